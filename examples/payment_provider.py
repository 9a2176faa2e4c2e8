"""A payment provider as a service: idempotency keys, a client timeout, and what a timeout means.

The job pays for an order in one step. The card provider is a ``Service`` of the world: its
``charge`` takes an idempotency key (a repeat of a key is answered with the first charge, without
charging again), ``refund`` gives a charge's money back, and ``find`` says what became of a key.
``find`` is a lagging read, as a provider's search endpoint is: it sees the provider's charges as
they stood up to 30 s ago (``Operation(find, lag_ms=(0.0, 30_000.0))``, the lag drawn per lookup),
so a charge made a moment ago may not be found yet. A second rail, the bank, can take a transfer
instead. The job calls the provider with a client timeout of 5 s: when no reply has come by then,
``ctx.call_service`` raises ``ServiceTimedOut``, and that says nothing about the charge: it may
have run, or may still run.

``pay-fallback`` takes a timeout for a refusal: no answer from the card provider, so it pays by
the bank. Hold the reply of the cron's first charge past the timeout and the order is paid twice,
once by each rail, every seed:

    python -m sims run examples/payment_provider.py:pay-fallback --plan \
        "FaultPlan((DelayLeg(drive='cron', operation='card.charge', nth=1, leg='reply', \
        ms=6000.0),))"

``pay-undo-and-retry`` knows a timeout is not a refusal, and compensates instead: it refunds the
charge "in case it ran", then charges again with the same key. The refund undoes the charge that
did run, and the provider answers the second charge from its key, with the first (refunded)
charge, without running it: the job ends done and the order is not paid. The same plan:

    python -m sims run examples/payment_provider.py:pay-undo-and-retry --plan \
        "FaultPlan((DelayLeg(drive='cron', operation='card.charge', nth=1, leg='reply', \
        ms=6000.0),))"

``pay-fresh-key`` asks before it charges again, as it should, but with a NEW idempotency key for
each try (``o-17/pay/1``, then ``o-17/pay/2``): after a timeout it looks the first key up with
``find``, and charges with the second key when the lookup answers None. That is right only if the
provider's reads saw its writes at once. Under the lag, the first charge ran, its answer came past
the timeout, and the lookup does not see it yet: the second key charges again, and the order is
paid twice. Hold the reply of the cron's first charge past the timeout, and let its lookup lag by
the whole 30 s (a ``StaleRead``; most seeds draw a lag past the 5 s on their own), every seed:

    python -m sims run examples/payment_provider.py:pay-fresh-key --plan \
        "FaultPlan((DelayLeg(drive='cron', operation='card.charge', nth=1, leg='reply', \
        ms=6000.0), StaleRead(operation='card.find', nth=1)))"

``pay-once`` is the fix. It charges with the order's idempotency key, and when the provider does
not answer in time it asks before it does anything else: ``find`` with the key. A charge that is
there is the payment; when none is there yet (not made, or not seen yet by the lagging lookup), it
charges again with the SAME key, so a first request that ran, or is still on the wire, is
answered from the key, never charged twice: the key, not the lookup, is what makes it safe. A
refusal (``ServiceUnavailable``: an outage) says the charge did not run; the step fails, and the
run is retried later. It pays each order once under the plans above and through an outage of the
provider (one that outlasts the run's attempts fails the run, unpaid, which the check allows):

    python -m sims run examples/payment_provider.py:pay-once --plan \
        "FaultPlan((DelayLeg(drive='cron', operation='card.charge', nth=1, leg='reply', \
        ms=6000.0),))"
    python -m sims run examples/payment_provider.py:pay-once --plan \
        "FaultPlan((DelayLeg(drive='cron', operation='card.charge', nth=1, leg='reply', \
        ms=6000.0), StaleRead(operation='card.find', nth=1)))"
    python -m sims run examples/payment_provider.py:pay-once --plan \
        "FaultPlan((ServiceOutage(service='card', from_ms=0.0, to_ms=3000.0),))"

``explore`` finds a plan that breaks each buggy variant on its own (one lost reply of the card
provider: for ``pay-fresh-key`` the lookup that follows it lags on its own, by the seed's draw)
and shrinks it; on ``pay-once`` it finds none in 3000 worlds:

    python -m sims explore examples/payment_provider.py:pay-fallback
    python -m sims explore examples/payment_provider.py:pay-fresh-key
    python -m sims explore examples/payment_provider.py:pay-once --examples 3000

The check, ``paid_once``, is the user's own: the ready-made ``once_per_done_run("card.charge")``
counts charges of one operation, and here the money moves by two rails and back by refunds.
"""

