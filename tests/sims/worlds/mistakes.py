"""Worlds with a mistake in how they are written, as a newcomer makes them: a scenario that starts
a run and never drives it, and a handler that calls ``ctx.step(...)`` without ``await``. Beside
each, the world written right, and a world whose run is driven but never ends (the spec's to
judge).
"""

from __future__ import annotations

from sims import DriveSpec, JobPassContext, JobPassResult, World, record_effect, scenario

SCOPE = "scope-1"


async def done(ctx: JobPassContext) -> JobPassResult:
    return JobPassResult(done=True)


async def never_done(ctx: JobPassContext) -> JobPassResult:
    return JobPassResult(done=False)


async def send_unawaited(ctx: JobPassContext) -> JobPassResult:
    async def send() -> str:
        await record_effect(ctx, "email")
        return "sent"

    ctx.step("send", send)  # the mistake: the step is created and never awaited
    return JobPassResult(done=True)


async def send_awaited(ctx: JobPassContext) -> JobPassResult:
    async def send() -> str:
        await record_effect(ctx, "email")
        return "sent"

    await ctx.step("send", send)
    return JobPassResult(done=True)


async def send_awaited_later(ctx: JobPassContext) -> JobPassResult:
    """Two steps created first and awaited later, in order, with the door opened between."""

    async def send() -> str:
        await record_effect(ctx, "email")
        return "sent"

    first = ctx.step("send", send)
    second = ctx.step("log", lambda: "logged")
    await ctx.scope()
    await first
    await second
    return JobPassResult(done=True)


async def _drive(world: World, handler: object, *, until_ms: int = 60_000) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "j", handler)  # type: ignore[arg-type]
    await world.start("cron", SCOPE, "m", "j")
    world.every("cron", SCOPE, every_ms=100, first_ms=0, until_ms=until_ms)
    await world.settle((SCOPE,), horizon_ms=until_ms, poll_ms=100)


@scenario("undriven")
async def undriven(world: World) -> None:
    """Start a run and return: no drive ever runs a pass of it."""
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "j", done)
    await world.start("cron", SCOPE, "m", "j")


@scenario("driven")
async def driven(world: World) -> None:
    """The same run, driven until it ends."""
    await _drive(world, done, until_ms=1_000)


@scenario("never-done")
async def never_done_world(world: World) -> None:
    """A run driven all along whose handler never says it is done: it is still running at the
    end, which the spec's runs-settle judges."""
    await _drive(world, never_done, until_ms=1_000)


@scenario("unawaited")
async def unawaited(world: World) -> None:
    """A handler that creates its step and never awaits it."""
    await _drive(world, send_unawaited)


@scenario("awaited")
async def awaited(world: World) -> None:
    """The same handler, awaiting its step."""
    await _drive(world, send_awaited)


@scenario("awaited-later")
async def awaited_later(world: World) -> None:
    """A handler that creates two steps and awaits them later, in order."""
    await _drive(world, send_awaited_later)
