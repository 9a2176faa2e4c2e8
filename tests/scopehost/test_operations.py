"""Module operations: run by name inside one transaction, with ``record``, ``record_once`` and
``items`` built in."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from driver import ValidationFailed
from scopehost._database import ScopeDatabase

from .store_support import T0, at, open_db


def _items_table_exists(db: ScopeDatabase) -> bool:
    found = db.connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'items'"
    ).fetchone()
    return found is not None


def test_record_appends_rows_with_no_unique_key_and_items_reads_them_back() -> None:
    db = open_db()
    first = db.invoke("record", {"kind": "walked", "key": "obj-1", "data": {"n": 1}}, now=T0)
    again = db.invoke("record", {"kind": "walked", "key": "obj-1", "data": {"n": 1}}, now=at(1))
    other = db.invoke("record", {"kind": "note", "data": ["é", None]}, now=at(2))

    assert (first, again, other) == (1, 2, 3)
    assert db.invoke("items", {}, now=at(3)) == [
        {"seq": 1, "kind": "walked", "key": "obj-1", "data": {"n": 1}, "at": T0},
        {"seq": 2, "kind": "walked", "key": "obj-1", "data": {"n": 1}, "at": at(1)},
        {"seq": 3, "kind": "note", "key": None, "data": ["é", None], "at": at(2)},
    ]
    assert [item["seq"] for item in db.invoke("items", {"kind": "note"}, now=at(3))] == [3]


def test_record_once_records_a_key_once_and_says_whether_it_did() -> None:
    db = open_db()
    first = db.invoke("record_once", {"kind": "mail", "key": "run-1/send", "data": 1}, now=T0)
    again = db.invoke("record_once", {"kind": "mail", "key": "run-1/send", "data": 2}, now=at(1))
    # The same key under another kind is another effect; a plain record does not dedupe.
    other_kind = db.invoke("record_once", {"kind": "note", "key": "run-1/send"}, now=at(2))
    plain = db.invoke("record", {"kind": "mail", "key": "run-1/send", "data": 3}, now=at(3))

    assert (first, again, other_kind, plain) == (True, False, True, 3)
    assert db.invoke("items", {}, now=at(4)) == [
        {"seq": 1, "kind": "mail", "key": "run-1/send", "data": 1, "at": T0},
        {"seq": 2, "kind": "note", "key": "run-1/send", "data": None, "at": at(2)},
        {"seq": 3, "kind": "mail", "key": "run-1/send", "data": 3, "at": at(3)},
    ]
    # After a plain record of the key, record_once still finds it there.
    assert db.invoke("record_once", {"kind": "mail", "key": "run-1/send"}, now=at(5)) is False


def test_record_once_finds_a_key_recorded_before_it_ever_ran() -> None:
    db = open_db()
    db.invoke("record", {"kind": "mail", "key": "k"}, now=T0)

    assert db.invoke("record_once", {"kind": "mail", "key": "k"}, now=at(1)) is False
    assert len(db.invoke("items", {}, now=at(2))) == 1


def test_record_once_that_fails_leaves_nothing() -> None:
    db = open_db()
    with pytest.raises(ValidationFailed, match=r"^args\.data is bytes"):
        db.invoke("record_once", {"kind": "k", "key": "x", "data": b"x"}, now=T0)

    assert db.invoke("items", {}, now=T0) == []
    assert db.invoke("record_once", {"kind": "k", "key": "x"}, now=T0) is True


def test_record_stores_data_as_compact_json() -> None:
    db = open_db()
    db.invoke("record", {"kind": "k", "data": {"a": [1, 2], "b": "é"}}, now=T0)

    assert db.connection.execute("SELECT data FROM items").fetchone()[0] == '{"a":[1,2],"b":"é"}'


def test_items_of_a_scope_that_recorded_nothing_is_empty() -> None:
    assert open_db().invoke("items", {}, now=T0) == []


def test_data_that_is_not_queue_safe_is_refused_and_nothing_is_recorded() -> None:
    db = open_db()
    with pytest.raises(
        ValidationFailed,
        match=(
            r"^args\.data\.blob is bytes — pass an id that finds the bytes, or text; a run "
            r"carries ids and configuration, "
            r"never bytes, class instances or functions$"
        ),
    ):
        db.invoke("record", {"kind": "k", "data": {"blob": b"x"}}, now=T0)

    assert db.invoke("items", {}, now=T0) == []


@pytest.mark.parametrize(
    ("operation", "args", "message"),
    [
        ("record", {}, r"^args\.kind is None; record needs a str kind$"),
        (
            "record",
            {"kind": "k", "key": 5},
            r"^args\.key is 5; record needs a str key \(or None\)$",
        ),
        (
            "record",
            {"kind": "k", "colour": "red"},
            r"^args has 'colour', which record does not take; it takes 'kind', 'key', 'data'$",
        ),
        ("items", {"kind": 1}, r"^args\.kind is 1; items needs a str kind \(or None\)$"),
        (
            "record_once",
            {"kind": "k"},
            r"^args\.key is None; record_once needs a str key$",
        ),
        (
            "record_once",
            {"kind": "k", "key": "x", "when": 1},
            r"^args has 'when', which record_once does not take; it takes 'kind', 'key', 'data'$",
        ),
    ],
)
def test_bad_arguments_are_refused_by_name(
    operation: str, args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationFailed, match=message):
        open_db().invoke(operation, args, now=T0)


def test_an_unknown_operation_is_refused_by_name_before_anything_runs() -> None:
    db = open_db(operations={"tally": lambda conn, args, now: 0})
    with pytest.raises(
        ValidationFailed,
        match=(
            r"^operation is 'recrod', which this scope does not have; "
            r"it has 'items', 'record', 'record_once', 'tally'$"
        ),
    ):
        db.invoke("recrod", {"kind": "k"}, now=T0)

    assert not db.connection.in_transaction
    assert not _items_table_exists(db)


def test_a_registered_operation_runs_with_the_store_now_inside_one_transaction() -> None:
    seen: list[tuple[dict[str, Any], str, bool]] = []

    def tally(conn: sqlite3.Connection, args: dict[str, Any], now: str) -> int:
        seen.append((args, now, conn.in_transaction))
        conn.execute("CREATE TABLE IF NOT EXISTS tally (n INTEGER)")
        conn.execute("INSERT INTO tally VALUES (?)", (args["n"],))
        return int(conn.execute("SELECT sum(n) FROM tally").fetchone()[0])

    db = open_db(operations={"tally": tally})

    assert db.invoke("tally", {"n": 2}, now=T0) == 2
    assert db.invoke("tally", {"n": 3}, now=at(1)) == 5
    assert seen == [({"n": 2}, T0, True), ({"n": 3}, at(1), True)]
    assert not db.connection.in_transaction


def test_an_operation_that_raises_leaves_none_of_its_writes() -> None:
    def half_then_fail(conn: sqlite3.Connection, args: dict[str, Any], now: str) -> None:
        conn.execute(
            "INSERT INTO items (kind, key, data, at) VALUES ('k', NULL, 'null', ?)", (now,)
        )
        raise LookupError("upstream said no")

    db = open_db(operations={"half": half_then_fail})
    db.invoke("items", {}, now=T0)

    with pytest.raises(LookupError, match=r"^upstream said no$"):
        db.invoke("half", {}, now=T0)

    assert db.invoke("items", {}, now=T0) == []


def test_an_operation_may_replace_a_default() -> None:
    db = open_db(operations={"items": lambda conn, args, now: "mine"})

    assert db.invoke("items", {}, now=T0) == "mine"


def test_the_operation_gets_a_copy_of_its_arguments() -> None:
    def mutate(conn: sqlite3.Connection, args: dict[str, Any], now: str) -> None:
        args["changed"] = True

    args: dict[str, Any] = {"x": 1}
    open_db(operations={"mutate": mutate}).invoke("mutate", args, now=T0)

    assert args == {"x": 1}


@pytest.mark.parametrize(
    ("operations", "message"),
    [
        (
            {"": lambda conn, args, now: None},
            r"^operations has the name ''; name each operation with a non-empty str$",
        ),
        (
            {"x": 5},
            r"^operations\.x is 5; an operation is a function \(conn, args, now\) -> result$",
        ),
    ],
)
def test_a_bad_registration_is_refused_when_the_scope_opens(
    operations: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationFailed, match=message):
        open_db(operations=operations)


def test_arguments_that_are_not_a_mapping_are_refused() -> None:
    with pytest.raises(
        ValidationFailed, match=r"^args is \[1\]; pass the operation's arguments as a dict$"
    ):
        open_db().invoke("items", [1], now=T0)  # type: ignore[arg-type]
