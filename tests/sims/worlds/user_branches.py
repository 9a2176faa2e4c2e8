"""A job whose own code has a branch only a fault reaches, and one no world can reach: what the
search measures of the user's code (docs/search.md, "Your code's branches").

The step's body reserves stock; when the call times out (its reply lost or late) it asks what
was reserved: ``if timed_out`` takes its way in only under a fault. The service's ``reserve``
refuses a count over 100, which this job never asks for: that branch is one no world takes, and
a clean result of a search names it.
"""

from __future__ import annotations

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

SCOPE = "s"
TIMEOUT_MS = 8_000
#: Ten minutes of ticks: longer than any fault the search draws, so every run settles.
TICKS_MS = 600_000


def reserve(state: dict[str, Any], args: dict[str, Any]) -> dict[str, int]:
    if args["count"] > 100:  # never: the job reserves one
        return {"reserved": 0}
    state["reserved"] = state.get("reserved", 0) + args["count"]
    return {"reserved": args["count"]}


def look(state: dict[str, Any], args: dict[str, Any]) -> dict[str, int]:
    return {"reserved": state.get("reserved", 0)}


STOCK = Service(
    "stock",
    operations={"reserve": Operation(reserve, idempotency_key="key"), "look": look},
    latency_ms=(5.0, 50.0),
)


async def reserve_one(ctx: JobPassContext) -> JobPassResult:
    async def body() -> str:
        args = {"key": ctx.payload["order"], "count": 1}
        try:
            await call_service(ctx, "stock", "reserve", args, timeout_ms=TIMEOUT_MS)
            timed_out = False
        except ServiceTimeout:
            timed_out = True
        if timed_out:  # only a fault gets here: the reply lost, or later than the timeout
            await call_service(ctx, "stock", "look", {}, timeout_ms=TIMEOUT_MS)
        return "reserved"

    await ctx.step("reserve", body)
    return JobPassResult(done=True)


@scenario("reserve", setup=WorldSetup(scopes=(SCOPE,), services=(STOCK,), lease_ms=30_000))
async def reserve_world(world: World) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_drive(DriveSpec(name="alarm"))
    world.add_job("shop", "reserve", reserve_one)
    await world.start("cron", SCOPE, "shop", "reserve", payload={"order": "o-1"})
    world.every("cron", SCOPE, every_ms=1000, first_ms=0, until_ms=TICKS_MS)
    world.every("alarm", SCOPE, every_ms=1000, first_ms=500, until_ms=TICKS_MS)
    await world.settle((SCOPE,), horizon_ms=TICKS_MS, poll_ms=500)
