"""Five jobs against their outside world (payment providers, a warehouse, a CRM, a ledger), each
with the bug a first version of it is likely to have, and the fix.

Each job lives in one world: one scope, two drives (``cron`` and ``alarm``) ticking every second,
and the services the job talks to, declared with ``Service``. Every buggy scenario is paired with
its fixed one:

1. ``renewal-try-keys`` / ``renewal-same-key``: a subscription renewal with dunning. The card
   provider answers a declined charge with a result (``{"status": "declined"}``) and replays that
   decline for the same idempotency key, so the job makes one key per try. The bug: it takes a
   timeout for a decline, moves to the next try with a new key, and the customer pays twice when
   the first charge ran. The fix moves to a new key only on a decline it has read.
2. ``fulfil-cancel-on-timeout`` / ``fulfil-retry-same-order``: authorize a card, ship at the
   warehouse, capture. The bug: when the warehouse does not answer, the job compensates: it
   cancels the shipment "in case" and voids the card hold. A cancel of a shipment that is not
   there yet undoes nothing, and when the ship request lands later the goods go out unpaid. The
   fix never compensates an ambiguous answer; it asks the warehouse again with the same order key.
3. ``onboard-set-stage`` / ``onboard-advance-stage``: onboard a customer and keep the CRM's
   lifecycle stage in step (``onboarding``, then ``active``). The bug: the stage is written
   blindly, so a write of ``onboarding`` from a pass that lost its run (or gave its request up)
   lands after the pass that took over wrote ``active``, and the CRM says ``onboarding`` for good.
   The fix uses the CRM's forward-only stage update.
4. ``invoice-search-then-create`` / ``invoice-request-id``: issue an invoice at the accounting
   ledger. On a timeout the job reconciles: it searches the ledger for the order's invoice and
   creates it only when none is there. The bug: the create has no request id, so a first create
   still on the wire lands after the search said "none" and the second create, and the order has
   two invoices. The fix sends the ledger's request id, the same on every create of the order.
5. ``checkout-fallback-on-refusal`` / ``checkout-close-then-fallback``: a checkout that pays
   through acme, and through bolt when acme refuses. A refusal is honest about the request it
   answers, not about the earlier ones: when an earlier acme charge timed out (it ran) and a later
   one is refused, the job pays at bolt too. The fix closes the order's key at acme (acme's
   cancel-by-key answers whether a charge with it exists, and refuses any later one) before it
   turns to bolt.

Each scenario is checked by a check of its own (or a ready-made one) that says what "correct"
means for the job. Run one, and search for the plan that breaks it:

    python -m sims run tests/sims/worlds/outside_world_jobs.py:renewal-try-keys
    python -m sims explore tests/sims/worlds/outside_world_jobs.py:renewal-try-keys
    python -m sims explore tests/sims/worlds/outside_world_jobs.py:renewal-same-key --examples 3000

A plan that breaks each buggy variant, every seed (its fix stays clean under it):

1. The first try's charge is given up on and lands 5 s later; the job took the timeout for a
   decline, tried again with new keys (declined, then paid), and the late first charge pays too:
   ``FaultPlan((LateRequest(drive='cron', operation='payments.charge', nth=1, ms=5000.0),))``
2. The ship request is given up on; the job cancels (nothing to cancel yet) and voids the hold;
   the request lands 5 s later and ships:
   ``FaultPlan((LateRequest(drive='cron', operation='warehouse.ship', nth=1, ms=5000.0),))``
3. The reply to the cron's first step boundary is held until the alarm, which took the run over,
   has committed it; the stale cron pass then writes ``onboarding`` over ``active``:
   ``FaultPlan((HoldLeg(drive='cron', operation='begin_step', nth=1, leg='reply',
   until='commit', max_ms=300000.0),))``
4. The first create is given up on; the search finds nothing, the second create makes an
   invoice, and the first lands 5.6 s later and makes another:
   ``FaultPlan((LateRequest(drive='cron', operation='ledger.create_invoice', nth=1, ms=5600.0),))``
5. acme charges and its reply is lost (a timeout); acme is down when the run is tried again, and
   bolt charges too. Two faults: ``FaultPlan((DropLeg(drive='cron', operation='acme.charge',
   nth=1, leg='reply'), ServiceOutage(service='acme', from_ms=5000.0, to_ms=60000.0)))``. The
   default ``explore`` (300 worlds) does not find this at seed 1; it finds one-fault plans at the
   seeds where acme's own refusals (``refuses=0.05``) refuse the retry.

Run one with ``python -m sims run tests/sims/worlds/outside_world_jobs.py:NAME --plan "PLAN"``.
"""

