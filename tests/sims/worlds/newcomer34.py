"""Five buggy jobs a new user wrote from the docs alone, each beside its fix.

- `start-key-by-run` / `start-key-by-order`: a charge keyed by the run id, paid twice when a start
  lands after its run ended (a second run, a new id).
- `keys-forgotten-retry` / `keys-forgotten-find-first`: a provider that keeps idempotency keys for
  a minute, met by a retry that comes after it.
- `booking-chain` / `booking-chain-fixed`: a booking whose third fault in a chain (answer lost,
  lookup lost, fallback lost) makes the retry book at a second hotel.
- `mail-key-by-address` / `mail-key-by-order`: a mail keyed by address, so two orders to one
  address mail once (inputs).
- `outage-skips-payment` / `outage-retries`: an `except ServiceUnavailable` that ends the run
  done, unpaid: a branch only an outage reaches.
"""

from __future__ import annotations

from typing import Any

import trio
from hypothesis import strategies as st

from driver import ServiceDeclined, ServiceTimedOut, ServiceUnavailable
from sims import (
    DriveSpec,
    JobPassContext,
    JobPassResult,
    Operation,
    RetryPolicy,
    Service,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    at_most_once,
    once_per_done_run,
    scenario,
)

HORIZON_MS = 600_000


def _drive_both(world: World, scope: str) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=5.0, reply_ms=8.0))
    world.every("cron", scope, every_ms=1_000, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", scope, every_ms=1_000, first_ms=500, until_ms=HORIZON_MS)


def _sent_args(trace: Trace) -> dict[tuple[str, int], dict[str, Any]]:
    return {(e["drive"], e["seq"]): e for e in trace.of("svc.send")}


def _effects_of(trace: Trace, op: str) -> list[tuple[float, dict[str, Any]]]:
    """(time, svc.send event) of every call of `op` that changed its service."""
    sent = _sent_args(trace)
    return [
        (e["t"], sent[(e["drive"], e["seq"])])
        for e in trace.of("svc.exec")
        if e["op"] == op and e.get("effect")
    ]


# ---------------------------------------------------------------------------------------------
# 1. A start-related bug: the charge's key is made from the run id.


def charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    state.setdefault("charges", []).append({"order": args["order"], "cents": args["cents"]})
    return {"charge": len(state["charges"])}


def find(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in state.get("charges", []) if c["order"] == args["order"]), None)


CARD = Service(
    "card",
    operations={"charge": Operation(charge, idempotent=True), "find": find},
    latency_ms=(5.0, 20.0),
)


def make_pay(key_of: str):  # type: ignore[no-untyped-def]
    async def pay(ctx: JobPassContext) -> JobPassResult:
        order = ctx.payload["order"]
        key = f"{ctx.run.id}/charge" if key_of == "run" else f"{order}/charge"
        args = {"order": order, "cents": ctx.payload["cents"]}

        async def body() -> str:
            try:
                await ctx.call_service(
                    "card", "charge", args, timeout_ms=5_000, idempotency_key=key
                )
            except ServiceTimedOut:
                await ctx.call_service(
                    "card", "charge", args, timeout_ms=5_000, idempotency_key=key
                )
            return "paid"

        await ctx.step("pay", body)
        return JobPassResult(done=True)

    return pay


