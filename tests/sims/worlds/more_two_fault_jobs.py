"""More jobs whose bug needs TWO faults that work together: no single fault reveals it. Each is
the slip a first version of a real job is likely to have, with its fix, and each pairs its faults
in a way the other two-fault worlds (``two_fault_jobs.py``) do not: one fault keeps a drive away
so that the stall another fault makes is not cut short by a takeover; a service call's timeout
and a scope write given up on.

Each job lives in one world: one scope, two drives (``cron`` and ``alarm``) ticking every second,
a 30 s lease, and the services the job talks to. In the clean world the cron runs every job alone.
Every buggy scenario is paired with its fixed one:

1. ``seat-charge-after-hold`` / ``seat-extend-then-charge`` (one fault keeps a drive away, the
   other stalls the other drive past the takeover that would have made the bug impossible): book
   a seat. The airline holds a seat for 40 s; the job holds it, charges the card, then confirms
   the hold, each in a step. The slip: the job charges on a hold placed in an earlier step without
   asking whether it still stands, reasoning that a pass that stalls loses its 30 s lease and the
   other drive, taking over, charges and confirms well inside the hold's 40 s. True while the
   other drive is up: with the alarm down, nobody takes over, the cron's stalled pass goes on
   after the hold lapsed, charges, and the confirm is refused: paid for a seat not held. The fix
   extends the hold first in the charge step (refused on a lapsed hold, before any charge).
2. ``pay-status-on-timeout`` / ``pay-status-paid-is-final`` (a service call's timeout, and a
   scope write given up on that lands late): take an order's payment and keep its status in the
   scope (``orders_status``, read by the shop's pages). On a timeout the job writes
   ``payment-retrying`` before failing the pass, for the support page. The slip: the status is
   written blindly, and a write the pass gave up on (its request still on the wire) can land after
   the next pass wrote ``paid``: a paid order shows ``payment-retrying`` for good. The fix makes
   ``paid`` final in the scope's own status operation (the store refuses to move a paid order
   back).

Each scenario is checked by a check of its own that says what "correct" means for the job. Run
one, and search for the plan that breaks it:

    python -m sims run tests/sims/worlds/more_two_fault_jobs.py:seat-charge-after-hold
    python -m sims explore tests/sims/worlds/more_two_fault_jobs.py:seat-charge-after-hold

A plan of two faults that breaks each buggy variant on seeds 1, 2 and 3 (its fix stays clean
under it); each of its faults alone leaves the world clean:

1. The alarm is killed at 0.1 s and stays down for 200 s; the reply to the cron's second step
   boundary (before the charge) comes 50 s late. Nobody takes the run over; the cron's stale pass
   charges at 50 s, on a hold placed at 0 s, and the confirm is refused:
   ``FaultPlan((CrashDrive(drive='alarm', at_ms=100.0, down_ms=200000.0), DelayLeg(drive='cron',
   operation='begin_step', nth=2, leg='reply', ms=50000.0)))``. The delay alone: the alarm takes
   over at 30.5 s and charges and confirms inside the hold; the stale cron's charge is a repeat.
   Two crashes show the same slip: the cron and then the alarm are each killed right after their
   hold (a repeat of the first, placed at 0 s), and the cron's pass that takes over at 61 s
   charges on it.
2. The charge runs and its reply is lost (a timeout); the ``payment-retrying`` write is given up
   on and lands 5 s later, after the retry wrote ``paid``: ``FaultPlan((DropLeg(drive='cron',
   operation='card.charge', nth=1, leg='reply'), LateRequest(drive='cron', operation='invoke',
   nth=1, ms=5000.0)))``. The lost reply alone: ``payment-retrying``, then ``paid``. The late
   request alone strikes the ``paid`` write: the pass fails, the next one writes ``paid`` again.
   A stale pass shows the same slip: the cron's first step boundary is held until the alarm took
   the run over and wrote ``paid``; the stale cron's charge then times out, and its
   ``payment-retrying`` lands last (a door write of a pass that lost its lease is not refused).

Run one with ``python -m sims run tests/sims/worlds/more_two_fault_jobs.py:NAME --plan "PLAN"``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import trio

from sims import (
    DriveSpec,
    JobPassContext,
    JobPassResult,
    Operation,
    Service,
    ServiceRefused,
    ServiceTimeout,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    call_service,
    run_keys,
    scenario,
)

SCOPE = "shop"
#: Every job's lease: longer than the longest chain of timeouts in one step body.
LEASE_MS = 30_000
#: Ticks run this long (ten leases and more), so a fault held for ten leases still meets a tick.
HORIZON_MS = 600_000
#: The client timeout every job gives a provider.
TIMEOUT_MS = 5_000.0


async def _two_drives(world: World) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=2.0, reply_ms=2.0))
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=HORIZON_MS)


def _now_ms() -> float:
    """The world's virtual time in ms: a service's own clock, as the airline's is."""
    return trio.current_time() * 1_000.0


