"""A card provider that works in its own time and calls back: a webhook, a poll, and one credit.

A shop gives store credit for what a customer pays: when an order's card charge is captured, the
customer's wallet is credited with it. The card provider is a ``Service`` that lives in time, as
a real one does:

- ``charge`` authorizes at once and schedules the provider's OWN work: the capture, 3.5 s later
  (``sims.later``), which runs on the provider's state whatever the job does meanwhile (an outage
  of the provider holds it until it ends);
- the capture calls the shop back (``sims.call_back``): a webhook to the endpoint
  ``card-events``, which the world adds on its web drive (``world.add_endpoint``). Its delivery
  can be lost, late or sent twice, and a delivery that failed is sent again 1 s, 5 s and 20 s
  later (``Service(callback_retries_ms=...)``);
- ``status`` says whether an order's charge has been captured.

The shop's code, which ships, is three pieces: the ``checkout`` job (one run per order) charges,
then polls ``status`` in its later passes until the charge is captured, and starts the
``credit`` run of the order; the ``card-events`` endpoint starts the same ``credit`` run when the
webhook says "captured", in case the poll is slow; the ``credit`` job credits the wallet. Both
paths start the credit run under the same key (the order): runs coalesce by key, so the second
start joins the first run, and the author takes that for "credited once".

It is not: a start joins only a run that is still running. ``credit-by-run`` credits without an
idempotency key, so a webhook delivered after the credit run ended (late, sent again, retried
after a lost answer) starts a second credit run, which credits again. Without faults the webhook
and the poll start the credit within a tick of each other and it looks fine. Let the provider
send its first webhook twice, 10 s apart, and the first order is credited twice, every seed:

    python -m sims run examples/webhooks.py:credit-by-run --plan \
        "FaultPlan((RepeatCallback(service='card', nth=1, after_ms=10000.0),))"

A webhook whose answer was lost is delivered again by the provider itself, a second later, when
the credit run has ended:

    python -m sims run examples/webhooks.py:credit-by-run --plan \
        "FaultPlan((DropCallback(service='card', nth=1, leg='reply'),))"

``credit-keyed`` is the fix: the credit carries the idempotency key ``ORDER/credit``, so any
number of credit runs, started by any path at any time, credit the order once (the wallet
answers a repeat from its key). Under both plans:

    python -m sims run examples/webhooks.py:credit-keyed --plan \
        "FaultPlan((RepeatCallback(service='card', nth=1, after_ms=10000.0),))"
    python -m sims run examples/webhooks.py:credit-keyed --plan \
        "FaultPlan((DropCallback(service='card', nth=1, leg='reply'),))"

``explore`` draws the callbacks' faults (lost on either leg, late, sent twice) at every webhook
of the clean world beside the faults on calls, and finds the bug with one fault: the first it
meets is the answer to the first charge lost, so that the checkout tries again later, and its
poll starts the credit after the webhook's credit run has ended. On ``credit-keyed`` it finds
none:

    python -m sims explore examples/webhooks.py:credit-by-run
    python -m sims explore examples/webhooks.py:credit-keyed --examples 3000

``world.settle`` waits for the runs and for the provider: while a webhook is on the wire (late,
sent again, or waiting for a retry) or a capture falls due before its horizon, the drives tick
on, so that a run a late webhook starts is driven too. The check, ``credited_once``, reads
the providers' states at the world's end (``sims.service_states``).
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any

# The shop's code ships: it imports only the driver's names, never ``sims``.
from driver import JobDriver, JobPassContext, JobPassResult, ServiceUnavailable, StartJobRunInput

# The providers, the check and the world are the simulation's: they import ``sims``.
from sims import (
    DriveSpec,
    Operation,
    Service,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    call_back,
    later,
    now_ms,
    run_keys,
    scenario,
    service_calls,
    service_states,
)

SCOPE = "shop"
ORDERS = {"o-17": 4_999, "o-18": 1_250}
TIMEOUT_MS = 5_000.0
#: When the provider captures a charge, after it authorized it.
CAPTURE_MS = 3_500.0
#: How long after a failed delivery the provider sends a webhook again: 1 s, 5 s, 20 s.
RETRIES_MS = (1_000.0, 5_000.0, 20_000.0)
HORIZON_MS = 300_000


# -- the providers -------------------------------------------------------------------------------


def charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    charges = state["charges"]
    made = {"id": f"ch-{len(charges) + 1}", "order": args["order"], "cents": args["cents"]}
    charges.append({**made, "captured": False, "at_ms": now_ms()})
    # The provider captures it later, on its own, and calls the shop back then.
    later(CAPTURE_MS, partial(capture, made["id"]), name="capture")
    return {**made, "status": "authorized"}


def capture(charge_id: str, state: dict[str, Any]) -> None:
    captured = next(c for c in state["charges"] if c["id"] == charge_id)
    captured["captured"] = True
    event = {"type": "charge.captured", "order": captured["order"], "cents": captured["cents"]}
    call_back("card-events", event)


def status(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    mine = [c for c in state["charges"] if c["order"] == args["order"]]
    return {"charged": bool(mine), "captured": any(c["captured"] for c in mine)}


def credit(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    credits = state["credits"]
    credits.append({"order": args["order"], "cents": args["cents"]})
    return {"credit": len(credits)}


def _no_charges() -> dict[str, Any]:
    return {"charges": []}


def _no_credits() -> dict[str, Any]:
    return {"credits": []}


CARD = Service(
    "card",
    operations={"charge": Operation(charge, idempotent=True), "status": status},
    state=_no_charges,
    latency_ms=(5.0, 50.0),
    times_ms={"capture": CAPTURE_MS},
    callback_retries_ms=RETRIES_MS,
)
WALLET = Service(
    "wallet",
    operations={"credit": Operation(credit, idempotent=True)},
    state=_no_credits,
    latency_ms=(5.0, 50.0),
)


# -- the shop's code: the checkout job, the webhook's endpoint, the credit job -------------------


async def checkout(ctx: JobPassContext) -> JobPassResult:
    """Charge the order, then poll the provider in later passes until the charge is captured,
    and start the order's credit run."""
    order = ctx.payload["order"]
    if ctx.cursor is None:

        async def pay() -> str:
            args = {"order": order, "cents": ctx.payload["cents"]}
            key = f"{order}/charge"
            charged = await ctx.call_service(
                "card", "charge", args, timeout_ms=TIMEOUT_MS, idempotency_key=key
            )
            return str(charged["id"])

        await ctx.step("charge", pay)
        return JobPassResult(cursor="charged")

    async def poll() -> bool:
        try:
            said = await ctx.call_service("card", "status", {"order": order}, timeout_ms=TIMEOUT_MS)
        except ServiceUnavailable:
            return False  # not now: the next pass asks again
        return bool(said["captured"])

    if not await ctx.step("status", poll):
        return JobPassResult()  # not captured yet: asked again at the next tick

    async def start_credit() -> str:
        started = await ctx.start_run("wallet", "credit", instance=order, payload=ctx.payload)
        return started.id

    await ctx.step("start-credit", start_credit)
    return JobPassResult(done=True)


