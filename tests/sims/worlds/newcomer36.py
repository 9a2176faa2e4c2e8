"""Three outside providers that behave like real ones, and a job that trips over each.

Written by a new user from README.md and docs/ alone (docs/simulating-your-jobs.md, "Providers
as they behave"; docs/fault-plans.md; docs/search.md), kept as it was written and tested by
``tests/sims/test_newcomer36.py``.

1. ``psp``: a payment provider whose ``search_payments`` endpoint lags its writes (a search
   index, up to 30 s behind the ledger). The subscription renewal job dedupes its charge by
   searching first and creates the payment WITHOUT an idempotency key ("the search makes it
   safe"). When the create's answer is lost, the pass fails, the retry searches, the index has
   not seen the first payment yet, and the customer pays twice.

       python -m sims run tests/sims/worlds/newcomer36.py:renew-search-first --plan \
           "FaultPlan((DropLeg(drive='cron', operation='psp.create_payment', nth=1, \
           leg='reply'), StaleRead(operation='psp.search_payments', nth=2)))"

   ``renew-keyed`` is the fix: the search stays (a fast path), but the create carries the
   idempotency key ``SUB/PERIOD``, which the provider checks atomically.

2. ``sms``: an SMS provider with a rate limit (5 requests a second, ``retry_after_ms`` on a
   refusal) that declines numbers it cannot reach. The notify job walks its recipients with a
   cursor, one step each; on a rate limit it yields the pass (good: it does not hold its lease
   sleeping) but commits the cursor PAST the recipient that was refused, so that recipient is
   never texted.

       python -m sims run tests/sims/worlds/newcomer36.py:notify-skip-throttled --plan \
           "FaultPlan((RateLimited(service='sms', nth=2, retry_after_ms=1000.0),))"

   ``notify-resume-throttled`` is the fix: the cursor stays AT the refused recipient.

3. ``carrier``: a shipping carrier that creates a label at once and then calls the shop back
   (webhooks to ``carrier-events``) on its own schedule: ``in_transit`` 2 s later, ``delivered``
   5 s later. Each event carries the shipment's version. The endpoint enqueues one run per event
   (one per shipment version); the buggy apply job writes the event's status into the shop's
   order database as it arrives (last arrival wins), so a late, retried or repeated webhook moves
   a delivered order back to an earlier status ("label_created", "in_transit").

       python -m sims run tests/sims/worlds/newcomer36.py:track-last-arrival-wins --plan \
           "FaultPlan((DelayCallback(service='carrier', nth=2, ms=6000.0),))"

   ``track-versioned`` is the fix: one conditional write, ``set_status_if_newer``, which the
   order database applies only when the event's version is newer than the one it holds.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any

# -- the shop's code, which ships: it imports only from ``driver`` ------------------------------
from driver import (
    JobDriver,
    JobPassContext,
    JobPassResult,
    ServiceDeclined,
    ServiceUnavailable,
    StartJobRunInput,
)

# -- the providers' models, the checks and the worlds import ``sims`` ----------------------------
from sims import (
    DriveSpec,
    Operation,
    Service,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    at_most_once,
    call_back,
    later,
    now_ms,
    run_keys,
    scenario,
    service_calls,
    service_states,
)

TIMEOUT_MS = 5_000.0
HORIZON_MS = 300_000
LEASE_MS = 15_000


# =================================================================================================
# 1. A payment provider whose search lags its writes
# =================================================================================================

#: The search index may be this far behind the ledger.
SEARCH_LAG_MS = 30_000.0
SUBSCRIPTION: dict[str, Any] = {"subscription": "sub-1", "period": "2024-06", "cents": 1_999}


def psp_create_payment(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    payments = state["payments"]
    made = {
        "id": f"pay-{len(payments) + 1}",
        "reference": args["reference"],
        "cents": args["cents"],
        "at_ms": now_ms(),
    }
    payments.append(made)
    return made


def psp_search_payments(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """A read: the search index, which the world runs on the state as it stood ``lag`` ago."""
    return {"data": [p for p in state["payments"] if p["reference"] == args["reference"]]}


def _no_payments() -> dict[str, Any]:
    return {"payments": []}


PSP = Service(
    "psp",
    operations={
        "create_payment": Operation(psp_create_payment, idempotent=True),
        "search_payments": Operation(psp_search_payments, lag_ms=(0.0, SEARCH_LAG_MS)),
    },
    state=_no_payments,
    latency_ms=(5.0, 50.0),
    times_ms={"search index lag": SEARCH_LAG_MS},
)


async def renew_search_first(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: dedupe by the provider's search, and create without an idempotency key."""
    reference = f"{ctx.payload['subscription']}/{ctx.payload['period']}"

    async def charge() -> str:
        found = await ctx.call_service(
            "psp", "search_payments", {"reference": reference}, timeout_ms=TIMEOUT_MS
        )
        if found["data"]:
            return str(found["data"][0]["id"])  # "already charged"
        made = await ctx.call_service(
            "psp",
            "create_payment",
            {"reference": reference, "cents": ctx.payload["cents"]},
            timeout_ms=TIMEOUT_MS,
        )
        return str(made["id"])

    await ctx.step("charge", charge)
    return JobPassResult(done=True)