def _run_status(trace: Trace) -> dict[str, str]:
    """Each run's status at the world's end, by run id: its run key's (``sims.run_keys``), so
    that a run's effects are judged with those of the other runs of its key."""
    key_of, status = run_keys(trace)
    return {run: status[key] for run, key in key_of.items()}


def _keyed_charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """A card charge: once per idempotency key (declared on the operation)."""
    made = state.setdefault("made", [])
    row = {"id": f"ch-{len(made) + 1}", "order": args["order"]}
    made.append({**row, "cents": args["cents"], "key": args["key"]})
    return row


CARD = Service(
    "card",
    operations={"charge": Operation(_keyed_charge, idempotency_key="key")},
    latency_ms=(5.0, 60.0),
)


# ================================================================================================
# 1. A seat charged on a hold that lapsed while nobody took the stalled pass over
# ================================================================================================

#: How long the airline keeps a seat held: longer than the lease, which the slip leans on.
HOLD_TTL_MS = 40_000.0


def _hold_of(state: dict[str, Any], hold_id: str) -> dict[str, Any]:
    for hold in state.get("holds", []):
        if hold["id"] == hold_id:
            return dict(hold)
    raise ServiceRefused(f"no hold {hold_id}")


def _live_hold(state: dict[str, Any], hold_id: str) -> dict[str, Any]:
    hold = _hold_of(state, hold_id)
    if _now_ms() - float(hold["at"]) > HOLD_TTL_MS:
        raise ServiceRefused(f"hold {hold_id} lapsed: held at {hold['at']:.0f} ms")
    return hold


def _set_hold(state: dict[str, Any], hold_id: str, **fields: Any) -> None:
    for hold in state["holds"]:
        if hold["id"] == hold_id:
            hold.update(fields)


