"""Module operations: what a handler's ``ctx.scope()`` can do inside the scope, as one message.

An operation is a plain function of the scope's connection, its arguments and the store's now,
run inside the transaction ``ScopeDatabase.invoke`` opens — so its writes land whole or not at all,
and it sees the store's clock, never the caller's.

The three defaults give a handler somewhere to put its effects: ``record`` appends a row to the
module table ``items`` and deliberately has NO unique key, so a step body that ran twice leaves two
rows, and the duplicates the spec allows (at-least-once) can be counted afterwards instead of being
silently merged. ``record_once`` is the idempotent way: it looks for the key and writes only if it
is new, both in the one transaction, so no other call can land between the look and the write (a
body that first reads ``items`` and then calls ``record`` makes two calls, and another pass's
write can land between them). ``items`` reads the rows back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from driver import ValidationFailed, assert_queue_safe, dumps, loads

#: ``(conn, args, now) -> result``: runs inside the invoking transaction; raising rolls it back.
ModuleOperation: TypeAlias = Callable[[sqlite3.Connection, dict[str, Any], str], Any]

ITEMS_DDL: Final = (
    "CREATE TABLE IF NOT EXISTS items "
    "(seq INTEGER PRIMARY KEY, kind TEXT, key TEXT, data TEXT, at TEXT)"
)
ITEMS_BY_KEY_DDL: Final = "CREATE INDEX IF NOT EXISTS items_by_key ON items (kind, key)"


def _text_arg(args: Mapping[str, Any], name: str, *, required: bool, operation: str) -> str | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ValidationFailed.at(
            f"args.{name}",
            f"is {value!r}; {operation} needs a str {name}" + ("" if required else " (or None)"),
        )
    return value


def _refuse_unknown_args(args: Mapping[str, Any], known: tuple[str, ...], operation: str) -> None:
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise ValidationFailed.at(
            "args",
            f"has {', '.join(repr(name) for name in unknown)}, which {operation} does not take; "
            f"it takes {', '.join(repr(name) for name in known)}",
        )


def record(conn: sqlite3.Connection, args: dict[str, Any], now: str) -> int:
    """Append one effect row ``{kind, key, data}`` stamped with the store's now; returns its seq.

    ``data`` is held to the queue-safety rule and stored as compact JSON, so what ``items`` reads
    back is exactly what was recorded."""
    _refuse_unknown_args(args, ("kind", "key", "data"), "record")
    kind = _text_arg(args, "kind", required=True, operation="record")
    key = _text_arg(args, "key", required=False, operation="record")
    data = args.get("data")
    assert_queue_safe(data, "args.data")
    conn.execute(ITEMS_DDL)
    cursor = conn.execute(
        "INSERT INTO items (kind, key, data, at) VALUES (?, ?, ?, ?)",
        (kind, key, dumps(data), now),
    )
    seq = cursor.lastrowid
    assert seq is not None  # an INSERT into a rowid table always has one
    return seq


def record_once(conn: sqlite3.Connection, args: dict[str, Any], now: str) -> bool:
    """Append the effect row ``{kind, key, data}`` unless ``items`` already holds a row of that
    ``kind`` and ``key``; True when it recorded, False when the key was already there.

    The look and the write run in the one transaction of this call, which the scope serializes
    with every other call: two passes that race to record the same key leave one row, whatever
    the timing. ``key`` is required here: it is what makes the effect once."""
    _refuse_unknown_args(args, ("kind", "key", "data"), "record_once")
    kind = _text_arg(args, "kind", required=True, operation="record_once")
    key = _text_arg(args, "key", required=True, operation="record_once")
    data = args.get("data")
    assert_queue_safe(data, "args.data")
    conn.execute(ITEMS_DDL)
    # Only this operation looks rows up by key; ``record`` alone never pays for the index.
    conn.execute(ITEMS_BY_KEY_DDL)
    if conn.execute(
        "SELECT 1 FROM items WHERE kind = ? AND key = ? LIMIT 1", (kind, key)
    ).fetchone():
        return False
    conn.execute(
        "INSERT INTO items (kind, key, data, at) VALUES (?, ?, ?, ?)",
        (kind, key, dumps(data), now),
    )
    return True


def items(conn: sqlite3.Connection, args: dict[str, Any], now: str) -> list[dict[str, Any]]:
    """Every effect row in ``seq`` order, optionally only those of one ``kind``, data decoded."""
    _refuse_unknown_args(args, ("kind",), "items")
    kind = _text_arg(args, "kind", required=False, operation="items")
    conn.execute(ITEMS_DDL)
    if kind is None:
        rows = conn.execute("SELECT seq, kind, key, data, at FROM items ORDER BY seq")
    else:
        rows = conn.execute(
            "SELECT seq, kind, key, data, at FROM items WHERE kind = ? ORDER BY seq", (kind,)
        )
    return [
        {"seq": seq, "kind": kind_, "key": key, "data": loads(data), "at": at}
        for seq, kind_, key, data, at in rows
    ]


DEFAULT_OPERATIONS: Final[Mapping[str, ModuleOperation]] = {
    "record": record,
    "record_once": record_once,
    "items": items,
}


def merge_operations(
    operations: Mapping[str, ModuleOperation] | None,
) -> dict[str, ModuleOperation]:
    """The defaults, overridden or extended by ``operations``; every entry checked once, here,
    so a bad registration fails when the scope opens rather than when a handler first calls it."""
    merged = dict(DEFAULT_OPERATIONS)
    for name, operation in (operations or {}).items():
        if not isinstance(name, str) or not name:
            raise ValidationFailed.at(
                "operations", f"has the name {name!r}; name each operation with a non-empty str"
            )
        if not callable(operation):
            raise ValidationFailed.at(
                f"operations.{name}",
                f"is {operation!r}; an operation is a function (conn, args, now) -> result",
            )
        merged[name] = operation
    return merged
