"""A scope database on an in-memory connection, its clock, and rows, for the store-layer tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

import attrs

from driver import JobRunKey, JobRunPatch, JobRunRow, JobStepRow, add_ms
from scopehost._database import ModuleOperation, ScopeDatabase

T0 = "2026-10-04T12:00:00.000Z"
LEASE_MS = 1_000


def at(ms: int) -> str:
    """The store time ``ms`` milliseconds after ``T0``."""
    return add_ms(T0, ms)


def connect() -> sqlite3.Connection:
    return sqlite3.connect(":memory:", isolation_level=None)


def open_db(
    *,
    scope_id: str = "scope-a",
    conn: sqlite3.Connection | None = None,
    operations: Mapping[str, ModuleOperation] | None = None,
) -> ScopeDatabase:
    return ScopeDatabase(conn or connect(), scope_id, operations=operations)


def new_row(run_id: str = "run-1", **changes: Any) -> JobRunRow:
    row = JobRunRow.fresh(
        run_id, JobRunKey("mod", "walk", "default"), payload='{"source":"s3"}', at=T0
    )
    return attrs.evolve(row, **changes)


def started(db: ScopeDatabase, run_id: str = "run-1", **changes: Any) -> JobRunRow:
    row = new_row(run_id, **changes)
    assert db.start_or_join(row.key, row, now=row.started_at) == row
    return row


def read(db: ScopeDatabase, run_id: str = "run-1") -> JobRunRow:
    found = db.connection.execute(
        "SELECT * FROM _substrat_job_runs WHERE id = ?", (run_id,)
    ).fetchone()
    assert found is not None, f"no run {run_id!r}"
    return JobRunRow.from_row(found)


def steps(db: ScopeDatabase, run_id: str = "run-1") -> list[JobStepRow]:
    return [
        JobStepRow(*row)
        for row in db.connection.execute(
            "SELECT step, result, attempts, last_error FROM _substrat_job_steps "
            "WHERE run_id = ? ORDER BY step",
            (run_id,),
        )
    ]


def claimed_and_begun(
    db: ScopeDatabase, run_id: str = "run-1", owner: str = "owner-1", *, now: str = T0
) -> None:
    """Claim ``run_id`` for ``owner`` with ``LEASE_MS`` and begin it, both at ``now``."""
    assert db.claim(run_id, owner, LEASE_MS, now=now) is not None
    assert db.begin(run_id, owner, LEASE_MS * 0.25, now=now)


def done_patch(*, cursor: str | None = '"c-1"', now: str = T0) -> JobRunPatch:
    return JobRunPatch(
        status="done",
        cursor=cursor,
        counters='{"walked":5}',
        attempts=0,
        last_error=None,
        updated_at=now,
        next_attempt_at=None,
        ended_at=now,
    )


def advanced_patch(*, cursor: str | None = '"c-1"', now: str = T0) -> JobRunPatch:
    return JobRunPatch(
        status="running",
        cursor=cursor,
        counters='{"walked":2}',
        attempts=0,
        last_error=None,
        updated_at=now,
        next_attempt_at=None,
        ended_at=None,
    )


#: The run table as a scope wrote it before the subject, lease and miss columns existed.
OLD_RUNS_DDL = """
CREATE TABLE _substrat_job_runs (
  id TEXT PRIMARY KEY, module_id TEXT NOT NULL, job TEXT NOT NULL, instance TEXT NOT NULL,
  payload TEXT NOT NULL, status TEXT NOT NULL, cursor TEXT,
  counters TEXT NOT NULL DEFAULT '{}', attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT,
  started_at TEXT NOT NULL, updated_at TEXT NOT NULL, next_attempt_at TEXT, ended_at TEXT
);
CREATE INDEX _substrat_job_runs_due ON _substrat_job_runs (status, next_attempt_at, id);
CREATE TABLE _substrat_job_steps (
  run_id TEXT NOT NULL, step TEXT NOT NULL, result TEXT, attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT, recorded_at TEXT NOT NULL, PRIMARY KEY (run_id, step)
);
"""
