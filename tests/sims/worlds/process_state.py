"""Worlds whose failures are, or are not, a function of their seed.

``remembers`` keeps what it charged in a module-level set: in a process that ran a world before,
its handler charges again, so the user's check fails there, and never in a world that runs alone.
``twice-on-thirds`` charges twice in every third seed, whatever ran before it: its failures are
the user's. ``raises-on-thirds`` raises in every third seed, fails the user's check in the next
and holds in the third.
"""

from __future__ import annotations

from typing import Any

from sims import DriveSpec, JobPassContext, JobPassResult, Trace, World, effects_at, record_effect
from sims import scenario as define

SCOPE = "scope-1"

#: What this process charged: state kept from one world to the next (the mistake).
CHARGED: set[str] = set()


async def charge_remembering(ctx: JobPassContext) -> JobPassResult:
    async def charge() -> str:
        if "charged" in CHARGED:
            await record_effect(ctx, "receipt")
        CHARGED.add("charged")
        await record_effect(ctx, "receipt")
        return "ok"

    await ctx.step("charge", charge)
    return JobPassResult(done=True)


async def charge_as_told(ctx: JobPassContext) -> JobPassResult:
    async def charge() -> str:
        for _ in range(2 if ctx.payload["twice"] else 1):
            await record_effect(ctx, "receipt")
        return "ok"

    await ctx.step("charge", charge)
    return JobPassResult(done=True)


def one_receipt_each(trace: Trace) -> list[str]:
    return [f"{key} landed {len(t)} times" for key, t in effects_at(trace).items() if len(t) > 1]


async def _drive(world: World, handler: Any, payload: Any = None) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "charge", handler)
    await world.start("cron", SCOPE, "m", "charge", payload=payload)
    world.every("cron", SCOPE, every_ms=100, first_ms=0, until_ms=1_000)
    await world.settle((SCOPE,), horizon_ms=1_000, poll_ms=100)


@define("remembers", checks=[one_receipt_each])
async def remembers(world: World) -> None:
    """Charge once per run, remembering in a module-level set what this process charged."""
    await _drive(world, charge_remembering)


@define("twice-on-thirds", checks=[one_receipt_each])
async def twice_on_thirds(world: World) -> None:
    """Charge twice in every third seed: the user's bug, a function of the seed."""
    await _drive(world, charge_as_told, {"twice": world.seed % 3 == 0})


@define("raises-on-thirds", checks=[one_receipt_each])
async def raises_on_thirds(world: World) -> None:
    """Raise in every third seed, charge twice in the next, hold in the third."""
    if world.seed % 3 == 0:
        raise KeyError("horizon_ms")
    await _drive(world, charge_as_told, {"twice": world.seed % 3 == 1})
