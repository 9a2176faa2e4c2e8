"""The search's stage of a second fault aimed at the world a first one made: what a clean world
teaches about which drive runs which pass, and what a first fault changes of it.

And the stretch that makes such plans fair: a world under bounded faults ticks and settles as much
longer as they can hold it up, so two long holds never leave a run running at the end for the
spec to be blamed."""

from __future__ import annotations

from pathlib import Path

from sims import (
    CrashAfter,
    CrashDrive,
    DelayLeg,
    DropLeg,
    FaultPlan,
    HoldLeg,
    LateRequest,
    ServiceOutage,
    StoreClockFault,
    simulate,
)
from sims.faults._plan import NO_FAULTS
from sims.search._shape import CallsMade, ServiceCall, WorldShape, calls_made, world_shape
from sims.search._stages import second_faults, single_plans

PAY = f"{Path(__file__).parents[2] / 'examples' / 'payment_provider.py'}:pay-once"
CRASH_BEFORE_HANDLER = FaultPlan((CrashAfter(drive="cron", operation="begin", nth=1),))


def _struck(plan: FaultPlan) -> set[tuple[str, str]]:
    second = plan.faults[1]
    return {(str(getattr(second, "drive", "")), str(getattr(second, "operation", "")))}


def test_a_takeover_is_aimed_at_the_calls_the_drive_that_took_over_made() -> None:
    shape = world_shape(PAY)
    # In the clean world the cron runs the whole job; the alarm only reads the due list.
    assert {d for d, op, _ in shape.calls if op == "begin"} == {"cron"}
    made = calls_made(simulate(PAY, 1, plan=CRASH_BEFORE_HANDLER, keep_trace=True))
    plans = second_faults(shape, {CRASH_BEFORE_HANDLER: made}, 1000)
    assert plans
    assert all(plan.faults[0] == CRASH_BEFORE_HANDLER.faults[0] for plan in plans)
    struck = set().union(*map(_struck, plans))
    # Every second fault strikes a call the alarm made only because the cron crashed (or the
    # service refusing that call, which names no drive).
    assert {drive for drive, _ in struck} == {"alarm", ""}
    assert {op for drive, op in struck if not drive} == {""}
    assert ("alarm", "card.charge") in struck
    assert ("alarm", "due_keys") not in struck  # the due list's reads are not aimed at
    seconds = {plan.faults[1] for plan in plans}
    charge = made.services[0]
    assert (charge.drive, charge.operation, charge.nth) == ("alarm", "card.charge", 1)
    assert DropLeg(drive="alarm", operation="card.charge", nth=1, leg="reply") in seconds
    moved_on = shape.moved_on_ms(charge)
    assert LateRequest(drive="alarm", operation="card.charge", nth=1, ms=moved_on) in seconds
    assert CrashAfter(drive="alarm", operation="begin", nth=1) in seconds
    assert CrashAfter(drive="alarm", operation="begin", nth=1, down_ms=90_000.0) in seconds
    assert (
        HoldLeg(
            drive="alarm",
            operation="record_step",
            nth=1,
            leg="reply",
            until="takeover",
            max_ms=300_000.0,
        )
        in seconds
    )
    # The most likely second faults first: the service call's answers in doubt.
    assert isinstance(plans[0].faults[1], DropLeg)


def test_first_faults_that_change_nothing_or_the_same_calls_get_one_list() -> None:
    shape = world_shape(PAY)
    clean = CallsMade(scope=shape.calls, services=shape.service_calls)
    made = calls_made(simulate(PAY, 1, plan=CRASH_BEFORE_HANDLER, keep_trace=True))
    same = FaultPlan((CrashAfter(drive="cron", operation="claim", nth=1),))
    nothing = FaultPlan((DelayLeg(drive="cron", operation="claim", nth=1, leg="reply", ms=1.0),))
    plans = second_faults(shape, {nothing: clean, CRASH_BEFORE_HANDLER: made, same: made}, 1000)
    assert {plan.faults[0] for plan in plans} == {CRASH_BEFORE_HANDLER.faults[0]}
    assert second_faults(shape, {nothing: clean}, 1000) == []


