"""The checks read a trace and say, in words, what broke the spec — including on traces no world
would write, which is where a check earns its keep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sims import (
    CheckReport,
    DelayLeg,
    FaultPlan,
    Finding,
    PauseDrive,
    Trace,
    WorldError,
    check_trace,
    simulate,
)

RUN = "01RUN0000000000000000000AA"
ROW = {
    "id": RUN,
    "module_id": "importer",
    "job": "walk",
    "instance": "default",
    "status": "running",
    "attempts": 0,
    "next_attempt_at": None,
    "lease_owner": None,
    "lease_began_at": None,
    "admission_misses": None,
    "last_error": None,
}


def _build(events: tuple[dict[str, Any], ...]) -> Trace:
    trace = Trace()
    trace.events.extend(events)
    return trace


def _start(
    t: float, row_id: str = RUN, seq: int = 1, scope: str = "scope-1"
) -> list[dict[str, Any]]:
    row = {**ROW, "id": row_id}
    send = {
        "t": t,
        "ev": "rpc.send",
        "link": "a",
        "seq": seq,
        "scope": scope,
        "op": "start_or_join",
        "args": [{}, row],
    }
    done = {
        "t": t,
        "ev": "rpc.exec",
        "link": "a",
        "seq": seq,
        "scope": scope,
        "op": "start_or_join",
        "store_at": "2026-10-04T12:00:00.000Z",
        "result": row,
    }
    return [send, done]


def test_a_handler_run_without_begin_is_a_violation() -> None:
    report = check_trace(
        _build(
            (
                *_start(0),
                {"t": 5, "ev": "handler.invoke", "drive": "a", "run": RUN, "owner": "O1"},
            )
        ),
        settles=False,
    )
    assert [f.line() for f in report.violations] == [
        "[violation] handler-iff-begin run 0000AA at 5 ms: drive a invoked the handler for pass "
        "O1 with no BEGIN written for it"
    ]


def test_a_second_live_run_for_one_key_is_a_violation() -> None:
    report = check_trace(_build((*_start(0), *_start(1, RUN[:-2] + "BB", seq=2))), settles=False)
    assert [f.check for f in report.violations] == ["one-live-run-per-key"]
    assert "while run 0000AA was live for the same key importer/walk/default in scope scope-1" in (
        report.violations[0].text
    )


def test_one_instance_live_in_several_scopes_is_not_a_double_start() -> None:
    starts = (
        *_start(0, scope="scope-1"),
        *_start(1, RUN[:-2] + "BB", seq=2, scope="scope-2"),
        *_start(2, RUN[:-2] + "CC", seq=3, scope="scope-3"),
    )
    assert check_trace(_build(starts), settles=False).violations == ()
    # ... while the same key twice in ONE of those scopes still is.
    again = _start(3, RUN[:-2] + "DD", seq=4, scope="scope-2")
    report = check_trace(_build((*starts, *again)), settles=False)
    assert [(f.check, f.run) for f in report.violations] == [
        ("one-live-run-per-key", RUN[:-2] + "DD")
    ]


def test_a_run_left_running_at_the_end_is_reported_when_faults_were_bounded() -> None:
    end = {"t": 9, "ev": "world.end", "runs": {"scope-1": [dict(ROW)]}}
    assert [f.check for f in check_trace(_build((*_start(0), end))).violations] == ["runs-settle"]
    assert check_trace(_build((*_start(0), end)), settles=False).ok


def test_checking_a_kept_trace_agrees_with_checking_it_live() -> None:
    simulation = simulate("lease-expiry-between-steps", 2)
    again = check_trace(simulation.outcome.trace)
    assert again.findings == simulation.report.findings


def test_a_violation_repeated_on_one_run_is_listed_a_few_times_then_counted() -> None:
    invokes = (
        {"t": 5 + i, "ev": "handler.invoke", "drive": "a", "run": RUN, "owner": f"O{i}"}
        for i in range(40)
    )
    report = check_trace(_build((*_start(0), *invokes)), settles=False)
    assert not report.ok
    assert [f.check for f in report.violations] == ["handler-iff-begin"] * 6
    assert [f.line() for f in report.violations[:5]] == [
        f"[violation] handler-iff-begin run 0000AA at {5 + i} ms: drive a invoked the handler for "
        f"pass O{i} with no BEGIN written for it"
        for i in range(5)
    ]
    assert report.violations[5].line() == (
        "[violation] handler-iff-begin run 0000AA at 44 ms: … and 35 more handler-iff-begin "
        "violations on this run, not listed (at most 5 of one check on one run are)"
    )
    # The verdict counts every violation, the listed ones and those past the cap.
    assert report.violation_count == 40
    assert CheckReport(report.findings).violation_count == 6


MISS_THEN_EARLY_CLAIM = '''
from sims import DriveSpec, JobPassResult, World, WorldSetup, record_effect, scenario


async def push_contacts(ctx):
    start = ctx.cursor or 0
    end = min(start + 3, 10)
    for index in range(start, end):
        async def push(index=index):
            await record_effect(ctx, f"push-{index}")
            return index

        await ctx.step(f"push-{index}", push)
    return JobPassResult(cursor=end, done=end >= 10)


@scenario("miss-then-claim", setup=WorldSetup(scopes=("s",), lease_ms=2_000))
async def world(world: World) -> None:
    """Two drives with latency on one scope, a 2 s lease."""
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=5.0, reply_ms=5.0))
    world.add_job("m", "sync", push_contacts)
    await world.start("cron", "s", "m", "sync")
    world.every("cron", "s", every_ms=1_000, first_ms=0, until_ms=30_000)
    world.every("alarm", "s", every_ms=1_000, first_ms=500, until_ms=30_000)
    await world.settle(("s",), horizon_ms=30_000, poll_ms=500)
'''


def test_a_claim_after_a_miss_is_due_when_the_backoff_ends_not_when_the_old_lease_would(
    tmp_path: Path,
) -> None:
    # The cron's first claim is held on the wire for 1.5 s, and a pass misses its admission: the
    # miss releases the lease and backs the run off. A later claim, after the backoff but before
    # the released lease would have run out, takes a run that is due. The real store breaks no
    # rule here; the check once took the run as due only when the released lease ran out.
    path = tmp_path / "miss_world.py"
    path.write_text(MISS_THEN_EARLY_CLAIM)
    plan = FaultPlan((DelayLeg(drive="cron", operation="claim", nth=1, leg="request", ms=1499.0),))
    simulation = simulate(f"{path}:miss-then-claim", 1, plan=plan)
    assert simulation.facts.count("admission.miss") >= 1  # the world reached the case
    assert simulation.report.ok, "\n".join(f.line() for f in simulation.report.findings)


UNDECLARED_SCOPE = '''
from driver import StartJobRunInput
from sims import DriveSpec, JobPassResult, World, scenario


async def never_done(ctx):
    return JobPassResult(done=False)


@scenario("through-the-world")
async def through_the_world(world: World) -> None:
    """A run started through the world in a scope the setup never declared."""
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "stuck", never_done)
    await world.start("cron", "elsewhere", "m", "stuck")


@scenario("past-the-world")
async def past_the_world(world: World) -> None:
    """The same, started through the drive's own driver."""
    drive = world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "stuck", never_done)
    await drive.driver.start_job_run("elsewhere", StartJobRunInput(module_id="m", job="stuck"))
