"""What the new code cannot carry on a run in flight, read from its passes over the run.

Within a pass, a step's memo is found by its name, and a run's ledger (its step rows) is kept
from a failed or killed pass until a pass commits. So over a run whose ledger holds steps of the
old code, the new code's next pass (and its retry) must:

1. call every step the ledger holds, by the same name: a step it never calls under that name has
   its effect run again under the new one (judged only from a pass that returned: a pass that
   raised stopped before it showed which steps it calls);
2. read the run as the old code wrote it: an exception of the new code's own (not a service's
   answer, not the scope's) over the run's payload or cursor stops every pass of the run;
3. call a step the ledger does not hold only after every step the ledger holds that it calls:
   called before one of them, the new step runs after the work it was meant to precede. On a run
   that also breaks rule 1, such a step is likely the missing one renamed: it is named in rule 1's
   finding rather than in one of its own.

Given the old code too, :mod:`._compare` holds the new code's passes to the old code's.

A run no pass could show this for (it ended before its pass came, each pass failed on a service's
answer, or a pass never ended) is not judged, and says why.
"""

from __future__ import annotations

from collections.abc import Iterable

from driver import JobRun

from ._drive import PASS_BOUND_MS, PassSeen
from ._verdict import (
    NEW_STEP_FIRST,
    RAISES,
    REMEDY_NAME,
    REMEDY_ORDER,
    REMEDY_READ,
    STEP_NOT_CALLED,
    DeployFinding,
    RunInFlight,
    RunVerdict,
)


def judge_run(run: RunInFlight, passes: list[PassSeen], row: JobRun | None) -> RunVerdict:
    """The verdict on one run, from the new code's passes over it and its row at the end."""
    called = tuple(tuple(one.called) for one in passes)
    if not passes:
        return RunVerdict(run=run, not_judged=_no_pass(row))
    returned = any(one.returned for one in passes)
    first = _new_steps_first(run, passes)
    never = _never_called(run, passes, tuple(first)) if returned else []
    # A new step called before the ones the ledger holds, on a run whose ledger holds a step the
    # new code never calls, is likely that step renamed: said with it, not in a block of its own.
    findings = [*never, *_raised(run, passes), *([] if never else first.values())]
    if not returned and not findings:
        return RunVerdict(run=run, called=called, not_judged=_failed_outside(passes))
    return RunVerdict(run=run, called=called, findings=tuple(findings))


def _no_pass(row: JobRun | None) -> str:
    if row is None or row.status == "running":
        return "no pass of the new code ran over it in the check's world"
    why = f" (its last error: {row.last_error})" if row.last_error else ""
    return f"it ended {row.status} before a pass of the new code ran over it{why}"


def _failed_outside(passes: list[PassSeen]) -> str:
    if passes[-1].ended is None:
        return (
            f"the new code's pass over it did not end within {PASS_BOUND_MS // 60_000} minutes of "
            "the check's world, and was cut: which steps the new code calls on it is not known"
        )
    ended = passes[-1].ended
    error = f"{ended.get('error_type', 'an error')}: {ended.get('raised', '')}".rstrip(": ")
    return (
        f"each pass of the new code over it failed on the outside world's answer ({error}) "
        "before it returned, so which steps the new code calls on it is not known"
    )


def _names(steps: Iterable[str]) -> str:
    listed = [repr(step) for step in steps]
    return ", ".join(listed) if listed else "no step"


def _never_called(
    run: RunInFlight, passes: list[PassSeen], first: tuple[str, ...]
) -> list[DeployFinding]:
    """Rule 1: a step the ledger holds that no pass of the new code called (``first``: the new
    steps it called before steps the ledger holds)."""
    called = [step for one in passes for step in one.called]
    ahead = ""
    if first:
        verb = "comes" if len(first) == 1 else "come"
        ahead = f"; {_names(first)}, which the ledger does not hold, {verb} before steps it holds"
    return [
        DeployFinding(
            rule=STEP_NOT_CALLED,
            run=run,
            step=f"step {held.name!r}",
            text=(
                f"the run's ledger holds {held.said()}, and the new code's passes never call "
                f"it (they called {_names(dict.fromkeys(called))}{ahead}): what it did would "
                "be done again, under a new name, or by other work the new code does here"
            ),
            remedy=REMEDY_NAME,
        )
        for held in run.ledger
        if held.name not in called
    ]


def _raised(run: RunInFlight, passes: list[PassSeen]) -> list[DeployFinding]:
    """Rule 2: the new code's own exception over the run (each one once)."""
    findings: dict[tuple[str, str], DeployFinding] = {}
    for one in passes:
        ended = one.ended or {}
        if "raised" not in ended or ended.get("outside"):
            continue
        error = (str(ended.get("error_type", "an exception")), str(ended["raised"]))
        where = f" at {ended['where']}" if ended.get("where") else ""
        findings.setdefault(
            error,
            DeployFinding(
                rule=RAISES,
                run=run,
                step=_where_in_the_pass(one),
                text=(
                    f"the new code raised {error[0]}: {error[1]}{where} over the run as the old "
                    "code wrote it (its payload, its cursor or the results its ledger holds), "
                    "so every pass of the run fails"
                ),
                remedy=REMEDY_READ,
            ),
        )
    return list(findings.values())


def _where_in_the_pass(one: PassSeen) -> str:
    if one.failed_step is not None:
        return f"in step {one.failed_step!r}"
    if one.called:
        return f"after step {one.called[-1]!r}"
    return "before its first step"


def _new_steps_first(run: RunInFlight, passes: list[PassSeen]) -> dict[str, DeployFinding]:
    """Rule 3: a step the ledger does not hold, called before one the ledger holds; by step."""
    findings: dict[str, DeployFinding] = {}
    for one in passes:
        for index, step in enumerate(one.called):
            if run.held(step) is not None or step in findings:
                continue
            later = [held for name in one.called[index + 1 :] if (held := run.held(name))]
            if not later:
                continue
            findings[step] = DeployFinding(
                rule=NEW_STEP_FIRST,
                run=run,
                step=f"step {step!r}",
                text=(
                    f"the new code calls {step!r}, a step the run's ledger does not hold, before "
                    f"{' and '.join(held.said() for held in later)}, which it holds: on this run "
                    f"{step!r} runs after the work it is meant to precede"
                ),
                remedy=REMEDY_ORDER,
            )
    return findings
