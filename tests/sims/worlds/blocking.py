"""Worlds whose user code waits on real time, which the world's clock cannot see: a handler that
sleeps (always, or only once a fault made its call time out), and one stuck in a single C call
that never lets go of the interpreter. Every wait here is bounded, so that a test whose mechanism
failed still ends."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from sims import (
    DriveSpec,
    JobPassContext,
    JobPassResult,
    Operation,
    Service,
    ServiceTimeout,
    World,
    WorldSetup,
    call_service,
    scenario,
)

SCOPE = "scope-1"


async def naps(ctx: JobPassContext) -> JobPassResult:
    time.sleep(30)  # naps
    return JobPassResult(done=True)


async def naps_briefly(ctx: JobPassContext) -> JobPassResult:
    time.sleep(0.6)  # naps briefly
    return JobPassResult(done=True)


async def stuck(ctx: JobPassContext) -> JobPassResult:
    # One call into C (half a minute of it) that never comes back to Python to let the
    # watchdog's thread run.
    sum(range(2 * 10**9))  # stuck
    return JobPassResult(done=True)


async def _drive(
    world: World, handler: Callable[[JobPassContext], Awaitable[JobPassResult]]
) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "charge", handler)
    await world.start("cron", SCOPE, "m", "charge")
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=5_000)
    await world.settle((SCOPE,), horizon_ms=5_000, poll_ms=500)


@scenario("naps")
async def naps_world(world: World) -> None:
    await _drive(world, naps)


@scenario("naps-briefly", setup=WorldSetup(scopes=(SCOPE,), cpu_allowance_s=0.2))
async def naps_briefly_world(world: World) -> None:
    await _drive(world, naps_briefly)


@scenario("stuck", setup=WorldSetup(scopes=(SCOPE,), cpu_allowance_s=0.5))
async def stuck_world(world: World) -> None:
    await _drive(world, stuck)


def pong(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    return {}


async def naps_on_timeout(ctx: JobPassContext) -> JobPassResult:
    """Clean in the clean world; only a fault on the ping (a timeout) makes it sleep."""
    try:
        await call_service(ctx, "pinger", "ping", {}, timeout_ms=1_000)
    except ServiceTimeout:
        time.sleep(30)  # naps on timeout
    return JobPassResult(done=True)


@scenario(
    "naps-on-timeout",
    setup=WorldSetup(
        scopes=(SCOPE,), services=(Service("pinger", operations={"ping": Operation(pong)}),)
    ),
)
async def naps_on_timeout_world(world: World) -> None:
    await _drive(world, naps_on_timeout)