async def renew_keyed(ctx: JobPassContext) -> JobPassResult:
    """The fix: the search is only a fast path; the create carries the period's key."""
    reference = f"{ctx.payload['subscription']}/{ctx.payload['period']}"

    async def charge() -> str:
        found = await ctx.call_service(
            "psp", "search_payments", {"reference": reference}, timeout_ms=TIMEOUT_MS
        )
        if found["data"]:
            return str(found["data"][0]["id"])
        made = await ctx.call_service(
            "psp",
            "create_payment",
            {"reference": reference, "cents": ctx.payload["cents"]},
            timeout_ms=TIMEOUT_MS,
            idempotency_key=reference,
        )
        return str(made["id"])

    await ctx.step("charge", charge)
    return JobPassResult(done=True)


def charged_once_per_period(trace: Trace) -> list[UserFinding]:
    """The renewal's period is charged exactly once when its run ended done, at most once
    otherwise: judged on the provider's ledger at the world's end."""
    payments = service_states(trace)["psp"]["payments"]
    reference = f"{SUBSCRIPTION['subscription']}/{SUBSCRIPTION['period']}"
    times = sum(1 for p in payments if p["reference"] == reference)
    _, status = run_keys(trace)
    ended = status.get(f"billing/renew/{SUBSCRIPTION['subscription']}", "never started")
    if times == 1 or (times == 0 and ended != "done"):
        return []
    made = [c for c in service_calls(trace) if c.op == "psp.create_payment" and c.effect]
    last = made[-1] if made else None
    stale = [
        e for e in trace.of("svc.exec") if e.get("op") == "psp.search_payments" and e.get("stale")
    ]
    why = f"; {len(stale)} search(es) answered from a stale index" if stale else ""
    return [
        UserFinding(
            f"{reference} was charged {times} times (its run ended {ended}){why}",
            at_ms=None if last is None else last.ran_ms,
            run=None if last is None else last.run,
        )
    ]


PSP_SETUP = WorldSetup(scopes=("billing",), services=(PSP,), lease_ms=LEASE_MS)


