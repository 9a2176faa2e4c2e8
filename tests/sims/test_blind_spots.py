"""Where the search did not look: the services' own times and the job's retry schedule, chains of
three faults, and the passes of drives the clean world never used for a run.

The jobs are in ``worlds/blind_spots.py``; its docstring tells each bug and its fix. The default
search (no budget given) finds each bug and leaves each fix clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from driver import RetryPolicy
from sims import (
    CrashAfter,
    DelayLeg,
    DropLeg,
    FaultPlan,
    SearchReport,
    Service,
    ServiceOutage,
    search,
    simulate,
)
from sims.faults._plan import NO_FAULTS
from sims.search._shape import CallsMade, ServiceCall, calls_made, merged, world_shape
from sims.search._stages import _Moved, in_own_time, next_faults

WORLDS = Path(__file__).parent / "worlds" / "blind_spots.py"


def _world(name: str) -> str:
    return f"{WORLDS}:{name}"


def _found(report: SearchReport) -> FaultPlan:
    assert report.found is not None, "\n".join(report.lines())
    return report.found.plan


# -- the services' own times and the retry schedule ----------------------------------------------


def test_the_shape_knows_the_services_times_and_the_retry_schedule() -> None:
    shape = world_shape(_world("keys-forgotten"))
    assert shape.times_of("card") == (60_000.0,)
    # RetryPolicy(max_attempts=6, base 10 s, max 60 s): retries 10, 20, 40, 60, 60 s apart,
    # each jittered by a fifth either way, summed from the failed pass.
    assert shape.retries_ms == (
        (8_000.0, 12_000.0),
        (24_000.0, 36_000.0),
        (56_000.0, 84_000.0),
        (104_000.0, 156_000.0),
        (152_000.0, 228_000.0),
    )


def test_outages_end_just_either_side_of_each_time_and_each_retry() -> None:
    shape = world_shape(_world("keys-forgotten"))
    charge = shape.service_calls[0]
    ran = shape.ran_ms(charge)
    ends = shape.outage_ends(charge)
    trip = 2 * 40.0 + 1.0
    # The key the provider forgets after a minute: just before it, just past it.
    assert ran + 60_000.0 - 1.0 in ends
    assert ran + 60_000.0 + trip in ends
    # The retries, counted from the pass that failed when the charge's answer was lost (after
    # the call's timeout): the third retry may come as late as 84 s.
    failed = charge.sent_ms + 5_000.0
    assert failed + 84_000.0 + trip in ends
    plans = in_own_time(shape, 1000)
    lost = DropLeg(drive="cron", operation="card.charge", nth=1, leg="reply")
    past_the_minute = ServiceOutage(service="card", from_ms=ran, to_ms=ran + 60_000.0 + trip)
    assert FaultPlan((lost, past_the_minute)) in plans
    outages = [fault for plan in plans for fault in plan.faults if isinstance(fault, ServiceOutage)]
    assert {outage.to_ms for outage in outages} == set(ends)


def test_a_reply_is_held_just_inside_and_just_past_a_clients_patience() -> None:
    shape = world_shape(_world("client-gives-up"))
    plans = in_own_time(shape, 1000)
    delays = {fault.ms for plan in plans for fault in plan.faults if isinstance(fault, DelayLeg)}
    assert 8_001.0 in delays
    assert 8_000.0 - (2 * 50.0 + 1.0) in delays
    # Drawn by Hypothesis too: the delays in the service's terms include them.
    assert 8_001.0 in shape.service_delays()


def test_the_default_search_finds_a_key_forgotten_after_the_providers_minute() -> None:
    plan = _found(search(_world("keys-forgotten"), findings=None))
    outage = [fault for fault in plan.faults if isinstance(fault, ServiceOutage)]
    assert len(plan) == 2
    assert outage
    # Shrunk to round numbers: down until about the minute the provider keeps its keys (the
    # retry that gets through comes later still), where no delay or outage in leases reaches.
    assert outage[0].to_ms >= 60_000.0


def test_the_default_search_finds_a_client_that_gave_up() -> None:
    plan = _found(search(_world("client-gives-up"), findings=None))
    # Shrunk to 8 s: with the reply's own leg, the answer comes just past the client's patience.
    assert plan == FaultPlan(
        (DelayLeg(drive="cron", operation="bank.pay", nth=1, leg="reply", ms=8_000.0),)
    )


def test_service_times_are_checked_where_they_are_written() -> None:
    with pytest.raises(ValueError, match=r"times_ms=\{'keys': -1\}.*finite number of ms above 0"):
        Service("card", operations={"charge": lambda state, args: None}, times_ms={"keys": -1})
    with pytest.raises(ValueError, match="give a dict of names to durations"):
        Service(
            "card",
            operations={"charge": lambda state, args: None},
            times_ms=[60_000],  # type: ignore[arg-type]
        )


# -- chains of faults ----------------------------------------------------------------------------


def test_the_default_search_finds_a_bug_three_faults_deep() -> None:
    report = search(_world("ledger-chain"), findings=None)
    plan = _found(report)
    assert len(plan) == 3
    # A charge's answer lost, then the lookup's (a call only that world made): the third lost
    # answer is the fallback booking's, or the one booking that makes a retry run it all again.
    operations = [getattr(fault, "operation", "") for fault in plan.faults]
    assert "card.find" in operations
    assert "card.charge" in operations


def test_every_pair_of_the_chains_faults_leaves_one_booking() -> None:
    report = search(_world("ledger-chain"), findings=None)
    plan = _found(report)
    for left_out in range(3):
        pair = FaultPlan(tuple(f for i, f in enumerate(plan.faults) if i != left_out))
        assert not simulate(_world("ledger-chain"), 1, plan=pair).report.violations


def test_a_third_fault_is_aimed_at_what_the_world_of_two_did_anew() -> None:
    shape = world_shape(_world("ledger-chain"))
    lost = DropLeg(drive="cron", operation="card.charge", nth=1, leg="reply")
    lookup_lost = DropLeg(drive="cron", operation="card.find", nth=1, leg="reply")
    one = FaultPlan((lost,))
    two = FaultPlan((lost, lookup_lost))
    made_one = calls_made(simulate(_world("ledger-chain"), 1, plan=one, keep_trace=True))
    made_two = calls_made(simulate(_world("ledger-chain"), 1, plan=two, keep_trace=True))
    thirds = next_faults(shape, {two: (made_one, made_two)}, 1000)
    assert thirds
    assert all(plan.faults[:2] == two.faults for plan in thirds)
    struck = {getattr(plan.faults[2], "operation", "") for plan in thirds}
    assert "ledger.book_from_search" in struck
    assert "card.charge" not in struck  # made in the world of one fault already
    # A change seen at one depth stands for all: given again, nothing more is aimed.
    seen: set[tuple[object, ...]] = set()
    assert next_faults(shape, {two: (made_one, made_two)}, 1000, seen)
    assert next_faults(shape, {two: (made_one, made_two)}, 1000, seen) == []


def test_a_chain_tells_its_depth() -> None:
    told: list[str] = []
    search(_world("ledger-chain"), findings=None, progress=told.append)
    assert any(line.startswith("a third fault, aimed at the worlds of 2 faults") for line in told)


# -- every drive, every pass ---------------------------------------------------------------------


def _call(drive: str, nth: int, run: str) -> ServiceCall:
    return ServiceCall(
        drive=drive, operation="card.charge", nth=nth, timeout_ms=None, sent_ms=0.0, run=run
    )


def test_drives_that_swapped_runs_are_aimed_at_though_their_counts_did_not_move() -> None:
    before = CallsMade(
        scope=(("cron", "begin", 1), ("alarm", "begin", 1)),
        services=(_call("cron", 1, "shop/pay/o-1"), _call("alarm", 1, "shop/pay/o-2")),
        on_runs=(("cron", "begin", 1, "shop/pay/o-1"), ("alarm", "begin", 1, "shop/pay/o-2")),
        passes=(("cron", "shop/pay/o-1"), ("alarm", "shop/pay/o-2")),
    )
    swapped = CallsMade(
        scope=before.scope,
        services=(_call("alarm", 1, "shop/pay/o-1"), _call("cron", 1, "shop/pay/o-2")),
        on_runs=(("alarm", "begin", 1, "shop/pay/o-1"), ("cron", "begin", 1, "shop/pay/o-2")),
        passes=(("alarm", "shop/pay/o-1"), ("cron", "shop/pay/o-2")),
    )
    assert before.counts() == swapped.counts()
    moved = _Moved.of(before, swapped)
    assert set(moved.scope) == {("cron", "begin", 1), ("alarm", "begin", 1)}
    assert {(c.drive, c.run) for c in moved.services} == {
        ("alarm", "shop/pay/o-1"),
        ("cron", "shop/pay/o-2"),
    }
    assert _Moved.of(before, before).key() == ((), (), ())


def test_a_pass_elsewhere_is_failed_by_its_service_refusing() -> None:
    shape = world_shape(_world("ledger-chain"))
    crash = FaultPlan((CrashAfter(drive="cron", operation="begin", nth=1),))
    made = calls_made(simulate(_world("ledger-chain"), 1, plan=crash, keep_trace=True))
    took_over = [call for call in made.services if call.drive == "alarm"]
    assert took_over  # the alarm ran the run the cron ran in the clean world
    seconds = {plan.faults[1] for plan in next_faults(shape, {crash: (shape.made(), made)}, 1000)}
    first = took_over[0]
    trip = 2 * shape.latency_of(first.service) + 1.0
    refused = ServiceOutage(
        service=first.service, from_ms=first.sent_ms, to_ms=first.sent_ms + trip
    )
    assert refused in seconds


def test_hypothesis_draws_at_calls_some_world_made() -> None:
    shape = world_shape(_world("ledger-chain"))
    crash = FaultPlan((CrashAfter(drive="cron", operation="begin", nth=1),))
    made = calls_made(simulate(_world("ledger-chain"), 1, plan=crash, keep_trace=True))
    assert ("alarm", "card.charge") not in {(c.drive, c.operation) for c in shape.service_calls}
    wide = shape.widened(merged(CallsMade(), made))
    assert ("alarm", "card.charge") in {(c.drive, c.operation) for c in wide.service_calls}
    assert ("alarm", "begin") in {(d, op) for d, op, _ in wide.calls}
    # Nothing new: the same shape.
    assert shape.widened(CallsMade()) == shape


@pytest.mark.parametrize(
    "fixed", ["keys-forgotten-looks-first", "client-gives-up-asks-again", "ledger-chain-same-ref"]
)
def test_each_fix_is_clean_under_the_default_search(fixed: str) -> None:
    report = search(_world(fixed), findings=None)
    assert report.found is None, "\n".join(report.lines())
    assert report.raised is None
    assert not simulate(_world(fixed), 1, plan=NO_FAULTS).report.violations


def test_a_retry_schedule_of_the_default_policy_is_known() -> None:
    shape = world_shape(_world("client-gives-up"))
    policy = RetryPolicy()
    first = policy.base_delay_ms
    assert shape.retries_ms[0] == (first * 0.8, first * 1.2)
    assert len(shape.retries_ms) == policy.max_attempts - 1
