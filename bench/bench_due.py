"""What the due read costs as runs wait: ``python -m bench.bench_due``.

A scope holds 10 due runs and N runs that wait (half leased, half backing off, all with their
next attempt after now). Each figure is the time of one ``due_keys(now, 50)`` through the scope's
actor, averaged over many calls; the ratio to the 100-waiting figure is what the read costs for
runs it does not return.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from typing import Any

import trio
import trio.testing

from scopehost import JOB_RUN_DUE_SQL, ScopeDatabase, open_scope_host

NOW = "2026-10-04T12:00:00.000Z"
STARTED = "2026-10-04T11:00:00.000Z"
LATER = "2026-10-04T13:00:00.000Z"
DUE = 10


def _fill(connection: sqlite3.Connection, waiting: int) -> None:
    rows: list[tuple[Any, ...]] = []
    for index in range(DUE):
        rows.append((f"due-{index:06d}", STARTED, None, None))
    for index in range(waiting):
        # Leased runs carry the lease's expiry; backing-off ones their next attempt: both later.
        owner = "01JBENCHOWNER0000000000000" if index % 2 else None
        rows.append(
            (f"wait-{index:06d}", "2026-10-04T11:00:00.000Z", "2026-10-04T13:00:00.000Z", owner)
        )
    connection.executemany(
        "INSERT INTO _substrat_job_runs (id, module_id, job, instance, payload, status, "
        "started_at, updated_at, next_attempt_at, lease_owner) "
        "VALUES (?, 'bench', 'walk', ?, '{}', 'running', ?, ?, ?, ?)",
        [
            (run_id, run_id, started, started, next_at, owner)
            for run_id, started, next_at, owner in rows
        ],
    )


def due_read_seconds(waiting: int, calls: int = 300) -> tuple[float, float]:
    """(seconds per due read through the actor, seconds per spec statement run directly)."""

    def database(connection: sqlite3.Connection, scope_id: str, **kwargs: Any) -> ScopeDatabase:
        opened = ScopeDatabase(connection, scope_id, **kwargs)
        if connection.execute("SELECT count(*) FROM _substrat_job_runs").fetchone()[0] == 0:
            _fill(connection, waiting)
        return opened

    async def main() -> tuple[float, float]:
        async with open_scope_host(database=database) as host:
            stub = host.stub("bench")
            assert len(await stub.due_keys(NOW, 50)) == DUE
            started = time.perf_counter()
            for _ in range(calls):
                await stub.due_keys(NOW, 50)
            through_actor = (time.perf_counter() - started) / calls
            connection = host._memory["bench"]
            started = time.perf_counter()
            for _ in range(calls):
                connection.execute(JOB_RUN_DUE_SQL, (NOW, 50)).fetchall()
            spec = (time.perf_counter() - started) / calls
        return through_actor, spec

    result: tuple[float, float] = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return result


def main(largest: int = 100_000) -> None:
    due_read_seconds(100, calls=50)  # warm
    base, base_spec = due_read_seconds(100)
    print(f"due runs: {DUE}; due_keys(now, 50) through the actor, per call")
    print(f"{'waiting':>9}  {'due read':>10}  {'vs 100':>7}  {'spec alone':>12}  {'vs 100':>7}")
    for waiting in (100, 1_000, 10_000, largest):
        through_actor, spec = due_read_seconds(waiting) if waiting != 100 else (base, base_spec)
        print(
            f"{waiting:>9,}  {through_actor * 1e6:>8.1f}µs  {through_actor / base:>6.2f}x"
            f"  {spec * 1e6:>10.1f}µs  {spec / base_spec:>6.2f}x"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
