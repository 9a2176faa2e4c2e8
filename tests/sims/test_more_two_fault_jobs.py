"""Jobs whose bug needs two faults that work together, of kinds the other two-fault worlds lack: a
plan of two faults breaks each bug on every seed tried (the user's check fails, the spec holds)
and leaves its fix clean, and each of its faults alone leaves the bug clean.

The jobs are in ``worlds/more_two_fault_jobs.py``; its docstring tells each bug, its fix and its
plan. The default search finds both, with two faults (each by another plan than the one above),
and nothing in their fixes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sims import FaultPlan, Simulation, explore_plans, plan_from_text, simulate

WORLDS = Path(__file__).parent / "worlds" / "more_two_fault_jobs.py"
SEEDS = (1, 2, 3)

#: (the buggy job, its fix, the two faults that break the bug on every seed of SEEDS).
JOBS = [
    (
        "seat-charge-after-hold",
        "seat-extend-then-charge",
        (
            "CrashDrive(drive='alarm', at_ms=100.0, down_ms=200000.0)",
            "DelayLeg(drive='cron', operation='begin_step', nth=2, leg='reply', ms=50000.0)",
        ),
    ),
    (
        "pay-status-on-timeout",
        "pay-status-paid-is-final",
        (
            "DropLeg(drive='cron', operation='card.charge', nth=1, leg='reply')",
            "LateRequest(drive='cron', operation='invoke', nth=1, ms=5000.0)",
        ),
    ),
]

#: (a buggy job, one fault of its plan). Each fires in the clean world too.
ALONE = [(bug, fault) for bug, _, faults in JOBS for fault in faults]


def _plan(*faults: str) -> FaultPlan:
    plan = plan_from_text(f"FaultPlan(({', '.join(faults)},))")
    assert isinstance(plan, FaultPlan)
    return plan


def _unfired(simulation: Simulation) -> list[str]:
    return [
        fault for event in simulation.outcome.trace.of("world.unfired") for fault in event["faults"]
    ]


@pytest.mark.parametrize(("bug", "fix", "faults"), JOBS, ids=[job[0] for job in JOBS])
def test_two_faults_break_the_bug_and_leave_its_fix_clean(
    bug: str, fix: str, faults: tuple[str, str]
) -> None:
    breaking = _plan(*faults)
    assert len(breaking) == 2, breaking
    for seed in SEEDS:
        broken = simulate(f"{WORLDS}:{bug}", seed, plan=breaking)
        assert broken.report.user_violations, (bug, seed)
        assert not broken.report.spec_violations, broken.report.spec_violations
        assert not _unfired(broken), (bug, seed, _unfired(broken))
        fixed = simulate(f"{WORLDS}:{fix}", seed, plan=breaking)
        assert fixed.report.ok, (fix, seed, fixed.report.violations)


@pytest.mark.parametrize(("bug", "fault"), ALONE, ids=[f"{a[0]}-{a[1]}" for a in ALONE])
def test_each_fault_alone_leaves_the_bug_clean(bug: str, fault: str) -> None:
    for seed in SEEDS:
        alone = simulate(f"{WORLDS}:{bug}", seed, plan=_plan(fault))
        assert not alone.report.user_violations, (bug, fault, seed, alone.report.user_violations)
        assert not alone.report.spec_violations, alone.report.spec_violations
        assert not _unfired(alone), (bug, fault, seed, _unfired(alone))


@pytest.mark.parametrize(("bug", "fix", "faults"), JOBS, ids=[job[0] for job in JOBS])
def test_the_default_search_finds_the_bug_with_two_faults_and_not_in_its_fix(
    bug: str, fix: str, faults: tuple[str, ...]
) -> None:
    found = explore_plans(f"{WORLDS}:{bug}", seed=1)
    assert found is not None, f"the default search missed {bug}"
    assert found.simulation.report.user_violations
    assert not found.simulation.report.spec_violations
    assert len(found.plan) == 2, found.plan  # no single fault shows it
    assert explore_plans(f"{WORLDS}:{fix}", seed=1) is None
