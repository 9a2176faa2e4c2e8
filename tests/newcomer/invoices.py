"""A newcomer's own job: send an invoice. Imports only ``driver`` (the code that ships).

``billing/invoice``, one run per invoice (instance = the invoice id). Payload:
``{"invoice": "INV-0001", "customer": "c1", "email": "c1@example.com", "lines": [1200, 300]}``.

Release 1 (``INVOICE_V1``), three steps:
  - ``render``: the total and the mail's text (pure);
  - ``email``: ``mail.send`` keyed ``INVOICE/email``;
  - ``archive``: ``archive.store`` keyed ``INVOICE/archive``.

Two release-2 deploy bugs, each with its fix:
  - ``INVOICE_V2_NUMBER`` (bug B): a new step ``number`` (``numbers.allocate``, an effect: a
    legal invoice number is reserved) is put FIRST, before ``render`` and ``email``. A run that
    mailed on v1 and is retried on v2 reserves a number for an invoice that already went out
    without one.
    ``INVOICE_V2_NUMBER_FIXED`` numbers only runs started by release 2 (their payload says
    ``"numbered": true``); older runs go on as release 1 did.
  - ``INVOICE_V2_REKEY`` (bug A): the same steps, but the mail's idempotency key is now built
    as ``CUSTOMER:INVOICE:email``. A v1 email whose answer was lost (a timeout: it may have been
    sent) is retried on v2 under a key the mailer never saw: the invoice is mailed twice.
    ``INVOICE_V2_REKEY_FIXED`` keeps the old key.
"""

from __future__ import annotations

from typing import Any

from driver import JobDefinition, JobPassContext, JobPassResult, RetryPolicy

MODULE = "billing"
JOB = "invoice"
TIMEOUT_MS = 1_000.0
RETRY = RetryPolicy(max_attempts=10, base_delay_ms=200, max_delay_ms=2_000)
LEASE_MS = 5_000


def render(order: dict[str, Any], number: int | None) -> dict[str, Any]:
    total = sum(int(c) for c in order["lines"])
    label = f"invoice {order['invoice']}" + (f" no. {number}" if number is not None else "")
    return {"total": total, "subject": f"{label}: {total / 100:.2f} EUR due"}


def v1_email_key(order: dict[str, Any]) -> str:
    return f"{order['invoice']}/email"


def v2_email_key(order: dict[str, Any]) -> str:
    return f"{order['customer']}:{order['invoice']}:email"


async def _send(
    ctx: JobPassContext, order: dict[str, Any], rendered: dict[str, Any], key: str
) -> dict[str, Any]:
    answer = await ctx.call_service(
        "mail",
        "send",
        {"invoice": order["invoice"], "to": order["email"], "subject": rendered["subject"]},
        timeout_ms=TIMEOUT_MS,
        idempotency_key=key,
    )
    return {"message": answer["message"]}


async def _archive(ctx: JobPassContext, order: dict[str, Any], rendered: dict[str, Any]) -> Any:
    return await ctx.call_service(
        "archive",
        "store",
        {"invoice": order["invoice"], "total": rendered["total"]},
        timeout_ms=TIMEOUT_MS,
        idempotency_key=f"{order['invoice']}/archive",
    )


async def _number(ctx: JobPassContext, order: dict[str, Any]) -> int:
    answer = await ctx.call_service(
        "numbers",
        "allocate",
        {"invoice": order["invoice"]},
        timeout_ms=TIMEOUT_MS,
        idempotency_key=f"{order['invoice']}/number",
    )
    return int(answer["number"])


async def _invoice(
    ctx: JobPassContext, *, numbered: bool, email_key: Any = v1_email_key
) -> JobPassResult:
    order = ctx.payload
    number = None
    if numbered:
        number = await ctx.step("number", lambda: _number(ctx, order))
    rendered = await ctx.step("render", lambda: render(order, number))
    await ctx.step("email", lambda: _send(ctx, order, rendered, email_key(order)))
    await ctx.step("archive", lambda: _archive(ctx, order, rendered))
    ctx.count("invoices")
    return JobPassResult(done=True)


async def invoice_v1(ctx: JobPassContext) -> JobPassResult:
    return await _invoice(ctx, numbered=False)


async def invoice_v2_number(ctx: JobPassContext) -> JobPassResult:
    """THE DEPLOY BUG B: ``number`` (an effect) runs first, also on runs that mailed on v1."""
    return await _invoice(ctx, numbered=True)


async def invoice_v2_number_fixed(ctx: JobPassContext) -> JobPassResult:
    """Runs started by release 2 say so in their payload; older ones go on as release 1."""
    return await _invoice(ctx, numbered=bool(ctx.payload.get("numbered")))


async def invoice_v2_rekey(ctx: JobPassContext) -> JobPassResult:
    """THE DEPLOY BUG A: the mail's idempotency key built another way."""
    return await _invoice(ctx, numbered=False, email_key=v2_email_key)


async def invoice_v2_rekey_fixed(ctx: JobPassContext) -> JobPassResult:
    return await _invoice(ctx, numbered=False, email_key=v1_email_key)


def _job(handler: Any, services: tuple[str, ...]) -> JobDefinition:
    return JobDefinition(MODULE, JOB, handler, retry=RETRY, lease_ms=LEASE_MS, services=services)


V1_SERVICES = ("mail", "archive")
ALL_SERVICES = ("mail", "archive", "numbers")
INVOICE_V1 = _job(invoice_v1, V1_SERVICES)
INVOICE_V2_NUMBER = _job(invoice_v2_number, ALL_SERVICES)
INVOICE_V2_NUMBER_FIXED = _job(invoice_v2_number_fixed, ALL_SERVICES)
INVOICE_V2_REKEY = _job(invoice_v2_rekey, V1_SERVICES)
INVOICE_V2_REKEY_FIXED = _job(invoice_v2_rekey_fixed, V1_SERVICES)

VARIANTS = {
    "v1": INVOICE_V1,
    "v2-number": INVOICE_V2_NUMBER,
    "v2-number-fixed": INVOICE_V2_NUMBER_FIXED,
    "v2-rekey": INVOICE_V2_REKEY,
    "v2-rekey-fixed": INVOICE_V2_REKEY_FIXED,
}


def invoices(count: int) -> list[dict[str, Any]]:
    return [
        {
            "invoice": f"INV-{i:04}",
            "customer": f"c{i % 3}",
            "email": f"c{i % 3}@example.com",
            "lines": [1_000 + 13 * i, 250],
        }
        for i in range(count)
    ]
