"""A fault plan is checked against its world before anything runs; a fault that never fired is
reported, and fails a scenario whose own plan documents it."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings

from sims import (
    CrashAfter,
    CrashDrive,
    DelayLeg,
    DropLeg,
    Evict,
    EvictAfter,
    Fault,
    FaultPlan,
    HoldLeg,
    LateRequest,
    PauseDrive,
    ServiceOutage,
    StoreClockFault,
    UpstreamFailure,
    World,
    WorldSetup,
    draw_plan,
    fault_plans,
    run_world,
    scenario,
    simulate,
)
from sims.cli._main import main
from sims.faults._check import PlanError, check_plan
from sims.scenarios._catalog import _random_setup
from sims.world._world import DriveSpec

DRIVES = ("cron", "alarm")
SCOPES = ("scope-1",)


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        (
            DelayLeg(drive="crom", operation="begin", nth=1, leg="reply", ms=5.0),
            "the world has no drive 'crom'; its drives are cron, alarm (a world declares its "
            "drives in WorldSetup(drives=...)); did you mean 'cron'?",
        ),
        (
            DropLeg(drive="cron", operation="commit", nth=1, leg="reply"),
            "a drive sends no operation 'commit'; its operations are start_or_join, due_keys, "
            "claim, begin, miss, list, patch, commit_pass, begin_step, record_step, invoke, and "
            "SERVICE.OPERATION for a call to one of the world's services; did you mean "
            "'commit_pass'?",
        ),
        (
            DropLeg(drive="cron", operation="begin", nth=1, leg="both"),  # type: ignore[arg-type]
            "a call has no leg 'both'; its legs are request and reply",
        ),
        (
            LateRequest(drive="alarm", operation="claim", nth=0, ms=5.0),
            "nth=0; give a whole number >= 1 (the first is 1)",
        ),
        (
            DelayLeg(drive="cron", operation="claim", nth=1, leg="request", ms=-1.0),
            "ms=-1.0; give a finite number of ms >= 0",
        ),
        (
            PauseDrive(drive="cron", nth=1, ms=float("inf")),
            "ms=inf; give a finite number of ms >= 0",
        ),
        (
            PauseDrive(drive="cron", nth=1, ms=5.0, where="mid-step"),  # type: ignore[arg-type]
            "a walk has no pause point 'mid-step'; its points are pass-start, before-step, "
            "after-effect, before-outcome",
        ),
        (
            Evict(scope="scope-2", at_ms=10.0),
            "the world has no scope 'scope-2'; its scopes are scope-1; did you mean 'scope-1'?",
        ),
        (CrashDrive(drive="cron", at_ms=-3.0), "at_ms=-3.0; give a finite number of ms >= 0"),
        (
            CrashDrive(drive="cron", at_ms=3.0, down_ms=-1.0),
            "down_ms=-1.0; give a finite number of ms >= 0",
        ),
        (UpstreamFailure(first=0), "first=0; give a whole number >= 1 (the first is 1)"),
        (
            UpstreamFailure(first=2, what="pages"),  # type: ignore[arg-type]
            "the upstream has no calls of kind 'pages'; its kinds are any, page, object",
        ),
        (StoreClockFault(drift=-1.0), "drift=-1.0; give a number above -1 and below 1"),
        # Faults that can change nothing: they would be told as fired, or as never fired, while
        # nothing happened.
        (
            DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=0),
            "ms=0 holds the leg for no time, which changes nothing; give ms > 0",
        ),
        (
            PauseDrive(drive="cron", nth=1, ms=0.0),
            "ms=0 stops the drive for no time, which changes nothing; give ms > 0",
        ),
        (
            StoreClockFault(skew_ms=0, drift=0),
            "with skew_ms=0 and drift=0 the store's clock runs true, which changes nothing; give "
            "a skew, a drift or both",
        ),
        (
            StoreClockFault(),
            "with skew_ms=0 and drift=0 the store's clock runs true, which changes nothing; give "
            "a skew, a drift or both",
        ),
    ],
)
def test_a_fault_the_world_cannot_have_is_refused_in_one_line(fault: Fault, problem: str) -> None:
    with pytest.raises(PlanError) as refused:
        check_plan(FaultPlan((fault,)), drives=DRIVES, scopes=SCOPES)
    assert str(refused.value) == f"fault {fault!r} cannot strike: {problem}"


#: The services of the world the service faults below are checked against.
SERVICES = {"bank": ("pay", "refund"), "mailer": ("send",)}


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        (
            DropLeg(drive="cron", operation="bank.charge", nth=1, leg="reply"),
            "the world has no service call 'bank.charge'; its service calls are bank.pay, "
            "bank.refund, mailer.send",
        ),
        (
            HoldLeg(drive="cron", operation="crm.upsert", nth=1, leg="reply", until="effect"),
            "the world has no service call 'crm.upsert'; its service calls are bank.pay, "
            "bank.refund, mailer.send",
        ),
        (
            EvictAfter(drive="cron", operation="bank.pay", nth=1),
            "a service call runs in no scope, so nothing can be evicted after it",
        ),
        (
            ServiceOutage(service="sms", from_ms=0.0, to_ms=10.0),
            "the world has no service 'sms'; its services are bank, mailer",
        ),
        (
            ServiceOutage(service="bank", from_ms=10.0, to_ms=10.0),
            "to_ms must be later than from_ms, or the outage lasts no time",
        ),
        (
            ServiceOutage(service="bank", from_ms=-1.0, to_ms=10.0),
            "from_ms=-1.0; give a finite number of ms >= 0",
        ),
        (
            LateRequest(drive="cron", operation="mailer.send", nth=0, ms=5.0),
            "nth=0; give a whole number >= 1 (the first is 1)",
        ),
    ],
)
def test_a_service_fault_the_world_cannot_have_is_refused_in_one_line(
    fault: Fault, problem: str
) -> None:
    with pytest.raises(PlanError) as refused:
        check_plan(FaultPlan((fault,)), drives=DRIVES, scopes=SCOPES, services=SERVICES)
    assert str(refused.value) == f"fault {fault!r} cannot strike: {problem}"


def test_a_world_without_services_names_where_to_declare_them() -> None:
    plan = FaultPlan((DropLeg(drive="cron", operation="bank.pay", nth=1, leg="reply"),))
    with pytest.raises(PlanError, match=r"declare them in WorldSetup\(services=\.\.\.\)\)$"):
        check_plan(plan, drives=DRIVES, scopes=SCOPES)


def test_service_faults_that_fit_are_let_through() -> None:
    plan = FaultPlan(
        (
            DropLeg(drive="cron", operation="bank.pay", nth=1, leg="reply"),
            DelayLeg(drive="alarm", operation="mailer.send", nth=2, leg="request", ms=9.0),
            HoldLeg(drive="cron", operation="bank.refund", nth=1, leg="reply", until="effect"),
            CrashAfter(drive="cron", operation="bank.pay", nth=1),
            LateRequest(drive="cron", operation="bank.pay", nth=1, ms=100.0),
            ServiceOutage(service="mailer", from_ms=0.0, to_ms=500.0),
        )
    )
    check_plan(plan, drives=DRIVES, scopes=SCOPES, services=SERVICES)


def test_a_second_store_clock_is_refused() -> None:
    plan = FaultPlan((StoreClockFault(skew_ms=5.0), StoreClockFault(drift=0.01)))
    with pytest.raises(PlanError, match=r"the store has one clock; give one StoreClockFault$"):
        check_plan(plan, drives=DRIVES, scopes=SCOPES)


def test_every_plan_the_swarm_draws_fits_its_world() -> None:
    for seed in range(200):
        setup = _random_setup(seed)
        check_plan(setup.plan, drives=setup.drives, scopes=setup.scopes)
        drawn = draw_plan(
            random.Random(seed),
            drives=DRIVES,
            scopes=SCOPES,
            lease_ms=1_000,
            margin_ms=250,
            horizon_ms=30_000,
        )
        check_plan(drawn, drives=DRIVES, scopes=SCOPES)


def test_faults_that_still_change_the_world_at_zero_are_let_through() -> None:
    # A late request of 0 ms is still given up on by its caller; a crash of 0 ms still kills the
    # drive's work; a clock with only a skew or only a drift still runs off.
    plan = FaultPlan(
        (
            LateRequest(drive="cron", operation="begin", nth=1, ms=0.0),
            CrashDrive(drive="cron", at_ms=0.0, down_ms=0.0),
            StoreClockFault(drift=0.01),
        )
    )
    check_plan(plan, drives=DRIVES, scopes=SCOPES)
    check_plan(FaultPlan((StoreClockFault(skew_ms=-5.0),)), drives=DRIVES, scopes=SCOPES)


@settings(max_examples=200, deadline=None)
@given(plan=fault_plans(drives=DRIVES, scopes=SCOPES))
def test_every_plan_hypothesis_draws_fits_its_world(plan: FaultPlan) -> None:
    check_plan(plan, drives=DRIVES, scopes=SCOPES)


def test_the_cli_refuses_a_plan_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    plan = "FaultPlan((DelayLeg(drive='cron', operation='begin', nth=0, leg='reply', ms=5.0),))"
    assert main(["run", "late-begin", "--plan", plan]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "error: fault DelayLeg(drive='cron', operation='begin', nth=0, leg='reply', ms=5.0) "
        "cannot strike: nth=0; give a whole number >= 1 (the first is 1)\n"
    )


def test_a_drive_the_setup_does_not_declare_is_refused() -> None:
    async def extra(world: World) -> None:
        world.add_drive(DriveSpec(name="worker"))

    with pytest.raises(BaseExceptionGroup) as raised:
        run_world(1, WorldSetup(), extra)
    leaf: BaseException = raised.value
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert str(leaf) == (
        "drive 'worker' is not one of this world's drives (cron, alarm); declare it in "
        "WorldSetup(drives=...), which is what a fault plan is checked against"
    )
    run_world(1, WorldSetup(drives=("worker",)), extra)


def test_faults_that_never_fired_are_named_and_the_rest_are_not() -> None:
    fires = DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=5.0)
    misses = (
        DelayLeg(drive="cron", operation="begin", nth=40, leg="reply", ms=5.0),
        DropLeg(drive="alarm", operation="commit_pass", nth=30, leg="request"),
        LateRequest(drive="cron", operation="miss", nth=1, ms=5.0),
        PauseDrive(drive="alarm", nth=90, ms=5.0),
        Evict(scope="scope-1", at_ms=10_000_000.0),
        CrashDrive(drive="alarm", at_ms=10_000_000.0),
        UpstreamFailure(first=10_000, count=2),
    )
    plan = FaultPlan((fires, *misses, UpstreamFailure(first=1, what="page")))
    sim = simulate("late-begin", 1, plan=plan)
    assert sim.outcome.unfired == misses
    assert sim.report.ok
    # A plan given in place of the scenario's own says what the world is to test: a fault of it
    # that never fired fails the world, as one of the scenario's own plan does.
    # Each fault aimed at a call says who made that operation, and how often: the fix is
    # usually its nth or its drive.
    who = (
        " (cron made 1 begin call; alarm made 1)",
        " (alarm made 1 commit_pass call)",
        " (cron made no miss calls)",
        "",
        "",
        "",
        "",
    )
    assert sim.mismatches == (
        f"7 faults of the given plan never fired, so the world did not test them: "
        f"{'; '.join(repr(fault) + told for fault, told in zip(misses, who, strict=True))}",
    )
    assert not sim.ok
    told = [e for e in sim.outcome.trace.events if e["ev"] == "world.unfired"]
    assert told[0]["faults"] == [repr(fault) for fault in misses]


def test_the_cli_fails_a_world_whose_given_fault_never_fired(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = "FaultPlan((DelayLeg(drive='cron', operation='begin', nth=9, leg='reply', ms=5.0),))"
    assert main(["run", "late-begin", "--plan", plan]) == 1
    verdict = capsys.readouterr().out.split("\nverdict:\n")[1].splitlines()
    assert verdict[:3] == [
        "  NOT AS DOCUMENTED: 1 fault of the given plan never fired, so the world did not test "
        "it: DelayLeg(drive='cron', operation='begin', nth=9, leg='reply', ms=5.0) (cron made 1 "
        "begin call)",
        "  the scenario's own plan was replaced by --plan, so what it documents was not "
        "asserted; only the checks were, and that its faults fired",
        "  0 violations, and faults of the given plan that never fired",
    ]


def test_a_drawn_world_only_reports_a_given_fault_that_never_fired(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # random declares faults_must_fire=False: its worlds differ by seed, so a fault may miss.
    plan = "FaultPlan((DelayLeg(drive='cron', operation='begin', nth=99, leg='reply', ms=5.0),))"
    assert main(["run", "random", "--plan", plan]) == 0
    verdict = capsys.readouterr().out.split("\nverdict:\n")[1].splitlines()
    assert verdict[:2] == [
        "  1 fault of the given plan never fired, so the world did not test it: "
        "DelayLeg(drive='cron', operation='begin', nth=99, leg='reply', ms=5.0) (cron made 5 "
        "begin calls; alarm made 4)",
        "  the scenario's own plan was replaced by --plan, so what it documents was not "
        "asserted; only the checks were",
    ]


UNFIRED = DelayLeg(drive="cron", operation="begin", nth=30, leg="reply", ms=1_250.0)


@scenario(
    "documents-an-unfired-fault",
    setup=WorldSetup(plan=FaultPlan((UNFIRED,)), objects=2),
)
async def documents_an_unfired_fault(world: World) -> None:
    """A world whose own plan documents a BEGIN reply it never sends."""
    world.add_drive(DriveSpec(name="cron"))
    await world.start_walk("cron", "scope-1", objects=2, chunk=2)
    world.every("cron", "scope-1", every_ms=500, first_ms=0, until_ms=5_000)
    await world.settle(("scope-1",), horizon_ms=5_000, poll_ms=500)


def test_a_scenario_whose_own_plan_did_not_fire_fails() -> None:
    sim = simulate(f"{__file__}:documents-an-unfired-fault", 1)
    assert sim.report.ok
    assert sim.mismatches == (f"1 fault never fired: {UNFIRED!r} (cron made 1 begin call)",)
    assert not sim.ok
