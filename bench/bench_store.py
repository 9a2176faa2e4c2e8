"""How fast a scope claims: the raw statement, the store, and the actor over its link.

Run as ``python -m bench.bench_store [N]``. Every figure claims the same N due runs once each, on
an in-memory database, so every claim wins and writes:

* raw: ``JOB_RUN_CLAIM_SQL`` executed with precomputed parameters, in ``BEGIN IMMEDIATE`` /
  ``COMMIT`` — the floor any adapter pays;
* store: ``ScopeDatabase.claim`` called directly — what a store operation adds (checking its
  inputs, the expiry from the store's now, the takeover read, rows as values);
* actor: ``ScopeStub.claim`` through the scope actor and a zero-latency link, one caller at a time
  and 16 at once — what the input gate and the RPC add;
* actor + latency: the same with 5 ms of virtual latency on both legs (under ``MockClock``, so the
  latency costs scheduling work, never wall time).

Figures are printed as ratios inside one run, because the machines are shared and noisy.
"""

from __future__ import annotations

import sqlite3
import sys
import time

import trio
import trio.testing

from driver import JOB_LEASE_EXPIRED_NOTE, JobRunKey, JobRunRow, iso_from_ms, parse_iso_ms
from scopehost import JOB_RUN_CLAIM_SQL, Link, ScopeDatabase, open_scope_host

T0 = "2026-10-04T12:00:00.000Z"
OWNER = "01JBENCH000000000000000OWNR"
LEASE_MS = 60_000
DEFAULT_N = 20_000


def _row(index: int) -> JobRunRow:
    key = JobRunKey("bench", "walk", f"i{index}")
    return JobRunRow.fresh(f"01JBENCH{index:018d}", key, payload="{}", at=T0)


def _fill(database: ScopeDatabase, n: int) -> list[str]:
    rows = [_row(index) for index in range(n)]
    for row in rows:
        database.start_or_join(row.key, row, now=T0)
    return [row.id for row in rows]


def raw_claim_rate(n: int = DEFAULT_N) -> float:
    """Claims per second of ``JOB_RUN_CLAIM_SQL`` alone, one committed transaction each."""
    database = ScopeDatabase(sqlite3.connect(":memory:", isolation_level=None), "raw")
    ids = _fill(database, n)
    expiry = iso_from_ms(parse_iso_ms(T0) + LEASE_MS)
    params = [(OWNER, expiry, T0, JOB_LEASE_EXPIRED_NOTE, run_id, T0) for run_id in ids]
    execute = database.connection.execute
    started = time.perf_counter()
    for values in params:
        execute("BEGIN IMMEDIATE")
        claimed = execute(JOB_RUN_CLAIM_SQL, values).fetchall()
        execute("COMMIT")
        assert claimed
    return n / (time.perf_counter() - started)


def database_claim_rate(n: int = DEFAULT_N) -> float:
    """Claims per second of ``ScopeDatabase.claim``, called directly (no actor, no link)."""
    database = ScopeDatabase(sqlite3.connect(":memory:", isolation_level=None), "store")
    ids = _fill(database, n)
    claim = database.claim
    started = time.perf_counter()
    for run_id in ids:
        assert claim(run_id, OWNER, LEASE_MS, now=T0) is not None
    return n / (time.perf_counter() - started)


def actor_claim_rate(n: int = DEFAULT_N, *, callers: int = 1, latency_ms: float = 0.0) -> float:
    """Claims per second through a scope actor and a link, ``callers`` at once."""

    async def main() -> float:
        async with open_scope_host() as host:
            setup = host.stub("bench")
            ids = [row.id for row in [_row(i) for i in range(n)]]
            for index in range(n):
                row = _row(index)
                await setup.start_or_join(row.key, row)
            stub = host.stub("bench", link=Link(request_ms=latency_ms, reply_ms=latency_ms))
            shares = [ids[k::callers] for k in range(callers)]

            async def caller(share: list[str]) -> None:
                for run_id in share:
                    assert await stub.claim(run_id, OWNER, LEASE_MS) is not None

            started = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for share in shares:
                    nursery.start_soon(caller, share)
            return n / (time.perf_counter() - started)

    rate: float = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return rate


def main(n: int = DEFAULT_N) -> None:
    # Warm every path once so none pays for first-use costs inside its timing.
    for warm in (raw_claim_rate, database_claim_rate, actor_claim_rate):
        warm(500)
    raw = raw_claim_rate(n)
    figures = [
        ("store: ScopeDatabase.claim", database_claim_rate(n)),
        ("actor, 1 caller, no latency", actor_claim_rate(n)),
        ("actor, 16 callers, no latency", actor_claim_rate(n, callers=16)),
        ("actor, 1 caller, 5 ms each leg", actor_claim_rate(n, latency_ms=5)),
        ("actor, 16 callers, 5 ms each leg", actor_claim_rate(n, callers=16, latency_ms=5)),
    ]
    print(f"claims per figure: {n} (each a distinct due run, each claim wins)")
    print(f"{'raw sqlite3 claim statement':<36}{raw:>10,.0f} claims/s   1.00 of raw")
    for label, rate in figures:
        print(f"{label:<36}{rate:>10,.0f} claims/s   {rate / raw:.2f} of raw")
    rates = dict(figures)
    for callers in ("1 caller", "16 callers"):
        ratio = rates[f"actor, {callers}, 5 ms each leg"] / rates[f"actor, {callers}, no latency"]
        print(f"latency on both legs, {callers}: {ratio:.2f} of the no-latency rate")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_N)
