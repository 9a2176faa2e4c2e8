"""Each scope file records the scope it belongs to, so a file of another scope is never served.

A scope's file is found by its name alone, and a name can lie: a file copied into place from
another scope, or, on a file system that ignores case, the one file that ``Tenant`` and ``tenant``
both name. So the first open of a file by a directory host writes the scope's id into a table of
the host's own, ``_scopehost_meta`` (beside the spec's tables, which keep their shape; a dump
reads only those), and every later open compares it with the scope being opened. A file without
the table (written before this record existed) is taken as the scope's own and stamped, unless it
holds tables and none of them is the host's (``foreign_tables``): that is a database of someone
else's, found at a scope's path, and writing the spec's tables into it would change a file that
is not the host's to change. An empty file, or a fresh one, holds no table and is the scope's.
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


#: The tables a scope's file may hold that are the host's: the spec's, the items of the scope's
#: own operations, and the scope record. A file holding one of them was written by a host.
_OWN_TABLES: Final = frozenset({"_substrat_job_runs", "_substrat_job_steps", "items", META_TABLE})


def foreign_tables(conn: sqlite3.Connection) -> list[str]:
    """The tables of a file that records no scope and holds tables, none of them the host's
    (someone else's database at a scope's path); an empty list when the file may be the
    scope's own."""
    tables = [
        str(name)
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
            "ESCAPE '\\' ORDER BY name"
        )
    ]
    return [] if _OWN_TABLES.intersection(tables) else tables


def unowned_file_message(scope_id: str, path: str, tables: list[str]) -> str:
    """Why a scope's file is refused: it is a database of someone else's."""
    shown = ", ".join(repr(name) for name in tables[:5]) + (", ..." if len(tables) > 5 else "")
    return (
        f"scope {scope_id!r}: its database file {path} is not a scope's: it holds tables of its "
        f"own ({shown}) and records no scope; nothing was read or written — move that file out "
        f"of the host's directory, and scope {scope_id!r} starts in a file of its own"
    )


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
