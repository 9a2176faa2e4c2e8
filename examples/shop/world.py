"""The shop's jobs in simulated worlds: the handlers of ``jobs.py`` themselves, not a copy.

The card provider and the mailer are modelled as the world's services, with the rules the real
ones in ``providers.py`` follow: a charge over the card's limit is declined, and a repeat of an
idempotency key is answered with the first result. Explore them:

    python -m sims explore examples/shop/world.py:order-buggy
    python -m sims explore examples/shop/world.py:order-fixed --examples 2000
    python -m sims explore examples/shop/world.py:month-end --examples 500

``order-buggy`` charges without a key: explore finds the lost answer of a charge that the retry
charges again, and shrinks it to one fault. ``order-fixed`` and ``month-end`` (the fixed order job,
started by the month-end fan-out) are clean. ``python -m examples.shop.serve`` runs the same
handlers on the real scope host against real HTTP services, and shows the same bug.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from driver import JobDefinition, ServiceDeclined
from sims import (
    DriveSpec,
    Operation,
    Service,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    scenario,
)

# The shop is imported as the package serve.py runs, from the repository's root, whatever folder
# this world is explored from.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.shop.jobs import MODULE, MONTH_END, ORDER_BUGGY, ORDER_FIXED, customers
from examples.shop.providers import LIMIT_CENTS

SCOPE = "shop"
#: Long enough for runs held up by a lease (a stale pass, a takeover) and retries to end.
HORIZON_MS = 300_000


def charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    if args["cents"] > LIMIT_CENTS:
        raise ServiceDeclined("the amount is over the card's limit", code="card_declined")
    charges = state.setdefault("charges", [])
    charges.append({"order": args["order"], "cents": args["cents"]})
    return {"charge": f"ch-{len(charges)}"}


def send(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    sent = state.setdefault("sent", [])
    sent.append({"to": args["to"], "subject": args["subject"]})
    return {"message": len(sent)}


CARD = Service(
    "card", operations={"charge": Operation(charge, idempotent=True)}, latency_ms=(5.0, 50.0)
)
MAIL = Service(
    "mail", operations={"send": Operation(send, idempotent=True)}, latency_ms=(5.0, 50.0)
)
SETUP = WorldSetup(scopes=(SCOPE,), lease_ms=5_000, services=(CARD, MAIL))


def charged_once(trace: Trace) -> list[UserFinding]:
    """Every order whose run ended done was charged exactly once, unless its card declined it;
    no order was charged twice, whatever became of its run."""
    sent = {(e["drive"], e["seq"]): e["args"] for e in trace.of("svc.send")}
    charges: dict[str, list[float]] = {}
    for event in trace.of("svc.exec"):
        if event["op"] == "card.charge" and event["effect"]:
            order = sent[(event["drive"], event["seq"])]["order"]
            charges.setdefault(order, []).append(event["t"])
    found = [
        UserFinding(f"order {order} was charged {len(times)} times", at_ms=times[1])
        for order, times in charges.items()
        if len(times) > 1
    ]
    for event in trace.of("world.end"):
        for rows in event["runs"].values():
            for row in rows:
                if row["job"] != "order" or row["status"] != "done":
                    continue
                order = row["instance"]
                declined = _payload(row)["cents"] > LIMIT_CENTS
                if not declined and order not in charges:
                    found.append(UserFinding(f"order {order} ended done, never charged"))
    return found


def _payload(row: dict[str, Any]) -> dict[str, Any]:
    payload = row["payload"]
    return dict(json.loads(payload) if isinstance(payload, str) else payload)


async def _orders(world: World, order: JobDefinition) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=15.0, reply_ms=40.0))
    world.register(order)
    first, over_the_limit = customers(7)[0], customers(7)[6]
    for customer in (first, over_the_limit):
        payload = {
            "order": f"2026-11/{customer['id']}",
            "customer": customer["id"],
            "email": customer["email"],
            "cents": customer["cents"],
        }
        await world.start(
            "cron", SCOPE, MODULE, "order", instance=payload["order"], payload=payload
        )
    world.every("cron", SCOPE, every_ms=500, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=500, first_ms=250, until_ms=HORIZON_MS)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("order-buggy", setup=SETUP, checks=[charged_once])
async def order_buggy(world: World) -> None:
    """Two orders (the second over the card's limit), the order job without an idempotency key
    on its charge."""
    await _orders(world, ORDER_BUGGY)


@scenario("order-fixed", setup=SETUP, checks=[charged_once])
async def order_fixed(world: World) -> None:
    """Two orders (the second over the card's limit), the order job with its charge keyed by the
    order."""
    await _orders(world, ORDER_FIXED)


@scenario("month-end", setup=SETUP, checks=[charged_once])
async def month_end(world: World) -> None:
    """The month-end job fans out one (fixed) order run per customer: seven customers, one of
    them over the card's limit."""
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=15.0, reply_ms=40.0))
    world.register(ORDER_FIXED)
    world.register(MONTH_END)
    payload = {"month": "2026-11", "customers": customers(7)}
    await world.start("cron", SCOPE, MODULE, "month-end", instance="2026-11", payload=payload)
    world.every("cron", SCOPE, every_ms=500, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=500, first_ms=250, until_ms=HORIZON_MS)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)
