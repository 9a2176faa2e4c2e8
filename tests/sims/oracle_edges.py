"""A small world that walks the spec's edges on purpose, for the oracle's own tests.

The ``random`` swarm is meant to reach every rule; this world reaches the ones a mutant test needs
in a few hundred virtual milliseconds, deterministically: a step policy narrower than its job's that
spends a step, a handler that counts and omits its cursor, one that reuses a step name, one that
throws until its job's limit, a door held (deferral), a pass that outlives its lease with a job of
one attempt (takeover exhaustion), starts under another subject and with a payload that is not
queue-safe, a start after the key's run ended, an erasure during and after passes, and a dump
restored into its own scope and imported into another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from driver import JobPassResult, RetryPolicy, StartJobRunInput
from sims import DelayLeg, FaultPlan, World, WorldSetup, scenario
from sims.world._world import DriveSpec

NAME = "oracle-edges"
#: How the tests name this world (a scenario in a file of its own).
EDGES = f"{Path(__file__).resolve()}:{NAME}"
SCOPES = ("scope-1", "scope-2")
MODULE = "edges"


async def _narrow(ctx: Any) -> JobPassResult:
    # The step's own policy (2 attempts) is narrower than the job's (3): it is spent first.
    async def fails() -> None:
        raise RuntimeError("upstream said no")

    await ctx.step("flaky", fails, RetryPolicy(max_attempts=2, base_delay_ms=50, max_delay_ms=80))
    return JobPassResult(done=True)


async def _counting(ctx: Any) -> JobPassResult:
    ctx.count("seen", 2)
    await ctx.step(f"page-{ctx.cursor or 0}", lambda: {"n": 1})
    if ctx.cursor is None:
        return JobPassResult(cursor=1)
    if ctx.counters.get("seen", 0) < 4:
        return JobPassResult()  # the cursor omitted: the committed one is kept
    return JobPassResult(done=True)


async def _reusing(ctx: Any) -> JobPassResult:
    await ctx.step("same", lambda: 1)
    await ctx.step("same", lambda: 2)
    return JobPassResult(done=True)


async def _throwing(ctx: Any) -> JobPassResult:
    await ctx.step("ok", lambda: 1)
    raise ValueError("the handler gave up")


async def _door(ctx: Any) -> JobPassResult:
    await ctx.scope()
    return JobPassResult(done=True)


async def _slow(ctx: Any) -> JobPassResult:
    await trio.sleep(1.5)  # outlives its 150 ms lease: taken over, and with one attempt, failed
    await ctx.step("late", lambda: 1)
    return JobPassResult(done=True)


async def _subject(ctx: Any) -> JobPassResult:
    await ctx.step("fetch", lambda: {"subjectId": "s-9", "piiClass": "contact"})
    await trio.sleep(0.02)
    return JobPassResult(cursor={"at": 1}, done=ctx.cursor is not None)


_JOBS: dict[str, tuple[Any, RetryPolicy | None, int]] = {
    "narrow": (_narrow, RetryPolicy(max_attempts=3, base_delay_ms=40, max_delay_ms=100), 1_000),
    "counting": (_counting, None, 1_000),
    "reusing": (_reusing, RetryPolicy(max_attempts=2, base_delay_ms=30, max_delay_ms=60), 1_000),
    "throwing": (_throwing, RetryPolicy(max_attempts=3, base_delay_ms=30, max_delay_ms=60), 1_000),
    "door": (_door, None, 1_000),
    "slow": (_slow, RetryPolicy(max_attempts=1), 150),
    "subject": (_subject, None, 1_000),
}


def _expect(simulation: Any) -> list[str]:
    return []


def _setup(seed: int) -> WorldSetup:
    # The late drive's first claims answer late (admission misses); one BEGIN request arrives too
    # late for the store to admit it (refused).
    late = tuple(
        DelayLeg(drive="late", operation="claim", nth=nth, leg="reply", ms=800.0)
        for nth in range(1, 12)
    )
    refused = DelayLeg(drive="alarm", operation="begin", nth=2, leg="request", ms=900.0)
    return WorldSetup(
        scopes=SCOPES,
        drives=("cron", "alarm", "late"),
        lease_ms=1_000,
        objects=3,
        plan=FaultPlan((*late, refused)),
    )


def _spending() -> Any:
    # Its step asks for 3 attempts on the first pass and 1 on the next: spent by its own policy.
    passes = 0

    async def handler(ctx: Any) -> JobPassResult:
        nonlocal passes
        passes += 1
        own = RetryPolicy(max_attempts=3 if passes == 1 else 1, base_delay_ms=20, max_delay_ms=40)

        async def fails() -> None:
            raise RuntimeError("still down")

        await ctx.step("flaky", fails, own)
        return JobPassResult(done=True)

    return handler


# The orphan run never ends (no drive registers its job), by design: the world does not settle.
# Its handlers raise and fail on purpose: each edge of the spec, reached.
@scenario(NAME, setup=_setup, expect=_expect, settles=False, failures_expected=True)
async def oracle_edges(world: World) -> None:
    """The spec's edges, each reached on purpose (the oracle's tests)."""
    spending = _spending()
    for name in ("cron", "alarm"):
        drive = world.add_drive(DriveSpec(name=name))
        for job, (handler, retry, lease) in _JOBS.items():
            drive.driver.register_job(MODULE, job, handler, retry=retry, lease_ms=lease)
        drive.driver.register_job(MODULE, "spending", spending)
    # A drive whose claims answer late, alone on scope-2: ten misses fail the walk there. A job no
    # drive registers sits ahead of it in the due order.
    world.add_drive(DriveSpec(name="late"))
    await world.drives["cron"].driver.start_job_run(
        "scope-2", StartJobRunInput(module_id="orphans", job="nobody")
    )
    cron = world.drives["cron"].driver
    for job in (*_JOBS, "spending"):
        subject = "s-9" if job == "subject" else None
        start = StartJobRunInput(module_id=MODULE, job=job, subject=subject)
        await cron.start_job_run("scope-1", start)
    await world.start_walk("cron", "scope-2", objects=3, chunk=3)
    for start in (
        StartJobRunInput(module_id=MODULE, job="counting", subject="someone-else"),
        StartJobRunInput(module_id=MODULE, job="counting", payload={"bytes": b"raw"}),
    ):
        try:
            await cron.start_job_run("scope-1", start)
        except Exception as err:
            world.note(f"start refused: {type(err).__name__}")
    world.host.hold_door("scope-1", MODULE)
    for name, first in (("cron", 0.0), ("alarm", 45.0)):
        world.every(name, "scope-1", every_ms=90, first_ms=first, until_ms=3_000)
        world.every(name, "scope-1", every_ms=5_000, first_ms=3_000 + first, until_ms=80_000)
    world.every("late", "scope-2", every_ms=1_000, first_ms=0, until_ms=600_000)
    await world.sleep_until_ms(30)
    await world.host.stub("scope-1").shred_subject("s-9")
    await world.sleep_until_ms(2_500)
    world.host.release_door("scope-1", MODULE)
    await world.settle(("scope-1",), horizon_ms=3_000, poll_ms=200)
    await world.host.stub("scope-1").shred_subject("s-9")
    # The key's run has ended: a new start inserts a new run, never joins the old one.
    await cron.start_job_run("scope-1", StartJobRunInput(module_id=MODULE, job="reusing"))
    await world.settle(("scope-1",), horizon_ms=80_000, poll_ms=1_000)
    await world.sleep_until_ms(600_000)
    dump = await world.host.stub("scope-2").export_dump()
    await world.host.stub("scope-2").import_dump(dump, "scope-2")
    await world.host.stub("scope-1").import_dump(dump, "scope-2")
    await world.sync("scope-1")
    await world.sync("scope-2")
