"""Deploys in the world: a version of a job's handler, put on the drives one by one by a fault of
the plan (``Deploy`` at a moment, ``DeployAfter`` right after a call), checked against the world,
fired or named unfired, shrunk, printed as code, replayed, and aimed by the search at the job's
own windows. The shop's release 2 renames its charge step: a pass of a run that charged on
release 1 misses the memo and charges again."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from driver import JobDefinition, JobPassContext, JobPassResult
from examples.shop.jobs import ORDER_V2
from sims import (
    NO_FAULTS,
    Deploy,
    DeployAfter,
    DriveSpec,
    DropLeg,
    FaultPlan,
    World,
    WorldSetup,
    draw_plan,
    explore_plans,
    plan_from_text,
    run_world,
    search,
    simulate,
)
from sims.faults._check import PlanError
from sims.faults._plan import FAULT_KINDS

ROOT = Path(__file__).parents[2]
DEPLOY = "examples/shop/world.py:deploy"
FIXED = "examples/shop/world.py:deploy-fixed"
BETWEEN_STEPS = DeployAfter(version="v2", drive="cron", operation="record_step", nth=1)


@pytest.fixture(autouse=True)
def _at_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _events(plan: FaultPlan, scenario: str = DEPLOY) -> list[dict[str, Any]]:
    return simulate(scenario, 1, plan=plan, keep_trace=True).outcome.trace.events


# -- the world -------------------------------------------------------------------------------


def test_a_deploy_between_two_steps_double_charges_on_the_renamed_step() -> None:
    simulation = simulate(DEPLOY, 1, plan=FaultPlan((BETWEEN_STEPS,)), keep_trace=True)
    assert [str(f.text) for f in simulation.report.violations] == [
        "order 2026-11/c0000 was charged 2 times"
    ]
    events = simulation.outcome.trace.events
    # Release 1 recorded 'charge'; after the deploy, the takeover's pass asks for 'charge-card'.
    steps = [(e["drive"], e["step"]) for e in events if e["ev"] == "step.run"]
    assert ("cron", "charge") in steps
    assert ("cron", "charge-card") in steps
    assert simulation.outcome.unfired == ()


def test_the_fixed_release_carries_the_same_deploy() -> None:
    simulation = simulate(FIXED, 1, plan=FaultPlan((BETWEEN_STEPS,)), keep_trace=True)
    assert simulation.report.ok, simulation.report.verdict()
    memo = [e["step"] for e in simulation.outcome.trace.events if e["ev"] == "step.memo"]
    assert memo == ["charge"]


def test_without_a_deploy_release_one_is_clean() -> None:
    assert simulate(DEPLOY, 1, plan=NO_FAULTS).report.ok


def test_a_rolling_deploy_restarts_the_drives_one_by_one_in_its_order() -> None:
    plan = FaultPlan((Deploy(version="v2", at_ms=20.0, drives=("alarm", "cron"), every_ms=100),))
    events = _events(plan)
    restarts = [(e["t"], e["drive"], e["version"]) for e in events if e["ev"] == "fault.deploy"]
    assert restarts == [(20.0, "alarm", "v2"), (120.0, "cron", "v2")]
    # Each restart is a kill where the drive stood, then a new process on the new code.
    kills = [(e["t"], e["drive"]) for e in events if e["ev"] == "fault.crash"]
    assert kills == [(20.0, "alarm"), (120.0, "cron")]


def test_between_two_restarts_both_versions_serve() -> None:
    async def scenario(world: World) -> None:
        world.add_drive(DriveSpec(name="cron"))
        world.add_drive(DriveSpec(name="alarm"))
        world.register(JobDefinition("m", "j", _v1))
        for at, instance in ((100.0, "a"), (6_000.0, "b")):
            await world.sleep_until_ms(at)
            for drive in ("cron", "alarm"):
                await world.start(drive, "s", "m", "j", instance=f"{instance}-{drive}")
                await world.tick(drive, "s")

    rolling = Deploy(version="v2", at_ms=50.0, every_ms=5_000)
    setup = WorldSetup(
        scopes=("s",), versions={"v2": JobDefinition("m", "j", _v2)}, plan=FaultPlan((rolling,))
    )
    events = run_world(1, setup, scenario).trace.events
    # cron restarted at 50 ms, alarm at 5050 ms: in between, v2 on cron and v1 on alarm.
    assert [(e["t"] // 1000, e["drive"], e["step"]) for e in events if e["ev"] == "step.run"] == [
        (0, "cron", "v2"),
        (0, "alarm", "v1"),
        (6, "cron", "v2"),
        (6, "alarm", "v2"),
    ]


def test_a_deploy_after_a_call_that_never_comes_is_named_unfired() -> None:
    late = DeployAfter(version="v2", drive="alarm", operation="record_step", nth=40)
    simulation = simulate(DEPLOY, 1, plan=FaultPlan((late,)))
    assert simulation.outcome.unfired == (late,)
    assert not any(e["ev"] == "fault.deploy" for e in simulation.outcome.trace.events)


def test_the_story_tells_the_deploy() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sims", "run", DEPLOY, "--plan", repr(BETWEEN_STEPS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert (
        "fault: the deploy of version v2 begins right after its record_step call 1 ran in the "
        "scope, before its reply left: cron, alarm restart on it, in that order" in result.stdout
    )
    assert "restarts on version v2 of the jobs" in result.stdout
    assert "step charge-card runs" in result.stdout


async def _late_job(ctx: JobPassContext) -> JobPassResult:
    return JobPassResult(done=True)


async def _v1(ctx: JobPassContext) -> JobPassResult:
    await ctx.step("v1", _nothing)
    return JobPassResult(done=True)


async def _v2(ctx: JobPassContext) -> JobPassResult:
    await ctx.step("v2", _nothing)
    return JobPassResult(done=True)


async def _nothing() -> None:
    return None


def test_a_job_registered_after_a_deploy_runs_the_version_on_the_restarted_drive() -> None:
    async def scenario(world: World) -> None:
        world.add_drive(DriveSpec(name="cron"))
        world.add_drive(DriveSpec(name="alarm"))
        world.deploy(Deploy(version="v2", at_ms=0.0, drives=("cron",)))
        world.register(JobDefinition("m", "j", _v1))
        for drive in ("cron", "alarm"):
            await world.start(drive, "s", "m", "j", instance=drive)
            await world.tick(drive, "s")

    setup = WorldSetup(scopes=("s",), versions={"v2": JobDefinition("m", "j", _v2)})
    events = run_world(1, setup, scenario).trace.events
    # cron was restarted on v2 before the job was registered: it runs v2's handler of that name.
    assert [(e["drive"], e["step"]) for e in events if e["ev"] == "step.run"] == [
        ("cron", "v2"),
        ("alarm", "v1"),
    ]


# -- the plan --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        (
            Deploy(version="v3", at_ms=1.0),
            "the world has no version 'v3' of its jobs; its versions are v2",
        ),
        (
            DeployAfter(version="v2", drive="nightly", operation="begin", nth=1),
            "the world has no drive 'nightly'",
        ),
        (
            Deploy(version="v2", at_ms=1.0, drives=("cron", "cron")),
            "names a drive twice; a deploy restarts each drive once",
        ),
        (
            Deploy(version="v2", at_ms=1.0, drives=("cron", "nightly")),
            "give a tuple of the world's drives (cron, alarm) in the order they restart",
        ),
        (
            Deploy(version="v2", at_ms=1.0, drives=5),  # type: ignore[arg-type]
            "drives=5; give a tuple of the world's drives (cron, alarm) in the order they restart",
        ),
        (Deploy(version="v2", at_ms=-1.0), "at_ms=-1.0; give a finite number of ms >= 0"),
        (
            DeployAfter(version="v2", drive="cron", operation="begin", nth=1, every_ms=-5.0),
            "every_ms=-5.0; give a finite number of ms >= 0",
        ),
        (
            DeployAfter(version="v2", drive="cron", operation="launch", nth=1),
            "a drive sends no operation 'launch'",
        ),
        (
            DeployAfter(version="v2", drive="cron", operation="begin", nth=0),
            "nth=0; give a whole number >= 1",
        ),
    ],
)
def test_a_deploy_that_cannot_strike_is_refused_before_the_world_runs(
    fault: Any, problem: str
) -> None:
    with pytest.raises(PlanError, match="cannot strike: .*" + _escaped(problem)):
        simulate(DEPLOY, 1, plan=FaultPlan((fault,)))


def _escaped(text: str) -> str:
    import re

    return re.escape(text)


def test_a_world_without_versions_refuses_a_deploy_and_says_how_to_declare_one() -> None:
    with pytest.raises(PlanError, match=r"its versions are none \(declare them in WorldSetup"):
        simulate("examples/shop/world.py:order-fixed", 1, plan=FaultPlan((BETWEEN_STEPS,)))


@pytest.mark.parametrize(
    ("versions", "message"),
    [
        ([ORDER_V2], r"WorldSetup\(versions=\[.*give a dict of each version's name"),
        ({"": ORDER_V2}, r"names a version ''; give a dict"),
        ({"v2": "ORDER_V2"}, r"\[\'v2\'\] is 'ORDER_V2'; give a dict"),
        ({"v2": ()}, r"\[\'v2\'\] is \(\); give a dict"),
        ({"v2": ORDER_V2}, r"job shop/order calls card, mail, which this world does not declare"),
    ],
)
def test_bad_versions_are_refused_where_the_setup_is_written(versions: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WorldSetup(versions=versions)


def test_versions_take_one_job_or_several() -> None:
    setup = WorldSetup(services=(), versions={"v2": JobDefinition("m", "j", _late_job)})
    assert [job.job for job in setup.versions["v2"]] == ["j"]


def test_a_deploy_prints_as_code_and_reads_back() -> None:
    plan = FaultPlan(
        (
            Deploy(version="v2", at_ms=12.5, drives=("alarm",), every_ms=3.0, down_ms=4.0),
            BETWEEN_STEPS,
        )
    )
    assert plan_from_text(repr(plan)) == plan
    # One fault written alone is the plan of it.
    assert plan_from_text(repr(BETWEEN_STEPS)) == FaultPlan((BETWEEN_STEPS,))


def test_draws_deploy_only_in_a_world_with_versions() -> None:
    common: dict[str, Any] = {
        "drives": ("cron", "alarm"),
        "scopes": ("s",),
        "lease_ms": 1_000,
        "margin_ms": 250.0,
        "horizon_ms": 30_000.0,
    }
    with_versions = [
        fault
        for seed in range(60)
        for fault in draw_plan(random.Random(seed), versions=("v2",), **common).faults
    ]
    assert {type(f) for f in with_versions} >= {Deploy, DeployAfter}
    without = [
        fault
        for seed in range(60)
        for fault in draw_plan(random.Random(seed), kinds=FAULT_KINDS, **common).faults
    ]
    assert not [f for f in without if isinstance(f, Deploy | DeployAfter)]


# -- the search ------------------------------------------------------------------------------


def test_default_explore_finds_the_deploy_and_shrinks_it_to_one_deploy() -> None:
    found = explore_plans(DEPLOY, max_examples=60)
    assert found is not None
    assert found.plan == FaultPlan((BETWEEN_STEPS,)), found.plan
    assert "charged 2 times" in str(found.simulation.report.violations)


def test_explore_finds_nothing_in_the_fixed_release() -> None:
    report = search(FIXED, max_worlds=200, max_seconds=None, fresh_process=False)
    assert report.found is None
    assert report.worlds == 200
    # The clean verdict says deploys were searched.
    fired = report.coverage.of("fault:")
    assert fired.get("DeployAfter", 0) > 10, fired
    assert fired.get("Deploy", 0) >= 1, fired
    lines = "\n".join(report.coverage.lines())
    assert "× a pass over the steps another version ran" in lines
    assert "× a pass on the old version after a deploy began" in lines


def test_a_failing_plan_with_noise_shrinks_to_its_deploy() -> None:
    noise = DropLeg(drive="alarm", operation="claim", nth=3, leg="reply")
    report = search(
        DEPLOY,
        start=FaultPlan((noise, BETWEEN_STEPS)),
        max_worlds=60,
        max_seconds=None,
        fresh_process=False,
    )
    assert report.found is not None
    assert report.found.plan == FaultPlan((BETWEEN_STEPS,))


def test_a_deploy_after_a_failed_pass_before_its_retry_is_a_window_searched() -> None:
    from sims.search._shape import world_shape
    from sims.search._stages import deploy_plans

    plans = deploy_plans(world_shape(DEPLOY), 1_000)
    after_failure = [
        plan
        for plan in plans
        if any(isinstance(f, DeployAfter) and f.operation == "patch" for f in plan.faults)
    ]
    assert after_failure, plans
    # The lost reply of the first receipt fails its pass; the deploy lands before the retry.
    plan = next(p for p in after_failure if p.faults[0].operation == "mail.send")  # type: ignore[union-attr]
    simulation = simulate(DEPLOY, 1, plan=plan)
    assert not simulation.report.ok
    assert simulation.outcome.unfired == ()
    fixed = simulate(FIXED, 1, plan=plan)
    assert fixed.report.ok, fixed.report.verdict()


def test_a_replayed_deploy_is_the_same_world() -> None:
    first = simulate(DEPLOY, 1, plan=FaultPlan((BETWEEN_STEPS,)), keep_trace=True)
    again = simulate(
        DEPLOY, 1, plan=plan_from_text(repr(FaultPlan((BETWEEN_STEPS,)))), keep_trace=True
    )
    assert first.outcome.trace.events == again.outcome.trace.events


def test_the_timeline_marks_each_restart_as_the_deploy() -> None:
    from sims.timeline._reader import build_timeline

    trace = simulate(DEPLOY, 1, plan=FaultPlan((BETWEEN_STEPS,)), keep_trace=True).outcome.trace
    titles = [mark.title for mark in build_timeline(trace).marks if mark.kind == "crash"]
    assert titles == [
        "deploy of v2: cron stopped (working=True) and back on it after 0.0 ms",
        "deploy of v2: alarm stopped (working=False) and back on it after 0.0 ms",
    ]