from __future__ import annotations

from typing import Any

from sims import (
    DriveSpec,
    JobPassContext,
    JobPassResult,
    Operation,
    Service,
    ServiceError,
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


# ================================================================================================
# 1. A subscription renewal: a timeout taken for a decline
# ================================================================================================
#
# The card provider runs each charge once per idempotency key and answers a repeat of the key with
# the first answer, a decline included (as real providers do). So a dunning job that wants to try
# again after a decline needs a new key per try. The card below declines its first charge
# (insufficient funds) and takes the next.


def payments_state() -> dict[str, Any]:
    return {"charges": [], "declines_left": 1}


def payments_charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    number = len(state["charges"]) + 1
    if state["declines_left"] > 0:
        state["declines_left"] -= 1
        status = "declined"
    else:
        status = "succeeded"
    state["charges"].append({"id": f"ch-{number}", "key": args["key"], "status": status})
    return {
        "id": f"ch-{number}",
        "status": status,
        "subscription": args["subscription"],
        "period": args["period"],
    }


PAYMENTS = Service(
    "payments",
    operations={"charge": Operation(payments_charge, idempotency_key="key")},
    state=payments_state,
    latency_ms=(5.0, 60.0),
)

MAX_TRIES = 4


def _renewal_args(ctx: JobPassContext, tries: int) -> dict[str, Any]:
    sub, period = ctx.payload["subscription"], ctx.payload["period"]
    return {
        "subscription": sub,
        "period": period,
        "cents": ctx.payload["cents"],
        "key": f"{sub}/{period}/try-{tries}",
    }


def _after_try(ctx: JobPassContext, tries: int, outcome: dict[str, Any]) -> JobPassResult:
    if outcome["status"] == "succeeded":
        ctx.count("renewed")
        return JobPassResult(cursor={"tries": tries + 1}, done=True)
    ctx.count("declined")
    if tries + 1 >= MAX_TRIES:  # dunning is over: the subscription lapses
        return JobPassResult(cursor={"tries": tries + 1}, done=True)
    return JobPassResult(cursor={"tries": tries + 1})  # the next pass tries again


async def renew_try_keys(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: any error is a failed try, and the next try has a new key."""
    tries = ctx.cursor["tries"] if ctx.cursor else 0
    args = _renewal_args(ctx, tries)

    async def charge() -> dict[str, Any]:
        try:
            made = await call_service(ctx, "payments", "charge", args, timeout_ms=TIMEOUT_MS)
        except ServiceError as error:  # down, refused or no answer: this try did not work
            return {"status": "failed", "error": str(error)}
        return {"status": made["status"], "charge": made["id"]}

    outcome = await ctx.step(f"charge-try-{tries}", charge)
    return _after_try(ctx, tries, outcome)


async def renew_same_key(ctx: JobPassContext) -> JobPassResult:
    """The fix: only a decline the job has read moves it to the next key. A timeout or a refusal
    fails the step, and the next pass asks again with the same key, which the provider answers
    from the key if the charge ran."""
    tries = ctx.cursor["tries"] if ctx.cursor else 0
    args = _renewal_args(ctx, tries)

    async def charge() -> dict[str, Any]:
        made = await call_service(ctx, "payments", "charge", args, timeout_ms=TIMEOUT_MS)
        return {"status": made["status"], "charge": made["id"]}

    outcome = await ctx.step(f"charge-try-{tries}", charge)
    return _after_try(ctx, tries, outcome)


def renewed_at_most_once(trace: Trace) -> list[UserFinding]:
    """A subscription's period is charged successfully at most once."""
    taken: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for event in trace.of("svc.exec"):
        result = event.get("result")
        if (
            event["op"] == "payments.charge"
            and event["effect"]
            and isinstance(result, dict)
            and result.get("status") == "succeeded"
        ):
            taken.setdefault((result["subscription"], result["period"]), []).append(event)
    return [
        UserFinding(
            f"{sub} was charged {len(events)} times for {period}: "
            + ", ".join(f"{e['result']['id']} by {e['drive']} at {e['t']} ms" for e in events),
            at_ms=events[1]["t"],
            run=events[1]["run"],
        )
        for (sub, period), events in sorted(taken.items())
        if len(events) > 1
    ]


RENEWAL_SETUP = WorldSetup(scopes=(SCOPE,), services=(PAYMENTS,), lease_ms=LEASE_MS)
RENEWAL_PAYLOAD = {"subscription": "sub-42", "period": "2026-10", "cents": 1_900}


async def _renewal_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("billing", "renew", handler)
    await world.start("cron", SCOPE, "billing", "renew", payload=RENEWAL_PAYLOAD)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("renewal-try-keys", setup=RENEWAL_SETUP, checks=[renewed_at_most_once])
async def renewal_try_keys_world(world: World) -> None:
    """Renew a subscription with dunning, one key per try: a timeout taken for a decline charges
    the period twice."""
    await _renewal_world(world, renew_try_keys)


@scenario("renewal-same-key", setup=RENEWAL_SETUP, checks=[renewed_at_most_once])
async def renewal_same_key_world(world: World) -> None:
    """Renew a subscription with dunning, a new key only after a decline it has read: charged
    at most once."""
    await _renewal_world(world, renew_same_key)


# ================================================================================================
# 2. Fulfilment: a compensation that undoes a call that has not run yet
# ================================================================================================
#
# The card holds the money (authorize), the warehouse ships, the card captures the hold. The
# warehouse ships at most once per order (its order number is the idempotency key), and its
# ``cancel`` cancels the order's shipment if there is one, putting the stock back.


def warehouse_state() -> dict[str, Any]:
    return {"stock": {"mug": 3, "kettle": 0}, "shipments": []}


def warehouse_ship(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    if state["stock"].get(args["sku"], 0) < args["qty"]:
        return {"order": args["order"], "shipped": False, "reason": "out of stock"}
    state["stock"][args["sku"]] -= args["qty"]
    shipment = {"id": f"sh-{len(state['shipments']) + 1}", "order": args["order"]}
    state["shipments"].append({**shipment, "sku": args["sku"], "qty": args["qty"], "live": True})
    return {**shipment, "shipped": True}


def warehouse_cancel(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    for shipment in state["shipments"]:
        if shipment["order"] == args["order"] and shipment["live"]:
            shipment["live"] = False
            state["stock"][shipment["sku"]] += shipment["qty"]
            return {"order": args["order"], "cancelled": True, "shipment": shipment["id"]}
    return {"order": args["order"], "cancelled": False}


def warehouse_find(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any] | None:
    for shipment in state["shipments"]:
        if shipment["order"] == args["order"] and shipment["live"]:
            return {"id": shipment["id"], "order": shipment["order"], "shipped": True}
    return None


WAREHOUSE = Service(
    "warehouse",
    operations={
        "ship": Operation(warehouse_ship, idempotency_key="order"),
        "cancel": warehouse_cancel,
        "find": warehouse_find,
    },
    state=warehouse_state,
    latency_ms=(10.0, 120.0),
)


def card_authorize(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    auths = state.setdefault("auths", [])
    auth = {"id": f"au-{len(auths) + 1}", "order": args["order"], "cents": args["cents"]}
    auths.append({**auth, "state": "held"})
    return auth


def _auth(state: dict[str, Any], auth_id: str) -> dict[str, Any]:
    auths: list[dict[str, Any]] = state.get("auths", [])
    for auth in auths:
        if auth["id"] == auth_id:
            return auth
    raise ServiceRefused(f"no authorization {auth_id}")


def card_capture(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    auth = _auth(state, args["auth"])
    if auth["state"] == "held":
        auth["state"] = "captured"
    return {"auth": auth["id"], "order": auth["order"], "state": auth["state"]}


def card_void(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    auth = _auth(state, args["auth"])
    if auth["state"] == "held":
        auth["state"] = "voided"
    return {"auth": auth["id"], "order": auth["order"], "state": auth["state"]}


CARD = Service(
    "card",
    operations={
        "authorize": Operation(card_authorize, idempotency_key="key"),
        "capture": card_capture,
        "void": card_void,
    },
    latency_ms=(5.0, 50.0),
)


async def _authorize(ctx: JobPassContext) -> dict[str, Any]:
    order = ctx.payload["order"]
    args = {"order": order, "cents": ctx.payload["cents"], "key": f"{order}/auth"}
    auth: dict[str, Any] = await call_service(ctx, "card", "authorize", args, timeout_ms=TIMEOUT_MS)
    return auth


def _ship_args(ctx: JobPassContext) -> dict[str, Any]:
    return {"order": ctx.payload["order"], "sku": ctx.payload["sku"], "qty": ctx.payload["qty"]}


async def fulfil_cancel_on_timeout(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: when the warehouse does not answer, cancel the shipment in case it was made, and
    release the card hold."""

    async def fulfil() -> str:
        auth = await _authorize(ctx)
        try:
            shipped = await call_service(
                ctx, "warehouse", "ship", _ship_args(ctx), timeout_ms=TIMEOUT_MS
            )
        except ServiceError:
            # The warehouse did not take the order: undo whatever it may have half done, and
            # give the customer's money back.
            await call_service(
                ctx, "warehouse", "cancel", {"order": ctx.payload["order"]}, timeout_ms=TIMEOUT_MS
            )
            await call_service(ctx, "card", "void", {"auth": auth["id"]}, timeout_ms=TIMEOUT_MS)
            return "cancelled"
        if not shipped["shipped"]:
            await call_service(ctx, "card", "void", {"auth": auth["id"]}, timeout_ms=TIMEOUT_MS)
            return "out-of-stock"
        await call_service(ctx, "card", "capture", {"auth": auth["id"]}, timeout_ms=TIMEOUT_MS)
        return "shipped"

    ctx.count(await ctx.step("fulfil", fulfil))
    return JobPassResult(done=True)


async def fulfil_retry_same_order(ctx: JobPassContext) -> JobPassResult:
    """The fix: an error from the warehouse fails the step, and the next pass ships again with the
    same order number, which the warehouse answers from the key if it shipped. The hold is voided
    only on a definite "out of stock"."""

    async def fulfil() -> str:
        auth = await _authorize(ctx)
        shipped = await call_service(
            ctx, "warehouse", "ship", _ship_args(ctx), timeout_ms=TIMEOUT_MS
        )
        if not shipped["shipped"]:
            await call_service(ctx, "card", "void", {"auth": auth["id"]}, timeout_ms=TIMEOUT_MS)
            return "out-of-stock"
        await call_service(ctx, "card", "capture", {"auth": auth["id"]}, timeout_ms=TIMEOUT_MS)
        return "shipped"

    ctx.count(await ctx.step("fulfil", fulfil))
    return JobPassResult(done=True)


def paid_for_what_shipped(trace: Trace) -> list[UserFinding]:
    """Per order: at most one shipment left standing; a shipment standing means the card hold was
    captured (never voided, and captured by the time the run ended done); money captured means a
    shipment standing."""
    status = _run_status(trace)
    shipped: dict[str, int] = {}
    card: dict[str, str] = {}
    run_of: dict[str, str] = {}
    last_at: dict[str, float] = {}
    for event in trace.of("svc.exec"):
        result = event.get("result")
        if not event["effect"] or not isinstance(result, dict):
            continue
        order = str(result["order"])
        run_of[order] = event["run"]
        last_at[order] = event["t"]
        if event["op"] == "warehouse.ship" and result.get("shipped"):
            shipped[order] = shipped.get(order, 0) + 1
        elif event["op"] == "warehouse.cancel" and result.get("cancelled"):
            shipped[order] = shipped.get(order, 0) - 1
        elif event["op"] in ("card.capture", "card.void"):
            card[order] = str(result["state"])
    findings = []
    for order, run in sorted(run_of.items()):
        standing, money = shipped.get(order, 0), card.get(order, "held")
        wrong = None
        if standing > 1:
            wrong = f"{standing} shipments stand"
        elif standing == 1 and money == "voided":
            wrong = "it shipped and its card hold was voided: shipped unpaid"
        elif standing == 1 and money != "captured" and status.get(run) == "done":
            wrong = "it shipped, and the run ended done without capturing the hold"
        elif standing <= 0 and money == "captured":
            wrong = "the card was captured and nothing shipped"
        if wrong:
            findings.append(UserFinding(f"order {order}: {wrong}", at_ms=last_at[order], run=run))
    return findings


FULFIL_SETUP = WorldSetup(scopes=(SCOPE,), services=(CARD, WAREHOUSE), lease_ms=LEASE_MS)


async def _fulfil_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("orders", "fulfil", handler)
    mug = {"order": "o-1", "sku": "mug", "qty": 1, "cents": 1_200}
    kettle = {"order": "o-2", "sku": "kettle", "qty": 1, "cents": 4_500}
    await world.start("cron", SCOPE, "orders", "fulfil", payload=mug, instance="o-1")
    await world.start("cron", SCOPE, "orders", "fulfil", payload=kettle, instance="o-2")
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("fulfil-cancel-on-timeout", setup=FULFIL_SETUP, checks=[paid_for_what_shipped])
async def fulfil_cancel_on_timeout_world(world: World) -> None:
    """Authorize, ship, capture; on a warehouse timeout cancel and void: a ship request that lands
    after the cancel goes out unpaid."""
    await _fulfil_world(world, fulfil_cancel_on_timeout)


@scenario("fulfil-retry-same-order", setup=FULFIL_SETUP, checks=[paid_for_what_shipped])
async def fulfil_retry_same_order_world(world: World) -> None:
    """Authorize, ship, capture; on a warehouse error ship again with the same order key: every
    shipment paid, nothing paid unshipped."""
    await _fulfil_world(world, fulfil_retry_same_order)


# ================================================================================================
# 3. Onboarding: a stale pass's late stage write
# ================================================================================================
#
# The CRM keeps each customer's lifecycle stage. ``set_stage`` writes it as given; ``advance_stage``
# moves it forward only (a stage earlier than the one stored changes nothing). The accounts service
# provisions the customer's workspace, once per customer.

STAGES = ("lead", "onboarding", "active")


def crm_set_stage(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    stages = state.setdefault("stages", {})
    stages[args["customer"]] = args["stage"]
    return {"customer": args["customer"], "stage": args["stage"]}


def crm_advance_stage(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    now = state.get("stages", {}).get(args["customer"], "lead")
    if STAGES.index(args["stage"]) > STAGES.index(now):
        state.setdefault("stages", {})[args["customer"]] = args["stage"]
        now = args["stage"]
    return {"customer": args["customer"], "stage": now}


def accounts_provision(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    workspaces = state.setdefault("workspaces", [])
    workspace = {"id": f"ws-{len(workspaces) + 1}", "customer": args["customer"]}
    workspaces.append({**workspace, "plan": args["plan"]})
    return workspace


CRM = Service(
    "crm",
    operations={"set_stage": crm_set_stage, "advance_stage": crm_advance_stage},
    latency_ms=(10.0, 150.0),
)
ACCOUNTS = Service(
    "accounts",
    operations={"provision": Operation(accounts_provision, idempotency_key="customer")},
    latency_ms=(20.0, 400.0),
)


def _onboard(stage_op: str) -> Any:
    async def onboard(ctx: JobPassContext) -> JobPassResult:
        customer, plan = ctx.payload["customer"], ctx.payload["plan"]

        def stage(name: str) -> Any:
            async def body() -> str:
                # The CRM is ours and fast: no timeout on it.
                await call_service(ctx, "crm", stage_op, {"customer": customer, "stage": name})
                return name

            return body

        async def provision() -> str:
            args = {"customer": customer, "plan": plan}
            made = await call_service(ctx, "accounts", "provision", args, timeout_ms=TIMEOUT_MS)
            return str(made["id"])

        await ctx.step("stage-onboarding", stage("onboarding"))
        await ctx.step("provision", provision)
        await ctx.step("stage-active", stage("active"))
        return JobPassResult(done=True)

    return onboard


def stage_ends_active(trace: Trace) -> list[UserFinding]:
    """A customer whose onboarding run ended done is ``active`` at the CRM: the last stage write
    that ran says so."""
    status = _run_status(trace)
    last: dict[str, dict[str, Any]] = {}
    run_of: dict[str, str] = {}
    for event in trace.of("svc.exec"):
        result = event.get("result")
        if event["op"] in ("crm.set_stage", "crm.advance_stage") and isinstance(result, dict):
            last[result["customer"]] = event
            run_of[result["customer"]] = event["run"]
    return [
        UserFinding(
            f"customer {customer}'s onboarding ended done, and the CRM says "
            f"{event['result']['stage']!r}: the last stage write was {event['drive']}'s at "
            f"{event['t']} ms",
            at_ms=event["t"],
            run=run_of[customer],
        )
        for customer, event in sorted(last.items())
        if status.get(run_of[customer]) == "done" and event["result"]["stage"] != "active"
    ]


ONBOARD_SETUP = WorldSetup(scopes=(SCOPE,), services=(CRM, ACCOUNTS), lease_ms=LEASE_MS)


async def _onboard_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("accounts", "onboard", handler)
    payload = {"customer": "cu-9", "plan": "team"}
    await world.start("cron", SCOPE, "accounts", "onboard", payload=payload)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario(
    "onboard-set-stage",
    setup=ONBOARD_SETUP,
    checks=[stage_ends_active, once_per_done_run("accounts.provision")],
)
async def onboard_set_stage_world(world: World) -> None:
    """Onboard a customer, writing the CRM stage blindly: a late write of an earlier stage
    leaves the customer in onboarding."""
    await _onboard_world(world, _onboard("set_stage"))


@scenario(
    "onboard-advance-stage",
    setup=ONBOARD_SETUP,
    checks=[stage_ends_active, once_per_done_run("accounts.provision")],
)
async def onboard_advance_stage_world(world: World) -> None:
    """Onboard a customer, moving the CRM stage forward only: active at the end."""
    await _onboard_world(world, _onboard("advance_stage"))


# ================================================================================================
# 4. Invoicing: a reconciliation that reads before a late create lands
# ================================================================================================
#
# The ledger numbers each invoice it creates. A create may carry a ``request_id``: a repeat of one
# is answered with the first invoice (the ledger's idempotency); without one, every create makes
# an invoice. ``search`` finds the invoices of a reference.


def ledger_create(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    invoices = state.setdefault("invoices", [])
    invoice = {"number": f"INV-{1000 + len(invoices)}", "reference": args["reference"]}
    invoices.append({**invoice, "lines": args["lines"]})
    return invoice


def ledger_search(state: dict[str, Any], args: dict[str, Any]) -> list[dict[str, Any]]:
    invoices: list[dict[str, Any]] = state.get("invoices", [])
    return [
        {"number": i["number"], "reference": i["reference"]}
        for i in invoices
        if i["reference"] == args["reference"]
    ]


LEDGER = Service(
    "ledger",
    operations={
        "create_invoice": Operation(ledger_create, idempotency_key="request_id"),
        "search": ledger_search,
    },
    latency_ms=(20.0, 300.0),
)


def _invoice(with_request_id: bool) -> Any:
    async def invoice(ctx: JobPassContext) -> JobPassResult:
        order = ctx.payload["order"]
        args: dict[str, Any] = {"reference": order, "lines": ctx.payload["lines"]}
        if with_request_id:
            args["request_id"] = f"{order}/invoice"

        async def issue() -> str:
            try:
                made = await call_service(
                    ctx, "ledger", "create_invoice", args, timeout_ms=TIMEOUT_MS
                )
            except ServiceTimeout:
                # No answer: did it go through? Look before creating it again.
                found = await call_service(
                    ctx, "ledger", "search", {"reference": order}, timeout_ms=TIMEOUT_MS
                )
                if found:
                    return str(found[0]["number"])
                made = await call_service(
                    ctx, "ledger", "create_invoice", args, timeout_ms=TIMEOUT_MS
                )
            return str(made["number"])

        await ctx.step("issue-invoice", issue)
        return JobPassResult(done=True)

    return invoice


INVOICE_SETUP = WorldSetup(scopes=(SCOPE,), services=(LEDGER,), lease_ms=LEASE_MS)
INVOICE_CHECKS = [
    at_most_once("ledger.create_invoice", key="reference"),
    once_per_done_run("ledger.create_invoice"),
]


async def _invoice_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("accounting", "invoice", handler)
    payload = {"order": "o-311", "lines": [{"sku": "desk", "cents": 34_900}]}
    await world.start("cron", SCOPE, "accounting", "invoice", payload=payload)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("invoice-search-then-create", setup=INVOICE_SETUP, checks=INVOICE_CHECKS)
async def invoice_search_then_create_world(world: World) -> None:
    """Issue an invoice; on a timeout search the ledger, and create it again when the search
    finds none: a late first create makes a second invoice."""
    await _invoice_world(world, _invoice(with_request_id=False))


@scenario("invoice-request-id", setup=INVOICE_SETUP, checks=INVOICE_CHECKS)
async def invoice_request_id_world(world: World) -> None:
    """Issue an invoice with the ledger's request id, the same on every create: one invoice."""
    await _invoice_world(world, _invoice(with_request_id=True))


# ================================================================================================
# 5. Checkout: two providers for one payment
# ================================================================================================
#
# acme is the primary provider and bolt the secondary, each with its own idempotency keys (a key
# acme has seen means nothing to bolt). acme refuses a small share of requests when it is busy.
# acme's ``cancel_key`` closes a key: it answers whether a charge with that key ran, and once a key
# is closed, a charge with it is refused (a request still on the wire included).


def _charge(provider: str) -> Any:
    def charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        if args["key"] in state.setdefault("closed", []):
            raise ServiceRefused(f"key {args['key']} was closed")
        charges = state.setdefault("charges", [])
        made = {"id": f"{provider}-{len(charges) + 1}", "order": args["order"]}
        charges.append({**made, "key": args["key"], "cents": args["cents"]})
        return {**made, "provider": provider}

    return charge


def acme_cancel_key(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    for charge in state.get("charges", []):
        if charge["key"] == args["key"]:
            return {"charged": True, "id": charge["id"]}
    closed = state.setdefault("closed", [])
    if args["key"] not in closed:
        closed.append(args["key"])
    return {"charged": False}


ACME = Service(
    "acme",
    operations={
        "charge": Operation(_charge("acme"), idempotency_key="key"),
        "cancel_key": acme_cancel_key,
    },
    latency_ms=(5.0, 60.0),
    refuses=0.05,
)
BOLT = Service(
    "bolt",
    operations={"charge": Operation(_charge("bolt"), idempotency_key="key")},
    latency_ms=(10.0, 90.0),
)


def _checkout_args(ctx: JobPassContext) -> dict[str, Any]:
    order = ctx.payload["order"]
    return {"order": order, "cents": ctx.payload["cents"], "key": f"{order}/checkout"}


async def checkout_fallback_on_refusal(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: a refusal from acme sends the payment to bolt, whatever acme did before."""
    args = _checkout_args(ctx)

    async def pay() -> str:
        try:
            made = await call_service(ctx, "acme", "charge", args, timeout_ms=TIMEOUT_MS)
        except ServiceRefused:
            # acme did not take it (a refusal never ran): route the payment to bolt.
            made = await call_service(ctx, "bolt", "charge", args, timeout_ms=TIMEOUT_MS)
        # A ServiceTimeout is not a refusal: it fails the step, and the next pass asks acme again
        # with the same key.
        return str(made["id"])

    await ctx.step("pay", pay)
    return JobPassResult(done=True)


async def checkout_close_then_fallback(ctx: JobPassContext) -> JobPassResult:
    """The fix: before turning to bolt, close the key at acme; pay at bolt only when acme says no
    charge with it ran (and then none ever will)."""
    args = _checkout_args(ctx)

    async def pay() -> str:
        try:
            made = await call_service(ctx, "acme", "charge", args, timeout_ms=TIMEOUT_MS)
            return str(made["id"])
        except ServiceRefused:
            pass
        closed = await call_service(
            ctx, "acme", "cancel_key", {"key": args["key"]}, timeout_ms=TIMEOUT_MS
        )
        if closed["charged"]:  # an earlier request of ours did charge at acme
            return str(closed["id"])
        made = await call_service(ctx, "bolt", "charge", args, timeout_ms=TIMEOUT_MS)
        return str(made["id"])

    await ctx.step("pay", pay)
    return JobPassResult(done=True)


def paid_once_by_either(trace: Trace) -> list[UserFinding]:
    """An order one of whose runs ended done was charged exactly once, at acme or at bolt; any
    order at most once. One order per run key: the runs a start made again are judged together."""
    key_of, status = run_keys(trace)
    charges: dict[str, list[dict[str, Any]]] = {}
    for event in trace.of("svc.exec"):
        if event["op"] in ("acme.charge", "bolt.charge") and event["effect"]:
            charges.setdefault(key_of.get(event["run"], event["run"]), []).append(event)
    findings = []
    for key, ended in sorted(status.items()):
        made = charges.get(key, [])
        if len(made) > 1 or (ended == "done" and not made):
            findings.append(
                UserFinding(
                    f"the runs of {key} ended {ended} and its order was charged {len(made)} times"
                    + "".join(f"; {e['result']['id']} at {e['t']} ms" for e in made),
                    at_ms=made[-1]["t"] if made else None,
                    run=made[-1]["run"] if made else None,
                )
            )
    return findings


CHECKOUT_SETUP = WorldSetup(scopes=(SCOPE,), services=(ACME, BOLT), lease_ms=LEASE_MS)


async def _checkout_world(world: World, handler: Any) -> None:
    await _two_drives(world)
    world.add_job("checkout", "pay", handler)
    payload = {"order": "o-58", "cents": 7_450}
    await world.start("cron", SCOPE, "checkout", "pay", payload=payload)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("checkout-fallback-on-refusal", setup=CHECKOUT_SETUP, checks=[paid_once_by_either])
async def checkout_fallback_on_refusal_world(world: World) -> None:
    """Pay at acme, and at bolt when acme refuses: an earlier acme charge that timed out but ran
    is paid again at bolt."""
    await _checkout_world(world, checkout_fallback_on_refusal)


@scenario("checkout-close-then-fallback", setup=CHECKOUT_SETUP, checks=[paid_once_by_either])
async def checkout_close_then_fallback_world(world: World) -> None:
    """Pay at acme, and at bolt only after closing the key at acme: paid once."""
    await _checkout_world(world, checkout_close_then_fallback)
