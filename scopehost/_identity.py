"""Each scope file records the scope it belongs to, so a file of another scope is never served.

A scope's file is found by its name alone, and a name can lie: a file copied into place from
another scope, or, on a file system that ignores case, the one file that ``Tenant`` and ``tenant``
both name. So the first open of a file by a directory host writes the scope's id into a table of
the host's own, ``_scopehost_meta`` (beside the spec's tables, which keep their shape; a dump
reads only those), and every later open compares it with the scope being opened. A file without
the table (written before this record existed) is taken as the scope's own and stamped.
"""

from __future__ import annotations

import sqlite3
from typing import Final

META_TABLE: Final = "_scopehost_meta"
_META_DDL: Final = (
    f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
)
_SCOPE_KEY: Final = "scope_id"


def recorded_scope(conn: sqlite3.Connection) -> str | None:
    """The scope id the file records, or None when it records none (new, or older than this)."""
    try:
        found = conn.execute(
            f"SELECT value FROM {META_TABLE} WHERE key = ?", (_SCOPE_KEY,)
        ).fetchone()
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return None
        raise
    return None if found is None else str(found[0])


def record_scope(conn: sqlite3.Connection, scope_id: str) -> None:
    """Write ``scope_id`` into the file, in one transaction of its own."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_META_DDL)
        conn.execute(
            f"INSERT OR IGNORE INTO {META_TABLE} (key, value) VALUES (?, ?)",
            (_SCOPE_KEY, scope_id),
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def foreign_file_message(scope_id: str, path: str, owner: str) -> str:
    """Why a scope's file is refused: it records another scope."""
    message = (
        f"scope {scope_id!r}: its database file {path} belongs to scope {owner!r} (the file "
        "records it); nothing was read or written"
    )
    if owner.casefold() == scope_id.casefold():
        return (
            f"{message} — this file system ignores case, so scope ids that differ only in case "
            "name one file: use ids that differ otherwise"
        )
    return (
        f"{message} — put scope {scope_id!r}'s own file back, or move this one to "
        f"{owner}.sqlite3 where it belongs"
    )
