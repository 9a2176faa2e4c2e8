"""A multi-pass payout job: the code that ships. It imports only ``driver``.

A run pays every payee of one batch (``payload = {"batch": ..., "payees": [{"id", "cents"}]}``)
through the ``bank`` service, CHUNK payees per pass; each pass hands the offset of the next
payee forward as its cursor. Each payee's transfer is one step, ``pay <id>``, keyed at the bank
by the batch and the payee, so that a retry of the step repeats the key and is not paid twice.

Releases:

- ``V1``: cursor = int offset; key ``"<batch>/<payee>"``.
- ``V2_CURSOR`` (BUG 1, cursor shape): release 2 carries the running total in the cursor,
  ``{"offset": n, "total": cents}``, and reads ``ctx.cursor["offset"]``. A run that v1 left with
  an int cursor (a pass committed, the next not yet run) raises ``TypeError`` on every pass.
  ``V2_CURSOR_FIXED`` reads both shapes and still WRITES the int (the expand step of an
  expand/contract change: a v1 drive still serving during a rolling deploy must read what v2
  writes). ``V2_CURSOR_HALF`` reads both shapes but writes the dict: fine for a v1 run picked up
  by v2, broken while v1 drives still serve (they read v2's dict).
- ``V2_REKEY`` (BUG 2, idempotency key): release 2 keys each transfer by the chunk too,
  ``"<batch>/c<chunk>/<payee>"`` (for per-chunk reconciliation at the bank). A transfer v1
  attempted whose answer was lost (it ran at the bank) is repeated by v2's retry under a key the
  bank never saw: paid twice. ``V2_REKEY_FIXED`` uses the new key only for runs started by v2
  (their payload says ``"keys": 2``), and v1's key for the others.
- ``V2_RESTART`` (BUG 3, a silent cursor misread): release 2's cursor is a dict, and it reads
  anything else as "start over" (``{"offset": 0}``). A v1 run with an int cursor is walked again
  from its first payee: the bank's keys stop the money going out twice, but the run's counters
  say 7 payees were paid out of 5. It raises nothing.
"""

from __future__ import annotations

from typing import Any

from driver import JobDefinition, JobPassContext, JobPassResult, RetryPolicy

MODULE = "payouts"
JOB = "batch"
CHUNK = 2
TRANSFER_TIMEOUT_MS = 2_000.0
RETRY = RetryPolicy(max_attempts=6, base_delay_ms=200, max_delay_ms=2_000)
LEASE_MS = 10_000


def payees(count: int = 5) -> list[dict[str, Any]]:
    return [{"id": f"p{i}", "cents": 1_000 + 100 * i} for i in range(count)]


def batch_payload(batch: str = "B7", count: int = 5, **extra: Any) -> dict[str, Any]:
    return {"batch": batch, "payees": payees(count), **extra}


async def _transfer(ctx: JobPassContext, payee: dict[str, Any], key: str) -> dict[str, Any]:
    answer = await ctx.call_service(
        "bank",
        "transfer",
        {"batch": ctx.payload["batch"], "payee": payee["id"], "cents": payee["cents"]},
        timeout_ms=TRANSFER_TIMEOUT_MS,
        idempotency_key=key,
    )
    return {"transfer": answer["transfer"]}


def _v1_key(ctx: JobPassContext, payee: dict[str, Any], start: int) -> str:
    return f"{ctx.payload['batch']}/{payee['id']}"


def _chunk_key(ctx: JobPassContext, payee: dict[str, Any], start: int) -> str:
    return f"{ctx.payload['batch']}/c{start // CHUNK}/{payee['id']}"


def _fixed_key(ctx: JobPassContext, payee: dict[str, Any], start: int) -> str:
    if ctx.payload.get("keys") == 2:
        return _chunk_key(ctx, payee, start)
    return _v1_key(ctx, payee, start)


async def _pay_chunk(ctx: JobPassContext, start: int, keyer: Any) -> int:
    """Pay the chunk from ``start``; the offset after it."""
    batch = ctx.payload["payees"]
    end = min(start + CHUNK, len(batch))
    for payee in batch[start:end]:
        key = keyer(ctx, payee, start)

        async def pay(payee: dict[str, Any] = payee, key: str = key) -> Any:
            return await _transfer(ctx, payee, key)

        await ctx.step(f"pay {payee['id']}", pay)
        ctx.count("paid")
        ctx.count("cents", payee["cents"])
    return end


