"""Module operations: what a handler's ``ctx.scope()`` can do inside the scope, as one message.

An operation is a plain function of the scope's connection, its arguments and the store's now,
run inside the transaction ``ScopeDatabase.invoke`` opens — so its writes land whole or not at all,
and it sees the store's clock, never the caller's.

The two defaults give a simulated handler somewhere to put its effects: ``record`` appends a row to
the module table ``items`` and deliberately has NO unique key, so a step body that ran twice leaves
two rows, and the duplicates the spec allows (at-least-once) can be counted afterwards instead of
being silently merged.
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


DEFAULT_OPERATIONS: Final[Mapping[str, ModuleOperation]] = {"record": record, "items": items}


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