def test_a_drive_kept_away_leaves_the_calls_of_the_drives_left_to_aim_at() -> None:
    # Two drives that each run a run of their own; the alarm kept away made fewer calls that act
    # on a run, and nobody made a new one: the cron's calls are aimed at, past the takeover that
    # no longer comes. (Fewer idle reads of the due list alone keep nobody away.)
    both = tuple(
        (drive, op, 1)
        for drive in ("alarm", "cron")
        for op in ("begin", "claim", "commit_pass", "due_keys")
    )
    shape = WorldShape(drives=("cron", "alarm"), scopes=("s",), lease_ms=1000, calls=both)
    away = FaultPlan((CrashDrive(drive="alarm", at_ms=499.0, down_ms=3000.0),))
    left = CallsMade(scope=tuple(call for call in both if call[0] == "cron"))
    struck = set().union(*map(_struck, second_faults(shape, {away: left}, 1000)))
    assert struck == {("cron", "begin"), ("cron", "claim"), ("cron", "commit_pass")}
    idle = CallsMade(scope=tuple(call for call in both if call[1] != "due_keys"))
    assert second_faults(shape, {away: idle}, 1000) == []


def test_takeovers_come_first_and_each_first_fault_gets_its_turn() -> None:
    shape = world_shape(PAY)
    late = ServiceCall(drive="cron", operation="card.charge", nth=2, timeout_ms=5000.0, sent_ms=9.0)
    retried = CallsMade(scope=shape.calls, services=(*shape.service_calls, late))
    took_over = calls_made(simulate(PAY, 1, plan=CRASH_BEFORE_HANDLER, keep_trace=True))
    retry = FaultPlan((DropLeg(drive="cron", operation="card.charge", nth=1, leg="reply"),))
    plans = second_faults(shape, {retry: retried, CRASH_BEFORE_HANDLER: took_over}, 4)
    firsts = [plan.faults[0] for plan in plans]
    assert firsts == [CRASH_BEFORE_HANDLER.faults[0], retry.faults[0]] * 2


def test_stage_one_keeps_each_drive_away_for_three_leases() -> None:
    shape = world_shape(PAY)
    away = [plan for plan in single_plans(shape, 10**6) if plan.of(CrashDrive)]
    assert away == [
        FaultPlan((CrashDrive(drive="cron", at_ms=0.0, down_ms=90_000.0),)),
        FaultPlan((CrashDrive(drive="alarm", at_ms=499.0, down_ms=90_000.0),)),
    ]


def test_a_plan_holds_a_world_up_by_the_sum_of_its_faults() -> None:
    assert NO_FAULTS.hold_up_ms() == 0.0
    plan = FaultPlan(
        (
            HoldLeg(drive="cron", operation="claim", nth=1, leg="reply", until="tick", max_ms=7.0),
            DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=5.0),
            CrashAfter(drive="cron", operation="begin", nth=1, down_ms=11.0),
            ServiceOutage(service="card", from_ms=100.0, to_ms=130.0),
            StoreClockFault(skew_ms=-3.0),
        )
    )
    assert plan.hold_up_ms() == 56.0


def test_two_holds_of_ten_leases_leave_the_run_time_to_end() -> None:
    # Each hold lasts up to the world's 300 s; one after the other they held the run past its
    # ticks, and runs-settle blamed the spec for a run the faults had kept from its drives.
    held = FaultPlan(
        (
            HoldLeg(
                drive="cron",
                operation="record_step",
                nth=1,
                leg="reply",
                until="effect",
                max_ms=300_000.0,
            ),
            HoldLeg(
                drive="alarm",
                operation="claim",
                nth=1,
                leg="reply",
                until="takeover",
                max_ms=300_000.0,
            ),
        )
    )
    simulation = simulate(PAY, 1, plan=held)
    assert simulation.report.ok, simulation.report.violations
    ends = [event["t"] for event in simulation.outcome.trace.of("world.end")]
    assert ends[0] > 300_000.0  # it ran past the scenario's own horizon to settle
