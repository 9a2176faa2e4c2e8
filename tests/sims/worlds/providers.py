"""A provider with time, lagging reads, a rate limit, a batch and callbacks, for the tests of
``sims/world/_provider.py`` and its neighbours.

``provider`` charges (the card schedules its own capture, which calls the shop back), reads its
charges back through a lagging search, mails a batch through a rate-limited mailer, and credits
from the webhook's run. Its checks are none: the tests read the trace.
"""

from __future__ import annotations

import contextlib
from typing import Any

import trio

from driver import (
    JobDriver,
    JobPassContext,
    JobPassResult,
    ServiceDeclined,
    ServiceUnavailable,
    StartJobRunInput,
)
from sims import (
    DriveSpec,
    Operation,
    Service,
    World,
    WorldSetup,
    call_back,
    later,
    now_ms,
    scenario,
)

SCOPE = "shop"


def charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    if args.get("declined"):
        # Scheduled, then declined: neither the capture nor a callback may survive it.
        later(1_000, _capture_of(args["order"]), name="capture")
        call_back("card-events", {"order": args["order"]})
        raise ServiceDeclined("card declined", code="declined")
    state["charges"].append({"order": args["order"], "at": now_ms(), "captured": False})
    later(3_500, _capture_of(args["order"]), name="capture")
    later(86_400_000, lambda state: state.update(forgotten=True), name="forget key")
    if "settle_ms" in args:
        later(args["settle_ms"], _capture_of(args["order"]), name="settlement")
    return {"order": args["order"]}


def _capture_of(order: str) -> Any:
    def capture(state: dict[str, Any]) -> None:
        for made in state["charges"]:
            if made["order"] == order:
                made["captured"] = True
        call_back("card-events", {"order": order, "at": now_ms()})

    return capture


def search(state: dict[str, Any], args: dict[str, Any]) -> list[str]:
    return [made["order"] for made in state["charges"] if made["order"] == args["order"]]


def send(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    state["sent"].extend(args["to"])
    return {"sent": list(args["to"])}


def touch(state: dict[str, Any], args: dict[str, Any]) -> str:
    state.setdefault("seen", [])  # THE TRAP: a read that adds an empty list
    return "ok"


CARD = Service(
    "card",
    operations={
        "charge": charge,
        "search": Operation(search, lag_ms=(0.0, 2_000.0)),
        "touch": touch,
    },
    state=lambda: {"charges": []},
    callback_retries_ms=(1_000.0, 2_000.0),
)
MAIL = Service(
    "mail",
    operations={"send": Operation(send, batch="to", batch_max=2)},
    state=lambda: {"sent": []},
    rate_limit=(2, 1_000.0),
)
WALLET = Service(
    "wallet",
    operations={"credit": lambda state, args: state.update({args["order"]: True})},
)
TO = ["a", "b", "c", "d", "e"]


async def pay(ctx: JobPassContext) -> JobPassResult:
    order = ctx.payload["order"]

    async def charge_and_read() -> list[str]:
        await ctx.call_service("card", "charge", {"order": order, **ctx.payload})
        found: list[str] = await ctx.call_service("card", "search", {"order": order})
        return found

    await ctx.step("charge", charge_and_read)

    async def mail() -> list[str]:
        rest = list(TO)
        while rest:
            try:
                answer = await ctx.call_service("mail", "send", {"to": rest})
            except ServiceUnavailable as refused:
                await trio.sleep((refused.retry_after_ms or 1_000.0) / 1000)
                continue
            rest = [who for who in rest if who not in answer["sent"]]
        return TO

    await ctx.step("mail", mail)
    return JobPassResult(done=True)


async def credit(ctx: JobPassContext) -> JobPassResult:
    async def credit_once() -> None:
        await ctx.call_service("wallet", "credit", {"order": ctx.payload["order"]})

    await ctx.step("credit", credit_once)
    return JobPassResult(done=True)


async def on_card_event(driver: JobDriver, payload: Any) -> None:
    """The shop's webhook: a captured charge starts the order's credit run."""
    await driver.start_job_run(
        SCOPE,
        StartJobRunInput(
            module_id="shop", job="credit", instance=payload["order"], payload=payload
        ),
    )


SETUP = WorldSetup(
    scopes=(SCOPE,), drives=("cron", "web"), services=(CARD, MAIL, WALLET), lease_ms=30_000
)


async def _drive(world: World, orders: tuple[str, ...], **payload: Any) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_drive(DriveSpec(name="web"))
    world.add_job("shop", "pay", pay)
    world.add_job("shop", "credit", credit)
    world.add_endpoint("card-events", on_card_event, drive="web")
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=60_000)
    for order in orders:
        start = {"order": order, **payload}
        await world.start("cron", SCOPE, "shop", "pay", instance=order, payload=start)
    await world.settle((SCOPE,), horizon_ms=60_000, poll_ms=500)


@scenario("provider", setup=SETUP)
async def provider_world(world: World) -> None:
    """One order: charged, searched, mailed in batches, captured later and credited by webhook."""
    await _drive(world, ("o-1",))


@scenario("late-webhook", setup=SETUP)
async def late_webhook_world(world: World) -> None:
    """A settlement the card does 100 s after the charge, past the settle's horizon (60 s): its
    webhook starts a run after the drives stopped, which nothing drives."""
    await _drive(world, ("o-1",), settle_ms=100_000)


async def touching(ctx: JobPassContext) -> JobPassResult:
    async def read() -> str:
        result: str = await ctx.call_service("card", "touch", {})
        return result

    await ctx.step("touch", read)
    return JobPassResult(done=True)


@scenario("empty-container", setup=SETUP)
async def empty_container_world(world: World) -> None:
    """A read whose only change is an empty list it adds to the state."""
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("shop", "touch", touching)
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=5_000)
    await world.start("cron", SCOPE, "shop", "touch")
    await world.settle((SCOPE,), horizon_ms=5_000, poll_ms=500)


async def declined(ctx: JobPassContext) -> JobPassResult:
    async def charge_declined() -> None:
        with contextlib.suppress(ServiceDeclined):
            await ctx.call_service("card", "charge", {"order": "o-9", "declined": True})

    await ctx.step("charge", charge_declined)
    return JobPassResult(done=True)


@scenario("declined", setup=SETUP)
async def declined_world(world: World) -> None:
    """A charge declined after it scheduled a capture and a callback: neither happens."""
    world.add_drive(DriveSpec(name="cron"))
    world.add_drive(DriveSpec(name="web"))
    world.add_job("shop", "declined", declined)
    world.add_endpoint("card-events", on_card_event, drive="web")
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=5_000)
    await world.start("cron", SCOPE, "shop", "declined")
    await world.settle((SCOPE,), horizon_ms=5_000, poll_ms=500)
