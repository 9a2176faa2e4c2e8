"""How fast the store claims: the raw claim statement against ``ScopeDatabase.claim``.

Run as ``python -m bench.bench_store``. Both loops claim one run over and over on an in-memory
database: each claim takes a 1 ms lease and the next comes 1 ms later, exactly at the expiry, so
every claim wins and writes. The raw loop executes ``JOB_RUN_CLAIM_SQL`` with precomputed
parameters and commits; ``ScopeDatabase.claim`` adds what a store operation must do besides —
checking its inputs, computing the expiry from the store's now, the takeover read, and the explicit
transaction. The ratio between them is the store layer's own cost; the actor's round trip, measured
against the same raw rate, is built on top of it.
"""

from __future__ import annotations

import sqlite3
import time

from driver import JOB_LEASE_EXPIRED_NOTE, JobRunRow, iso_from_ms, parse_iso_ms
from scopehost._database import ScopeDatabase
from scopehost._sql import JOB_RUN_CLAIM_SQL

T0 = "2026-10-04T12:00:00.000Z"
RUN_ID = "01JBENCH0000000000000000RUN"
OWNER = "01JBENCH000000000000000OWNR"
DEFAULT_N = 20_000


def _row() -> JobRunRow:
    return JobRunRow(
        id=RUN_ID,
        module_id="bench",
        job="walk",
        instance="default",
        payload="{}",
        subject_id=None,
        status="running",
        cursor=None,
        counters="{}",
        attempts=0,
        last_error=None,
        started_at=T0,
        updated_at=T0,
        next_attempt_at=None,
        ended_at=None,
    )


def _times(n: int) -> list[str]:
    start = parse_iso_ms(T0)
    return [iso_from_ms(start + offset) for offset in range(n + 1)]


def _open(scope_id: str) -> ScopeDatabase:
    db = ScopeDatabase(sqlite3.connect(":memory:", isolation_level=None), scope_id)
    row = _row()
    db.start_or_join(row.key, row, now=T0)
    return db


def raw_claim_rate(n: int = DEFAULT_N) -> float:
    """Claims per second of ``JOB_RUN_CLAIM_SQL`` alone, one committed statement each."""
    conn = _open("bench-raw").connection
    times = _times(n)
    params = [
        (OWNER, times[index + 1], times[index], JOB_LEASE_EXPIRED_NOTE, RUN_ID, times[index])
        for index in range(n)
    ]
    execute = conn.execute
    started = time.perf_counter()
    for values in params:
        execute("BEGIN IMMEDIATE")
        claimed = execute(JOB_RUN_CLAIM_SQL, values).fetchall()
        execute("COMMIT")
        assert claimed
    return n / (time.perf_counter() - started)


def database_claim_rate(n: int = DEFAULT_N) -> float:
    """Claims per second of ``ScopeDatabase.claim``, called directly (no actor, no link)."""
    db = _open("bench-db")
    times = _times(n)
    claim = db.claim
    started = time.perf_counter()
    for index in range(n):
        assert claim(RUN_ID, OWNER, 1, now=times[index]) is not None
    return n / (time.perf_counter() - started)


def main(n: int = DEFAULT_N) -> None:
    # Warm both paths once so neither pays for first-use costs inside its timing.
    raw_claim_rate(500)
    database_claim_rate(500)
    raw = raw_claim_rate(n)
    direct = database_claim_rate(n)
    print(f"claims per run: {n}")
    print(f"raw sqlite3 claim statement  {raw:>12,.0f} ops/s")
    print(f"ScopeDatabase.claim          {direct:>12,.0f} ops/s   ratio {direct / raw:.2f} of raw")


if __name__ == "__main__":
    main()
