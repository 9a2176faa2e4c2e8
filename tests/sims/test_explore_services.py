"""Explore aims at the job's outside world: it learns each service call and its timeout from a
clean run, strikes every one of them in the ways a caller's timeout goes wrong, counts what it
struck, and finds the payment a timeout-then-fallback makes twice, while the same job that asks
the bank again with an idempotency key stays clean."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from sims import (
    CrashAfter,
    DelayLeg,
    DropLeg,
    EvictAfter,
    Fault,
    FaultPlan,
    HoldLeg,
    LateRequest,
    ServiceOutage,
    plan_from_text,
    search,
    simulate,
    world_shape,
)
from sims.faults._check import check_plan
from sims.search._aimed import aimed_plans
from sims.search._coverage import Coverage, features_of, struck_service_calls
from sims.search._explore import _Search
from sims.search._shape import WorldShape, _service_calls
from sims.search._stages import guided_pairs, single_plans

WORLD = Path(__file__).parent / "worlds" / "bank_fallback.py"
BUGGY = f"{WORLD}:fallback"
FIXED = f"{WORLD}:fallback-asks-the-bank"
SERVICES = {"bank": ("pay",), "rail": ("pay",)}
#: The one service call of the clean world: the cron's first payment at the bank.
PAY: dict[str, Any] = {"drive": "cron", "operation": "bank.pay", "nth": 1}

SHAPE = world_shape(BUGGY)


def _fits(plan: FaultPlan) -> None:
    check_plan(plan, drives=SHAPE.drives, scopes=SHAPE.scopes, services=SERVICES)


def _strikes_a_service_call(fault: Fault) -> bool:
    return "." in str(getattr(fault, "operation", ""))


# -- the shape ------------------------------------------------------------------------------------


def test_the_shape_holds_each_service_call_its_timeout_and_the_services_latency() -> None:
    [call] = SHAPE.service_calls
    assert (call.drive, call.operation, call.nth, call.timeout_ms) == ("cron", "bank.pay", 1, 8000)
    assert call.sent_ms > 0
    assert SHAPE.service_counts() == (("cron", "bank.pay", 1),)
    assert SHAPE.services_by_name() == SERVICES
    assert SHAPE.latency_of("bank") == 50.0
    # Delays in the call's own terms: just past its timeout, the timeout plus the latency.
    delays = SHAPE.service_delays(call)
    assert {8001.0, 8051.0, 8101.0} <= set(delays)
    assert SHAPE.past_timeout_ms(call) == 8001.0
    assert SHAPE.moved_on_ms(call) == 8101.0
    # The world's delays hold them too, beside the lease's windows.
    assert {8001.0, 8051.0, 30_001.0} <= set(SHAPE.window_delays())


def test_service_calls_are_numbered_per_drive_and_operation_with_each_ones_timeout() -> None:
    sends: list[dict[str, Any]] = [
        {"drive": "cron", "op": "bank.pay", "timeout_ms": 100, "t": 1.0},
        {"drive": "cron", "op": "mailer.send", "timeout_ms": None, "t": 2.0},
        {"drive": "alarm", "op": "bank.pay", "timeout_ms": 300, "t": 3.0},
        {"drive": "cron", "op": "bank.pay", "timeout_ms": 200, "t": 4.0},
        {"drive": "stranger", "op": "bank.pay", "timeout_ms": 1, "t": 5.0},
    ]
    calls = _service_calls(sends, {"cron": None, "alarm": None})
    assert [(c.drive, c.operation, c.nth, c.timeout_ms) for c in calls] == [
        ("cron", "bank.pay", 1, 100.0),
        ("cron", "mailer.send", 1, None),
        ("alarm", "bank.pay", 1, 300.0),
        ("cron", "bank.pay", 2, 200.0),
    ]
    # A caller with no timeout learns nothing from one: its delays aim past the lease instead.
    shape = WorldShape(drives=("cron",), scopes=("s",), lease_ms=1000, service_calls=calls)
    assert shape.past_timeout_ms(calls[1]) == 1001.0


# -- stage 1 --------------------------------------------------------------------------------------


def test_stage_one_strikes_every_service_call_of_the_clean_world_five_ways() -> None:
    singles = single_plans(SHAPE, 10_000)
    for plan in singles:
        _fits(plan)
    struck = [plan.faults[0] for plan in singles if _strikes_a_service_call(plan.faults[0])]
    assert struck == [
        DropLeg(**PAY, leg="reply"),
        DelayLeg(**PAY, leg="reply", ms=8001.0),
        LateRequest(**PAY, ms=8101.0),
        HoldLeg(**PAY, leg="reply", until="effect", max_ms=300_000.0),
        CrashAfter(**PAY),
    ]
    assert singles[: len(struck)] == [FaultPlan((fault,)) for fault in struck]  # tried first
    assert not any(isinstance(plan.faults[0], EvictAfter) for plan in singles[: len(struck)])
    outages = [plan.faults[0] for plan in singles if isinstance(plan.faults[0], ServiceOutage)]
    # From the bank's first call: that request, the caller's retries within its timeout, those
    # until the lease ran out, the whole world; the rail, never called, for the whole world.
    assert [(o.service, o.to_ms - o.from_ms) for o in outages][:3] == [
        ("bank", 51.0),
        ("bank", 8101.0),
        ("bank", 30_101.0),
    ]
    assert {o.service for o in outages} == {"bank", "rail"}


def test_a_small_share_still_tries_every_service_fault_first() -> None:
    singles = single_plans(SHAPE, 12)
    assert len(singles) == 12
    # The five faults of the one call and the five outages whole, then two of the scope's.
    assert sum(_strikes_a_service_call(plan.faults[0]) for plan in singles[:5]) == 5
    assert all(isinstance(plan.faults[0], ServiceOutage) for plan in singles[5:10])


def test_each_service_fault_of_stage_one_makes_the_fallback_pay_twice() -> None:
    for fault in (
        DropLeg(**PAY, leg="reply"),
        DelayLeg(**PAY, leg="reply", ms=8001.0),
        LateRequest(**PAY, ms=8101.0),
        HoldLeg(**PAY, leg="reply", until="effect", max_ms=300_000.0),
    ):
        simulation = simulate(BUGGY, 1, plan=FaultPlan((fault,)))
        paid = [e["op"] for e in simulation.outcome.trace.of("svc.exec") if e.get("effect")]
        assert sorted(paid) == ["bank.pay", "rail.pay"], fault
        assert [f.check for f in simulation.report.violations] == ["one-payment"]


def test_a_late_request_lands_after_its_caller_moved_on() -> None:
    plan = FaultPlan((LateRequest(**PAY, ms=SHAPE.moved_on_ms(SHAPE.service_calls[0])),))
    trace = simulate(BUGGY, 1, plan=plan).outcome.trace
    [bank] = [e for e in trace.of("svc.exec") if e["op"] == "bank.pay"]
    rail = next(e for e in trace.of("svc.reply") if e["op"] == "rail.pay")
    recorded = next(trace.of("step.end"))
    # The rail's payment came back and the step was recorded before the bank's request ran.
    assert rail["t"] < recorded["t"] < bank["t"]


def test_a_reply_delayed_past_the_timeout_comes_after_the_caller_gave_up() -> None:
    plan = FaultPlan(
        (DelayLeg(**PAY, leg="reply", ms=SHAPE.past_timeout_ms(SHAPE.service_calls[0])),)
    )
    trace = simulate(BUGGY, 1, plan=plan).outcome.trace
    ops = [(e["ev"], e["op"]) for e in trace.of("svc.timeout", "svc.late")]
    assert ops == [("svc.timeout", "bank.pay"), ("svc.late", "bank.pay")]


# -- stage 2 and Hypothesis -----------------------------------------------------------------------


def test_the_guided_pairs_combine_service_faults_with_the_scopes() -> None:
    searching = _Search(
        scenario=FIXED,
        shown=FIXED,
        seed=1,
        mutant=None,
        max_worlds=1_000,
        max_seconds=None,
        fresh_process=False,
        clock=lambda: 0.0,
    )
    singles = single_plans(world_shape(FIXED), 10_000)
    assert searching.first_failing(singles, remember=True) is None
    pairs = list(guided_pairs(singles, searching.coverage, searching.reached))
    assert len(pairs) == 45  # ten singles, six of the scope and four of the services
    mixed = [
        p
        for p in pairs
        if sum(_strikes_a_service_call(f) or isinstance(f, ServiceOutage) for f in p.faults) == 1
    ]
    assert len(mixed) == 6 * 4
    # Three of the four are a service call's faults, one an outage over a window of the world.
    outages = {f for p in pairs for f in p.faults if isinstance(f, ServiceOutage)}
    assert len(outages) == 1
    assert len({f for p in pairs for f in p.faults if _strikes_a_service_call(f)}) == 3


def _finds(predicate: object) -> FaultPlan:
    return find(
        aimed_plans(SHAPE),
        predicate,  # type: ignore[arg-type]
        settings=settings(
            max_examples=2_000,
            derandomize=True,
            database=None,
            phases=(Phase.generate,),
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_hypothesis_draws_every_service_fault_in_the_calls_own_terms() -> None:
    for kind in (DelayLeg, DropLeg, LateRequest, HoldLeg, CrashAfter):
        plan = _finds(
            lambda p, kind=kind: any(
                isinstance(f, kind) and _strikes_a_service_call(f) for f in p.faults
            )
        )
        assert plan.faults
    late = _finds(
        lambda p: any(
            isinstance(f, DelayLeg) and f.operation == "bank.pay" and f.ms == 8001.0
            for f in p.faults
        )
    )
    assert late.faults
    outage = _finds(lambda p: any(isinstance(f, ServiceOutage) for f in p.faults))
    [down] = [f for f in outage.faults if isinstance(f, ServiceOutage)]
    windows = {(s.name, w) for s in SHAPE.services for w in SHAPE.outage_windows(s.name)}
    assert (down.service, (down.from_ms, down.to_ms)) in windows


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=aimed_plans(SHAPE))
def test_every_plan_hypothesis_draws_fits_a_world_with_services(plan: FaultPlan) -> None:
    _fits(plan)
    assert not any(isinstance(f, EvictAfter) and _strikes_a_service_call(f) for f in plan.faults)


@given(st.data())
@settings(max_examples=30, deadline=None)
def test_a_world_without_services_draws_no_service_fault(data: st.DataObject) -> None:
    shape = WorldShape(drives=("cron", "alarm"), scopes=("s",), lease_ms=1000, leases=(1000,))
    plan = data.draw(aimed_plans(shape))
    assert not any(_strikes_a_service_call(f) or isinstance(f, ServiceOutage) for f in plan.faults)


# -- coverage -------------------------------------------------------------------------------------


def test_a_hold_released_at_its_max_ms_is_counted_as_such() -> None:
    # Nothing else acts while the start's reply is held: only its time limit lets it go.
    timed_out = FaultPlan(
        (
            HoldLeg(
                drive="cron",
                operation="start_or_join",
                nth=1,
                leg="reply",
                until="effect",
                max_ms=1000.0,
            ),
        )
    )
    # The cron's step held open until the alarm, taking the run over, pays.
    by_event = FaultPlan(
        (HoldLeg(drive="cron", operation="begin_step", nth=1, leg="reply", until="effect"),)
    )
    coverage = Coverage()
    for plan, why in ((timed_out, "max_ms"), (by_event, "effect")):
        simulation = simulate(FIXED, 1, plan=plan)
        [release] = simulation.outcome.trace.of("fault.release")
        assert release["why"] == why
        coverage.add(features_of(simulation))
    assert coverage.counts["hold:max_ms"] == 1
    assert coverage.of("window:")["a held leg released after its event"] == 1
    lines = "\n".join(coverage.lines())
    assert "held legs released at their max_ms (their event never came): in 1 world" in lines


def test_the_coverage_says_how_many_service_calls_were_struck() -> None:
    coverage = Coverage()
    dropped = simulate(FIXED, 1, plan=FaultPlan((DropLeg(**PAY, leg="reply"),)))
    assert struck_service_calls(dropped) == Counter({"bank.pay": 1})
    # An outage over the first call refuses it, and the caller's retry after the timeout too.
    [call] = SHAPE.service_calls
    down = ServiceOutage(service="bank", from_ms=0.0, to_ms=call.sent_ms + 60_000.0)
    refused = simulate(FIXED, 1, plan=FaultPlan((down,)))
    assert struck_service_calls(refused)["bank.pay"] >= 1
    clean = simulate(FIXED, 1)
    assert struck_service_calls(clean) == Counter()
    for simulation in (dropped, refused, clean):
        coverage.add(features_of(simulation), struck=struck_service_calls(simulation))
    total = 1 + struck_service_calls(refused)["bank.pay"]
    lines = "\n".join(coverage.lines())
    assert f"service calls struck: {total} ({total} × bank.pay), in 2 worlds" in lines
    assert "a request the service refused" in lines
    # A search whose worlds call no service says nothing of services.
    plain = Coverage()
    plain.add(features_of(simulate("late-begin", 1)))
    assert "service" not in "\n".join(plain.lines())


# -- the measured goal ----------------------------------------------------------------------------


def test_the_default_explore_finds_the_fallback_paying_twice_in_one_fault() -> None:
    report = search(BUGGY)
    assert report.found is not None, "\n".join(report.lines())
    assert report.seconds < 30.0
    assert report.reproduced is True  # a fresh process gave the same trace, byte for byte
    [fault] = report.found.plan.faults
    assert isinstance(fault, DropLeg | DelayLeg | LateRequest | HoldLeg | CrashAfter)
    assert fault.operation == "bank.pay"
    trace = report.found.simulation.outcome.trace
    assert next(trace.of("svc.timeout"))["op"] == "bank.pay"  # taken for a refusal ...
    paid = [e["op"] for e in trace.of("svc.exec") if e.get("effect")]
    assert paid == ["bank.pay", "rail.pay"]  # ... and the rail paid again
    again = simulate(BUGGY, 1, plan=plan_from_text(repr(report.found.plan)))
    assert [f.check for f in again.report.violations] == ["one-payment"]


def test_the_job_that_asks_the_bank_again_stays_clean_under_the_default_explore() -> None:
    report = search(FIXED, max_seconds=None)
    assert not report.failed, "\n".join(report.lines())
    assert report.worlds == 300
    lines = "\n".join(report.lines())
    assert "service calls struck: " in lines
    assert report.coverage.struck["bank.pay"] > 20
    # The timeout and the late reply were reached: the fix was tested where the bug is.
    windows = report.coverage.of("window:")
    assert windows["a service call that timed out"] > 5
    assert windows["a reply that came after its caller gave up"] > 5


def test_the_clean_summary_names_the_service_operations_no_world_called() -> None:
    coverage = Coverage()
    coverage.add(
        frozenset({"services", "declared:bank.pay", "declared:rail.pay", "called:bank.pay"})
    )
    coverage.add(frozenset({"services", "declared:bank.pay", "declared:rail.pay"}))
    (line,) = [line for line in coverage.lines() if "no world called" in line]
    assert line == (
        "  service operations no world called: rail.pay (a fault strikes only a call the world "
        "makes: a path the search never opened, such as a fallback, was not tested)"
    )
    coverage.add(frozenset({"services", "declared:rail.pay", "called:rail.pay"}))
    assert not [line for line in coverage.lines() if "no world called" in line]


def test_a_world_reports_what_it_declared_and_called() -> None:
    features = features_of(simulate(BUGGY, 1))
    assert {"declared:bank.pay", "declared:rail.pay", "called:bank.pay"} <= features
    assert "called:rail.pay" not in features
