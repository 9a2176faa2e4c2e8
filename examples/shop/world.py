"""The shop's jobs in simulated worlds: the handlers of ``jobs.py`` themselves, not a copy.

The card provider and the mailer are modelled as the world's services, with the rules the real
ones in ``providers.py`` follow: a charge over the card's limit is declined, and a repeat of an
idempotency key is answered with the first result. Explore them:

    python -m sims explore examples/shop/world.py:order-buggy
    python -m sims explore examples/shop/world.py:order-fixed --examples 2000
    python -m sims explore examples/shop/world.py:month-end --examples 500

``order-buggy`` charges without a key: explore finds the lost answer of a charge that the retry
charges again, and shrinks it to one fault. ``incident`` and ``incident-buggy`` start from what a
killed serve left in ``$SHOP_INCIDENT`` (its data folder): the shop's scope and the providers'
records, restored (docs/recording.md, "An incident becomes a world"). ``order-fixed`` and
``month-end`` (the fixed order job, started by the month-end fan-out) are clean. ``python -m
examples.shop.serve`` runs the same handlers on the real scope host against real HTTP services, and
shows the same bug.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import attrs

from driver import JobDefinition, ServiceDeclined
from scopehost import read_scope_file
from sims import (
    DriveSpec,
    Operation,
    Service,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    carries_the_ledger,
    scenario,
)

# The shop is imported as the package serve.py runs, from the repository's root, whatever folder
# this world is explored from.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.shop.jobs import (
    MODULE,
    MONTH_END,
    ORDER_BUGGY,
    ORDER_FIXED,
    ORDER_V1,
    ORDER_V2,
    ORDER_V2_FIXED,
    customers,
)
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


def _charges(trace: Trace) -> dict[str, list[float]]:
    """When the world's card charged each order: the calls that changed the card's state."""
    sent = {(e["drive"], e["seq"]): e["args"] for e in trace.of("svc.send")}
    charges: dict[str, list[float]] = {}
    for event in trace.of("svc.exec"):
        if event["op"] == "card.charge" and event["effect"]:
            order = sent[(event["drive"], event["seq"])]["order"]
            charges.setdefault(order, []).append(event["t"])
    return charges


def charged_once(trace: Trace) -> list[UserFinding]:
    """Every order whose run ended done was charged exactly once, unless its card declined it;
    no order was charged twice, whatever became of its run."""
    charges = _charges(trace)
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


# -- a deploy under running runs ---------------------------------------------------------------
#
# The order job's release 1 serves when the world starts; release 2 is the version a deploy (a
# fault of the plan, docs/deploys.md) puts on the drives, one by one, whenever the search aims it:
# between two steps of a pass, between a failed pass and its retry, with a pass in flight on v1.
#
#     python -m sims explore examples/shop/world.py:deploy
#
# finds the double charge of v2's renamed charge step; ``deploy-fixed`` (v2 with the step's old
# name kept) is clean.


@scenario("deploy", setup=attrs.evolve(SETUP, versions={"v2": ORDER_V2}), checks=[charged_once])
async def deploy(world: World) -> None:
    """Two orders on release 1 of the order job; release 2 (its charge step renamed) is
    deployed while they run."""
    await _orders(world, ORDER_V1)


@scenario(
    "deploy-fixed",
    setup=attrs.evolve(SETUP, versions={"v2": ORDER_V2_FIXED}),
    checks=[charged_once],
)
async def deploy_fixed(world: World) -> None:
    """Two orders on release 1; release 2 done right (the charge step's name kept) is deployed
    while they run."""
    await _orders(world, ORDER_V1)


# -- an incident, restored --------------------------------------------------------------------
#
# A data folder that `python -m examples.shop.serve` left when it was killed part-way (SIGKILL,
# a crash, a deploy gone wrong): the shop's scope as its file holds it, and the card provider and
# the mailer as their own records hold them. The incident worlds start from there and run the
# same handlers on; explore searches the faults that could still strike from that moment:
#
#     SHOP_INCIDENT=DIR python -m sims explore examples/shop/world.py:incident
#
# (docs/recording.md, "An incident becomes a world", walks through it.)

#: The environment variable naming the incident's data folder (a serve's --data).
INCIDENT_VARIABLE = "SHOP_INCIDENT"


def incident_folder() -> Path:
    folder = os.environ.get(INCIDENT_VARIABLE)
    if not folder or not (Path(folder) / "scopes" / f"{SCOPE}.sqlite3").is_file():
        raise ValueError(
            f"{INCIDENT_VARIABLE}={folder!r}: name the data folder an incident left (the --data "
            f"of python -m examples.shop.serve), which holds scopes/{SCOPE}.sqlite3"
        )
    return Path(folder)


def _provider_records(path: Path, table: str, columns: str) -> tuple[list[Any], dict[str, Any]]:
    """A provider's rows of ``table`` and the answers it remembers by key, read-only."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute(f"SELECT {columns} FROM {table} ORDER BY 1").fetchall()
        answered = {
            str(key): json.loads(body)
            for key, status, body in conn.execute("SELECT key, status, body FROM answered")
            if status == 200  # a decline is an answer the world gives again by itself
        }
        return rows, answered
    finally:
        conn.close()


def _restore_providers(world: World, folder: Path) -> list[str]:
    """The card provider and the mailer as their records stood; the orders charged then."""
    rows, answered = _provider_records(folder / "card.sqlite3", "charges", "charge, orderid, cents")
    world.restore_service(
        "card",
        {"charges": [{"order": order, "cents": cents} for _, order, cents in rows]},
        answered={("charge", key.split(":", 1)[1]): v for key, v in answered.items()},
    )
    sent, answered = _provider_records(folder / "mail.sqlite3", "mails", "mail, sent_to, subject")
    world.restore_service(
        "mail",
        {"sent": [{"to": to, "subject": subject} for _, to, subject in sent]},
        answered={("send", key.split(":", 1)[1]): v for key, v in answered.items()},
    )
    return [order for _, order, _ in rows]


def charged_once_from_the_incident(trace: Trace) -> list[UserFinding]:
    """No order charged twice with a charge of this world among them: the charges the incident
    left count, and one more for the same order in this world is the double charge."""
    before: dict[str, int] = {}
    for order in _provider_records(
        incident_folder() / "card.sqlite3", "charges", "charge, orderid, cents"
    )[0]:
        before[order[1]] = before.get(order[1], 0) + 1
    here = _charges(trace)
    return [
        UserFinding(
            f"order {order} was charged {before.get(order, 0) + len(times)} times: "
            f"{before.get(order, 0)} before the incident, {len(times)} in this world",
            at_ms=times[0],
        )
        for order, times in sorted(here.items())
        if before.get(order, 0) + len(times) > 1
    ]


async def _incident(world: World, order: JobDefinition) -> None:
    folder = incident_folder()
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=15.0, reply_ms=40.0))
    world.register(order)
    world.register(MONTH_END)
    await world.restore(SCOPE, read_scope_file(folder / "scopes" / f"{SCOPE}.sqlite3"))
    _restore_providers(world, folder)
    world.every("cron", SCOPE, every_ms=500, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=500, first_ms=250, until_ms=HORIZON_MS)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("incident", setup=SETUP, checks=[charged_once_from_the_incident, carries_the_ledger])
async def incident(world: World) -> None:
    """The incident in $SHOP_INCIDENT, restored, driven on by the fixed order job."""
    await _incident(world, ORDER_FIXED)


@scenario(
    "incident-buggy", setup=SETUP, checks=[charged_once_from_the_incident, carries_the_ledger]
)
async def incident_buggy(world: World) -> None:
    """The incident in $SHOP_INCIDENT, restored, driven on by the order job without its key."""
    await _incident(world, ORDER_BUGGY)
