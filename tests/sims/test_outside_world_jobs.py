"""Five jobs against their outside world, written from the docs alone by a new user (each with
the bug a first version is likely to have, and its fix): the default search finds every bug, each
fix stays clean under the search and under the plan that breaks its bug.

The jobs are in ``worlds/outside_world_jobs.py``; its docstring tells each bug and its plan.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sims import FaultPlan, explore_plans, plan_from_text, simulate

WORLDS = Path(__file__).parent / "worlds" / "outside_world_jobs.py"

#: (the buggy job, its fix, a plan that breaks the bug on every seed).
JOBS = [
    (
        "renewal-try-keys",
        "renewal-same-key",
        "FaultPlan((LateRequest(drive='cron', operation='payments.charge', nth=1, ms=5000.0),))",
    ),
    (
        "fulfil-cancel-on-timeout",
        "fulfil-retry-same-order",
        "FaultPlan((LateRequest(drive='cron', operation='warehouse.ship', nth=1, ms=5000.0),))",
    ),
    (
        "onboard-set-stage",
        "onboard-advance-stage",
        "FaultPlan((HoldLeg(drive='cron', operation='begin_step', nth=1, leg='reply', "
        "until='commit', max_ms=300000.0),))",
    ),
    (
        "invoice-search-then-create",
        "invoice-request-id",
        "FaultPlan((LateRequest(drive='cron', operation='ledger.create_invoice', nth=1, "
        "ms=5600.0),))",
    ),
    (
        "checkout-fallback-on-refusal",
        "checkout-close-then-fallback",
        "FaultPlan((DropLeg(drive='cron', operation='acme.charge', nth=1, leg='reply'), "
        "ServiceOutage(service='acme', from_ms=5000.0, to_ms=60000.0)))",
    ),
]


@pytest.mark.parametrize(("bug", "fix", "plan"), JOBS, ids=[job[0] for job in JOBS])
def test_the_plan_that_breaks_the_bug_leaves_its_fix_clean(bug: str, fix: str, plan: str) -> None:
    breaking = plan_from_text(plan)
    for seed in (1, 2, 3):
        broken = simulate(f"{WORLDS}:{bug}", seed, plan=breaking)
        assert broken.report.user_violations, (bug, seed)
        assert not broken.report.spec_violations, broken.report.spec_violations
        # A fix may make calls the bug's plan aims at no more: it is held to its checks only.
        fixed = simulate(f"{WORLDS}:{fix}", seed, plan=breaking)
        assert fixed.report.ok, (fix, seed, fixed.report.violations)


@pytest.mark.parametrize(("bug", "fix", "plan"), JOBS, ids=[job[0] for job in JOBS])
def test_the_default_search_finds_the_bug_and_not_in_its_fix(bug: str, fix: str, plan: str) -> None:
    found = explore_plans(f"{WORLDS}:{bug}", seed=1)
    assert found is not None, f"the default search missed {bug}"
    assert found.simulation.report.user_violations
    assert not found.simulation.report.spec_violations
    assert 1 <= len(found.plan) <= 2, found.plan
    assert isinstance(found.plan, FaultPlan)
    assert explore_plans(f"{WORLDS}:{fix}", seed=1) is None
