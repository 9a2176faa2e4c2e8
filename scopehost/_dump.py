"""Dumps: a scope's job runs and step ledgers, exported and replayed row for row.

Rows travel verbatim — no decoding, no re-encoding — so a dump replays exactly what the source
held, malformed JSON included (the operator read is what reports that, with ``decode_error``).

The one thing a copy must not carry is a claim to run. A run that is ``running`` in a dump taken
from another scope did not run there: it runs in the scope that asked for it, never in a copy, or
one walk would run twice. So importing into a DIFFERENT scope fails every running run with a note
saying where it came from; importing into its OWN scope (a restore) keeps it running, and resumable.
"""

from __future__ import annotations

import sqlite3
from typing import Final

import attrs

from driver import JobRunRow

from ._schema import RUNS_TABLE, STEPS_TABLE

_RUN_COLUMNS: Final = tuple(field.name for field in attrs.fields(JobRunRow))


@attrs.frozen
class JobStepDumpRow:
    """The ``_substrat_job_steps`` row, every column, as a dump carries it."""

    run_id: str
    step: str
    result: str | None
    attempts: int
    last_error: str | None
    recorded_at: str


_STEP_COLUMNS: Final = tuple(field.name for field in attrs.fields(JobStepDumpRow))


@attrs.frozen
class JobRunDump:
    """Every run and step row of one scope, in id order, as exported."""

    scope_id: str
    runs: tuple[JobRunRow, ...]
    steps: tuple[JobStepDumpRow, ...]


def not_carried_note(source_scope_id: str) -> str:
    """``last_error`` of a running run imported into a scope other than its own."""
    return (
        f"not carried: copied from scope {source_scope_id} before it ran; "
        "it runs in the scope that asked for it, never in a copy"
    )


def export_rows(conn: sqlite3.Connection, scope_id: str) -> JobRunDump:
    runs = tuple(
        JobRunRow.from_row(row) for row in conn.execute(f"SELECT * FROM {RUNS_TABLE} ORDER BY id")
    )
    steps = tuple(
        JobStepDumpRow(*row)
        for row in conn.execute(
            f"SELECT {', '.join(_STEP_COLUMNS)} FROM {STEPS_TABLE} ORDER BY run_id, step"
        )
    )
    return JobRunDump(scope_id, runs, steps)


def _carried(run: JobRunRow, *, foreign: bool, source_scope_id: str, now: str) -> JobRunRow:
    if not foreign or run.status != "running":
        return run
    return attrs.evolve(
        run,
        status="failed",
        last_error=not_carried_note(source_scope_id),
        updated_at=now,
        next_attempt_at=None,
        ended_at=now,
        lease_owner=None,
        lease_began_at=None,
    )


def import_rows(
    conn: sqlite3.Connection,
    dump: JobRunDump,
    *,
    scope_id: str,
    source_scope_id: str,
    now: str,
) -> int:
    """Replay ``dump`` into this scope (``INSERT OR REPLACE``) inside the caller's transaction;
    returns the number of runs imported."""
    foreign = dump.scope_id != scope_id
    run_sql = (
        f"INSERT OR REPLACE INTO {RUNS_TABLE} ({', '.join(_RUN_COLUMNS)}) "
        f"VALUES ({', '.join('?' for _ in _RUN_COLUMNS)})"
    )
    conn.executemany(
        run_sql,
        (
            attrs.astuple(_carried(run, foreign=foreign, source_scope_id=source_scope_id, now=now))
            for run in dump.runs
        ),
    )
    step_sql = (
        f"INSERT OR REPLACE INTO {STEPS_TABLE} ({', '.join(_STEP_COLUMNS)}) "
        f"VALUES ({', '.join('?' for _ in _STEP_COLUMNS)})"
    )
    conn.executemany(step_sql, (attrs.astuple(step) for step in dump.steps))
    return len(dump.runs)
