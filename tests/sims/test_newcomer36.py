"""A new user's providers, written from the docs alone (``worlds/newcomer36.py``): a search that
lags its writes, a rate limit, webhooks out of order. The default search finds each bug and
leaves each fix clean, and the plans its docstring gives break each bug and not its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

import sims

WORLDS = Path(__file__).parent / "worlds" / "newcomer36.py"

PAIRS = [
    ("renew-search-first", "renew-keyed"),  # 1. a lagging search trusted to dedupe a charge
    ("notify-skip-throttled", "notify-resume-throttled"),  # 2. a rate limit's recipient skipped
    ("track-last-arrival-wins", "track-versioned"),  # 3. webhooks applied as they arrive
]
#: The plans of the world's docstring (and, for the webhooks, a repeat), each a bug's.
PLANS = [
    (
        "renew-search-first",
        "renew-keyed",
        "FaultPlan((DropLeg(drive='cron', operation='psp.create_payment', nth=1, leg='reply'), "
        "StaleRead(operation='psp.search_payments', nth=2)))",
    ),
    (
        "notify-skip-throttled",
        "notify-resume-throttled",
        "FaultPlan((RateLimited(service='sms', nth=2, retry_after_ms=1000.0),))",
    ),
    (
        "track-last-arrival-wins",
        "track-versioned",
        "FaultPlan((DelayCallback(service='carrier', nth=2, ms=6000.0),))",
    ),
    (
        "track-last-arrival-wins",
        "track-versioned",
        "FaultPlan((RepeatCallback(service='carrier', nth=1, after_ms=10000.0),))",
    ),
]


@pytest.mark.parametrize(("bug", "fix"), PAIRS, ids=[bug for bug, _ in PAIRS])
def test_default_search_finds_the_bug_and_not_the_fix(bug: str, fix: str) -> None:
    found = sims.search(f"{WORLDS}:{bug}", findings=None)
    assert found.found is not None, f"{bug}: the default search found nothing"
    clean = sims.search(f"{WORLDS}:{fix}", findings=None)
    assert clean.found is None, f"{fix}: the default search found {clean.found}"


@pytest.mark.parametrize(("bug", "fix", "plan"), PLANS, ids=[plan for _, _, plan in PLANS])
def test_each_plan_breaks_the_bug_and_not_its_fix(bug: str, fix: str, plan: str) -> None:
    faults = sims.plan_from_text(plan)
    broken = sims.simulate(f"{WORLDS}:{bug}", 1, plan=faults)
    assert [finding.check for finding in broken.report.violations][:1] != [], bug
    assert all(finding.by_user for finding in broken.report.violations)
    held = sims.simulate(f"{WORLDS}:{fix}", 1, plan=faults)
    assert held.report.ok, held.report.violations
    assert not held.outcome.unfired, held.outcome.unfired
