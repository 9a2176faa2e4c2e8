"""Five jobs whose bug needs TWO faults that work together to show: no single fault reveals it.
Each is the slip a first version of a real job is likely to have, with its fix.

Each job lives in one world: one scope, two drives (``cron`` and ``alarm``) ticking every second,
a 30 s lease, and the services the job talks to. In the clean world the cron runs every job alone.
Every buggy scenario is paired with its fixed one:

1. ``payout-lost-close-is-closed`` / ``payout-close-must-answer`` (a pass fails, a drive that never
   ran the job takes it over, and a fault on that drive's calls shows the bug): a seller payout.
   A pass that finds an earlier try of its run (a scope row written before each payment) closes
   that try's key at the bank, which answers whether the payment ran and refuses it for good if
   not, and pays with a new key only when it did not. The bug: a close with no answer is taken
   for "not paid" (the close went out, so the key must be closed), and the payout is paid twice.
   The fix fails the step on a close with no answer; the next pass closes again.
2. ``label-fallback-on-refusal`` / ``label-close-then-fallback`` (an answer in doubt, then a
   refusal): buy a shipping label at swift, and at the post when swift refuses. A buy whose reply
   was lost fails the step, and the next pass asks swift again with the same key; but swift is
   down by then, and the refusal sends the job to the post: two labels. The fix closes the key at
   swift before turning to the post.
3. ``booking-release-on-refusal`` / ``booking-close-then-release`` (a delay keeps a pass away
   past a takeover, and the pass that took over meets a refusal; the stale pass acts late): hold a
   seat, charge the card, and give the seat back when the card refuses. The cron's pass is held
   before its charge past its lease; the alarm takes over while the card is down, is refused, and
   gives the seat back; then the stale cron pass charges: paid for a seat given back. The fix
   closes the card's key before giving the seat back (a late charge is then refused, and a charge
   that ran keeps the seat).
4. ``refund-delay-mail-no-key`` / ``refund-delay-mail-keyed`` (a pass fails, another drive
   recovers the run, and a fault on that drive's recovery calls shows the bug): refund an order.
   A pass that finds an earlier try that never went through mails the customer "your refund is
   delayed" before trying again; that mail, on a path the clean world never takes, is sent
   without the mailer's key, so a recovery pass that fails after it mails twice. The fix gives
   the mail the mailer's idempotency key.
5. ``topup-rotate-stuck-key`` / ``topup-same-key`` (two answers in doubt in a row): top a wallet
   up. On a timeout the body charges once more with the same key (the wallet answers a charge
   that ran), and after a second timeout it takes the key for stuck and charges with a fresh one:
   when the first charge ran, that is two charges. The fix fails the step after the second
   timeout; the next pass asks with the same key.

Each scenario is checked by a check of its own (or a ready-made one) that says what "correct"
means for the job. Run one, and search for the plan that breaks it:

    python -m sims run tests/sims/worlds/two_fault_jobs.py:payout-lost-close-is-closed
    python -m sims explore tests/sims/worlds/two_fault_jobs.py:payout-lost-close-is-closed
    python -m sims explore tests/sims/worlds/two_fault_jobs.py:payout-close-must-answer \
        --examples 3000

A plan of two faults that breaks each buggy variant on seeds 1, 2 and 3 (its fix stays clean
under it); each of its faults alone leaves the world clean:

1. The cron is killed right after its payment ran; the alarm takes the run over at the lease's
   end, closes the key (the bank says "paid") and loses the answer; it pays again with a new key:
   ``FaultPlan((CrashAfter(drive='cron', operation='bank.pay', nth=1), DropLeg(drive='alarm',
   operation='bank.close_key', nth=1, leg='reply')))``. The drop strikes a call the clean world
   never makes: alone, it never fires.
2. swift buys the label and its reply is lost (a timeout); swift is down when the run is tried
   again, and the post sells a second label:
   ``FaultPlan((DropLeg(drive='cron', operation='swift.buy', nth=1, leg='reply'),
   ServiceOutage(service='swift', from_ms=1000.0, to_ms=60000.0)))``.
3. The reply to the cron's second step boundary (before the charge) comes 35 s late; the alarm
   takes over at 30.5 s while the card is down, is refused, gives the seat back and ends the run;
   the stale cron pass then charges: ``FaultPlan((DelayLeg(drive='cron', operation='begin_step',
   nth=2, leg='reply', ms=35000.0), ServiceOutage(service='card', from_ms=30000.0,
   to_ms=33000.0)))``.
4. The cron is killed right after it wrote its first try's row (before the refund); the alarm
   takes over, closes the key (nothing ran), mails "delayed" and loses the mailer's answer; the
   step fails, and the next pass mails again: ``FaultPlan((CrashAfter(drive='cron',
   operation='invoke', nth=2), DropLeg(drive='alarm', operation='mailer.send', nth=1,
   leg='reply')))``. The drop strikes a call the clean world never makes.
5. The first charge runs and its reply is lost; the second (the same key: a repeat) loses its
   reply too; the fresh key charges again: ``FaultPlan((DropLeg(drive='cron',
   operation='wallet.charge', nth=1, leg='reply'), DropLeg(drive='cron',
   operation='wallet.charge', nth=2, leg='reply')))``.

Run one with ``python -m sims run tests/sims/worlds/two_fault_jobs.py:NAME --plan "PLAN"``.
"""

