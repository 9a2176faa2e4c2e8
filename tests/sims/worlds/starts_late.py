"""A start that is a call: lost, answered late, delivered late, sent again.

The job charges an order's card in one step, with an idempotency key the card provider honours.
``charge-by-run`` takes the key from the run's id: a run retried, taken over or crashed charges
once, whatever the faults on the card's wire. But a start is a call too. The scenario starts the
run as the guide says (``World.start`` starts again when a start raises), so a first start given up
on and delivered after the run the second one made has ended makes a NEW run, with a new id, and
a new key: the order is charged twice. A second click on "pay" after the first run ended does the
same. ``charge-by-order`` takes the key from the order in the payload: one charge per order,
however many runs its starts make.

``checkout`` starts the charge from a handler (``ctx.start_run`` in a step of a checkout run),
keyed by the run's id again: a handler's start is a call on its drive's wire like the scenario's.

The drives tick on for a while after the run ends (a cron does not stop because one run ended),
so a start that lands late still finds drives to run what it made.
"""

from __future__ import annotations

from typing import Any

from sims import (
    DriveSpec,
    JobPassContext,
    JobPassResult,
    Operation,
    Service,
    World,
    WorldSetup,
    at_most_once,
    scenario,
)

SCOPE = "shop"
#: How long the scenario lets the drives tick before it waits for its runs to end, in ms of
#: virtual time: well past the run's end in a world without faults.
TICKING_MS = 6_000
#: How long the drives tick at most: time for a run held up by its faults to end.
HORIZON_MS = 120_000


def _charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    charges = state.setdefault("charges", [])
    charges.append(args["order"])
    return {"charge": f"ch-{len(charges)}"}


CARD = Service(
    "card", operations={"charge": Operation(_charge, idempotent=True)}, latency_ms=(5.0, 20.0)
)
SETUP = WorldSetup(scopes=(SCOPE,), services=(CARD,), lease_ms=2_000)


async def charge_by_run(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: the charge's key is the run's id, and a late or repeated start makes a new run."""

    async def charge() -> Any:
        order = ctx.payload["order"]
        key = f"{ctx.run.id}/charge"
        return await ctx.call_service("card", "charge", {"order": order}, idempotency_key=key)

    await ctx.step("charge", charge)
    return JobPassResult(done=True)


async def charge_by_order(ctx: JobPassContext) -> JobPassResult:
    """The fix: the key is the order's, so every run of the order is answered with one charge."""

    async def charge() -> Any:
        order = ctx.payload["order"]
        key = f"{order}/charge"
        return await ctx.call_service("card", "charge", {"order": order}, idempotency_key=key)

    await ctx.step("charge", charge)
    return JobPassResult(done=True)


async def _drive(world: World, handler: Any) -> None:
    await _drive_started(world, "pay", handler)


CHARGED_ONCE = at_most_once("card.charge", key="order")


@scenario("charge-by-run", setup=SETUP, checks=[CHARGED_ONCE])
async def charge_by_run_world(world: World) -> None:
    """Charge an order with the run's id as the key: a late or repeated start charges twice."""
    await _drive(world, charge_by_run)


@scenario("charge-by-order", setup=SETUP, checks=[CHARGED_ONCE])
async def charge_by_order_world(world: World) -> None:
    """Charge an order with the order's own key: one charge, however many runs it has."""
    await _drive(world, charge_by_order)


async def checkout(ctx: JobPassContext) -> JobPassResult:
    """A checkout that starts the order's charge as a run of its own, in a step."""

    async def start_charge() -> str:
        run = await ctx.start_run("shop", "pay", payload={"order": ctx.payload["order"]})
        return str(run.id)

    await ctx.step("start-charge", start_charge)
    return JobPassResult(done=True)


@scenario("checkout", setup=SETUP, checks=[CHARGED_ONCE])
async def checkout_world(world: World) -> None:
    """A checkout run starts the charge run from its handler: the second start of the cron."""
    world.add_job("shop", "checkout", checkout)
    await _drive_started(world, "checkout", charge_by_run)


async def _drive_started(world: World, job: str, handler: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=2.0, reply_ms=2.0))
    world.add_job("shop", "pay", handler)
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=HORIZON_MS)
    await world.start("cron", SCOPE, "shop", job, payload={"order": "o-17"})
    await world.sleep_until_ms(TICKING_MS)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)
