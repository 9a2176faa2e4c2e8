"""A bug in a user's handler, found and shrunk by the simulator: a step body that is not
idempotent.

The job charges a customer's card in a step. The charge is a real effect outside the run, and the
body makes it unconditionally. The spec says a step body runs at least once: when a pass loses
its step record (its request is lost, or the lease runs out between the effect and the record),
the next pass runs the body again. With no faults the world is fine, so a plain run shows
nothing; ``explore`` searches fault plans for one that makes the scenario's own check fail, and
shrinks it to the smallest:

    python -m sims run examples/double_charge.py:double-charge
    python -m sims explore examples/double_charge.py:double-charge

The spec's own checks call the second charge explained (it is inside the at-least-once window);
the user's check — each card charged once — is what fails, because the handler is wrong. The fix
is ``charge-once`` below: the body first looks for its own earlier charge.
"""

from __future__ import annotations

from typing import Any

from sims import (
    DriveSpec,
    JobPassContext,
    JobPassResult,
    Trace,
    World,
    WorldSetup,
    effect_key,
    effects_in,
    record_effect,
    scenario,
)

SCOPE = "payments"


async def charge(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: the charge step's body charges again whenever it runs again."""

    async def charge_card() -> str:
        await record_effect(ctx, "charge", data={"cents": ctx.payload["cents"]})
        return "charged"

    await ctx.step("charge", charge_card)

    async def receipt() -> str:
        return "sent"

    await ctx.step("receipt", receipt)
    return JobPassResult(done=True)


async def charge_once(ctx: JobPassContext) -> JobPassResult:
    """The fix: the body finds an earlier charge of this run before it charges."""

    async def charge_card() -> str:
        door = await ctx.scope()
        made: list[dict[str, Any]] = await door.invoke("items", {"kind": "effect"})
        if not any(row["key"] == effect_key(ctx.run.id, "charge") for row in made):
            await record_effect(ctx, "charge", data={"cents": ctx.payload["cents"]})
        return "charged"

    await ctx.step("charge", charge_card)

    async def receipt() -> str:
        return "sent"

    await ctx.step("receipt", receipt)
    return JobPassResult(done=True)


def charged_once(trace: Trace) -> list[str]:
    """Each run charges its card exactly once."""
    landed = effects_in(trace)
    return [
        f"run {event['run']} charged the card {landed[effect_key(event['run'], 'charge')]} times"
        for event in trace.of("world.start")
        if landed[effect_key(event["run"], "charge")] != 1
    ]


async def _drive(world: World, handler: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=1.0, reply_ms=1.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=1.0, reply_ms=1.0))
    world.add_job("payments", "charge", handler)
    await world.start("cron", SCOPE, "payments", "charge", payload={"cents": 4_999})
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=20_000)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=20_000)
    await world.settle((SCOPE,), horizon_ms=20_000, poll_ms=500)


@scenario("double-charge", setup=WorldSetup(scopes=(SCOPE,)), checks=[charged_once])
async def double_charge(world: World) -> None:
    """Charge a card in a step whose body is not idempotent; fine until a fault makes the body
    run twice (python -m sims explore finds one)."""
    await _drive(world, charge)


@scenario("charge-once", setup=WorldSetup(scopes=(SCOPE,)), checks=[charged_once])
async def charge_once_world(world: World) -> None:
    """The same charge, with an idempotent body: it looks for its own earlier charge first."""
    await _drive(world, charge_once)