async def _start_world(world: World, key_of: str) -> None:
    _drive_both(world, "shop")
    world.add_job("billing", "pay", make_pay(key_of), retry=RetryPolicy(max_attempts=5))
    await world.start("cron", "shop", "billing", "pay", payload={"order": "o-1", "cents": 4_999})
    await world.settle(("shop",), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario(
    "start-key-by-run",
    setup=WorldSetup(scopes=("shop",), services=(CARD,), lease_ms=30_000),
    checks=[at_most_once("card.charge", key="order")],
)
async def start_key_by_run(world: World) -> None:
    """BUG: the charge's idempotency key is the run id; a late or repeated start pays twice."""
    await _start_world(world, "run")


@scenario(
    "start-key-by-order",
    setup=WorldSetup(scopes=("shop",), services=(CARD,), lease_ms=30_000),
    checks=[at_most_once("card.charge", key="order")],
)
async def start_key_by_order(world: World) -> None:
    """FIX: the key is the order's, the same in every run a start makes."""
    await _start_world(world, "order")


# ---------------------------------------------------------------------------------------------
# 2. A bug in the service's own time: the provider forgets keys after a minute.

KEYS_KEPT_MS = 60_000


def forgetful_charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    now_ms = trio.current_time() * 1000
    keys = state.setdefault("keys", {})
    seen = keys.get(args["key"])
    if seen is not None and now_ms - seen["at"] < KEYS_KEPT_MS:
        first: dict[str, Any] = seen["result"]
        return first
    state.setdefault("charges", []).append({"order": args["order"], "cents": args["cents"]})
    result = {"charge": len(state["charges"])}
    keys[args["key"]] = {"at": now_ms, "result": result}
    return result


FORGETFUL = Service(
    "psp",
    operations={"charge": forgetful_charge, "find": find},
    latency_ms=(5.0, 20.0),
    times_ms={"idempotency keys kept": KEYS_KEPT_MS},
)


def make_psp_pay(find_first: bool):  # type: ignore[no-untyped-def]
    async def pay(ctx: JobPassContext) -> JobPassResult:
        order = ctx.payload["order"]
        args = {"order": order, "cents": ctx.payload["cents"], "key": f"{order}/charge"}

        async def body() -> str:
            if find_first:
                # The provider keeps charges for ever, keys for a minute: ask first.
                found = await ctx.call_service("psp", "find", {"order": order}, timeout_ms=5_000)
                if found is not None:
                    return "paid"
            # A timeout or a refusal fails the step; the run is retried by its policy.
            await ctx.call_service("psp", "charge", args, timeout_ms=5_000)
            return "paid"

        await ctx.step("pay", body)
        return JobPassResult(done=True)

    return pay


async def _psp_world(world: World, find_first: bool) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.every("cron", "shop", every_ms=1_000, first_ms=0, until_ms=HORIZON_MS)
    world.add_job(
        "billing",
        "pay",
        make_psp_pay(find_first),
        retry=RetryPolicy(max_attempts=10, base_delay_ms=2_000, max_delay_ms=30_000),
    )
    await world.start("cron", "shop", "billing", "pay", payload={"order": "o-2", "cents": 1_500})
    await world.settle(("shop",), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario(
    "keys-forgotten-retry",
    setup=WorldSetup(scopes=("shop",), services=(FORGETFUL,), lease_ms=30_000),
    checks=[at_most_once("psp.charge", key="order")],
)
async def keys_forgotten_retry(world: World) -> None:
    """BUG: a retry after the provider forgot the key charges again."""
    await _psp_world(world, find_first=False)


@scenario(
    "keys-forgotten-find-first",
    setup=WorldSetup(scopes=("shop",), services=(FORGETFUL,), lease_ms=30_000),
    checks=[at_most_once("psp.charge", key="order")],
)
async def keys_forgotten_find_first(world: World) -> None:
    """FIX: every pass asks the provider for the order's charge before charging."""
    await _psp_world(world, find_first=True)


# ---------------------------------------------------------------------------------------------
# 3. Three faults in a chain: book's answer lost -> lookup; lookup's answer lost -> fallback
#    (book again, same key, after noting the doubt); fallback's answer lost -> the retry reads
#    the note and books at the backup hotel.


def book(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    state.setdefault("bookings", []).append(args["order"])
    return {"booking": len(state["bookings"])}


def find_booking(state: dict[str, Any], args: dict[str, Any]) -> bool:
    return args["order"] in state.get("bookings", [])


HOTEL = Service(
    "hotel",
    operations={"book": Operation(book, idempotent=True), "find": find_booking},
    latency_ms=(5.0, 20.0),
)
BACKUP = Service(
    "backup",
    operations={"book": Operation(book, idempotent=True), "find": find_booking},
    latency_ms=(5.0, 20.0),
)


def make_booking(fixed: bool):  # type: ignore[no-untyped-def]
    async def booking(ctx: JobPassContext) -> JobPassResult:
        order = ctx.payload["order"]
        key = f"{order}/book"
        args = {"order": order}

        async def body() -> str:
            door = await ctx.scope()
            doubts = await door.invoke("items", {"kind": "doubt"})
            if any(row["key"] == order for row in doubts):
                if fixed:
                    # The doubt is about the hotel: ask it again with the same key.
                    await ctx.call_service(
                        "hotel", "book", args, timeout_ms=2_000, idempotency_key=key
                    )
                    return "hotel"
                # BUG: an earlier pass could not tell; book at the backup instead.
                await ctx.call_service(
                    "backup", "book", args, timeout_ms=2_000, idempotency_key=key
                )
                return "backup"
            try:
                await ctx.call_service("hotel", "book", args, timeout_ms=2_000, idempotency_key=key)
                return "hotel"
            except ServiceTimedOut:
                pass
            try:
                found = await ctx.call_service("hotel", "find", args, timeout_ms=2_000)
            except ServiceTimedOut:
                # Neither answer came: note the doubt, then book again with the same key.
                await door.invoke("record", {"kind": "doubt", "key": order, "data": None})
                found = False
            if not found:
                await ctx.call_service("hotel", "book", args, timeout_ms=2_000, idempotency_key=key)
            return "hotel"

        await ctx.step("book", body)
        return JobPassResult(done=True)

    return booking


def booked_once(trace: Trace) -> list[UserFinding]:
    times: dict[str, list[float]] = {}
    for op in ("hotel.book", "backup.book"):
        for t, send in _effects_of(trace, op):
            times.setdefault(send["args"]["order"], []).append(t)
    return [
        UserFinding(f"order {order} was booked {len(ts)} times", at_ms=sorted(ts)[1])
        for order, ts in sorted(times.items())
        if len(ts) > 1
    ]


async def _booking_world(world: World, fixed: bool) -> None:
    _drive_both(world, "trips")
    world.add_job("travel", "book", make_booking(fixed), retry=RetryPolicy(max_attempts=5))
    await world.start("cron", "trips", "travel", "book", payload={"order": "t-3"})
    await world.settle(("trips",), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario(
    "booking-chain",
    setup=WorldSetup(scopes=("trips",), services=(HOTEL, BACKUP), lease_ms=30_000),
    checks=[booked_once],
)
async def booking_chain(world: World) -> None:
    """BUG: after three answers lost in a chain, the retry books at the backup hotel too."""
    await _booking_world(world, fixed=False)


@scenario(
    "booking-chain-fixed",
    setup=WorldSetup(scopes=("trips",), services=(HOTEL, BACKUP), lease_ms=30_000),
    checks=[booked_once],
)
async def booking_chain_fixed(world: World) -> None:
    """FIX: a retry in doubt books at the hotel again with the same key."""
    await _booking_world(world, fixed=True)


# ---------------------------------------------------------------------------------------------
# 4. Inputs: orders to ship, each mailed once; the buggy key is the address.


def send_mail(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    state.setdefault("sent", []).append({"order": args["order"], "to": args["to"]})
    return {"id": len(state["sent"])}


MAILER = Service(
    "mail", operations={"send": Operation(send_mail, idempotent=True)}, latency_ms=(5.0, 20.0)
)

ADDRESSES = st.lists(
    st.sampled_from(["1 Elm St", "2 Oak Ave", "3 Pine Rd"]), min_size=1, max_size=4
)


def make_ship(key_of: str):  # type: ignore[no-untyped-def]
    async def ship(ctx: JobPassContext) -> JobPassResult:
        for i, to in enumerate(ctx.payload["addresses"]):
            order = f"order-{i}"
            key = f"{to}/shipped" if key_of == "address" else f"{order}/shipped"

            async def body(order: str = order, to: str = to, key: str = key) -> str:
                await ctx.call_service(
                    "mail",
                    "send",
                    {"order": order, "to": to},
                    timeout_ms=5_000,
                    idempotency_key=key,
                )
                return "mailed"

            await ctx.step(f"mail-{order}", body)
        return JobPassResult(done=True)

    return ship


def every_order_mailed(trace: Trace) -> list[str]:
    addresses = next(trace.of("world.begin")).get("inputs") or []
    end = next(trace.of("world.end"))
    if not any(r.get("status") == "done" for rows in end["runs"].values() for r in rows):
        return []  # a run that failed (its service down for good) mailed what it could
    mailed = {send["args"]["order"] for _t, send in _effects_of(trace, "mail.send")}
    return [
        f"order-{i} (to {to}) was never mailed"
        for i, to in enumerate(addresses)
        if f"order-{i}" not in mailed
    ]


async def _ship_world(world: World, key_of: str) -> None:
    _drive_both(world, "shop")
    world.add_job("shop", "ship", make_ship(key_of), retry=RetryPolicy(max_attempts=5))
    await world.start("cron", "shop", "shop", "ship", payload={"addresses": world.inputs})
    await world.settle(("shop",), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario(
    "mail-key-by-address",
    setup=WorldSetup(scopes=("shop",), services=(MAILER,), lease_ms=30_000),
    checks=[every_order_mailed],
    inputs=ADDRESSES,
)
async def mail_key_by_address(world: World) -> None:
    """BUG: the mail's key is the address: a second order to one address is never mailed."""
    await _ship_world(world, "address")


@scenario(
    "mail-key-by-order",
    setup=WorldSetup(scopes=("shop",), services=(MAILER,), lease_ms=30_000),
    checks=[every_order_mailed],
    inputs=ADDRESSES,
)
async def mail_key_by_order(world: World) -> None:
    """FIX: the mail's key is the order's."""
    await _ship_world(world, "order")


# ---------------------------------------------------------------------------------------------
# 5. A branch only a fault reaches: an outage taken for "nothing to pay".

GATEWAY = Service(
    "gateway",
    operations={"charge": Operation(charge, idempotent=True), "find": find},
    latency_ms=(5.0, 20.0),
)


def make_settle(fixed: bool):  # type: ignore[no-untyped-def]
    async def settle(ctx: JobPassContext) -> JobPassResult:
        order = ctx.payload["order"]
        args = {"order": order, "cents": ctx.payload["cents"]}
        key = f"{order}/charge"

        async def body() -> str:
            try:
                answer = await ctx.call_service(
                    "gateway", "charge", args, timeout_ms=5_000, idempotency_key=key
                )
            except ServiceDeclined:
                return "declined"
            except ServiceUnavailable:
                if fixed:
                    raise  # refused for now: fail the step, the run is retried
                return "skipped"  # BUG: an outage taken for "nothing to pay"
            except ServiceTimedOut:
                answer = await ctx.call_service(
                    "gateway", "charge", args, timeout_ms=5_000, idempotency_key=key
                )
            if answer["charge"] > 1:
                return "paid (not the first charge)"
            return "paid"

        await ctx.step("charge", body)
        return JobPassResult(done=True)

    return settle


async def _settle_world(world: World, fixed: bool) -> None:
    _drive_both(world, "shop")
    world.add_job("billing", "settle", make_settle(fixed), retry=RetryPolicy(max_attempts=5))
    await world.start("cron", "shop", "billing", "settle", payload={"order": "o-5", "cents": 700})
    await world.settle(("shop",), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario(
    "outage-skips-payment",
    setup=WorldSetup(scopes=("shop",), services=(GATEWAY,), lease_ms=30_000),
    checks=[once_per_done_run("gateway.charge")],
)
async def outage_skips_payment(world: World) -> None:
    """BUG: a refusal (an outage) ends the run done, unpaid."""
    await _settle_world(world, fixed=False)


@scenario(
    "outage-retries",
    setup=WorldSetup(scopes=("shop",), services=(GATEWAY,), lease_ms=30_000),
    checks=[once_per_done_run("gateway.charge")],
)
async def outage_retries(world: World) -> None:
    """FIX: a refusal fails the step and the run is retried."""
    await _settle_world(world, fixed=True)
