"""A shop's order job in two releases, for ``python -m sims before-deploy``.

Release 1 (``ORDER_V1``) reserves the order's stock, then charges its card, each in a step of its
own. The tests run it on a real host whose card provider is down: each order's pass reserves, then
fails at the charge, and the run waits for its retry with ``reserve`` done and ``charge`` attempted
in its ledger. The releases about to ship are checked against those runs:

- ``V2_FIXED`` keeps both step names and adds a receipt after them: every run can go on;
- ``V2_RENAMED`` renames ``reserve`` to ``reserve-stock``: the stock is reserved again;
- ``V2_RAISES`` reads a payload field (``currency``) the old runs never had;
- ``V2_NEW_FIRST`` adds a fraud check before the steps the ledger holds.

``REFUND_V1`` is another job, whose pass always fails on the real host; ``REFUND_V2`` is its next
release, which calls no service. ``KILLED_SAME`` and ``KILLED_RENAMED`` are the next releases of
the job of a run a host was killed in the middle of (``tests.sims.test_check``). The scenario
``shop`` declares the services the order job calls (``--world
tests/sims/worlds/before_deploy.py:shop``).
"""

from __future__ import annotations

from typing import Any

import trio

from driver import JobDefinition, JobPassResult, RetryPolicy
from sims import DriveSpec, Operation, Service, World, WorldSetup, scenario

MODULE = "shop"
SCOPE = "shop"
RETRY = RetryPolicy(max_attempts=5, base_delay_ms=1_000, max_delay_ms=60_000)
SERVICES = ("stock", "card")


def _reserve(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    reserved = state.setdefault("reserved", [])
    reserved.append(args["order"])
    return {"reservation": len(reserved)}


def _charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    charges = state.setdefault("charges", [])
    charges.append(args["order"])
    return {"charge": f"ch-{len(charges)}"}


STOCK = Service("stock", operations={"reserve": Operation(_reserve, idempotent=True)})
CARD = Service("card", operations={"charge": Operation(_charge, idempotent=True)})
SETUP = WorldSetup(scopes=(SCOPE,), services=(STOCK, CARD))


async def reserve(ctx: Any, key: str) -> Any:
    order = ctx.payload["order"]
    return await ctx.call_service(
        "stock", "reserve", {"order": order}, idempotency_key=f"{order}/{key}"
    )


async def charge(ctx: Any) -> Any:
    order = ctx.payload["order"]
    return await ctx.call_service(
        "card", "charge", {"order": order}, idempotency_key=f"{order}/charge"
    )


async def order_v1(ctx: Any) -> JobPassResult:
    await ctx.step("reserve", lambda: reserve(ctx, "reserve"))
    await ctx.step("charge", lambda: charge(ctx))
    return JobPassResult(done=True)


async def order_v2_fixed(ctx: Any) -> JobPassResult:
    await ctx.step("reserve", lambda: reserve(ctx, "reserve"))
    charged = await ctx.step("charge", lambda: charge(ctx))
    await ctx.step("receipt", lambda: f"receipt for {charged['charge']}")
    return JobPassResult(done=True)


async def order_v2_renamed(ctx: Any) -> JobPassResult:
    await ctx.step("reserve-stock", lambda: reserve(ctx, "reserve-stock"))
    await ctx.step("charge", lambda: charge(ctx))
    return JobPassResult(done=True)


async def order_v2_raises(ctx: Any) -> JobPassResult:
    currency = ctx.payload["currency"]
    await ctx.step("reserve", lambda: reserve(ctx, "reserve"))
    await ctx.step("charge", lambda: charge(ctx))
    await ctx.step("receipt", lambda: f"charged in {currency}")
    return JobPassResult(done=True)


async def order_v2_new_first(ctx: Any) -> JobPassResult:
    await ctx.step("check-fraud", lambda: {"fraud": False})
    await ctx.step("reserve", lambda: reserve(ctx, "reserve"))
    await ctx.step("charge", lambda: charge(ctx))
    return JobPassResult(done=True)


async def refund_v1(ctx: Any) -> JobPassResult:
    async def send() -> None:
        raise RuntimeError("the bank's refund file is not open yet")

    await ctx.step("send", send)
    return JobPassResult(done=True)


async def refund_v2(ctx: Any) -> JobPassResult:
    await ctx.step("send", lambda: "sent")
    return JobPassResult(done=True)


def _order(handler: Any) -> JobDefinition:
    return JobDefinition(MODULE, "order", handler, retry=RETRY, services=SERVICES)


ORDER_V1 = _order(order_v1)
REFUND_V1 = JobDefinition(MODULE, "refund", refund_v1, retry=RETRY)
V1 = (ORDER_V1, REFUND_V1)

V2_FIXED = (_order(order_v2_fixed),)
V2_RENAMED = _order(order_v2_renamed)
V2_RAISES = (_order(order_v2_raises),)
V2_NEW_FIRST = [_order(order_v2_new_first)]
REFUND_V2 = JobDefinition(MODULE, "refund", refund_v2, retry=RETRY)
#: Not job definitions: refused.
NOT_JOBS = ("order", "refund")


async def one_two(ctx: Any) -> JobPassResult:
    one = await ctx.step("one", lambda: 1)
    await ctx.step("two", lambda: one + 1)
    return JobPassResult(done=True)


async def first_two(ctx: Any) -> JobPassResult:
    one = await ctx.step("first", lambda: 1)
    await ctx.step("two", lambda: one + 1)
    return JobPassResult(done=True)


#: The next releases of ``tests.sims.test_check.handler``'s job (``m``/``j``), whose run a host
#: killed mid-pass left with step ``one`` done and its lease live: the same steps, and ``one``
#: renamed.
KILLED_SAME = JobDefinition("m", "j", one_two)
KILLED_RENAMED = JobDefinition("m", "j", first_two)


async def never_returns(ctx: Any) -> JobPassResult:
    await ctx.step("send", lambda: "sent")
    await trio.sleep_forever()


#: A release of the refund job whose pass never ends.
REFUND_HANGS = JobDefinition(MODULE, "refund", never_returns, retry=RETRY)


@scenario("shop", setup=SETUP)
async def shop(world: World) -> None:
    """Two orders, run on release 1 with the services healthy."""
    world.add_drive(DriveSpec(name="cron"))
    world.register(ORDER_V1)
    for n in range(2):
        await world.start("cron", SCOPE, MODULE, "order", instance=f"o{n}", payload={"order": n})
    world.every("cron", SCOPE, every_ms=500, first_ms=0, until_ms=10_000)
    await world.settle((SCOPE,), horizon_ms=10_000, poll_ms=500)


@scenario("no-services")
async def no_services(world: World) -> None:
    """A world that declares no service."""
