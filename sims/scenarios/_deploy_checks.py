"""A ready-made check for new code over runs in flight: does it carry the step ledger they hold?

Within a pass, a step's memo is found by its name. A run in flight when new code is deployed (or
restored from an incident, ``World.restore``) may hold, in its ledger, the results of steps its
old code ran in a pass that has not committed. The new code's next pass over it reads those memos
only if it calls the same steps by the same names: a step renamed runs its body again (a second
charge), and a step called before the ones the ledger holds runs its effect out of order. So
``carries_the_ledger`` reads, for each running run a world restored with step results, the first
pass the world ran over it, and reports:

- a step the ledger holds that the new code did not call before it called a step the ledger does
  not hold (renamed, moved, or dropped: its effect would run again under another name);
- a step the ledger holds that the new code never called at all in that pass;
- the new code raising an exception of its own (not the outside world's) before it reached a step
  the ledger does not hold: the run's payload, cursor or memos are what it cannot read.

Each finding names the run, the steps and the remedy (keep the old name, or version the job).
Reported as ``carries-the-ledger``.
"""

from __future__ import annotations

from typing import Any

import attrs

from .._trace import Trace, dump_ledgers, imported
from ..oracle._report import UserFinding, short

#: A handler cannot read the ledger (the spec gives it no such call), so there is no branching
#: on it: the old name, or a new job.
REMEDY = "keep the old step name, or register the new code as a new job (version it)"


@attrs.define
class _FirstPass:
    """The steps the new code's first pass over a restored run called, in order, and how the
    pass ended."""

    drive: str
    called: list[str] = attrs.field(factory=list)
    ended: dict[str, Any] | None = None


#: By run: when the restore came, and the steps whose results its ledger held.
Ledgers = dict[str, tuple[float, set[str]]]


def _restored_ledgers(trace: Trace) -> Ledgers:
    """For each running run a restore put in the world with step results: when, and which."""
    found: Ledgers = {}
    for event in trace.of("rpc.send"):
        carried = imported(event.get("args")) if event["op"] == "import_dump" else None
        if carried is None or carried[1] != event["scope"]:
            continue  # a copy into another scope fails its running runs: nothing to carry
        dump = carried[0]
        ledgers = dump_ledgers(dump)
        for row in dump["runs"]:
            if row.get("status") == "running" and row.get("id") in ledgers:
                found[row["id"]] = (event["t"], ledgers[row["id"]])
    return found


def _first_passes(trace: Trace, ledgers: Ledgers) -> dict[str, _FirstPass]:
    passes: dict[str, _FirstPass] = {}
    for event in trace.of("handler.invoke", "hx.step", "hx.end"):
        run = event.get("run")
        if run not in ledgers or event["t"] < ledgers[run][0]:
            continue
        if event["ev"] == "handler.invoke":
            passes.setdefault(run, _FirstPass(str(event["drive"])))
            continue
        first = passes.get(run)
        if first is None or first.ended is not None or first.drive != event["drive"]:
            continue
        if event["ev"] == "hx.step":
            first.called.append(str(event["step"]))
        else:
            first.ended = event
    return passes


def carries_the_ledger(trace: Trace) -> list[UserFinding]:
    """Whether the code that runs over each restored run in flight carries its step ledger
    (see the module's docstring)."""
    ledgers = _restored_ledgers(trace)
    findings = []
    for run, first in sorted(_first_passes(trace, ledgers).items()):
        held = ledgers[run][1]
        text = _what_it_cannot_carry(held, first)
        if text is not None:
            findings.append(UserFinding(f"run {short(run)}: {text}; {REMEDY}"))
    return findings


def _what_it_cannot_carry(held: set[str], first: _FirstPass) -> str | None:
    ledger = ", ".join(repr(step) for step in sorted(held))
    new = next((step for step in first.called if step not in held), None)
    if new is not None:
        before = first.called[: first.called.index(new)]
        skipped = sorted(held - set(before))
        if skipped:
            names = ", ".join(repr(step) for step in skipped)
            return (
                f"the ledger holds {ledger} from a pass of the old code, and the new code called "
                f"{new!r} before {names}: a step called under a new name, or out of its order, "
                "runs its effect again"
            )
        return None
    ended = first.ended or {}
    if "raised" in ended and not ended.get("outside"):
        where = f" at {ended['where']}" if ended.get("where") else ""
        return (
            f"the new code raised {ended.get('error_type', 'an exception')}{where} over a run "
            f"whose ledger holds {ledger}, before it reached a step of its own: it cannot read "
            "the run's payload, cursor or memos"
        )
    never = sorted(held - set(first.called))
    if ended and "raised" not in ended and never:
        names = ", ".join(repr(step) for step in never)
        return (
            f"the ledger holds {ledger} from a pass of the old code, and the new code's pass "
            f"ended without calling {names}: under another name its effect would run again"
        )
    return None
