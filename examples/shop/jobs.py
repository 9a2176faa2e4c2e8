"""The shop's jobs: the code that ships. It imports the job-run kernel (``driver``) and nothing
from the simulator: ``world.py`` explores these very handlers, and ``serve.py`` runs them on the
real scope host against real HTTP services.

- ``order``: charge the order's card, then mail a receipt. A decline is an answer (the customer
  is told); an outage or a lost answer fails the step, and the pass is retried.
  - ``order_buggy`` charges without an idempotency key, as code that "worked in testing" does:
    when the provider charged but its answer was lost (``ServiceTimedOut``), the retry charges the
    card again.
  - ``order_fixed`` names the charge with a key made from the order, which the provider remembers:
    a repeat, from a retry or from another drive that took the run over, is answered with the
    first charge, never charged again. The receipt is keyed the same way.
- ``order`` in two releases, and the deploy between them (docs/deploys.md): ``order_v1`` keys
  each service call by the order and the step's name (``_keyed``), so that a repeat of a step (a
  retry, a takeover) repeats its key and the provider answers it with the first result.
  - ``order_v2`` renames the charge step ``charge-card`` (a second way to pay is coming) and
    shows the amount in the receipt. New runs are fine. A run whose pass charged on v1 and then
    failed (the mailer down) is retried on v2: the ledger holds ``charge``, v2 asks for
    ``charge-card``, the memo misses, and the card is charged again under the new step's key.
  - ``order_v2_fixed`` is v2 with the charge step's old name kept: the memo a v1 pass left
    answers it, and the key stays the one the provider knows.
- ``month-end``: starts one ``order`` run per customer (``ctx.start_run``), each in a step of its
  own: a start joins only a LIVE run, so a retried pass that started a child again after that
  child had ended would make a second one. The step's memo keeps a retry from starting it again.
  It cannot stop a pass that lost its lease from running a step body once more (the spec's
  at-least-once window): such a stale pass may start a second run of an order that has ended.
  What keeps the money right then is the charge's idempotency key, made from the order, which the
  second run repeats, and the provider answers without charging.
"""

from __future__ import annotations

from typing import Any

from driver import (
    JobDefinition,
    JobPassContext,
    JobPassResult,
    RetryPolicy,
    ServiceDeclined,
)

MODULE = "shop"
#: How long a call waits for an answer: past it, the call may have run (``ServiceTimedOut``).
CHARGE_TIMEOUT_MS = 2_000.0
MAIL_TIMEOUT_MS = 2_000.0
#: A failed pass is tried again soon, and often: a provider's hiccup is short.
RETRY = RetryPolicy(max_attempts=10, base_delay_ms=200, max_delay_ms=3_000)
#: A pass reaches a step boundary well within this; a drive that died holding a run gives it up
#: to another after it (the default, 15 minutes, would keep a killed serve's runs that long).
LEASE_MS = 10_000


def charge_args(order: dict[str, Any]) -> dict[str, Any]:
    return {"order": order["order"], "customer": order["customer"], "cents": order["cents"]}


async def _receipt(ctx: JobPassContext, order: dict[str, Any], charged: dict[str, Any]) -> None:
    if "declined" in charged:
        subject = f"order {order['order']}: your card was declined ({charged['declined']})"
    else:
        subject = f"order {order['order']}: receipt for charge {charged['charge']}"
    await ctx.call_service(
        "mail",
        "send",
        {"to": order["email"], "subject": subject},
        timeout_ms=MAIL_TIMEOUT_MS,
        idempotency_key=f"{order['order']}/receipt",
    )


async def _charge(
    ctx: JobPassContext, order: dict[str, Any], idempotency_key: str | None
) -> dict[str, Any]:
    """Charge the order's card; a decline is an answer, kept as the step's result."""
    try:
        answer = await ctx.call_service(
            "card",
            "charge",
            charge_args(order),
            timeout_ms=CHARGE_TIMEOUT_MS,
            idempotency_key=idempotency_key,
        )
    except ServiceDeclined as declined:
        return {"declined": declined.code}
    return {"charge": answer["charge"]}


