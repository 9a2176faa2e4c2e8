"""Five jobs whose bug needs two faults that work together, written from the docs alone by a new
user (each with the slip a first version is likely to have, and its fix): a plan of two faults
breaks each bug on every seed tried and leaves its fix clean, and each of its faults alone leaves
the bug clean.

The jobs are in ``worlds/two_fault_jobs.py``; its docstring tells each bug and its plan. The
default search finds every bug, with two faults, and nothing in its fix (docs/search.md, "What the
default budget finds", gives the worlds and the CPU each took).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sims import FaultPlan, Simulation, explore_plans, plan_from_text, simulate

WORLDS = Path(__file__).parent / "worlds" / "two_fault_jobs.py"
SEEDS = (1, 2, 3)

#: (the buggy job, its fix, a plan of two faults that breaks the bug on every seed of SEEDS).
JOBS = [
    (
        "payout-lost-close-is-closed",
        "payout-close-must-answer",
        "FaultPlan((CrashAfter(drive='cron', operation='bank.pay', nth=1), "
        "DropLeg(drive='alarm', operation='bank.close_key', nth=1, leg='reply')))",
    ),
    (
        "label-fallback-on-refusal",
        "label-close-then-fallback",
        "FaultPlan((DropLeg(drive='cron', operation='swift.buy', nth=1, leg='reply'), "
        "ServiceOutage(service='swift', from_ms=1000.0, to_ms=60000.0)))",
    ),
    (
        "booking-release-on-refusal",
        "booking-close-then-release",
        "FaultPlan((DelayLeg(drive='cron', operation='begin_step', nth=2, leg='reply', "
        "ms=35000.0), ServiceOutage(service='card', from_ms=30000.0, to_ms=33000.0)))",
    ),
    (
        "refund-delay-mail-no-key",
        "refund-delay-mail-keyed",
        "FaultPlan((CrashAfter(drive='cron', operation='invoke', nth=2), "
        "DropLeg(drive='alarm', operation='mailer.send', nth=1, leg='reply')))",
    ),
    (
        "topup-rotate-stuck-key",
        "topup-same-key",
        "FaultPlan((DropLeg(drive='cron', operation='wallet.charge', nth=1, leg='reply'), "
        "DropLeg(drive='cron', operation='wallet.charge', nth=2, leg='reply')))",
    ),
]

#: (a buggy job, one fault of its plan or a variant of one that fires in the clean world, whether
#: it fires alone). A fault that does not fire alone strikes a call (or a moment) that only the
#: other fault brings about: the clean world never makes that call, or never calls the service
#: in that window.
ALONE = [
    ("payout-lost-close-is-closed", "CrashAfter(drive='cron', operation='bank.pay', nth=1)", True),
    (
        "payout-lost-close-is-closed",
        "DropLeg(drive='alarm', operation='bank.close_key', nth=1, leg='reply')",
        False,
    ),
    (
        "label-fallback-on-refusal",
        "DropLeg(drive='cron', operation='swift.buy', nth=1, leg='reply')",
        True,
    ),
    (
        "label-fallback-on-refusal",
        "ServiceOutage(service='swift', from_ms=1000.0, to_ms=60000.0)",
        False,
    ),
    # The same outage over the clean world's buy: refused, the post sells the one label.
    (
        "label-fallback-on-refusal",
        "ServiceOutage(service='swift', from_ms=0.0, to_ms=60000.0)",
        True,
    ),
    (
        "booking-release-on-refusal",
        "DelayLeg(drive='cron', operation='begin_step', nth=2, leg='reply', ms=35000.0)",
        True,
    ),
    (
        "booking-release-on-refusal",
        "ServiceOutage(service='card', from_ms=30000.0, to_ms=33000.0)",
        False,
    ),
    # An outage over the clean world's charge: refused, the seat is given back, nothing charged.
    (
        "booking-release-on-refusal",
        "ServiceOutage(service='card', from_ms=0.0, to_ms=3000.0)",
        True,
    ),
    ("refund-delay-mail-no-key", "CrashAfter(drive='cron', operation='invoke', nth=2)", True),
    (
        "refund-delay-mail-no-key",
        "DropLeg(drive='alarm', operation='mailer.send', nth=1, leg='reply')",
        False,
    ),
    (
        "topup-rotate-stuck-key",
        "DropLeg(drive='cron', operation='wallet.charge', nth=1, leg='reply')",
        True,
    ),
    (
        "topup-rotate-stuck-key",
        "DropLeg(drive='cron', operation='wallet.charge', nth=2, leg='reply')",
        False,
    ),
]


def _unfired(simulation: Simulation) -> list[str]:
    return [
        fault for event in simulation.outcome.trace.of("world.unfired") for fault in event["faults"]
    ]


@pytest.mark.parametrize(("bug", "fix", "plan"), JOBS, ids=[job[0] for job in JOBS])
def test_two_faults_break_the_bug_and_leave_its_fix_clean(bug: str, fix: str, plan: str) -> None:
    breaking = plan_from_text(plan)
    assert len(breaking) == 2, breaking
    for seed in SEEDS:
        broken = simulate(f"{WORLDS}:{bug}", seed, plan=breaking)
        assert broken.report.user_violations, (bug, seed)
        assert not broken.report.spec_violations, broken.report.spec_violations
        assert not _unfired(broken), (bug, seed, _unfired(broken))
        # A fix may make calls the bug's plan aims at no more: it is held to its checks only.
        fixed = simulate(f"{WORLDS}:{fix}", seed, plan=breaking)
        assert fixed.report.ok, (fix, seed, fixed.report.violations)


@pytest.mark.parametrize(("bug", "fault", "fires"), ALONE, ids=[f"{a[0]}-{a[1]}" for a in ALONE])
def test_each_fault_alone_leaves_the_bug_clean(bug: str, fault: str, fires: bool) -> None:
    plan = plan_from_text(f"FaultPlan(({fault},))")
    assert isinstance(plan, FaultPlan)
    for seed in SEEDS:
        alone = simulate(f"{WORLDS}:{bug}", seed, plan=plan)
        assert not alone.report.user_violations, (bug, fault, seed, alone.report.user_violations)
        assert not alone.report.spec_violations, alone.report.spec_violations
        assert (not _unfired(alone)) == fires, (bug, fault, seed, _unfired(alone))


@pytest.mark.parametrize(("bug", "fix", "plan"), JOBS, ids=[job[0] for job in JOBS])
def test_the_default_search_finds_the_bug_with_two_faults_and_not_in_its_fix(
    bug: str, fix: str, plan: str
) -> None:
    found = explore_plans(f"{WORLDS}:{bug}", seed=1)
    assert found is not None, f"the default search missed {bug}"
    assert found.simulation.report.user_violations
    assert not found.simulation.report.spec_violations
    assert len(found.plan) == 2, found.plan  # no single fault shows it
    assert explore_plans(f"{WORLDS}:{fix}", seed=1) is None