async def card_events(driver: JobDriver, event: dict[str, Any]) -> None:
    """The webhook's endpoint: a captured charge starts the order's credit run (or joins it)."""
    if event["type"] != "charge.captured":
        return
    order, payload = event["order"], {"order": event["order"], "cents": event["cents"]}
    credit = StartJobRunInput(module_id="wallet", job="credit", instance=order, payload=payload)
    await driver.start_job_run(SCOPE, credit)


async def credit_by_run(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: the credit has no idempotency key; the run's coalescing is taken for one."""
    args = {"order": ctx.payload["order"], "cents": ctx.payload["cents"]}

    async def give() -> int:
        credited = await ctx.call_service("wallet", "credit", args, timeout_ms=TIMEOUT_MS)
        return int(credited["credit"])

    await ctx.step("credit", give)
    return JobPassResult(done=True)


async def credit_keyed(ctx: JobPassContext) -> JobPassResult:
    """The fix: the credit's key names the order's credit, whichever run makes it."""
    order = ctx.payload["order"]
    args = {"order": order, "cents": ctx.payload["cents"]}

    async def give() -> int:
        credited = await ctx.call_service(
            "wallet", "credit", args, timeout_ms=TIMEOUT_MS, idempotency_key=f"{order}/credit"
        )
        return int(credited["credit"])

    await ctx.step("credit", give)
    return JobPassResult(done=True)


# -- the check: each order paid is credited once --------------------------------------------------


def credited_once(trace: Trace) -> list[UserFinding]:
    """Each order whose charge was captured is credited exactly once, and an order not captured
    never; a paid order may stay uncredited only when its credit run failed (the wallet down past
    the run's attempts), which an operator sees."""
    states = service_states(trace)
    paid = {c["order"] for c in states["card"]["charges"] if c["captured"]}
    credits = Counter(c["order"] for c in states["wallet"]["credits"])
    # Which call credited, when, in which run: where to place a finding.
    made = {
        call.args["order"]: call
        for call in service_calls(trace)
        if call.op == "wallet.credit" and call.effect
    }
    _, status = run_keys(trace)
    found = []
    for order in ORDERS:
        times, ended = credits[order], status.get(f"wallet/credit/{order}", "never started")
        if times == (1 if order in paid else 0) or (times == 0 and ended == "failed"):
            continue
        said = "paid" if order in paid else "not paid"
        last = made.get(order)
        found.append(
            UserFinding(
                f"order {order} was {said} and credited {times} times (its credit run {ended})",
                at_ms=None if last is None else last.ran_ms,
                run=None if last is None else last.run,
            )
        )
    return found


# -- the world -----------------------------------------------------------------------------------


SETUP = WorldSetup(
    scopes=(SCOPE,), drives=("cron", "alarm", "web"), services=(CARD, WALLET), lease_ms=15_000
)


async def _drive(world: World, credit_job: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="web", request_ms=2.0, reply_ms=2.0))
    world.add_job("shop", "checkout", checkout)
    world.add_job("wallet", "credit", credit_job)
    world.add_endpoint("card-events", card_events, drive="web")
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=HORIZON_MS)
    for order, cents in ORDERS.items():
        payload = {"order": order, "cents": cents}
        await world.start("cron", SCOPE, "shop", "checkout", payload=payload, instance=order)
    # Settle waits for the runs and for the provider: a webhook still on the wire (late, sent
    # again, retried) starts a credit run after the others ended, and the drives drive it.
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("credit-by-run", setup=SETUP, checks=[credited_once])
async def credit_by_run_world(world: World) -> None:
    """Credit a paid order from a webhook and a poll, trusting the credit run's coalescing: a
    webhook after the credit run ended credits twice."""
    await _drive(world, credit_by_run)


@scenario("credit-keyed", setup=SETUP, checks=[credited_once])
async def credit_keyed_world(world: World) -> None:
    """Credit a paid order from a webhook and a poll, the credit keyed by the order: once."""
    await _drive(world, credit_keyed)
