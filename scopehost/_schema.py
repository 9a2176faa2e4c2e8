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
    if _is_new_memory_database(conn):
        # A simulated world opens a few fresh in-memory scopes, and running the DDL costs each
        # ten times what loading the same tables ready-made does: the result is the same
        # database, page for page, since the template is this very DDL run once.
        conn.deserialize(_memory_template())
        return ()
    return _create_or_upgrade(conn)


def _create_or_upgrade(conn: sqlite3.Connection) -> tuple[str, ...]:
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


def _is_new_memory_database(conn: sqlite3.Connection) -> bool:
    """Whether ``conn``'s main database lives in memory and has never held a table (schema
    version 0), so that loading the template into it replaces nothing."""
    if not _CAN_DESERIALIZE:
        return False
    (version,) = conn.execute("PRAGMA schema_version").fetchone()
    if version != 0:
        return False
    return any(
        name == "main" and not path for _, name, path in conn.execute("PRAGMA database_list")
    )


#: Whether this sqlite3 module can load a serialized database (SQLite built with it, which
#: CPython's own builds are); without it every new scope runs the DDL, as a file scope does.
_CAN_DESERIALIZE: Final = hasattr(sqlite3.Connection, "deserialize")
_template: bytes | None = None


def _memory_template() -> bytes:
    """The spec's tables in a fresh in-memory database, serialized once per process."""
    global _template
    if _template is None:
        made = sqlite3.connect(":memory:", isolation_level=None)
        try:
            _create_or_upgrade(made)
            _template = made.serialize()
        finally:
            made.close()
    return _template