def seats_hold(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """Hold a seat for HOLD_TTL_MS (once per key)."""
    holds = state.setdefault("holds", [])
    hold = {"id": f"h-{len(holds) + 1}", "booking": args["booking"], "at": _now_ms()}
    holds.append(hold)
    return dict(hold)


def seats_extend(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """Hold a live seat for HOLD_TTL_MS more; a lapsed hold is refused."""
    hold = _live_hold(state, args["hold"])
    _set_hold(state, hold["id"], at=_now_ms())
    return {"hold": hold["id"], "booking": hold["booking"], "extended": True}


def seats_confirm(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """Sell a held seat; a lapsed hold is refused (its seat went back on sale)."""
    hold = _live_hold(state, args["hold"])
    _set_hold(state, hold["id"], confirmed=True)
    return {"hold": hold["id"], "booking": hold["booking"], "confirmed": True}


SEATS = Service(
    "seats",
    operations={
        "hold": Operation(seats_hold, idempotency_key="key"),
        "extend": seats_extend,
        "confirm": seats_confirm,
    },
    latency_ms=(5.0, 40.0),
)


def _seat(extend_first: bool) -> Any:
    async def seat(ctx: JobPassContext) -> JobPassResult:
        booking = ctx.payload["booking"]

        async def hold() -> dict[str, Any]:
            args = {"booking": booking, "key": f"{booking}/hold"}
            held: dict[str, Any] = await call_service(
                ctx, "seats", "hold", args, timeout_ms=TIMEOUT_MS
            )
            return held

        held = await ctx.step("hold", hold)

        async def charge() -> str:
            if extend_first:
                # THE FIX: the hold was placed in an earlier step, maybe by another pass, maybe
                # long ago. Ask the airline to keep it (refused when it lapsed) before charging.
                await call_service(
                    ctx, "seats", "extend", {"hold": held["id"]}, timeout_ms=TIMEOUT_MS
                )
            # THE BUG (without the extension): the hold is taken to stand. A pass that stalls
            # loses its lease at 30 s, and the drive that takes over charges and confirms well
            # inside the hold's 40 s; but nobody takes over when the other drive is down.
            args = {"order": booking, "cents": ctx.payload["cents"], "key": f"{booking}/pay"}
            made = await call_service(ctx, "card", "charge", args, timeout_ms=TIMEOUT_MS)
            return str(made["id"])

        async def confirm() -> str:
            await call_service(ctx, "seats", "confirm", {"hold": held["id"]}, timeout_ms=TIMEOUT_MS)
            return str(held["id"])

        await ctx.step("charge", charge)
        await ctx.step("confirm", confirm)
        return JobPassResult(done=True)

    return seat


def charged_only_on_a_live_hold(trace: Trace) -> list[UserFinding]:
    """A booking is charged at most once, and only while the airline holds its seat (its last
    hold or extension at most HOLD_TTL_MS before the charge); a run that ended done is charged and
    its seat sold. A run that failed after a charge whose answer it never got (the card down on
    every retry) goes to the payments team's refund queue: that is not this job's slip."""
    status = _run_status(trace)
    held_at: dict[str, float] = {}
    charged: dict[str, list[float]] = {}
    sold: set[str] = set()
    run_of: dict[str, str] = {}
    findings = []
    for event in trace.of("svc.exec"):
        result = event.get("result")
        if not event["effect"] or not isinstance(result, dict):
            continue
        op, at = event["op"], float(event["t"])
        booking = str(result.get("booking", result.get("order", "")))
        run_of[booking] = str(event["run"])
        if op in ("seats.hold", "seats.extend"):
            held_at[booking] = at
        elif op == "seats.confirm":
            sold.add(booking)
        elif op == "card.charge":
            charged.setdefault(booking, []).append(at)
            since = at - held_at.get(booking, float("-inf"))
            if since > HOLD_TTL_MS:
                findings.append(
                    UserFinding(
                        f"booking {booking} was charged {since:.0f} ms after its seat was last "
                        f"held: the hold had lapsed ({HOLD_TTL_MS:.0f} ms)",
                        at_ms=at,
                        run=run_of[booking],
                    )
                )
    for booking, run in sorted(run_of.items()):
        paid = charged.get(booking, [])
        done = status.get(run) == "done"
        if len(paid) > 1 or (done and not (paid and booking in sold)):
            findings.append(
                UserFinding(
                    f"booking {booking} was charged {len(paid)} times, its seat "
                    + ("sold" if booking in sold else "not sold")
                    + f", and its run ended {status.get(run)}",
                    at_ms=paid[-1] if paid else None,
                    run=run,
                )
            )
    return findings


SEAT_SETUP = WorldSetup(scopes=(SCOPE,), services=(SEATS, CARD), lease_ms=LEASE_MS)


async def _seat_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("travel", "seat", handler)
    payload = {"booking": "bk-7702", "cents": 18_400}
    await world.start("cron", SCOPE, "travel", "seat", payload=payload)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("seat-charge-after-hold", setup=SEAT_SETUP, checks=[charged_only_on_a_live_hold])
async def seat_charge_after_hold_world(world: World) -> None:
    """Hold a seat, charge, confirm: a pass that stalls with nobody to take over charges on a
    hold that lapsed, and the seat is paid for and not sold."""
    await _seat_world(world, _seat(extend_first=False))


@scenario("seat-extend-then-charge", setup=SEAT_SETUP, checks=[charged_only_on_a_live_hold])
async def seat_extend_then_charge_world(world: World) -> None:
    """Hold a seat, extend the hold then charge, confirm: never charged without a seat."""
    await _seat_world(world, _seat(extend_first=True))


# ================================================================================================
# 2. An order's status written blindly, from a request a failed pass gave up on
# ================================================================================================

STATUS_TABLE = (
    "CREATE TABLE IF NOT EXISTS orders_status "
    "(order_id TEXT PRIMARY KEY, status TEXT NOT NULL, at TEXT NOT NULL)"
)


def _write_status(conn: sqlite3.Connection, order: str, status: str, now: str) -> None:
    conn.execute(
        "INSERT INTO orders_status (order_id, status, at) VALUES (?, ?, ?) "
        "ON CONFLICT (order_id) DO UPDATE SET status = excluded.status, at = excluded.at",
        (order, status, now),
    )


def set_status(conn: sqlite3.Connection, args: dict[str, Any], now: str) -> dict[str, str]:
    """THE BUG's store operation: the last write wins, whenever it was sent."""
    conn.execute(STATUS_TABLE)
    _write_status(conn, args["order"], args["status"], now)
    return {"order": args["order"], "status": args["status"]}


def set_status_paid_is_final(
    conn: sqlite3.Connection, args: dict[str, Any], now: str
) -> dict[str, str]:
    """THE FIX: a paid order stays paid; a late write of any other status changes nothing. It
    answers the status the order has after the write."""
    conn.execute(STATUS_TABLE)
    row = conn.execute(
        "SELECT status FROM orders_status WHERE order_id = ?", (args["order"],)
    ).fetchone()
    if row is not None and row[0] == "paid":
        return {"order": args["order"], "status": "paid"}
    _write_status(conn, args["order"], args["status"], now)
    return {"order": args["order"], "status": args["status"]}


async def pay_with_status(ctx: JobPassContext) -> JobPassResult:
    order = ctx.payload["order"]
    door = await ctx.scope()

    async def charge() -> str:
        args = {"order": order, "cents": ctx.payload["cents"], "key": f"{order}/pay"}
        try:
            made = await call_service(ctx, "card", "charge", args, timeout_ms=TIMEOUT_MS)
        except ServiceTimeout:
            # Tell the support page the payment is being retried, then fail the step: the next
            # pass charges again with the same key. THE BUG (with set_status): this write is
            # blind, and when it is given up on, it may land after the next pass wrote "paid".
            await door.invoke("set_status", {"order": order, "status": "payment-retrying"})
            raise
        return str(made["id"])

    await ctx.step("charge", charge)
    await door.invoke("set_status", {"order": order, "status": "paid"})
    return JobPassResult(done=True)


def status_says_paid(trace: Trace) -> list[UserFinding]:
    """An order whose run ended done shows ``paid`` at the world's end (the last status write
    that ran in the scope), and an order shows ``paid`` only if the card charged it. A run that
    failed with its charge in doubt (the card's answer lost, then the card down on every retry)
    shows what its last pass wrote: the payments team reconciles failed runs, and that is not
    this job's slip."""
    status = _run_status(trace)
    charged: set[str] = set()
    run_of: dict[str, str] = {}
    for event in trace.of("svc.exec"):
        result = event.get("result")
        if event["op"] == "card.charge" and isinstance(result, dict):
            run_of[result["order"]] = str(event["run"])
            if event["effect"]:
                charged.add(result["order"])
    last: dict[str, tuple[float, str]] = {}
    for event in trace.of("rpc.exec"):
        result = event.get("result")
        if event["op"] == "invoke" and isinstance(result, dict) and "status" in result:
            last[result["order"]] = (event["t"], result["status"])
    findings = []
    for order, run in sorted(run_of.items()):
        at, shown = last.get(order, (None, None))
        done = status.get(run) == "done"
        if (done and shown != "paid") or (shown == "paid" and order not in charged):
            findings.append(
                UserFinding(
                    f"order {order} shows {shown!r} at the end; its run ended {status.get(run)}, "
                    + ("and the card charged it" if order in charged else "and nothing charged"),
                    at_ms=at,
                    run=run,
                )
            )
    return findings


def _status_setup(operation: Any) -> WorldSetup:
    return WorldSetup(
        scopes=(SCOPE,),
        services=(CARD,),
        lease_ms=LEASE_MS,
        operations={"set_status": operation},
    )


#: How long the shop runs on after the payment's run ended: its pages read the status then, and
#: a scope write still on the wire lands in that time (the world does not wait for one).
SHOP_OPEN_S = 60.0


async def _status_world(world: World) -> None:
    await _two_drives(world)
    world.add_job("checkout", "pay", pay_with_status)
    payload = {"order": "o-3318", "cents": 4_250}
    await world.start("cron", SCOPE, "checkout", "pay", payload=payload)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)
    await trio.sleep(SHOP_OPEN_S)


@scenario("pay-status-on-timeout", setup=_status_setup(set_status), checks=[status_says_paid])
async def pay_status_on_timeout_world(world: World) -> None:
    """Charge an order and keep its status in the scope, blindly: a "retrying" write given up on
    after a timeout lands after "paid", and a paid order shows "payment-retrying"."""
    await _status_world(world)


@scenario(
    "pay-status-paid-is-final",
    setup=_status_setup(set_status_paid_is_final),
    checks=[status_says_paid],
)
async def pay_status_paid_is_final_world(world: World) -> None:
    """Charge an order and keep its status in the scope, where "paid" is final: a paid order
    shows "paid"."""
    await _status_world(world)
