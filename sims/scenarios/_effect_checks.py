"""Ready-made checks of a job's effects on its services, named in one line of a scenario.

``checks=[at_most_once("bank.charge", key="order"), once_per_done_run("bank.charge")]``: each is
a check like a user's own (a function of the trace that returns its findings), read from the
trace's service calls (``svc.send``, ``svc.exec``) by the one definition of an effect: a call that
changed its service's state. A finding names the key, every call that made the effect (its drive,
its pass, its run, its step) and when, and is placed on the page at the effect too many.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from .._numbers import ms
from .._trace import Trace, service_effect
from ..oracle._report import UserFinding, short

Check = Callable[[Trace], list[UserFinding]]


@attrs.frozen
class _Effect:
    """One call that changed its service: who made it, in which pass and step, and when."""

    at_ms: float
    sent_ms: float
    drive: str
    run: str
    seq: int
    args: dict[str, Any]
    owner: str | None
    step: str | None

    def said(self) -> str:
        # The drive's own call number, as its trace events and a plan's faults count calls: a
        # call sent early and delivered late lands after one sent later.
        where = f"{self.drive}'s call #{self.seq}"
        if self.owner:
            where += f" (pass {short(self.owner)}"
        else:
            where += " (no pass"
        step = f", step {self.step!r}" if self.step else ""
        sent = f"sent at {ms(self.sent_ms)} ms, " if self.sent_ms != self.at_ms else ""
        return f"{where} of run {short(self.run)}{step}) {sent}ran at {ms(self.at_ms)} ms"


def _effects(trace: Trace, call: str) -> Iterator[_Effect]:
    """Every effect of ``call`` (``SERVICE.OPERATION``) in ``trace``, in the order it landed."""
    sent: dict[tuple[str, int], dict[str, Any]] = {}
    passes: dict[tuple[str, str], str] = {}
    for event in trace.of("handler.invoke", "svc.send", "svc.exec"):
        if event["ev"] == "handler.invoke":
            passes[(str(event["drive"]), str(event["run"]))] = str(event["owner"])
        elif event.get("op") != call:
            continue
        elif event["ev"] == "svc.send":
            sent[(event["drive"], event["seq"])] = event
        elif service_effect(event) is not None:
            send = sent.pop((event["drive"], event["seq"]), {})
            yield _Effect(
                at_ms=float(event["t"]),
                sent_ms=float(send.get("t", event["t"])),
                drive=str(event["drive"]),
                run=str(event["run"]),
                seq=int(event["seq"]),
                args=dict(send.get("args") or {}),
                owner=passes.get((str(event["drive"]), str(event["run"]))),
                step=send.get("step"),
            )


def _check_call(call: object) -> str:
    if not isinstance(call, str) or call.count(".") != 1 or not all(call.split(".")):
        raise ValueError(
            f"{call!r} names no service call; name it 'SERVICE.OPERATION', as a plan does"
        )
    return call


def at_most_once(call: str, *, key: str) -> Check:
    """A check: ``call`` (``"SERVICE.OPERATION"``) changes its service at most once for each
    value of its argument ``key`` (an order, an invoice number, a mail's recipient and subject).
    A call made without that argument is a finding of its own: nothing says which key it was."""
    _check_call(call)
    if not isinstance(key, str) or not key:
        raise ValueError(f"at_most_once({call!r}, key={key!r}); name the argument that keys it")

    def check(trace: Trace) -> list[UserFinding]:
        by_key: dict[str, list[_Effect]] = {}
        found: list[UserFinding] = []
        for effect in _effects(trace, call):
            if key not in effect.args:
                found.append(
                    UserFinding(
                        f"{call} {effect.said()} was made without its {key!r} argument",
                        at_ms=effect.at_ms,
                        run=effect.run,
                    )
                )
                continue
            by_key.setdefault(repr(effect.args[key]), []).append(effect)
        for value, effects in by_key.items():
            if len(effects) > 1:
                calls = "; ".join(effect.said() for effect in effects)
                found.append(
                    UserFinding(
                        f"{call} with {key}={value} took effect {len(effects)} times: {calls}",
                        at_ms=effects[1].at_ms,
                        run=effects[1].run,
                    )
                )
        return found

    check.__name__ = check.check_name = f"{call}-at-most-once-per-{key}"  # type: ignore[attr-defined]
    return check


@attrs.frozen
class _Ended:
    """What the world's end says of one run: the key its start named, and how it ended."""

    key: tuple[str, ...]
    status: str


def run_keys(trace: Trace) -> tuple[dict[str, str], dict[str, str]]:
    """Each run's key (``MODULE/JOB/INSTANCE``: the work a start names) by run id, and each key's
    status at the world's end: ``done`` when any of its runs ended done, else its last run's.
    What a check of yours judges the runs of one start by: a start tried again after its answer
    was lost, or sent again, makes a second run of the same work once the first has ended."""
    key_of: dict[str, str] = {}
    status: dict[str, str] = {}
    for event in trace.of("world.end"):
        for rows in event["runs"].values():
            for row in rows:
                key = f"{row['module_id']}/{row['job']}/{row['instance']}"
                key_of[str(row["id"])] = key
                if status.get(key) != "done":
                    status[key] = str(row["status"])
    return key_of, status


def _ended_runs(trace: Trace) -> dict[str, _Ended]:
    """Each run the world ended with, by id, with its run key: its scope, module, job and instance
    (the work a start names). A start tried again after its reply was lost makes a second run of
    the same key when the first had already ended, so a key can have several runs."""
    ended: dict[str, _Ended] = {}
    for event in trace.of("world.end"):
        for scope, rows in event["runs"].items():
            for row in rows:
                key = (str(scope), str(row["module_id"]), str(row["job"]), str(row["instance"]))
                ended[str(row["id"])] = _Ended(key, str(row["status"]))
    return ended


def once_per_done_run(call: str) -> Check:
    """A check: every run key (module, job, instance: the work a start names) one of whose runs
    ended ``done`` had exactly one effect of ``call`` (``"SERVICE.OPERATION"``) across all its
    runs: not none (a payment lost), not two (a double charge). A key none of whose runs ended done
    is held to at most one. The runs of one key are judged together because a start tried again
    (its reply lost after the first run had already ended) makes a second run of the same work: a
    job that keys its effect by the order makes it once over both, one that keys it by the run id
    makes it twice, and is caught."""
    _check_call(call)

    def check(trace: Trace) -> list[UserFinding]:
        ended = _ended_runs(trace)
        scopes = {run.key[0] for run in ended.values()}
        runs_of: dict[tuple[str, ...], list[str]] = {}
        for run, its in ended.items():
            runs_of.setdefault(its.key, []).append(run)
        by_key: dict[tuple[str, ...], list[_Effect]] = {key: [] for key in runs_of}
        for effect in _effects(trace, call):
            # A run the world's end does not list (never the case in a world that ended) is a
            # key of its own: nothing says which work it was.
            key = ended[effect.run].key if effect.run in ended else ("?", effect.run)
            runs_of.setdefault(key, [effect.run] if key[0] == "?" else [])
            by_key.setdefault(key, []).append(effect)
        found: list[UserFinding] = []
        end = trace.events[-1]["t"] if trace.events else 0.0
        for key, effects in by_key.items():
            runs = runs_of[key]
            statuses = [ended[run].status if run in ended else "unknown" for run in runs]
            said = ", ".join(
                f"run {short(run)} {status}" for run, status in zip(runs, statuses, strict=True)
            )
            if key[0] == "?":
                named = f"run {short(key[1])}'s key (not in the world's end; {said})"
            else:
                where = f" in scope {key[0]}" if len(scopes) > 1 else ""
                named = f"key {'/'.join(key[1:])}{where} ({said})"
            if len(effects) > 1:
                calls = "; ".join(effect.said() for effect in effects)
                found.append(
                    UserFinding(
                        f"{named} took {call} {len(effects)} times: {calls}",
                        at_ms=effects[1].at_ms,
                        run=effects[1].run,
                    )
                )
            elif not effects and "done" in statuses:
                found.append(
                    UserFinding(
                        f"{named} ended done and {call} never took effect",
                        at_ms=end,
                        run=runs[statuses.index("done")],
                    )
                )
        return found

    check.__name__ = check.check_name = f"{call}-once-per-done-run"  # type: ignore[attr-defined]
    return check
