"""Fault plans are data: drawn from a seed, printed, and read back safely."""

from __future__ import annotations

import random

import pytest

from sims import (
    CrashDrive,
    DelayLeg,
    FaultPlan,
    PauseDrive,
    UpstreamFailure,
    draw_plan,
    plan_from_text,
)


def _draw(seed: int) -> FaultPlan:
    return draw_plan(
        random.Random(seed),
        drives=("cron", "alarm"),
        scopes=("scope-1",),
        lease_ms=1000,
        margin_ms=250,
        horizon_ms=30_000,
    )


def test_a_plan_is_a_function_of_its_seed() -> None:
    assert _draw(5) == _draw(5)
    assert any(_draw(5) != _draw(seed) for seed in range(6, 10))


def test_swarm_draws_enable_different_subsets_of_kinds() -> None:
    kinds = {frozenset(type(fault) for fault in _draw(seed).faults) for seed in range(40)}
    assert len(kinds) > 10


def test_a_printed_plan_reads_back() -> None:
    plan = FaultPlan(
        (
            DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=1500.0),
            CrashDrive(drive="alarm", at_ms=30.0, down_ms=-0.0),
            PauseDrive(drive="cron", nth=2, ms=999.0, where="after-effect"),
            UpstreamFailure(first=3, count=2, what="page"),
        )
    )
    assert plan_from_text(repr(plan)) == plan
    assert plan_from_text(repr(plan.faults)) == plan


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("__import__('os').system('true')", r"calls something other than CrashDrive, DelayLeg"),
        ("FaultPlan(faults=[x for x in ()])", r"holds a ListComp, which a plan cannot"),
        ("DelayLeg(", r"is not Python"),
        ("3", r"is a int, not a FaultPlan"),
    ],
)
def test_a_plan_that_is_not_a_plan_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_from_text(text)