from __future__ import annotations

from typing import Any

# The job's code ships: it imports only the service port's names, from ``driver``.
from driver import JobPassContext, JobPassResult, ServiceError, ServiceTimedOut

# The providers, the check and the world are the simulation's: they import ``sims``.
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

SCOPE = "shop"
TIMEOUT_MS = 5_000.0
#: Long enough for a run held up by a lease of 30 s (a stale pass, a takeover) to end.
HORIZON_MS = 300_000


# -- the providers: plain functions over the service's state -----------------------------------


def charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    # Every call is a new charge: only the idempotency key (below) makes a repeat charge nothing.
    charges = state.setdefault("charges", [])
    made = {"id": f"ch-{len(charges) + 1}", "key": args["key"], "order": args["order"]}
    charges.append({**made, "cents": args["cents"], "refunded": False})
    return made


def find(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any] | None:
    # A read: it changes nothing (no setdefault here), so it is never an effect.
    charges: list[dict[str, Any]] = state.get("charges", [])
    return next((c for c in charges if c["key"] == args["key"]), None)


def refund(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    found = find(state, args)
    if found is None or found["refunded"]:
        return {"refunded": False}
    found["refunded"] = True
    return {"refunded": True}


def transfer(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    state.setdefault("transfers", []).append({"order": args["order"], "cents": args["cents"]})
    return {"transfer": len(state["transfers"])}


CARD = Service(
    "card",
    operations={
        "charge": Operation(charge, idempotency_key="key"),
        "refund": refund,
        # A provider's lookup lags its writes, as search endpoints do: a charge made a moment
        # ago may not be found yet (anywhere from at once to 30 s later, drawn per lookup).
        "find": Operation(find, lag_ms=(0.0, 30_000.0)),
    },
    latency_ms=(5.0, 50.0),
)
BANK = Service("bank", operations={"transfer": transfer}, latency_ms=(20.0, 200.0))


# -- the job, four ways -------------------------------------------------------------------------


def _charge_args(ctx: JobPassContext) -> dict[str, Any]:
    order = ctx.payload["order"]
    return {"order": order, "cents": ctx.payload["cents"], "key": f"{order}/pay"}


async def pay_fallback(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: no answer from the card provider is taken for a refusal, and the bank pays too."""
    args = _charge_args(ctx)

    async def pay() -> str:
        try:
            await ctx.call_service("card", "charge", args, timeout_ms=TIMEOUT_MS)
            return "card"
        except ServiceError:  # a ServiceTimedOut too: the charge may have run
            await ctx.call_service("bank", "transfer", args, timeout_ms=TIMEOUT_MS)
            return "bank"

    await ctx.step("pay", pay)
    return JobPassResult(done=True)


async def pay_undo_and_retry(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: on a timeout it refunds "in case", then charges again with the same key, which
    the provider answers with the charge it just refunded."""
    args = _charge_args(ctx)

    async def pay() -> str:
        try:
            await ctx.call_service("card", "charge", args, timeout_ms=TIMEOUT_MS)
        except ServiceTimedOut:
            await ctx.call_service("card", "refund", {"key": args["key"]}, timeout_ms=TIMEOUT_MS)
            await ctx.call_service("card", "charge", args, timeout_ms=TIMEOUT_MS)
        return "card"

    await ctx.step("pay", pay)
    return JobPassResult(done=True)


async def pay_fresh_key(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: a new idempotency key for each try, and a lookup trusted to have seen the first
    charge. Right only if the provider's reads saw its writes at once: under the lag, a charge
    that ran, whose answer came too late, is not found yet, and the second key charges again."""
    order = ctx.payload["order"]

    def attempt(n: int) -> dict[str, Any]:
        return {**_charge_args(ctx), "key": f"{order}/pay/{n}"}

    async def pay() -> str:
        try:
            await ctx.call_service("card", "charge", attempt(1), timeout_ms=TIMEOUT_MS)
        except ServiceTimedOut:
            first = {"key": attempt(1)["key"]}
            found = await ctx.call_service("card", "find", first, timeout_ms=TIMEOUT_MS)
            if found is None:  # "it did not go through": but the lookup lags the charge
                await ctx.call_service("card", "charge", attempt(2), timeout_ms=TIMEOUT_MS)
        return "card"

    await ctx.step("pay", pay)
    return JobPassResult(done=True)


async def pay_once(ctx: JobPassContext) -> JobPassResult:
    """The fix: one idempotency key for the order, and a question before any other move."""
    args = _charge_args(ctx)

    async def pay() -> str:
        try:
            await ctx.call_service("card", "charge", args, timeout_ms=TIMEOUT_MS)
        except ServiceTimedOut:
            # No answer is no news: ask the provider what became of the key.
            found = await ctx.call_service(
                "card", "find", {"key": args["key"]}, timeout_ms=TIMEOUT_MS
            )
            if found is None:
                # Not there yet. The same key: a first request still on the wire is answered
                # from it when it lands. (Another timeout fails the step; the next pass asks.)
                await ctx.call_service("card", "charge", args, timeout_ms=TIMEOUT_MS)
        return "card"

    await ctx.step("pay", pay)
    return JobPassResult(done=True)


# -- the check: every order paid once, whichever rail, refunds taken back -------------------------


#: What each call that took effect did to the customer's money.
MONEY = {"card.charge": 1, "bank.transfer": 1, "card.refund": -1}


def paid_once(trace: Trace) -> list[UserFinding]:
    """An order one of whose runs ended done was paid exactly once, by card charges and bank
    transfers that took effect, less the refunds that took effect; an order none of whose runs
    ended done (they gave up on a provider that stayed down) was paid at most once. The runs of
    one run key (here one key per order) are judged together: a start tried again after its reply
    was lost makes a second run of the same order when the first had already ended, and the order
    is paid once over both."""
    key_of: dict[str, str] = {}
    ended: dict[str, list[str]] = {}
    for event in trace.of("world.end"):
        for rows in event["runs"].values():
            for row in rows:
                key = f"{row['module_id']}/{row['job']}/{row['instance']}"
                key_of[str(row["id"])] = key
                ended.setdefault(key, []).append(str(row["status"]))
    paid: dict[str, int] = {}
    moved: dict[str, tuple[float, str]] = {}
    for event in trace.of("svc.exec"):
        if event["effect"]:  # not a refusal, a repeat answered from its key, a refund of nothing
            key = key_of.get(str(event["run"]), str(event["run"]))
            paid[key] = paid.get(key, 0) + MONEY[event["op"]]
            moved[key] = (event["t"], str(event["run"]))
    found = []
    for key, statuses in ended.items():
        done = "done" in statuses
        if paid.get(key, 0) == 1 or not (done or paid.get(key, 0) > 1):
            continue
        at_ms, run = moved.get(key, (None, None))
        found.append(
            UserFinding(
                f"the order's {'run' if len(statuses) == 1 else f'{len(statuses)} runs'} ({key}) "
                f"ended {', '.join(statuses)} and it was paid {paid.get(key, 0)} times",
                at_ms=at_ms,
                run=run,
            )
        )
    return found


# -- the world ----------------------------------------------------------------------------------


SETUP = WorldSetup(scopes=(SCOPE,), services=(CARD, BANK), lease_ms=30_000)


async def _drive(world: World, handler: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=2.0, reply_ms=2.0))
    world.add_job("shop", "pay", handler)
    # The drives tick from the start: a run is driven even while its start is still on the wire.
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=HORIZON_MS)
    await world.start("cron", SCOPE, "shop", "pay", payload={"order": "o-17", "cents": 4_999})
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("pay-fallback", setup=SETUP, checks=[paid_once])
async def pay_fallback_world(world: World) -> None:
    """Pay an order by card, and by bank when the card provider does not answer: a timeout taken
    for a refusal pays twice."""
    await _drive(world, pay_fallback)


@scenario("pay-undo-and-retry", setup=SETUP, checks=[paid_once])
async def pay_undo_and_retry_world(world: World) -> None:
    """Pay an order by card, refunding and charging again on a timeout: the refund undoes a
    charge that ran, and the key answers the new charge with the refunded one."""
    await _drive(world, pay_undo_and_retry)


@scenario("pay-fresh-key", setup=SETUP, checks=[paid_once])
async def pay_fresh_key_world(world: World) -> None:
    """Pay an order by card with a new key per try, looking the first key up after a timeout: the
    lookup lags the charge, finds nothing, and the second key pays again."""
    await _drive(world, pay_fresh_key)


@scenario("pay-once", setup=SETUP, checks=[paid_once])
async def pay_once_world(world: World) -> None:
    """Pay an order by card with its idempotency key, asking the provider after a timeout: paid
    once."""
    await _drive(world, pay_once)