async def _renew_world(world: World, handler: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=2.0, reply_ms=2.0))
    world.add_job("billing", "renew", handler)
    world.every("cron", "billing", every_ms=1_000, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", "billing", every_ms=1_000, first_ms=500, until_ms=HORIZON_MS)
    await world.start(
        "cron",
        "billing",
        "billing",
        "renew",
        payload=SUBSCRIPTION,
        instance=SUBSCRIPTION["subscription"],
    )
    await world.settle(("billing",), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario(
    "renew-search-first",
    setup=PSP_SETUP,
    checks=[charged_once_per_period, at_most_once("psp.create_payment", key="reference")],
)
async def renew_search_first_world(world: World) -> None:
    """Renew a subscription, deduping the charge by the provider's lagging search: a retry
    after a lost answer charges twice."""
    await _renew_world(world, renew_search_first)


@scenario(
    "renew-keyed",
    setup=PSP_SETUP,
    checks=[charged_once_per_period, at_most_once("psp.create_payment", key="reference")],
)
async def renew_keyed_world(world: World) -> None:
    """Renew a subscription, the charge keyed by the period: once, whatever the search says."""
    await _renew_world(world, renew_keyed)


# =================================================================================================
# 2. An SMS provider with a rate limit
# =================================================================================================

CAMPAIGN = "outage-2024-06-01"
RECIPIENTS = ["+15550001", "+15550002", "not-a-number", "+15550004"]


def sms_send(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    if not args["to"].startswith("+"):
        raise ServiceDeclined(f"cannot reach {args['to']}", code="invalid_number")
    state["outbox"].append({"to": args["to"], "text": args["text"]})
    return {"sid": f"sm-{len(state['outbox'])}", "to": args["to"]}


def _no_messages() -> dict[str, Any]:
    return {"outbox": []}


SMS = Service(
    "sms",
    operations={"send": Operation(sms_send, idempotent=True)},
    state=_no_messages,
    latency_ms=(5.0, 40.0),
    rate_limit=(5, 1_000.0),
)


async def _text(ctx: JobPassContext, to: str) -> dict[str, Any]:
    """One recipient's step body: texted, declined by the provider (an answer, not a failure), or
    throttled (a rate limit: the provider said when to come back). An outage (no retry-after) and
    a timeout leave the body: the step fails, and the pass is retried by the job's policy.

    The refusal is caught HERE, in the body: a step that raises fails its pass even when the
    handler catches the exception around ``await ctx.step(...)`` (protocol.md, "How a pass
    ends")."""
    try:
        answer = await ctx.call_service(
            "sms",
            "send",
            {"to": to, "text": ctx.payload["text"]},
            timeout_ms=TIMEOUT_MS,
            idempotency_key=f"{ctx.payload['campaign']}/{to}",
        )
    except ServiceDeclined:
        return {"declined": True}
    except ServiceUnavailable as refused:
        if refused.retry_after_ms is None:
            raise  # the provider is down: the step fails, and the run is tried again later
        return {"throttled_ms": refused.retry_after_ms}
    return {"sid": answer["sid"]}


def notify_job(skip_refused: bool) -> Any:
    async def notify(ctx: JobPassContext) -> JobPassResult:
        recipients = ctx.payload["to"]
        start = int(ctx.cursor or 0)
        for i in range(start, len(recipients)):
            said = await ctx.step(f"sms-{i}", partial(_text, ctx, recipients[i]))
            if "throttled_ms" in said:
                # Throttled: commit what is done, give the lease back, come back on a later tick
                # (the step's memo is dropped with the commit, so the next pass asks again).
                if skip_refused:
                    return JobPassResult(cursor=i + 1)  # THE BUG: "i is handled"; it is not
                return JobPassResult(cursor=i)  # the fix: resume AT the refused recipient
            ctx.count("declined" if "declined" in said else "texted")
        return JobPassResult(cursor=len(recipients), done=True)

    return notify


def texted_once(trace: Trace) -> list[UserFinding]:
    """Every reachable recipient got the text exactly once (at most once if the run did not end
    done); an unreachable one never."""
    outbox = service_states(trace)["sms"]["outbox"]
    texted = Counter(m["to"] for m in outbox)
    _, status = run_keys(trace)
    ended = status.get(f"alerts/notify/{CAMPAIGN}", "never started")
    # When each recipient was last turned away (a refused call never ran: its ``sent_ms``).
    refused_at = {
        c.args["to"]: c.sent_ms
        for c in service_calls(trace)
        if c.op == "sms.send" and c.refused and not c.code
    }
    found = []
    for to in RECIPIENTS:
        want = 1 if to.startswith("+") else 0
        got = texted[to]
        if got == want or (got == 0 and ended != "done"):
            continue
        found.append(
            UserFinding(
                f"{to} was texted {got} times, not {want} (the notify run ended {ended})",
                at_ms=refused_at.get(to),
            )
        )
    return found


SMS_SETUP = WorldSetup(scopes=("alerts",), services=(SMS,), lease_ms=LEASE_MS)


async def _notify_world(world: World, skip_refused: bool) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=2.0, reply_ms=2.0))
    world.add_job("alerts", "notify", notify_job(skip_refused))
    world.every("cron", "alerts", every_ms=1_000, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", "alerts", every_ms=1_000, first_ms=500, until_ms=HORIZON_MS)
    payload = {"campaign": CAMPAIGN, "text": "Service restored.", "to": RECIPIENTS}
    await world.start("cron", "alerts", "alerts", "notify", payload=payload, instance=CAMPAIGN)
    await world.settle(("alerts",), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("notify-skip-throttled", setup=SMS_SETUP, checks=[texted_once])
async def notify_skip_throttled_world(world: World) -> None:
    """Text an alert to each recipient; a rate-limited recipient is skipped by the cursor."""
    await _notify_world(world, skip_refused=True)


@scenario("notify-resume-throttled", setup=SMS_SETUP, checks=[texted_once])
async def notify_resume_throttled_world(world: World) -> None:
    """Text an alert to each recipient; a rate limit resumes at the refused recipient."""
    await _notify_world(world, skip_refused=False)


# =================================================================================================
# 3. A carrier that calls the shop back (webhooks), and the shop's order database
# =================================================================================================

ORDERS = ("o-17", "o-18")
#: The carrier's own schedule after a label is created.
IN_TRANSIT_MS = 2_000.0
DELIVERED_MS = 5_000.0
#: How long after a failed delivery the carrier sends a webhook again.
CALLBACK_RETRIES_MS = (1_000.0, 5_000.0, 20_000.0)


def _event(shipment: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": f"shipment.{shipment['status']}",
        "shipment": shipment["id"],
        "order": shipment["order"],
        "status": shipment["status"],
        "version": shipment["version"],
    }


def carrier_create_shipment(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    shipments = state["shipments"]
    made = {
        "id": f"shp-{len(shipments) + 1}",
        "order": args["order"],
        "status": "label_created",
        "version": 1,
    }
    shipments.append(made)
    call_back("carrier-events", _event(made))
    later(IN_TRANSIT_MS, partial(carrier_advance, made["id"], "in_transit"), name="in_transit")
    later(DELIVERED_MS, partial(carrier_advance, made["id"], "delivered"), name="delivered")
    return dict(made)


def carrier_advance(shipment_id: str, status: str, state: dict[str, Any]) -> None:
    shipment = next(s for s in state["shipments"] if s["id"] == shipment_id)
    shipment["status"] = status
    shipment["version"] += 1
    call_back("carrier-events", _event(shipment))


def _no_shipments() -> dict[str, Any]:
    return {"shipments": []}


CARRIER = Service(
    "carrier",
    operations={"create_shipment": Operation(carrier_create_shipment, idempotent=True)},
    state=_no_shipments,
    latency_ms=(5.0, 50.0),
    times_ms={"in transit": IN_TRANSIT_MS, "delivered": DELIVERED_MS},
    callback_retries_ms=CALLBACK_RETRIES_MS,
)


def orders_set_status(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """UPDATE orders SET status = ? WHERE id = ?"""
    row = state["orders"].setdefault(args["order"], {"status": None, "version": 0, "writes": 0})
    row["status"] = args["status"]
    row["version"] = args["version"]
    row["writes"] += 1
    return dict(row)


def orders_set_status_if_newer(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """UPDATE orders SET status = ?, version = ? WHERE id = ? AND version < ?"""
    row = state["orders"].setdefault(args["order"], {"status": None, "version": 0, "writes": 0})
    if args["version"] > row["version"]:
        row["status"] = args["status"]
        row["version"] = args["version"]
        row["writes"] += 1
        return {**row, "applied": True}
    return {**row, "applied": False}


def _no_orders() -> dict[str, Any]:
    return {"orders": {}}


ORDERS_DB = Service(
    "orders",
    operations={
        "set_status": orders_set_status,
        "set_status_if_newer": orders_set_status_if_newer,
    },
    state=_no_orders,
    latency_ms=(1.0, 5.0),
)


async def ship(ctx: JobPassContext) -> JobPassResult:
    """Buy the order's label at the carrier."""
    order = ctx.payload["order"]

    async def label() -> str:
        made = await ctx.call_service(
            "carrier",
            "create_shipment",
            {"order": order},
            timeout_ms=TIMEOUT_MS,
            idempotency_key=f"{order}/ship",
        )
        return str(made["id"])

    await ctx.step("label", label)
    return JobPassResult(done=True)


async def carrier_events(driver: JobDriver, event: dict[str, Any]) -> None:
    """The webhook's endpoint: enqueue one run per shipment version (the web handler returns
    200 at once; the run applies the event)."""
    start = StartJobRunInput(
        module_id="tracking",
        job="apply",
        instance=f"{event['shipment']}/v{event['version']}",
        payload=event,
    )
    await driver.start_job_run("shop", start)


async def apply_last_arrival_wins(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: the event's status is written as it arrives; a late one overwrites a newer."""
    event = ctx.payload

    async def apply() -> None:
        await ctx.call_service(
            "orders",
            "set_status",
            {"order": event["order"], "status": event["status"], "version": event["version"]},
            timeout_ms=TIMEOUT_MS,
        )

    await ctx.step("apply", apply)
    return JobPassResult(done=True)


async def apply_versioned(ctx: JobPassContext) -> JobPassResult:
    """The fix: one conditional write; an older version changes nothing."""
    event = ctx.payload

    async def apply() -> bool:
        said = await ctx.call_service(
            "orders",
            "set_status_if_newer",
            {"order": event["order"], "status": event["status"], "version": event["version"]},
            timeout_ms=TIMEOUT_MS,
        )
        return bool(said["applied"])

    await ctx.step("apply", apply)
    return JobPassResult(done=True)


def shop_agrees_with_carrier(trace: Trace) -> list[UserFinding]:
    """At the world's end, the shop's order database says what the carrier says of each
    order's shipment. Excused only where an operator sees why: the run that was to apply the
    carrier's latest event ended failed (the order database down past its attempts), or the
    carrier gave up delivering that event."""
    states = service_states(trace)
    carrier = {s["order"]: s for s in states["carrier"]["shipments"]}
    shop = states["orders"]["orders"]
    _, status = run_keys(trace)
    sent = {e["cb"]: e["payload"] for e in trace.of("svc.callback")}
    gave_up = {
        (sent[e["cb"]]["shipment"], sent[e["cb"]]["version"])
        for e in trace.of("svc.callback.abandoned")
    }
    writes = {
        c.args["order"]: c
        for c in service_calls(trace)
        if c.service == "orders" and c.effect and c.ran_ms is not None
    }
    found = []
    for order in ORDERS:
        truth = carrier.get(order)
        if truth is None:
            continue  # never shipped: nothing to agree on
        ours = shop.get(order, {"status": "nothing", "version": 0})
        if ours["status"] == truth["status"]:
            continue
        latest = f"tracking/apply/{truth['id']}/v{truth['version']}"
        ended = status.get(latest, "never started")
        if ended == "failed" or (truth["id"], truth["version"]) in gave_up:
            continue
        last = writes.get(order)
        found.append(
            UserFinding(
                f"order {order}: the carrier says {truth['status']} (v{truth['version']}), "
                f"the shop says {ours['status']} (v{ours['version']}); the run applying "
                f"v{truth['version']} "
                f"{'ended ' + ended if ended != 'never started' else 'never started'}",
                at_ms=None if last is None else last.ran_ms,
                run=None if last is None else last.run,
            )
        )
    return found


TRACK_SETUP = WorldSetup(
    scopes=("shop",),
    drives=("cron", "alarm", "web"),
    services=(CARRIER, ORDERS_DB),
    lease_ms=LEASE_MS,
)


async def _track_world(world: World, apply: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="web", request_ms=2.0, reply_ms=2.0))
    world.add_job("shop", "ship", ship)
    world.add_job("tracking", "apply", apply)
    world.add_endpoint("carrier-events", carrier_events, drive="web")
    world.every("cron", "shop", every_ms=1_000, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", "shop", every_ms=1_000, first_ms=500, until_ms=HORIZON_MS)
    for order in ORDERS:
        await world.start("cron", "shop", "shop", "ship", payload={"order": order}, instance=order)
    await world.settle(("shop",), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("track-last-arrival-wins", setup=TRACK_SETUP, checks=[shop_agrees_with_carrier])
async def track_last_arrival_wins_world(world: World) -> None:
    """Track shipments from the carrier's webhooks, the last to arrive winning: a late or
    repeated webhook moves a delivered order back."""
    await _track_world(world, apply_last_arrival_wins)


@scenario("track-versioned", setup=TRACK_SETUP, checks=[shop_agrees_with_carrier])
async def track_versioned_world(world: World) -> None:
    """Track shipments from the carrier's webhooks, each applied only if its version is newer."""
    await _track_world(world, apply_versioned)
