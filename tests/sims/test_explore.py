"""Hypothesis explores fault plans; on a broken store it finds the break and shrinks it."""

from __future__ import annotations

from sims import (
    CrashAfter,
    DelayLeg,
    DropLeg,
    EvictAfter,
    HoldLeg,
    explore_plans,
    plan_from_text,
    simulate,
)
from sims.mutants._catalog import MUTANTS


def test_the_exploration_finds_a_record_step_without_its_lease_check_and_shrinks_it() -> None:
    found = explore_plans(mutant="record-step-owner", max_examples=150)
    assert found is not None, "the exploration missed the broken record_step"
    # One fault of a call (a held, late or dropped leg) is all it takes, and all the shrunk plan
    # holds.
    assert len(found.plan.faults) == 1
    assert isinstance(found.plan.faults[0], DelayLeg | DropLeg | HoldLeg | CrashAfter | EvictAfter)
    assert found.simulation.report.violations
    # What it prints replays it: the command's plan reads back, and the code's call fails the same.
    assert plan_from_text(repr(found.plan)) == found.plan
    assert f'--mutant record-step-owner --plan "{found.plan!r}"' in found.command()
    again = simulate("random", 1, plan=found.plan, database=MUTANTS["record-step-owner"])
    assert [f.line() for f in again.report.violations] == [
        f.line() for f in found.simulation.report.violations
    ]
    namespace: dict[str, object] = {}
    try:
        exec(found.code(), namespace)
    except AssertionError:
        pass
    else:
        raise AssertionError("the printed scenario did not reproduce the violation")


def test_the_exploration_finds_nothing_on_the_real_store() -> None:
    assert explore_plans(max_examples=60) is None
