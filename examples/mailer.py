"""A mailer as a service: a mail sent from a step body, and the idempotency key that sends it once.

The job sends an order's receipt in a step. The mailer is a ``Service`` of the world whose
``send`` takes an optional idempotency key: a second send with a key the mailer has seen is
answered with the first send's result, and no second mail goes out.

A step body runs at least once: when its step record is lost, the next pass runs the body again.
``receipt-no-key`` sends without a key, so a body that runs twice mails the customer twice. Lose
the request of the cron's first step record, and it does, every seed:

    python -m sims run examples/mailer.py:receipt-no-key --plan \
        "FaultPlan((DropLeg(drive='cron', operation='record_step', nth=1, leg='request'),))"

``receipt-once`` is the fix: the same send with a key made from the order (never from the pass,
the time or a random draw: every pass of the run must send the same key). The second body's send
reaches the mailer and is answered from the key. Under the same plan it mails once:

    python -m sims run examples/mailer.py:receipt-once --plan \
        "FaultPlan((DropLeg(drive='cron', operation='record_step', nth=1, leg='request'),))"

``explore`` finds a one-fault plan that mails twice on its own (a lost reply of the mailer: the
body fails, and the next pass sends again); on ``receipt-once`` it finds none in 3000 worlds:

    python -m sims explore examples/mailer.py:receipt-no-key
    python -m sims explore examples/mailer.py:receipt-once --examples 3000

The checks are ready-made: ``at_most_once("mailer.send", key="order")`` (one receipt per order,
whatever the runs) and ``once_per_done_run("mailer.send")`` (a run key one of whose runs ended
done sent its receipt, once over all its runs: the runs a start made again are judged together).
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
    call_service,
    once_per_done_run,
    scenario,
)

SCOPE = "shop"


def send(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    outbox = state.setdefault("outbox", [])
    outbox.append({"to": args["to"], "subject": args["subject"]})
    return {"message": len(outbox)}


MAILER = Service(
    "mailer",
    operations={"send": Operation(send, idempotency_key="key")},
    latency_ms=(10.0, 120.0),
)


def _receipt(ctx: JobPassContext) -> dict[str, Any]:
    order = ctx.payload["order"]
    return {"to": ctx.payload["email"], "subject": f"Your receipt for {order}", "order": order}


async def receipt_no_key(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: the body sends a mail each time it runs."""

    async def send_receipt() -> int:
        sent = await call_service(ctx, "mailer", "send", _receipt(ctx), timeout_ms=10_000)
        return int(sent["message"])

    await ctx.step("send-receipt", send_receipt)
    return JobPassResult(done=True)


async def receipt_once(ctx: JobPassContext) -> JobPassResult:
    """The fix: the same send, with an idempotency key the mailer dedupes on."""

    async def send_receipt() -> int:
        mail = {**_receipt(ctx), "key": f"receipt/{ctx.payload['order']}"}
        sent = await call_service(ctx, "mailer", "send", mail, timeout_ms=10_000)
        return int(sent["message"])

    await ctx.step("send-receipt", send_receipt)
    return JobPassResult(done=True)


CHECKS = [at_most_once("mailer.send", key="order"), once_per_done_run("mailer.send")]
SETUP = WorldSetup(scopes=(SCOPE,), services=(MAILER,), lease_ms=15_000)


async def _drive(world: World, handler: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=2.0, reply_ms=2.0))
    world.add_job("shop", "receipt", handler)
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=300_000)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=300_000)
    payload = {"order": "o-17", "email": "ada@example.com"}
    await world.start("cron", SCOPE, "shop", "receipt", payload=payload)
    await world.settle((SCOPE,), horizon_ms=300_000, poll_ms=500)


@scenario("receipt-no-key", setup=SETUP, checks=CHECKS)
async def receipt_no_key_world(world: World) -> None:
    """Mail an order's receipt from a step body, without an idempotency key: a body that runs
    twice mails twice."""
    await _drive(world, receipt_no_key)


@scenario("receipt-once", setup=SETUP, checks=CHECKS)
async def receipt_once_world(world: World) -> None:
    """Mail an order's receipt with an idempotency key: once, however often the body runs."""
    await _drive(world, receipt_once)