# -- release 1 ------------------------------------------------------------------------------


async def batch_v1(ctx: JobPassContext) -> JobPassResult:
    start = ctx.cursor or 0
    end = await _pay_chunk(ctx, start, _v1_key)
    return JobPassResult(cursor=end, done=end >= len(ctx.payload["payees"]))


# -- bug 1: the cursor's shape ---------------------------------------------------------------


def _total(ctx: JobPassContext, upto: int) -> int:
    return sum(p["cents"] for p in ctx.payload["payees"][:upto])


async def batch_v2_cursor(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: reads ``ctx.cursor["offset"]``; a v1 cursor is an int."""
    cursor = ctx.cursor or {"offset": 0, "total": 0}
    start = cursor["offset"]
    end = await _pay_chunk(ctx, start, _v1_key)
    total = cursor["total"] + _total(ctx, end) - _total(ctx, start)
    return JobPassResult(
        cursor={"offset": end, "total": total}, done=end >= len(ctx.payload["payees"])
    )


def _read_either(cursor: Any) -> int:
    if cursor is None:
        return 0
    if isinstance(cursor, int):
        return cursor
    return int(cursor["offset"])


async def batch_v2_cursor_half(ctx: JobPassContext) -> JobPassResult:
    """Reads both shapes, writes the dict: a v1 drive serving beside it cannot read that."""
    start = _read_either(ctx.cursor)
    end = await _pay_chunk(ctx, start, _v1_key)
    return JobPassResult(
        cursor={"offset": end, "total": _total(ctx, end)}, done=end >= len(ctx.payload["payees"])
    )


async def batch_v2_cursor_fixed(ctx: JobPassContext) -> JobPassResult:
    """Reads both shapes, writes the int v1 reads; the total is derived, not carried."""
    start = _read_either(ctx.cursor)
    end = await _pay_chunk(ctx, start, _v1_key)
    if end >= len(ctx.payload["payees"]):
        ctx.count("total-checked", _total(ctx, end))
    return JobPassResult(cursor=end, done=end >= len(ctx.payload["payees"]))


# -- bug 2: the idempotency key ----------------------------------------------------------------


async def batch_v2_rekey(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: the key gains the chunk number; a transfer v1 attempted is repeated under it."""
    start = ctx.cursor or 0
    end = await _pay_chunk(ctx, start, _chunk_key)
    return JobPassResult(cursor=end, done=end >= len(ctx.payload["payees"]))


async def batch_v2_rekey_fixed(ctx: JobPassContext) -> JobPassResult:
    """The new key only for runs v2 started (``"keys": 2`` in their payload)."""
    start = ctx.cursor or 0
    end = await _pay_chunk(ctx, start, _fixed_key)
    return JobPassResult(cursor=end, done=end >= len(ctx.payload["payees"]))


# -- bug 3: a cursor misread in silence ---------------------------------------------------------


async def batch_v2_restart(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: anything but a dict cursor reads as 'start over'; a v1 run is walked again."""
    cursor = ctx.cursor if isinstance(ctx.cursor, dict) else {"offset": 0}
    start = cursor["offset"]
    end = await _pay_chunk(ctx, start, _v1_key)
    return JobPassResult(cursor={"offset": end}, done=end >= len(ctx.payload["payees"]))


async def batch_v2_restart_fixed(ctx: JobPassContext) -> JobPassResult:
    """Reads v1's int as the offset it is; writes the int (v1 drives may still serve)."""
    start = _read_either(ctx.cursor)
    end = await _pay_chunk(ctx, start, _v1_key)
    return JobPassResult(cursor=end, done=end >= len(ctx.payload["payees"]))


def _job(handler: Any) -> JobDefinition:
    return JobDefinition(MODULE, JOB, handler, retry=RETRY, lease_ms=LEASE_MS, services=("bank",))


V1 = _job(batch_v1)
V2_CURSOR = _job(batch_v2_cursor)
V2_CURSOR_HALF = _job(batch_v2_cursor_half)
V2_CURSOR_FIXED = _job(batch_v2_cursor_fixed)
V2_REKEY = _job(batch_v2_rekey)
V2_REKEY_FIXED = _job(batch_v2_rekey_fixed)
V2_RESTART = _job(batch_v2_restart)
V2_RESTART_FIXED = _job(batch_v2_restart_fixed)