'''


@pytest.mark.parametrize("name", ["through-the-world", "past-the-world"])
def test_a_run_in_a_scope_the_world_did_not_declare_is_an_error_not_a_pass(
    tmp_path: Path, name: str
) -> None:
    # The end-of-world checks (every run ends, the rows checkpoint) read the declared scopes: a
    # run elsewhere must not leave them with nothing to find and a clean verdict.
    path = tmp_path / "undeclared.py"
    path.write_text(UNDECLARED_SCOPE)
    with pytest.raises(WorldError) as caught:
        simulate(f"{path}:{name}", 0)
    assert str(caught.value.error) == (
        "scope 'elsewhere' is not one of this world's scopes (scope-1); declare it in "
        "WorldSetup(scopes=...), which is what the end-of-world checks read (a run left running "
        "in an undeclared scope would go unseen)"
    )


def test_a_finding_late_in_a_long_world_says_its_time_in_plain_digits() -> None:
    # An hour-long world reaches millions of ms, where the usual short float form turns to e+06.
    finding = Finding("runs-settle", "violation", None, 2_229_460.0, "still running")
    assert finding.line() == "[violation] runs-settle at 2229460 ms: still running"
    assert Finding("c", "explained", None, 1203.25, "x").line() == "[explained] c at 1203.25 ms: x"


def test_a_takeover_after_the_claims_lease_ran_out_is_explained_though_begin_came_later() -> None:
    # BEGIN does not renew the lease: the cron's lease runs out a lease after its claim, however
    # late its BEGIN was written. The alarm's takeover after that is the spec's at-least-once
    # window (a stretch longer than the lease), never a takeover of a live lease.
    plan = FaultPlan(
        (
            DelayLeg(drive="cron", operation="begin", nth=1, leg="request", ms=600),
            PauseDrive(drive="cron", nth=1, ms=2500, where="before-step"),
        )
    )
    simulation = simulate("late-begin", 1, plan=plan)
    assert simulation.report.ok, "\n".join(f.line() for f in simulation.report.findings)
    (explained,) = simulation.report.explained
    assert "A stretch longer than the lease" in explained.text
