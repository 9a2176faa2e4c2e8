"""Worlds whose user code loops without awaiting, each with a small CPU allowance: a handler, a
step's body, a handler that swallows every Exception, and a scenario's check."""

from __future__ import annotations

import contextlib
from typing import Any

from sims import (
    DriveSpec,
    JobPassContext,
    JobPassResult,
    Operation,
    Service,
    ServiceTimeout,
    Trace,
    World,
    WorldSetup,
    call_service,
    scenario,
)

SCOPE = "scope-1"
SETUP = WorldSetup(scopes=(SCOPE,), cpu_allowance_s=0.2)


def spin() -> None:
    n = 0
    while True:  # spin
        n += 1


async def spins(ctx: JobPassContext) -> JobPassResult:
    spin()
    return JobPassResult(done=True)


async def spins_in_step(ctx: JobPassContext) -> JobPassResult:
    async def charge() -> str:
        while True:  # charge
            pass

    await ctx.step("charge", charge)
    return JobPassResult(done=True)


async def swallows(ctx: JobPassContext) -> JobPassResult:
    while True:
        # What stops a world is no Exception: it is not swallowed here.
        with contextlib.suppress(Exception):
            spin()


async def done(ctx: JobPassContext) -> JobPassResult:
    return JobPassResult(done=True)


async def _drive(world: World, handler: Any) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "charge", handler)
    await world.start("cron", SCOPE, "m", "charge")
    world.every("cron", SCOPE, every_ms=100, first_ms=0, until_ms=5_000)
    await world.settle((SCOPE,), horizon_ms=5_000, poll_ms=100)


@scenario("spins", setup=SETUP)
async def spins_world(world: World) -> None:
    await _drive(world, spins)


@scenario("spins-in-step", setup=SETUP)
async def spins_in_step_world(world: World) -> None:
    await _drive(world, spins_in_step)


@scenario("swallows", setup=SETUP)
async def swallows_world(world: World) -> None:
    await _drive(world, swallows)


def endless(trace: Trace) -> list[str]:
    while True:  # endless
        pass


@scenario("check-spins", setup=SETUP, checks=[endless])
async def check_spins_world(world: World) -> None:
    await _drive(world, done)


@scenario("in-time", setup=SETUP)
async def in_time_world(world: World) -> None:
    await _drive(world, done)


def pong(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    return {}


async def spins_on_timeout(ctx: JobPassContext) -> JobPassResult:
    """Clean in the clean world; only a fault on the ping (a timeout) makes it spin."""
    try:
        await call_service(ctx, "pinger", "ping", {}, timeout_ms=1_000)
    except ServiceTimeout:
        spin()
    return JobPassResult(done=True)


#: No allowance of its own: only a search's time budget stops it.
@scenario(
    "spins-on-timeout",
    setup=WorldSetup(
        scopes=(SCOPE,),
        cpu_allowance_s=None,
        services=(Service("pinger", operations={"ping": Operation(pong)}),),
    ),
)
async def spins_on_timeout_world(world: World) -> None:
    await _drive(world, spins_on_timeout)
