"""A start is a call: lost, answered late, delivered late after its caller gave up, sent again.

The worlds are in ``worlds/starts_late.py``: a charge keyed by the run's id, which a second run
of the same order charges again, and the fix keyed by the order.
"""

from __future__ import annotations

import random
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, find, settings

from sims import (
    DelayLeg,
    DropLeg,
    FaultPlan,
    LateRequest,
    RepeatStart,
    Simulation,
    WorldError,
    draw_plan,
    plan_from_text,
    search,
    simulate,
)
from sims.faults._check import PlanError, check_plan
from sims.search._aimed import aimed_plans
from sims.search._shape import world_shape
from sims.search._stages import start_plans
from sims.timeline._story import story_lines

WORLDS = Path(__file__).parent / "worlds" / "starts_late.py"
BY_RUN = f"{WORLDS}:charge-by-run"
BY_ORDER = f"{WORLDS}:charge-by-order"
CHECKOUT = f"{WORLDS}:checkout"
START = "start_or_join"


def _story(simulation: Simulation) -> str:
    return "\n".join(story_lines(simulation.outcome.trace.events, limit=100_000))


def _lost(*nths: int) -> FaultPlan:
    return FaultPlan(
        tuple(DropLeg(drive="cron", operation=START, nth=n, leg="request") for n in nths)
    )


def test_the_scenarios_start_starts_again_when_the_wire_loses_it() -> None:
    # Two starts lost: the third try starts the run, and the trace and the story say so.
    simulation = simulate(BY_ORDER, 1, plan=_lost(1, 2), keep_trace=True)
    assert simulation.report.ok, simulation.report.violations
    trace = simulation.outcome.trace
    failed = list(trace.of("world.start.failed"))
    assert [(e["try"], e["error"], e.get("again_ms")) for e in failed] == [
        (1, "RequestDropped", 500.0),
        (2, "RequestDropped", 500.0),
    ]
    assert len(list(trace.of("world.start"))) == 1
    story = _story(simulation)
    assert "try 1 of 3, it starts again in 500 ms" in story
    # Three lost: the caller gives up, and the world raises as before.
    with pytest.raises(WorldError, match="RequestDropped"):
        simulate(BY_ORDER, 1, plan=_lost(1, 2, 3))


def test_a_lost_answer_to_a_start_started_again_charges_a_key_from_the_run_twice() -> None:
    # The first start ran; its reply was lost; the start again after the run ended made a second.
    plan = FaultPlan((DropLeg(drive="cron", operation=START, nth=1, leg="reply"),))
    by_run = simulate(BY_RUN, 1, plan=plan)
    assert [f.check for f in by_run.report.violations] == ["card.charge-at-most-once-per-order"]
    assert simulate(BY_ORDER, 1, plan=plan).report.ok


def test_repeat_start_is_checked_against_the_world() -> None:
    drives, scopes = ("cron", "alarm"), ("shop",)
    at_once = RepeatStart(drive="cron", nth=1, after_ms=0.0)
    check_plan(FaultPlan((at_once,)), drives=drives, scopes=scopes)
    for bad, said in [
        (RepeatStart(drive="web", nth=1, after_ms=5.0), "no drive 'web'"),
        (RepeatStart(drive="cron", nth=0, after_ms=5.0), "nth=0; give a whole number >= 1"),
        (RepeatStart(drive="cron", nth=1, after_ms=-1.0), "after_ms=-1.0; give a finite"),
        (RepeatStart(drive="cron", nth=1, after_ms=float("nan")), "after_ms=nan"),
    ]:
        with pytest.raises(PlanError, match=said):
            check_plan(FaultPlan((bad,)), drives=drives, scopes=scopes)


def test_repeat_start_fires_is_told_round_trips_and_is_reported_unfired() -> None:
    repeat = RepeatStart(drive="cron", nth=1, after_ms=1_500.0)
    assert plan_from_text(repr(FaultPlan((repeat,)))) == FaultPlan((repeat,))
    simulation = simulate(BY_RUN, 1, plan=FaultPlan((repeat,)), keep_trace=True)
    assert simulation.outcome.unfired == ()
    assert [f.check for f in simulation.report.violations] == ["card.charge-at-most-once-per-order"]
    story = _story(simulation)
    assert "sends that start again, 1500 ms later" in story
    assert "(start 1 sent again)" in story
    # The second click within the run's life joins it: one charge even keyed by the run.
    joined = attrs.evolve(repeat, after_ms=20.0)
    assert simulate(BY_RUN, 1, plan=FaultPlan((joined,))).report.ok
    # The cron makes one start: a repeat of its second never fires.
    never = RepeatStart(drive="cron", nth=2, after_ms=5.0)
    assert simulate(BY_RUN, 1, plan=FaultPlan((never,))).outcome.unfired == (never,)


