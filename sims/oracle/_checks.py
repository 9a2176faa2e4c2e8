"""Invariant checks over a trace: the spec's safety properties, reported in words.

The checker replays the trace against a small model of each run, in the order the store executed
things (a trace is written by one thread, so its order is the real order). Every claim, BEGIN,
renewal, step record, outcome and miss the store ACCEPTED is held to the spec's rules; every handler
invocation is matched with the BEGIN that licensed it; every overlap of two passes of one run is
either placed in a window the spec documents (and explained), or reported as a violation.

A finding is a sentence about what happened, when, and against which lease, so a violation can be
read without opening the trace; the seed and the replay command come from whoever ran the world.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from driver import iso_from_ms, parse_iso_ms

from .._numbers import ms, plural
from .._trace import Trace, dump_ledgers, effect_recorded, imported, service_effect
from ._conclusions import Conclusions
from ._model import admission_backoff
from ._oracle import Oracle
from ._passes import Pass, Run
from ._report import CheckReport, Finding, short
from ._spec import ERASED_FINISHED_NOTE, ERASED_RUNNING_NOTE

#: At most this many violations of one check on one run are listed as findings; the rest are
#: counted, in one more finding (a broken rule can repeat on every pass of a run that never ends).
MAX_REPEATS = 5

#: How ``last_error`` begins on a running run that an import copied into another scope, failed.
NOT_CARRIED_PREFIX = "not carried: copied from scope "


class TraceChecker(Conclusions):
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.runs: dict[tuple[str, str], Run] = {}
        self.passes: dict[str, Pass] = {}
        self.passes_of: dict[str, list[Pass]] = defaultdict(list)
        self.effects: dict[str, list[tuple[str, str, float]]] = defaultdict(list)
        #: The step a service call was made in, by (drive, seq), until it ran.
        self.service_steps: dict[tuple[str, int], str] = {}
        #: Service effects made in a step body, by (run, commits before, step, call).
        self.service_effects: dict[tuple[str, int, str, str], list[tuple[str, float]]] = (
            defaultdict(list)
        )
        #: How often each step was recorded, by (run, commits before, step).
        self.steps_recorded: Counter[tuple[str, int, str]] = Counter()
        #: What the world's end cut off, in words (``world.cut``), or None.
        self.cut: str | None = None
        #: How many passes of each run committed so far.
        self.commits: Counter[str] = Counter()
        self.end_t = 0.0
        self.end_runs: list[tuple[str, dict[str, Any]]] = []
        self.started_t: dict[str, float] = {}
        self.started_by: dict[str, str] = {}
        self.started_from: dict[str, str] = {}
        self.started_again: dict[str, str] = {}
        self.late_starts: dict[str, tuple[str, int, float]] = {}
        self.gave_up: dict[tuple[str, int], tuple[int, float, float]] = {}
        self.returned_t: float | None = None
        self.last_drive_t: dict[str, float] = {}
        self.begin_calls: dict[tuple[str, int], Pass] = {}
        # Only the send leg carries the arguments; the exec leg is matched to it by (link, seq).
        self.sent: dict[tuple[str, int], Any] = {}
        #: How many violations each (check, run) has had, listed or not, and when the last unlisted
        #: one happened.
        self.violations_of: dict[tuple[str, str | None], int] = defaultdict(int)
        self.last_unlisted: dict[tuple[str, str | None], float] = {}
        #: The executable model of the spec, checking every store reply and kernel decision.
        self.oracle = Oracle(self.violation)
        self._handlers: dict[str, Any] = {}

    def violation(self, check: str, run: str | None, t: float, text: str) -> None:
        """Every violation, the checker's and the oracle's, comes through here: the first
        :data:`MAX_REPEATS` of one check on one run are findings, the rest are counted and reported
        in one line by :meth:`report` (the verdict is the same; only the repetition goes)."""
        key = (check, run)
        seen = self.violations_of[key] = self.violations_of[key] + 1
        if seen <= MAX_REPEATS:
            self.findings.append(Finding(check, "violation", run, t, text))
        else:
            self.last_unlisted[key] = t

    def report(self, *, settles: bool) -> CheckReport:
        self.conclude(settles=settles)
        self.oracle.conclude([f.text for f in self.findings if f.check == "double-run"])
        for (check, run), seen in self.violations_of.items():
            if seen > MAX_REPEATS:
                more = seen - MAX_REPEATS
                self.findings.append(
                    Finding(
                        check,
                        "violation",
                        run,
                        self.last_unlisted[(check, run)],
                        f"… and {more:,} more {check} {'violation' if more == 1 else 'violations'} "
                        f"{'on this run' if run else 'like these'}, not listed "
                        f"(at most {MAX_REPEATS} of one check on one run are)",
                    )
                )
        by_check: dict[str, int] = defaultdict(int)
        for (check, _), seen in self.violations_of.items():
            by_check[check] += seen
        return CheckReport(
            tuple(self.findings),
            self.oracle.probe_counts(),
            violations_unlisted=sum(self.violations_of.values())
            - sum(1 for finding in self.findings if finding.verdict == "violation"),
            violations_by_check=tuple(sorted(by_check.items())),
            settles=settles,
            cut=self.cut,
        )

    def explained(self, check: str, run: str | None, t: float, text: str) -> None:
        self.findings.append(Finding(check, "explained", run, t, text))

    # -- replay ---------------------------------------------------------------------------------

    def feed(self, events: Iterable[dict[str, Any]]) -> None:
        for event in events:
            self.observe(event)

    def observe(self, event: dict[str, Any]) -> None:
        """Take one event, in trace order (usable live, as a trace listener)."""
        self.oracle.observe(event)
        name = event["ev"]
        if name == "rpc.exec" and "result" in event:
            args = self.sent.pop((event["link"], event["seq"]), [])
            handler = self._handler("exec_" + event["op"])
            if handler is not None:
                handler(event, args)
        elif name == "rpc.exec":
            self.sent.pop((event["link"], event["seq"]), None)
        elif name in ("rpc.deliver", "rpc.drop"):
            self.sent.pop((event["link"], event["seq"]), None)
            self.leg_end(event)
        elif name == "rpc.send":
            self.sent[(event["link"], event["seq"])] = event["args"]
        else:
            handler = self._handler("on_" + name.replace(".", "_"))
            if handler is not None:
                handler(event)
        self.end_t = event["t"]

    def _handler(self, method: str) -> Any:
        """This checker's method of that name, or None; looked up once per name, since most events
        have none and a failed lookup costs an exception each time."""
        try:
            return self._handlers[method]
        except KeyError:
            handler = self._handlers[method] = getattr(self, method, None)
            return handler

    def model(self, scope: str, run_id: str, row: dict[str, Any] | None = None) -> Run:
        run = self.runs.get((scope, run_id))
        if run is None:
            key = (
                (scope, row["module_id"], row["job"], row["instance"])
                if row
                else (scope, "?", "?", "?")
            )
            run = Run(run_id, key)
            if row is not None:
                self.sync_row(run, row)
            self.runs[(scope, run_id)] = run
        return run

    @staticmethod
    def sync_row(run: Run, row: dict[str, Any]) -> None:
        run.status = row["status"]
        run.owner = row.get("lease_owner")
        run.began = row.get("lease_began_at") is not None
        run.attempts = row["attempts"]
        run.misses = row.get("admission_misses") or 0
        next_at = row.get("next_attempt_at")
        run.next_at = parse_iso_ms(next_at) if next_at else None

    # -- store operations, as the store executed them ---------------------------------------------

    def exec_start_or_join(self, event: dict[str, Any], args: list[Any]) -> None:
        row, candidate = event["result"], args[1]
        if row is None or row["id"] != candidate["id"]:
            return
        key = (event["scope"], row["module_id"], row["job"], row["instance"])
        live = [r.id for r in self.runs.values() if r.key == key and r.status == "running"]
        if live:
            self.violation(
                "one-live-run-per-key",
                row["id"],
                event["t"],
                f"start inserted run {short(row['id'])} while run {short(live[0])} was live for "
                f"the same key {'/'.join(key[1:])} in scope {key[0]}; a start against a live key "
                "must join it",
            )
        run = self.model(event["scope"], row["id"], row)
        run.payload = candidate.get("payload")

    def exec_claim(self, event: dict[str, Any], args: list[Any]) -> None:
        result = event["result"]
        if result is None:
            return
        run_id, owner, lease_ms = args[0], args[1], args[2]
        row, takeover = result["run"], result["takeover"]
        t, now = event["t"], parse_iso_ms(event["store_at"])
        run = self.model(event["scope"], run_id, row)
        if run.next_at is not None and run.next_at > now:
            held = f"held by {short(run.owner)} " if run.owner else ""
            self.violation(
                "claim-only-when-due",
                run_id,
                t,
                f"drive {event['link']} claimed the run at store time {event['store_at']} though "
                f"it was {held}not due until {iso_from_ms(run.next_at)}: a live lease was taken",
            )
        if takeover != run.began:
            self.violation(
                "attempts-charged",
                run_id,
                t,
                f"the claim by {short(owner)} reported takeover={takeover}, but the lease it "
                f"replaced had {'' if run.began else 'not '}begun",
            )
        expected = run.attempts + (1 if run.began else 0)
        if row["attempts"] != expected:
            self.violation(
                "attempts-charged",
                run_id,
                t,
                f"the claim by {short(owner)} left attempts={row['attempts']}; the spec charges "
                f"{expected} ({run.attempts} before, +1 only for taking over a BEGUN lease)",
            )
        if (row.get("admission_misses") or 0) != run.misses:
            self.violation(
                "admission-misses",
                run_id,
                t,
                f"the claim found admission_misses={row.get('admission_misses')}, but "
                f"{run.misses} consecutive misses had been recorded since the last BEGIN",
            )
        self.sync_row(run, row)
        new = Pass(
            owner,
            run_id,
            event["link"],
            event["scope"],
            t,
            now,
            lease_ms,
            last_renewal_store_ms=now,
        )
        self.passes[owner] = new
        self.passes_of[run_id].append(new)

    def _holder_check(self, event: dict[str, Any], run: Run, owner: str, what: str) -> bool:
        if run.owner == owner:
            return True
        self.violation(
            "no-write-after-lease-lost",
            run.id,
            event["t"],
            f"{what} by pass {short(owner)} (drive {event['link']}) was accepted at "
            f"{event['store_at']} although the run was held by {short(run.owner)}",
        )
        return False

    def exec_begin(self, event: dict[str, Any], args: list[Any]) -> None:
        run_id, owner, margin_ms = args[0], args[1], args[2]
        pass_ = self.passes.get(owner)
        if pass_ is not None:
            self.begin_calls[(event["link"], event["seq"])] = pass_
        if event["result"] is not True:
            return
        run = self.model(event["scope"], run_id)
        now = parse_iso_ms(event["store_at"])
        self._holder_check(event, run, owner, "BEGIN")
        if run.next_at is None or run.next_at - now <= margin_ms:
            left = "no" if run.next_at is None else f"{run.next_at - now} ms of"
            self.violation(
                "begin-margin",
                run_id,
                event["t"],
                f"BEGIN of {short(owner)} wrote with {left} lease left, not more than the "
                f"margin of {ms(margin_ms)} ms",
            )
        run.began, run.misses = True, 0
        if pass_ is not None:
            # BEGIN does not renew the lease (its statement leaves next_attempt_at alone): the
            # lease still runs out at the claim, or the latest renewal, plus the lease.
            pass_.begin_t, pass_.begin_store_ms = event["t"], now

    def exec_miss(self, event: dict[str, Any], args: list[Any]) -> None:
        result = event["result"]
        if result is None:
            return
        run_id, owner = args[0], args[1]
        run = self.model(event["scope"], run_id)
        self._holder_check(event, run, owner, "an admission miss")
        if run.began:
            self.violation(
                "admission-misses",
                run_id,
                event["t"],
                f"a miss was recorded for {short(owner)} after its pass had begun",
            )
        if result["misses"] != run.misses + 1:
            self.violation(
                "admission-misses",
                run_id,
                event["t"],
                f"the miss made the count {result['misses']}, not {run.misses + 1}: misses must "
                "count consecutively from the last BEGIN",
            )
        run.misses, run.owner, run.began = result["misses"], None, False
        if result["failed"]:
            run.status, run.failed_by, run.next_at = "failed", "admission exhaustion", None
        else:
            # The miss released the lease and put the next attempt after the backoff: from now on
            # the run is due then, not when the released lease would have run out.
            run.next_at = parse_iso_ms(event["store_at"]) + admission_backoff(result["misses"])

    def _renew(self, event: dict[str, Any], run: Run, owner: str, lease_ms: int) -> None:
        now = parse_iso_ms(event["store_at"])
        run.next_at = now + lease_ms
        pass_ = self.passes.get(owner)
        if pass_ is not None:
            pass_.last_renewal_store_ms = now

    def exec_import_dump(self, event: dict[str, Any], args: list[Any]) -> None:
        """The runs an import wrote are what the store holds from then on: a restore (into the
        dump's own scope) replaces the scope's runs with the dump's, each as its row stands, with
        the step rows it carries as its ledger; a copy adds them, a running one failed."""
        found = imported(args)
        if found is None:
            return
        dump, source = found
        scope = event["scope"]
        restore = source == scope
        if restore:
            # The store deleted the runs the dump does not hold; those it holds keep what the
            # checks know of them (their passes, why they failed), their rows as the dump's.
            kept = {row.get("id") for row in dump["runs"] if isinstance(row, dict)}
            for key in [key for key in self.runs if key[0] == scope and key[1] not in kept]:
                del self.runs[key]
        ledgers = dump_ledgers(dump)
        for row in dump["runs"]:
            if not isinstance(row, dict) or "id" not in row:
                continue
            run = self.model(scope, row["id"], row)
            carried = restore or row.get("status") != "running"
            # A copy fails a running run ("not carried"): it ends, and its lease with it.
            ended = {"status": "failed", "lease_owner": None, "lease_began_at": None}
            self.sync_row(run, row if carried else {**row, **ended, "next_attempt_at": None})
            run.ledger = ledgers.get(row["id"], set()) if carried else set()

    def exec_begin_step(self, event: dict[str, Any], args: list[Any]) -> None:
        result = event["result"]
        if not result["held"]:
            return
        run_id, step, owner, lease_ms = args
        run = self.model(event["scope"], run_id)
        if not self._holder_check(event, run, owner, f"the renewal before step {step!r}"):
            return
        self._renew(event, run, owner, lease_ms)
        row = result["row"]
        if row is not None and row["result"] is not None and step not in run.ledger:
            self.violation(
                "ledger-one-pass",
                run_id,
                event["t"],
                f"step {step!r} read a completed memo that no pass since the last commit "
                "recorded: the ledger held a finished pass's rows",
            )

    def exec_record_step(self, event: dict[str, Any], args: list[Any]) -> None:
        if event["result"] is not True:
            return
        run_id, step, result, owner, lease_ms = args[0], args[1], args[2], args[6], args[7]
        run = self.model(event["scope"], run_id)
        if not self._holder_check(event, run, owner, f"recording step {step!r}"):
            return
        self._renew(event, run, owner, lease_ms)
        if result is not None:
            self.steps_recorded[(run_id, self.commits[run_id], step)] += 1
            run.ledger.add(step)
            pass_ = self.passes.get(owner)
            if pass_ is not None:
                pass_.recorded.add(step)

    def _outcome(self, event: dict[str, Any], args: list[Any], *, commit: bool) -> None:
        if event["result"] is not True:
            return
        run_id, patch, owner = args
        run = self.model(event["scope"], run_id)
        self._holder_check(event, run, owner, "the commit" if commit else "the outcome")
        run.status, run.attempts = patch["status"], patch["attempts"]
        run.owner, run.began = None, False
        run.next_at = parse_iso_ms(patch["next_attempt_at"]) if patch["next_attempt_at"] else None
        if commit:
            run.ledger.clear()
            self.commits[run_id] += 1
        if run.status == "failed":
            pass_ = self.passes.get(owner)
            run.failed_by = (
                "takeover exhaustion" if pass_ is not None and pass_.exhausted else "a failed pass"
            )

    def exec_patch(self, event: dict[str, Any], args: list[Any]) -> None:
        self._outcome(event, args, commit=False)

    def exec_commit_pass(self, event: dict[str, Any], args: list[Any]) -> None:
        self._outcome(event, args, commit=True)

    def on_svc_send(self, event: dict[str, Any]) -> None:
        if "step" in event:
            self.service_steps[(event["drive"], event["seq"])] = str(event["step"])

    def on_svc_exec(self, event: dict[str, Any]) -> None:
        # A service call's effect inside a step body is judged as a row's is, by whether its
        # step was recorded; one made outside any step is the handler's own (no step to judge).
        # Steps are counted between two commits: a commit clears the ledger, and the next pass
        # may run a step of the same name afresh.
        step = self.service_steps.pop((event["drive"], event["seq"]), None)
        if step is not None and service_effect(event) is not None:
            run = str(event["run"])
            where = (run, self.commits[run], step, str(event["op"]))
            self.service_effects[where].append((event["drive"], event["t"]))

    def exec_invoke(self, event: dict[str, Any], args: list[Any]) -> None:
        # The one definition of an effect, shared with ``effects_in`` and the timeline.
        key = effect_recorded(args, event.get("result"))
        if key is not None:
            self.effects[key].append((event["link"], key, event["t"]))

    # -- legs, kernel and world events ----------------------------------------------------------

    def leg_end(self, event: dict[str, Any]) -> None:
        if event["op"] != "begin":
            return
        pass_ = self.begin_calls.get((event["link"], event["seq"]))
        if pass_ is None or event.get("result") is not True:
            return
        if event["ev"] == "rpc.deliver":
            pass_.begin_delivered_t = event["t"]
        else:
            pass_.begin_reply_lost = True

    def on_handler_invoke(self, event: dict[str, Any]) -> None:
        pass_ = self.passes.get(event["owner"])
        if pass_ is None or pass_.begin_t is None:
            self.violation(
                "handler-iff-begin",
                event["run"],
                event["t"],
                f"drive {event['drive']} invoked the handler for pass {short(event['owner'])} "
                "with no BEGIN written for it",
            )
            return
        pass_.invoke_t = event["t"]
        self.model(pass_.scope, event["run"]).failed_by = None

    def on_handler_end(self, event: dict[str, Any]) -> None:
        pass_ = self.passes.get(event["owner"])
        if pass_ is not None and pass_.end_t is None:
            pass_.end_t = event["t"]

    on_pass_outcome = on_handler_end

    def on_takeover_exhausted(self, event: dict[str, Any]) -> None:
        pass_ = self.passes.get(event["owner"])
        if pass_ is not None:
            pass_.exhausted = True

    def on_fault_crash(self, event: dict[str, Any]) -> None:
        for pass_ in self.passes.values():
            if pass_.drive == event["drive"] and pass_.end_t is None:
                pass_.crashed = True
                if pass_.invoke_t is not None or pass_.begin_t is not None:
                    pass_.end_t = event["t"]

    def on_world_sync(self, event: dict[str, Any]) -> None:
        for row in event["runs"]:
            run = self.model(event["scope"], row["id"], row)
            self.sync_row(run, row)
            last_error = row.get("last_error") or ""
            if last_error in (ERASED_RUNNING_NOTE, ERASED_FINISHED_NOTE):
                run.failed_by = "erasure"
            elif last_error.startswith(NOT_CARRIED_PREFIX) and row["status"] == "failed":
                run.failed_by = "an import into another scope"

    def on_world_cut(self, event: dict[str, Any]) -> None:
        passes = [f"{p['drive']} on run {short(p['run'])}" for p in event["passes"]]
        busy = {p["drive"] for p in event["passes"]}
        ticks = [f"a tick of {drive}" for drive in event["ticks"] if drive not in busy]
        calls = [plural(event["calls"], "service call")] if event["calls"] else []
        self.cut = (
            f"the world was cut {ms(event['grace_ms'])} ms after its scenario returned, with "
            f"{', '.join([*passes, *ticks, *calls])} still running: what they would have done "
            "next was not checked (raise WorldSetup(grace_ms=...) to let them finish)"
        )

    def on_world_end(self, event: dict[str, Any]) -> None:
        for scope, rows in event["runs"].items():
            self.end_runs.extend((scope, row) for row in rows)


def check_trace(trace: Trace, *, settles: bool = True) -> CheckReport:
    """Every check over ``trace``; ``settles`` says the faults were bounded, so every run must have
    ended ``done`` or ``failed`` by the end."""
    checker = TraceChecker()
    checker.feed(trace.events)
    return checker.report(settles=settles)
