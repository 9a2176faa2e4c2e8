"""A job that pays an order through the outside world, as a newcomer writes it, and as it should be.

``fallback``: the step's body pays at the bank and, when the bank's call times out, pays through a
second rail. A timeout says nothing about the bank: the payment may have run, and its reply was
lost or came too late. So one lost reply pays the order twice (the bug explore must find, shrunk
to that one fault).

``fallback-asks-the-bank``: the same job, fixed. The bank's ``pay`` takes an idempotency key (the
order), so when the call times out the body asks the bank again with the same key instead of
turning to the second rail: a payment that ran answers with its first result, one that did not
runs now. A pass that takes the run over and runs the body again asks the same way. Explore finds
nothing here.
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
    Trace,
    World,
    WorldSetup,
    call_service,
    scenario,
)

SCOPE = "s"
TIMEOUT_MS = 8_000
#: How long the drives tick: ten minutes of virtual time, longer than any fault the search draws
#: (a held leg waits ten leases at most). A world whose ticks end first (the brief's first
#: version ticked for a minute) leaves a run that a long hold on its start kept from running
#: unfinished, and the runs-settle check says so, whatever the job does. A clean world still ends
#: as soon as its run has.
TICKS_MS = 600_000


def pay(state: dict[str, Any], args: dict[str, Any]) -> dict[str, bool]:
    state.setdefault("paid", []).append(args["order"])
    return {"ok": True}


BANK = Service("bank", operations={"pay": pay}, latency_ms=(5.0, 50.0))
RAIL = Service("rail", operations={"pay": pay}, latency_ms=(5.0, 50.0))
#: The bank as a payment API is: a repeat of an order's payment answers with the first result.
KEYED_BANK = Service(
    "bank", operations={"pay": Operation(pay, idempotency_key="order")}, latency_ms=(5.0, 50.0)
)


async def settle_with_fallback(ctx: JobPassContext) -> JobPassResult:
    async def body() -> str:
        order = {"order": ctx.payload["order"]}
        try:  # THE BUG: a timeout is taken for a refusal, and the second rail pays again
            await call_service(ctx, "bank", "pay", order, timeout_ms=TIMEOUT_MS)
            return "bank"
        except ServiceTimeout:
            await call_service(ctx, "rail", "pay", order, timeout_ms=TIMEOUT_MS)
            return "rail"

    await ctx.step("pay", body)
    return JobPassResult(done=True)


async def settle_asking_the_bank(ctx: JobPassContext) -> JobPassResult:
    async def body() -> str:
        order = {"order": ctx.payload["order"]}
        try:
            await call_service(ctx, "bank", "pay", order, timeout_ms=TIMEOUT_MS)
        except ServiceTimeout:
            # The payment may have run: ask the bank, with the same key, whether it did. A
            # second timeout fails the step, and a later pass asks again.
            await call_service(ctx, "bank", "pay", order, timeout_ms=TIMEOUT_MS)
        return "bank"

    await ctx.step("pay", body)
    return JobPassResult(done=True)


def one_payment(trace: Trace) -> list[str]:
    """The order is paid at most once, by the bank and the rail together."""
    paid = [e for e in trace.of("svc.exec") if e.get("effect")]
    return [f"paid {len(paid)} times"] if len(paid) > 1 else []


async def _settle(world: World, handler: Any) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_drive(DriveSpec(name="alarm"))
    world.add_job("shop", "settle", handler)
    await world.start("cron", SCOPE, "shop", "settle", payload={"order": "o-1"})
    world.every("cron", SCOPE, every_ms=1000, first_ms=0, until_ms=TICKS_MS)
    world.every("alarm", SCOPE, every_ms=1000, first_ms=500, until_ms=TICKS_MS)
    await world.settle((SCOPE,), horizon_ms=TICKS_MS, poll_ms=500)


@scenario(
    "fallback",
    setup=WorldSetup(scopes=(SCOPE,), services=(BANK, RAIL), lease_ms=30_000),
    checks=[one_payment],
)
async def fallback(world: World) -> None:
    await _settle(world, settle_with_fallback)


@scenario(
    "fallback-asks-the-bank",
    setup=WorldSetup(scopes=(SCOPE,), services=(KEYED_BANK, RAIL), lease_ms=30_000),
    checks=[one_payment],
)
async def fallback_asks_the_bank(world: World) -> None:
    await _settle(world, settle_asking_the_bank)