async def order_buggy(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: the charge carries no idempotency key, so a charge whose answer was lost is made
    again by the retry."""
    order = ctx.payload
    charged = await ctx.step("charge", lambda: _charge(ctx, order, None))
    await ctx.step("receipt", lambda: _receipt(ctx, order, charged))
    return JobPassResult(done=True)


async def order_fixed(ctx: JobPassContext) -> JobPassResult:
    """The fix: the charge is named by the order (``idempotency_key``), so any repeat of it is
    answered with the first charge."""
    order = ctx.payload
    key = f"{order['order']}/charge"
    charged = await ctx.step("charge", lambda: _charge(ctx, order, key))
    await ctx.step("receipt", lambda: _receipt(ctx, order, charged))
    return JobPassResult(done=True)


async def month_end(ctx: JobPassContext) -> JobPassResult:
    """One order run per customer of the month, each named by the month and the customer."""
    month = ctx.payload["month"]
    for customer in ctx.payload["customers"]:
        order = {
            "order": f"{month}/{customer['id']}",
            "customer": customer["id"],
            "email": customer["email"],
            "cents": customer["cents"],
        }

        async def start(order: dict[str, Any] = order) -> str:
            run = await ctx.start_run(MODULE, "order", instance=order["order"], payload=order)
            return run.id

        # A step each: a retried pass starts no child again, even one that has ended since (a
        # start joins only a live run). A stale pass may; the order's keys make that harmless.
        await ctx.step(f"start {order['order']}", start)
    return JobPassResult(done=True)


def _keyed(order: dict[str, Any], step: str) -> str:
    """The idempotency key of ``step``'s call for ``order``: the same for every repeat of the
    step, whoever runs it."""
    return f"{order['order']}/{step}"


async def _release(ctx: JobPassContext, charge_step: str, *, amount: bool) -> JobPassResult:
    """Charge under the step named ``charge_step``, then mail the receipt (with the amount in
    its subject when ``amount``); each call keyed by the order and its step's name."""
    order = ctx.payload
    charged = await ctx.step(charge_step, lambda: _charge(ctx, order, _keyed(order, charge_step)))

    async def receipt() -> None:
        subject = f"order {order['order']}: " + (
            f"your card was declined ({charged['declined']})"
            if "declined" in charged
            else f"receipt for charge {charged['charge']}"
        )
        if amount:
            subject += f", {order['cents'] / 100:.2f}"
        await ctx.call_service(
            "mail",
            "send",
            {"to": order["email"], "subject": subject},
            timeout_ms=MAIL_TIMEOUT_MS,
            idempotency_key=_keyed(order, "receipt"),
        )

    await ctx.step("receipt", receipt)
    return JobPassResult(done=True)


async def order_v1(ctx: JobPassContext) -> JobPassResult:
    """Release 1: the charge step is ``charge``."""
    return await _release(ctx, "charge", amount=False)


async def order_v2(ctx: JobPassContext) -> JobPassResult:
    """Release 2, THE DEPLOY BUG: the charge step renamed ``charge-card``; a pass of a run that
    charged on v1 misses the memo and charges again, under a key the provider never saw."""
    return await _release(ctx, "charge-card", amount=True)


async def order_v2_fixed(ctx: JobPassContext) -> JobPassResult:
    """Release 2 done right: the amount in the receipt, the charge step's name kept."""
    return await _release(ctx, "charge", amount=True)


SERVICES = ("card", "mail")
ORDER_BUGGY = JobDefinition(
    MODULE, "order", order_buggy, retry=RETRY, lease_ms=LEASE_MS, services=SERVICES
)
ORDER_FIXED = JobDefinition(
    MODULE, "order", order_fixed, retry=RETRY, lease_ms=LEASE_MS, services=SERVICES
)
ORDER_V1, ORDER_V2, ORDER_V2_FIXED = (
    JobDefinition(MODULE, "order", handler, retry=RETRY, lease_ms=LEASE_MS, services=SERVICES)
    for handler in (order_v1, order_v2, order_v2_fixed)
)
MONTH_END = JobDefinition(MODULE, "month-end", month_end, retry=RETRY, lease_ms=LEASE_MS)
#: The order job's variants, by the name ``serve.py --variant`` takes.
ORDERS = {
    "buggy": ORDER_BUGGY,
    "fixed": ORDER_FIXED,
    "v1": ORDER_V1,
    "v2": ORDER_V2,
    "v2-fixed": ORDER_V2_FIXED,
}


def shop_jobs(variant: str) -> tuple[JobDefinition, ...]:
    """The shop's jobs, with the order job's ``variant`` (one of :data:`ORDERS`)."""
    if variant not in ORDERS:
        raise ValueError(f"variant {variant!r}: give one of {', '.join(map(repr, ORDERS))}")
    return ORDERS[variant], MONTH_END


def customers(count: int) -> list[dict[str, Any]]:
    """``count`` customers, their orders' amounts varied; every seventh one's amount is over the
    card's limit, so that declines happen too."""
    return [
        {
            "id": f"c{index:04}",
            "email": f"c{index:04}@example.com",
            "cents": 90_000 if index % 7 == 6 else 1_000 + 37 * index,
        }
        for index in range(count)
    ]
