"""The old code beside the new: ``before-deploy --old``, a differential check.

Given the code running now, the check runs the old code's next pass (and its retry) over the same
runs, in a world of its own on the same seed, and holds the new code's outside work to it, as
Temporal's replayer holds new workflow code to a recorded history's commands. A call is known by
its service operation and its idempotency key (or, with no key, its arguments):

4. a step whose work may have happened (attempted and failed, in the ledger; or, on a run a killed
   pass held, the first step the old code's retry runs past the ledger: the dead pass was in it)
   that the new code repeats under another key than the old code's repeat: the service cannot tell
   the repeat from new work;
5. on a run with no other finding, calls the new code makes that the old code's would not, or
   the other way round: the new code does other work on this run (it reads the cursor or the
   payload otherwise). Renamed steps, a new step ahead of the ledger's and a changed key are
   reported by their own rules first.

And a step of the ledger the new code never calls (rule 1) is told apart: renamed (the old
step's calls are made by the new code under another step's name), or other work.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping

import attrs

from .._trace import Trace
from ._drive import PassSeen
from ._verdict import (
    KEY_CHANGED,
    OTHER_WORK,
    REMEDY_KEY,
    REMEDY_OTHER_WORK,
    STEP_NOT_CALLED,
    DeployFinding,
    RunInFlight,
    RunVerdict,
)


@attrs.frozen
class Call:
    """One service call a step made: the step, "SERVICE.OPERATION", its idempotency key (None:
    none), and what it is known by (the key, or its arguments when it has none)."""

    step: str
    operation: str
    key: str | None
    known_by: str

    def said(self) -> str:
        return f"{self.operation} {self.known_by} (step {self.step!r})"


@attrs.frozen
class Done:
    """What one code did over one run in the check's world: its passes, and its service calls
    in the order they were sent."""

    passes: tuple[PassSeen, ...]
    calls: tuple[Call, ...]


def done_over(trace: Trace, passes: Mapping[str, list[PassSeen]]) -> dict[str, Done]:
    """What the code of ``trace``'s world did over each run of ``passes`` (its passes over
    them, :func:`~._drive.passes_over`): those passes, and the calls they made."""
    calls: dict[str, list[Call]] = {run: [] for run in passes}
    for event in trace.of("svc.send"):
        made = calls.get(str(event.get("run")))
        if made is None or event.get("step") is None:
            continue
        key = event.get("key")
        known = f"key {key!r}" if key is not None else f"with {_short(event.get('args'))}"
        made.append(Call(str(event["step"]), str(event["op"]), key, known))
    return {run: Done(tuple(passes[run]), tuple(calls[run])) for run in passes}


def _short(args: object) -> str:
    text = json.dumps(args, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def compared(verdict: RunVerdict, old: Done, new: Done) -> RunVerdict:
    """``verdict`` with the findings the old code's passes show (rules 4 and 5, and rule 1 told
    apart)."""
    run = verdict.run
    findings = [_told_apart(finding, old, new) for finding in verdict.findings]
    findings += _keys_changed(run, old, new)
    if not findings:
        findings += _other_work(run, old, new)
    return attrs.evolve(verdict, findings=tuple(findings))


def _may_have_run(run: RunInFlight, old: Done) -> list[str]:
    """The steps whose work may have happened: the ledger's attempted ones, and, on a run a
    pass held when the source was taken (a killed one, maybe), the first step the old code's
    retry runs past the ledger."""
    steps = [step.name for step in run.ledger if not step.done]
    if run.held_by_a_pass and old.passes:
        past = [name for name in old.passes[0].called if run.held(name) is None]
        steps += past[:1]
    return steps


def _keys_changed(run: RunInFlight, old: Done, new: Done) -> list[DeployFinding]:
    """Rule 4: a step whose work may have happened, repeated by the new code under another key
    than the old code's repeat."""
    findings = []
    for step in _may_have_run(run, old):
        held = run.held(step)
        said = held.said() if held else f"{step!r} (the pass killed with the run was in it)"
        mine = {call.operation: call.key for call in new.calls if call.step == step}
        for call in (call for call in old.calls if call.step == step):
            if call.operation not in mine or mine[call.operation] == call.key:
                continue
            findings.append(
                DeployFinding(
                    rule=KEY_CHANGED,
                    run=run,
                    step=f"step {step!r}",
                    text=(
                        f"the run's ledger holds {said}; the old code repeats its "
                        f"{call.operation} under idempotency key {call.key!r}, the new code "
                        f"under {mine[call.operation]!r}: the service cannot tell the repeat from "
                        "new work, so what the old attempt did may be done again"
                        if held
                        else f"the old code's retry would repeat {said}, its {call.operation} "
                        f"under idempotency key {call.key!r}; the new code repeats it under "
                        f"{mine[call.operation]!r}: the service cannot tell the repeat from new "
                        "work, so what the killed pass did may be done again"
                    ),
                    remedy=REMEDY_KEY,
                )
            )
    return findings


def _told_apart(finding: DeployFinding, old: Done, new: Done) -> DeployFinding:
    """A step of the ledger the new code never calls (rule 1), told apart where the calls show
    it: renamed when the new code makes the attempted step's calls under another step's name,
    other work when it makes none of them. (A step done makes no call on a retry: the memo
    answers it, so the calls cannot tell, and the finding says both.)"""
    if finding.rule != STEP_NOT_CALLED:
        return finding
    step = finding.step.removeprefix("step ").strip("'")
    theirs = {(c.operation, c.known_by) for c in old.calls if c.step == step}
    renamed = any((c.operation, c.known_by) in theirs and c.step != step for c in new.calls)
    if renamed or not theirs:
        return finding
    held = finding.run.held(step)
    called = ", ".join(dict.fromkeys(repr(c.step) for c in new.calls)) or "no step with a call"
    return attrs.evolve(
        finding,
        rule=OTHER_WORK,
        text=(
            f"the run's ledger holds {held.said() if held else repr(step)}; the old code's retry "
            f"repeats it ({', '.join(sorted(f'{op} {by}' for op, by in theirs))}), the new "
            f"code's passes neither call it nor make those calls (they called {called}): not a "
            "rename, the new code does other work on this run (it reads the run's cursor or "
            "payload otherwise)"
        ),
        remedy=REMEDY_OTHER_WORK,
    )


def _other_work(run: RunInFlight, old: Done, new: Done) -> list[DeployFinding]:
    """Rule 5: the service calls of the two codes' passes over the run, as multisets, differ."""
    theirs = Counter((c.operation, c.known_by) for c in old.calls)
    mine = Counter((c.operation, c.known_by) for c in new.calls)
    if theirs == mine:
        return []
    new_only, old_only = mine - theirs, theirs - mine
    only_new = [c.said() for c in new.calls if (c.operation, c.known_by) in new_only]
    only_old = [c.said() for c in old.calls if (c.operation, c.known_by) in old_only]
    return [
        DeployFinding(
            rule=OTHER_WORK,
            run=run,
            step=f"step {(new.calls or old.calls)[0].step!r}",
            text=(
                f"the new code's passes over the run make {', '.join(only_new) or 'no call'} "
                f"where the old code's would make {', '.join(only_old) or 'no call'}: the new "
                "code does other work on this run (it reads the run's cursor or payload "
                "otherwise)"
            ),
            remedy=REMEDY_OTHER_WORK,
        )
    ]
