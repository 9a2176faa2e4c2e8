"""Worlds whose bugs hide in their inputs, as a newcomer's scenario declares them.

``shared-address``: a shipping job given a run's orders ships once per address, not once per
order, so two orders sharing an address get one parcel. No fault is needed; only inputs the
scenario would never have written by hand (its simplest are one order). ``one-per-order`` is the
fixed job, keyed by the order.

``large-order-approval``: an order of 100 or more sends an approval email from a step whose body
is not idempotent. Its record lost, the next pass sends again: a bug that needs both a fault and
an input (the simplest order, 0, sends no email at all). ``large-order-approval-once`` sends it
through the provider's own dedupe, and is clean.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import strategies as st

from sims import (
    DriveSpec,
    JobPassContext,
    JobPassResult,
    Trace,
    World,
    WorldSetup,
    effects_at,
    record_effect,
    record_effect_once,
    scenario,
)

SCOPE = "shop"
ADDRESSES = ("1 Elm St", "2 Oak Ave", "3 Pine Rd")
#: A run's orders: each the address it ships to.
ORDERS = st.lists(st.sampled_from(ADDRESSES), min_size=1, max_size=4)


def _inputs(trace: Trace) -> Any:
    return next(trace.of("world.begin"))["inputs"]


async def ship_per_address(ctx: JobPassContext) -> JobPassResult:
    # The bug: the parcels are deduped by address, as if an address were a customer.
    for address in sorted(set(ctx.payload["orders"])):

        async def ship(address: str = address) -> None:
            await record_effect_once(ctx, f"ship {address}")

        await ctx.step(f"ship {address}", ship)
    return JobPassResult(done=True)


async def ship_per_order(ctx: JobPassContext) -> JobPassResult:
    for number, address in enumerate(ctx.payload["orders"]):

        async def ship(number: int = number, address: str = address) -> None:
            await record_effect_once(ctx, f"ship {number}", data=address)

        await ctx.step(f"ship {number}", ship)
    return JobPassResult(done=True)


def every_order_shipped(trace: Trace) -> list[str]:
    """Each run that ended done shipped one parcel per order it was given (a run the faults
    made fail may have shipped fewer; a start repeated may make a second run)."""
    orders = _inputs(trace)
    parcels = Counter(key.split("/")[0] for key in effects_at(trace) if "/ship " in key)
    done = [
        run["id"]
        for runs in next(trace.of("world.end"))["runs"].values()
        for run in runs
        if run["status"] == "done"
    ]
    return [
        f"{len(orders)} orders {orders} got {parcels[run]} parcels in run {run}"
        for run in done
        if parcels[run] != len(orders)
    ]


async def _ship(world: World, job: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=1.0, reply_ms=1.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=1.0, reply_ms=1.0))
    world.add_job("shop", "ship", job)
    await world.start("cron", SCOPE, "shop", "ship", payload={"orders": world.inputs})
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=20_000)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=20_000)
    await world.settle((SCOPE,), horizon_ms=20_000, poll_ms=500)


@scenario(
    "shared-address",
    setup=WorldSetup(scopes=(SCOPE,)),
    checks=[every_order_shipped],
    inputs=ORDERS,
)
async def shared_address(world: World) -> None:
    """Ship a run's orders, deduped (wrongly) by address."""
    await _ship(world, ship_per_address)


@scenario(
    "one-per-order",
    setup=WorldSetup(scopes=(SCOPE,)),
    checks=[every_order_shipped],
    inputs=ORDERS,
)
async def one_per_order(world: World) -> None:
    """Ship a run's orders, one parcel per order."""
    await _ship(world, ship_per_order)


async def approve_twice(ctx: JobPassContext) -> JobPassResult:
    amount = ctx.payload["amount"]
    await ctx.step("price", lambda: amount)
    if amount >= 100:

        async def approve() -> str:
            await record_effect(ctx, "approval")
            return "sent"

        await ctx.step("approval", approve)
    return JobPassResult(done=True)


async def approve_once(ctx: JobPassContext) -> JobPassResult:
    amount = ctx.payload["amount"]
    await ctx.step("price", lambda: amount)
    if amount >= 100:

        async def approve() -> str:
            await record_effect_once(ctx, "approval")
            return "sent"

        await ctx.step("approval", approve)
    return JobPassResult(done=True)


def one_approval(trace: Trace) -> list[str]:
    """An order's approval email goes out once."""
    return [
        f"the approval of run {key.split('/')[0]} was sent {len(times)} times"
        for key, times in effects_at(trace).items()
        if key.endswith("/approval") and len(times) > 1
    ]


async def _approve(world: World, job: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=1.0, reply_ms=1.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=1.0, reply_ms=1.0))
    world.add_job("shop", "approve", job)
    await world.start("cron", SCOPE, "shop", "approve", payload={"amount": world.inputs})
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=20_000)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=20_000)
    await world.settle((SCOPE,), horizon_ms=20_000, poll_ms=500)


@scenario(
    "large-order-approval",
    setup=WorldSetup(scopes=(SCOPE,)),
    checks=[one_approval],
    inputs=st.integers(0, 1_000),
)
async def large_order_approval(world: World) -> None:
    """Send a large order's approval from a step whose body is not idempotent."""
    await _approve(world, approve_twice)


@scenario(
    "large-order-approval-once",
    setup=WorldSetup(scopes=(SCOPE,)),
    checks=[one_approval],
    inputs=st.integers(0, 1_000),
)
async def large_order_approval_once(world: World) -> None:
    """Send a large order's approval through the provider's own dedupe."""
    await _approve(world, approve_once)


@scenario("not-json", setup=WorldSetup(scopes=(SCOPE,)), inputs=st.just({1.5, 2.5}))
async def not_json(world: World) -> None:
    """Inputs drawn as a set, which JSON cannot hold: refused with the remedy."""