def test_a_handlers_start_delivered_late_makes_a_second_run() -> None:
    # The cron's second start is the checkout handler's ctx.start_run: given up on, the pass
    # fails and its retry starts again; the first start, delivered after that run ended, makes
    # another, and the charge keyed by the run's id is made twice.
    late = LateRequest(drive="cron", operation=START, nth=2, ms=5_000.0)
    simulation = simulate(CHECKOUT, 1, plan=FaultPlan((late,)), keep_trace=True)
    assert simulation.outcome.unfired == ()
    trace = simulation.outcome.trace
    assert [e["op"] for e in trace.of("rpc.late")] == [START]
    assert [f.check for f in simulation.report.violations] == ["card.charge-at-most-once-per-order"]
    # The search aims at the handler's start too, at the moments of the run it made.
    plans = start_plans(world_shape(CHECKOUT), share=100)
    handlers = [p.faults[0] for p in plans if getattr(p.faults[0], "nth", 0) == 2]
    assert DropLeg(drive="cron", operation=START, nth=2, leg="request") in handlers
    assert {type(f) for f in handlers} == {DropLeg, DelayLeg, LateRequest, RepeatStart}


def test_start_plans_land_before_during_and_after_the_run_while_drives_tick() -> None:
    shape = world_shape(BY_RUN)
    (start,) = shape.starts
    assert start.began_ms is not None
    assert start.ended_ms is not None
    plans = start_plans(shape, share=100)
    late = [f.ms for p in plans for f in p.faults if isinstance(f, LateRequest)]
    again = [f.after_ms for p in plans for f in p.faults if isinstance(f, RepeatStart)]
    assert late == again
    assert late[0] < start.began_ms < late[1] < start.ended_ms < late[2] < shape.horizon_ms
    assert all(start.sent_ms + ms < shape.horizon_ms for ms in late)
    assert len(start_plans(shape, share=3)) == 3


def test_explore_finds_the_double_charge_with_a_start_fault_and_the_fix_is_clean() -> None:
    found = search(BY_RUN, findings=None)
    assert found.failed
    assert found.found is not None
    struck = found.found.plan.faults
    assert len(struck) == 1
    assert getattr(struck[0], "operation", None) == START
    clean = search(BY_ORDER, findings=None)
    assert not clean.failed, list(clean.lines())


def test_the_swarm_draws_start_faults_only_for_a_world_with_starts() -> None:
    drives, scopes = ("cron", "alarm"), ("shop",)

    def drawn(seed: int, *, starts: bool) -> FaultPlan:
        return draw_plan(
            random.Random(seed),
            drives=drives,
            scopes=scopes,
            lease_ms=1_000,
            margin_ms=250.0,
            horizon_ms=30_000.0,
            starts=starts,
        )

    with_starts = [drawn(seed, starts=True) for seed in range(200)]
    without = [drawn(seed, starts=False) for seed in range(200)]
    struck = [
        fault
        for plan in with_starts
        for fault in plan.faults
        if getattr(fault, "operation", None) == START
    ]
    assert any(isinstance(fault, RepeatStart) for fault in struck)
    assert any(isinstance(fault, LateRequest | DropLeg) for fault in struck)
    for plan in with_starts:
        check_plan(plan, drives=drives, scopes=scopes)
    assert not any(
        getattr(fault, "operation", None) == START for plan in without for fault in plan.faults
    )


def test_hypothesis_draws_start_faults_for_a_world_with_starts() -> None:
    shape = world_shape(BY_RUN)
    plan = find(
        aimed_plans(shape),
        lambda plan: any(isinstance(fault, RepeatStart) for fault in plan.faults),
        settings=settings(database=None, suppress_health_check=list(HealthCheck)),
    )
    (repeat,) = plan.faults
    assert isinstance(repeat, RepeatStart)
    assert repeat.drive == "cron"
