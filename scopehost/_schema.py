"""The scope's spine tables: created from the spec's DDL, and an older shape brought up to date.

A scope written before the subject, lease and admission-miss columns existed has a
``_substrat_job_runs`` without them. ``CREATE TABLE IF NOT EXISTS`` leaves such a table alone, so
each missing column is added (nullable, as the spec declares it) in the same transaction that runs
the DDL: either the scope opens with the whole current shape, or nothing changed.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from ._sql import JOB_RUN_DDL

RUNS_TABLE: Final = "_substrat_job_runs"
STEPS_TABLE: Final = "_substrat_job_steps"

#: The columns a later revision of the spec added, with their declared types. All nullable with no
#: default, which is what lets ``ALTER TABLE ... ADD COLUMN`` add them without rewriting a row:
#: every existing row reads NULL, which the spec defines as "none" for each of them.
LATER_RUN_COLUMNS: Final = (
    ("subject_id", "TEXT"),
    ("lease_owner", "TEXT"),
    ("lease_began_at", "TEXT"),
    ("admission_misses", "INTEGER"),
)


def run_columns(conn: sqlite3.Connection) -> list[str]:
    """The names of ``_substrat_job_runs``'s columns, in table order (empty if it is absent)."""
    return [str(info[1]) for info in conn.execute(f"PRAGMA table_info({RUNS_TABLE})")]


def step_columns(conn: sqlite3.Connection) -> list[str]:
    """The names of ``_substrat_job_steps``'s columns, in table order (empty if it is absent)."""
    return [str(info[1]) for info in conn.execute(f"PRAGMA table_info({STEPS_TABLE})")]


def ensure_schema(conn: sqlite3.Connection) -> tuple[str, ...]:
    """Create the spec's tables and indexes, or upgrade an older shape in place, as ONE
    transaction. Returns the names of the columns it had to add (empty for a current shape)."""
    if conn.in_transaction:
        raise RuntimeError(
            "the scope database's connection is inside a transaction; "
            "finish it before opening the scope"
        )
    try:
        # executescript runs the DDL's several statements; starting the script with BEGIN keeps
        # them inside our transaction instead of each committing on its own.
        conn.executescript("BEGIN IMMEDIATE;" + JOB_RUN_DDL)
        present = set(run_columns(conn))
        added = tuple(name for name, _ in LATER_RUN_COLUMNS if name not in present)
        for name, kind in LATER_RUN_COLUMNS:
            if name in added:
                conn.execute(f"ALTER TABLE {RUNS_TABLE} ADD COLUMN {name} {kind}")
        conn.execute("COMMIT")
    except BaseException:
        _roll_back(conn)
        raise
    return added


def _roll_back(conn: sqlite3.Connection) -> None:
    # SQLite ends the transaction itself on some errors; only one still open needs ending.
    if conn.in_transaction:
        conn.execute("ROLLBACK")