from __future__ import annotations

from typing import Any

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
    at_most_once,
    call_service,
    once_per_done_run,
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


def _run_status(trace: Trace) -> dict[str, str]:
    """Each run's status at the world's end, by run id: its run key's (``sims.run_keys``), so
    that a run's effects are judged with those of the other runs of its key."""
    key_of, status = run_keys(trace)
    return {run: status[key] for run, key in key_of.items()}


def _keyed_charge(prefix: str) -> Any:
    """A provider's money-moving call: once per idempotency key, and refused on a closed key."""

    def charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        if args["key"] in state.setdefault("closed", []):
            raise ServiceRefused(f"key {args['key']} was closed")
        made = state.setdefault("made", [])
        row = {"id": f"{prefix}-{len(made) + 1}", "order": args["order"], "key": args["key"]}
        made.append({**row, "cents": args["cents"]})
        return row

    return charge


def close_key(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """Close a key: say whether a call with it ran, and refuse every later call with it."""
    for row in state.get("made", []):
        if row["key"] == args["key"]:
            return {"ran": True, "id": row["id"]}
    closed = state.setdefault("closed", [])
    if args["key"] not in closed:
        closed.append(args["key"])
    return {"ran": False}


# ================================================================================================
# 1. A payout whose reconciliation takes a lost answer for "not paid"
# ================================================================================================

BANK = Service(
    "bank",
    operations={
        "pay": Operation(_keyed_charge("po"), idempotency_key="key"),
        "close_key": close_key,
    },
    latency_ms=(5.0, 60.0),
)


def _payout(trust_a_lost_close: bool) -> Any:
    async def payout(ctx: JobPassContext) -> JobPassResult:
        order = ctx.payload["payout"]

        async def pay() -> str:
            door = await ctx.scope()
            tries = [
                row
                for row in await door.invoke("items", {"kind": "payout-try"})
                if row["data"]["run"] == ctx.run.id
            ]
            if tries:
                # An earlier pass got as far as paying. Close its key: the bank says whether that
                # payment ran, and refuses it for good if it has not (a request still on the wire
                # included), so a new try with a new key cannot pay twice.
                last = str(tries[-1]["key"])
                try:
                    closed = await call_service(
                        ctx, "bank", "close_key", {"key": last}, timeout_ms=TIMEOUT_MS
                    )
                except ServiceTimeout:
                    if not trust_a_lost_close:
                        raise  # THE FIX: no answer is no answer; the next pass closes again
                    # THE BUG: the close went out, so the key is closed whatever happened.
                    closed = {"ran": False}
                if closed["ran"]:
                    return str(closed["id"])
            key = f"{order}/try-{len(tries) + 1}"
            await door.invoke(
                "record", {"kind": "payout-try", "key": key, "data": {"run": ctx.run.id}}
            )
            args = {"order": order, "cents": ctx.payload["cents"], "key": key}
            made = await call_service(ctx, "bank", "pay", args, timeout_ms=TIMEOUT_MS)
            return str(made["id"])

        await ctx.step("pay", pay)
        return JobPassResult(done=True)

    return payout


PAYOUT_SETUP = WorldSetup(scopes=(SCOPE,), services=(BANK,), lease_ms=LEASE_MS)
PAYOUT_CHECKS = [once_per_done_run("bank.pay")]


async def _payout_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("payouts", "payout", handler)
    payload = {"payout": "po-2026-11-seller-8", "cents": 182_000}
    await world.start("cron", SCOPE, "payouts", "payout", payload=payload)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("payout-lost-close-is-closed", setup=PAYOUT_SETUP, checks=PAYOUT_CHECKS)
async def payout_lost_close_is_closed_world(world: World) -> None:
    """Pay a seller out; a pass that finds an earlier try closes its key, and takes a close with
    no answer for "not paid": pays twice when the pass that takes over loses that answer."""
    await _payout_world(world, _payout(trust_a_lost_close=True))


@scenario("payout-close-must-answer", setup=PAYOUT_SETUP, checks=PAYOUT_CHECKS)
async def payout_close_must_answer_world(world: World) -> None:
    """Pay a seller out; a close of an earlier try's key with no answer fails the step: paid
    once."""
    await _payout_world(world, _payout(trust_a_lost_close=False))


# ================================================================================================
# 2. A shipping label bought from a second carrier when the first refuses
# ================================================================================================

SWIFT = Service(
    "swift",
    operations={
        "buy": Operation(_keyed_charge("sw"), idempotency_key="key"),
        "close_key": close_key,
    },
    latency_ms=(10.0, 80.0),
)
POST = Service(
    "post",
    operations={"buy": Operation(_keyed_charge("pp"), idempotency_key="key")},
    latency_ms=(10.0, 120.0),
)


def _label(close_first: bool) -> Any:
    async def label(ctx: JobPassContext) -> JobPassResult:
        order = ctx.payload["order"]
        args = {"order": order, "cents": ctx.payload["cents"], "key": f"{order}/label"}

        async def buy() -> str:
            try:
                made = await call_service(ctx, "swift", "buy", args, timeout_ms=TIMEOUT_MS)
                return str(made["id"])
            except ServiceRefused:
                pass  # swift did not take it: a refusal never ran
            # A timeout is not a refusal: it fails the step, and the next pass asks swift again.
            if close_first:
                # THE FIX: a refusal speaks for this request only. Close the key: swift says
                # whether an earlier request of ours bought the label.
                closed = await call_service(
                    ctx, "swift", "close_key", {"key": args["key"]}, timeout_ms=TIMEOUT_MS
                )
                if closed["ran"]:
                    return str(closed["id"])
            made = await call_service(ctx, "post", "buy", args, timeout_ms=TIMEOUT_MS)
            return str(made["id"])

        await ctx.step("buy-label", buy)
        return JobPassResult(done=True)

    return label


def one_label_per_order(trace: Trace) -> list[UserFinding]:
    """A parcel one of whose runs ended done has exactly one label bought, at swift or at the
    post; any parcel at most one (each label is paid for). One parcel per run key: the runs a start
    made again are judged together."""
    key_of, status = run_keys(trace)
    bought: dict[str, list[dict[str, Any]]] = {}
    for event in trace.of("svc.exec"):
        if event["op"] in ("swift.buy", "post.buy") and event["effect"]:
            bought.setdefault(key_of.get(event["run"], event["run"]), []).append(event)
    findings = []
    for key, ended in sorted(status.items()):
        made = bought.get(key, [])
        if len(made) > 1 or (ended == "done" and not made):
            findings.append(
                UserFinding(
                    f"the runs of {key} ended {ended} and {len(made)} labels were bought"
                    + "".join(f"; {e['result']['id']} at {e['t']} ms" for e in made),
                    at_ms=made[-1]["t"] if made else None,
                    run=made[-1]["run"] if made else None,
                )
            )
    return findings


LABEL_SETUP = WorldSetup(scopes=(SCOPE,), services=(SWIFT, POST), lease_ms=LEASE_MS)


async def _label_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("shipping", "label", handler)
    payload = {"order": "o-904", "cents": 690}
    await world.start("cron", SCOPE, "shipping", "label", payload=payload)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("label-fallback-on-refusal", setup=LABEL_SETUP, checks=[one_label_per_order])
async def label_fallback_on_refusal_world(world: World) -> None:
    """Buy a label at swift, at the post when swift refuses: a swift buy that timed out but ran,
    then a refusal, buys two labels."""
    await _label_world(world, _label(close_first=False))


@scenario("label-close-then-fallback", setup=LABEL_SETUP, checks=[one_label_per_order])
async def label_close_then_fallback_world(world: World) -> None:
    """Buy a label at swift, at the post only after closing the key at swift: one label."""
    await _label_world(world, _label(close_first=True))


# ================================================================================================
# 3. A booking that gives the seat back when the card refuses
# ================================================================================================


def seats_hold(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    held = state.setdefault("held", {})
    held[args["booking"]] = held.get(args["booking"], 0) + 1
    return {"booking": args["booking"], "seat": args["seat"], "held": True}


def seats_release(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    held = state.setdefault("held", {})
    if held.get(args["booking"], 0) > 0:
        held[args["booking"]] -= 1
        return {"booking": args["booking"], "released": True}
    return {"booking": args["booking"], "released": False}


SEATS = Service(
    "seats",
    operations={"hold": Operation(seats_hold, idempotency_key="key"), "release": seats_release},
    latency_ms=(5.0, 40.0),
)
CARD = Service(
    "card",
    operations={
        "charge": Operation(_keyed_charge("ch"), idempotency_key="key"),
        "close_key": close_key,
    },
    latency_ms=(5.0, 60.0),
)


def _book(close_first: bool) -> Any:
    async def book(ctx: JobPassContext) -> JobPassResult:
        booking, seat = ctx.payload["booking"], ctx.payload["seat"]

        async def hold() -> str:
            args = {"booking": booking, "seat": seat, "key": f"{booking}/hold"}
            await call_service(ctx, "seats", "hold", args, timeout_ms=TIMEOUT_MS)
            return str(seat)

        async def charge() -> str:
            args = {"order": booking, "cents": ctx.payload["cents"], "key": f"{booking}/pay"}
            try:
                made = await call_service(ctx, "card", "charge", args, timeout_ms=TIMEOUT_MS)
                return str(made["id"])
            except ServiceRefused:
                pass  # the card did not take it: give the seat back, the booking is off
            if close_first:
                # THE FIX: the refusal speaks for this request only. Close the key first: the
                # card says whether an earlier charge of ours ran, and refuses any that is late.
                closed = await call_service(
                    ctx, "card", "close_key", {"key": args["key"]}, timeout_ms=TIMEOUT_MS
                )
                if closed["ran"]:
                    return str(closed["id"])
            await call_service(ctx, "seats", "release", {"booking": booking}, timeout_ms=TIMEOUT_MS)
            return "abandoned"

        await ctx.step("hold-seat", hold)
        ctx.count(await ctx.step("charge", charge))
        return JobPassResult(done=True)

    return book


def paid_iff_seated(trace: Trace) -> list[UserFinding]:
    """A booking is charged at most once; a charged booking keeps its seat (no seat paid for and
    given back); a booking whose run ended done is charged exactly when it keeps its seat. A run
    that failed may leave its seat held unpaid: the seats service lets a hold lapse."""
    status = _run_status(trace)
    seated: dict[str, int] = {}
    charged: dict[str, int] = {}
    run_of: dict[str, str] = {}
    last_at: dict[str, float] = {}
    for event in trace.of("svc.exec"):
        result = event.get("result")
        if not event["effect"] or not isinstance(result, dict):
            continue
        if event["op"] == "seats.hold":
            seated[result["booking"]] = seated.get(result["booking"], 0) + 1
        elif event["op"] == "seats.release":
            seated[result["booking"]] = seated.get(result["booking"], 0) - 1
        elif event["op"] == "card.charge":
            charged[result["order"]] = charged.get(result["order"], 0) + 1
        else:
            continue
        booking = str(result.get("booking", result.get("order")))
        run_of[booking], last_at[booking] = event["run"], event["t"]
    findings = []
    for booking, run in sorted(run_of.items()):
        seats, paid = seated.get(booking, 0), charged.get(booking, 0)
        seated_unpaid = status.get(run) == "done" and seats == 1 and paid == 0
        if paid > 1 or (paid == 1 and seats != 1) or seats > 1 or seated_unpaid:
            findings.append(
                UserFinding(
                    f"booking {booking} was charged {paid} times and holds {seats} seats",
                    at_ms=last_at[booking],
                    run=run,
                )
            )
    return findings


BOOKING_SETUP = WorldSetup(scopes=(SCOPE,), services=(SEATS, CARD), lease_ms=LEASE_MS)


async def _booking_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("travel", "book", handler)
    payload = {"booking": "bk-5521", "seat": "14C", "cents": 21_900}
    await world.start("cron", SCOPE, "travel", "book", payload=payload)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("booking-release-on-refusal", setup=BOOKING_SETUP, checks=[paid_iff_seated])
async def booking_release_on_refusal_world(world: World) -> None:
    """Hold a seat, charge the card, give the seat back when the card refuses: a stale pass's
    late charge, after the pass that took over met a refusal, pays for a seat given back."""
    await _booking_world(world, _book(close_first=False))


@scenario("booking-close-then-release", setup=BOOKING_SETUP, checks=[paid_iff_seated])
async def booking_close_then_release_world(world: World) -> None:
    """Hold a seat, charge the card, and on a refusal close the card's key before giving the seat
    back: paid exactly when seated."""
    await _booking_world(world, _book(close_first=True))


# ================================================================================================
# 4. A refund whose recovery path mails the customer without a key
# ================================================================================================


def mailer_send(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    sent = state.setdefault("sent", [])
    mail = {"id": f"m-{len(sent) + 1}", "to": args["to"], "order": args["order"]}
    sent.append({**mail, "subject": args["subject"]})
    return mail


PSP = Service(
    "psp",
    operations={
        "refund": Operation(_keyed_charge("re"), idempotency_key="key"),
        "close_key": close_key,
    },
    latency_ms=(5.0, 60.0),
)
MAILER = Service(
    "mailer",
    operations={"send": Operation(mailer_send, idempotency_key="key")},
    latency_ms=(10.0, 200.0),
)


def _refund(mail_key: bool) -> Any:
    async def refund(ctx: JobPassContext) -> JobPassResult:
        order = ctx.payload["order"]

        async def give_back() -> str:
            door = await ctx.scope()
            tries = [
                row
                for row in await door.invoke("items", {"kind": "refund-try"})
                if row["data"]["run"] == ctx.run.id
            ]
            if tries:
                # An earlier pass got as far as refunding. Close its key: the provider says
                # whether that refund ran, and refuses it for good if not.
                last = {"key": str(tries[-1]["key"])}
                closed = await call_service(ctx, "psp", "close_key", last, timeout_ms=TIMEOUT_MS)
                if closed["ran"]:
                    return str(closed["id"])
                # It never went through: tell the customer the refund is late, then try again.
                mail = {
                    "to": ctx.payload["email"],
                    "order": order,
                    "subject": f"Your refund for {order} is delayed",
                }
                if mail_key:
                    mail["key"] = f"{order}/refund-delayed"  # THE FIX: the mailer's own key
                # THE BUG (without the key): this path is rare, and a pass that fails after the
                # mail went out mails again.
                await call_service(ctx, "mailer", "send", mail, timeout_ms=TIMEOUT_MS)
            key = f"{order}/refund-{len(tries) + 1}"
            await door.invoke(
                "record", {"kind": "refund-try", "key": key, "data": {"run": ctx.run.id}}
            )
            args = {"order": order, "cents": ctx.payload["cents"], "key": key}
            made = await call_service(ctx, "psp", "refund", args, timeout_ms=TIMEOUT_MS)
            return str(made["id"])

        await ctx.step("refund", give_back)
        return JobPassResult(done=True)

    return refund


REFUND_SETUP = WorldSetup(scopes=(SCOPE,), services=(PSP, MAILER), lease_ms=LEASE_MS)
REFUND_CHECKS = [once_per_done_run("psp.refund"), at_most_once("mailer.send", key="order")]


async def _refund_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("support", "refund", handler)
    payload = {"order": "o-7310", "cents": 3_450, "email": "ana@example.com"}
    await world.start("cron", SCOPE, "support", "refund", payload=payload)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("refund-delay-mail-no-key", setup=REFUND_SETUP, checks=REFUND_CHECKS)
async def refund_delay_mail_no_key_world(world: World) -> None:
    """Refund an order; after a try that never went through, mail "your refund is delayed"
    without a key: a pass that fails after that mail mails the customer twice."""
    await _refund_world(world, _refund(mail_key=False))


@scenario("refund-delay-mail-keyed", setup=REFUND_SETUP, checks=REFUND_CHECKS)
async def refund_delay_mail_keyed_world(world: World) -> None:
    """Refund an order; the "refund delayed" mail carries the mailer's key: mailed at most
    once."""
    await _refund_world(world, _refund(mail_key=True))


# ================================================================================================
# 5. A charge that takes two timeouts on one key for a stuck key
# ================================================================================================

WALLET = Service(
    "wallet",
    operations={"charge": Operation(_keyed_charge("wl"), idempotency_key="key")},
    latency_ms=(5.0, 60.0),
)


def _topup(rotate: bool) -> Any:
    async def topup(ctx: JobPassContext) -> JobPassResult:
        order = ctx.payload["order"]
        args = {"order": order, "cents": ctx.payload["cents"], "key": f"{order}/charge"}

        async def charge() -> str:
            try:
                made = await call_service(ctx, "wallet", "charge", args, timeout_ms=TIMEOUT_MS)
            except ServiceTimeout:
                try:  # once more with the same key: the wallet answers a charge that ran
                    made = await call_service(ctx, "wallet", "charge", args, timeout_ms=TIMEOUT_MS)
                except ServiceTimeout:
                    if not rotate:
                        raise  # THE FIX: no answer is no answer; the next pass asks again
                    # THE BUG: two timeouts on one key, so the key must be stuck at the wallet:
                    # charge with a fresh one.
                    fresh = {**args, "key": f"{order}/charge-fresh"}
                    made = await call_service(ctx, "wallet", "charge", fresh, timeout_ms=TIMEOUT_MS)
            return str(made["id"])

        await ctx.step("charge", charge)
        return JobPassResult(done=True)

    return topup


TOPUP_SETUP = WorldSetup(scopes=(SCOPE,), services=(WALLET,), lease_ms=LEASE_MS)
TOPUP_CHECKS = [once_per_done_run("wallet.charge")]


async def _topup_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("wallet", "topup", handler)
    payload = {"order": "tp-118", "cents": 5_000}
    await world.start("cron", SCOPE, "wallet", "topup", payload=payload)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("topup-rotate-stuck-key", setup=TOPUP_SETUP, checks=TOPUP_CHECKS)
async def topup_rotate_stuck_key_world(world: World) -> None:
    """Top a wallet up; after two timeouts on one key, charge with a fresh key: two lost
    answers in a row charge twice."""
    await _topup_world(world, _topup(rotate=True))


@scenario("topup-same-key", setup=TOPUP_SETUP, checks=TOPUP_CHECKS)
async def topup_same_key_world(world: World) -> None:
    """Top a wallet up; every try of the order uses its one key: charged once."""
    await _topup_world(world, _topup(rotate=False))
