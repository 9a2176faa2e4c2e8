"""JSON text at the store's doors: what the store's readers could not read alike is refused, by
path, with nothing written; text that is not JSON at all travels verbatim."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver import JOB_JSON_MAX_DEPTH, JOB_JSON_MAX_INT_DIGITS, ValidationFailed, job_run_of
from driver._json import _careful_problem, json_text_problem, loads, nesting_depth

from .store_support import (
    LEASE_MS,
    T0,
    advanced_patch,
    at,
    claimed_and_begun,
    new_row,
    open_db,
    read,
    started,
    steps,
)

NAN = '{"x":NaN,"who":{"subjectId":"s1","piiClass":"email"}}'
DEEP = "[" * (JOB_JSON_MAX_DEPTH + 1) + "]" * (JOB_JSON_MAX_DEPTH + 1)
LONG_INT = '{"n":' + "9" * (JOB_JSON_MAX_INT_DIGITS + 1) + "}"

NAN_MESSAGE = (
    "holds NaN, Infinity or -Infinity, which JSON does not have — store a number JSON carries, "
    "or null"
)
DEEP_MESSAGE = (
    f"nests lists and objects more than {JOB_JSON_MAX_DEPTH} levels deep, more than a run's JSON "
    "carries — flatten it"
)
LONG_INT_MESSAGE = (
    f"holds an int of more than {JOB_JSON_MAX_INT_DIGITS} digits, more than a run's JSON "
    "carries — store a number that large as a str"
)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (NAN, NAN_MESSAGE),
        ("[Infinity]", NAN_MESSAGE),
        ('{"a":-Infinity}', NAN_MESSAGE),
        (DEEP, DEEP_MESSAGE),
        ("[" * 5_000, DEEP_MESSAGE),  # not JSON, but depth is measured on any text alike
        (LONG_INT, LONG_INT_MESSAGE),
        ("-" + "1" * (JOB_JSON_MAX_INT_DIGITS + 1), LONG_INT_MESSAGE),
        # Allowed: JSON within the limits, and text that is not JSON at all (verbatim).
        ("[" * JOB_JSON_MAX_DEPTH + "]" * JOB_JSON_MAX_DEPTH, None),
        ('"' + "[" * 500 + '"', None),  # brackets inside a string do not nest
        ('["\\"' + "[" * 500 + '"]', None),  # nor after an escaped quote
        ("1" * JOB_JSON_MAX_INT_DIGITS, None),
        ('{"x":1.5e300,"y":"NaN"}', None),
        ("{not json", None),
        ("[NaN,", None),  # not JSON even with the constants: verbatim
    ],
)
def test_which_json_text_may_enter_the_store(text: str, problem: str | None) -> None:
    assert json_text_problem(text) == problem


_LONG_INT = "9" * (JOB_JSON_MAX_INT_DIGITS + 1)
#: Pieces of JSON text, refused ones and broken ones among them, to be joined at random.
_PIECES = st.sampled_from(
    [
        *("[", "]", "{", "}", ",", ":", '"a"', "1", "-2", "1.5", "null", "NaN", "-Infinity"),
        *(_LONG_INT, f"-{_LONG_INT}", f'"{_LONG_INT}"', "x", '"\\"', "1e309", "-1E400"),
    ]
)


@given(st.lists(_PIECES, max_size=12).map("".join))
def test_the_one_fast_reading_says_what_the_careful_reading_says(text: str) -> None:
    # Text JSON within the limits is vetted by one reading; anything else is read with care. The
    # two must agree on every text, refused or broken.
    assert json_text_problem(text) == _careful_problem(text)


def test_the_depth_scan_counts_only_brackets_outside_strings() -> None:
    assert nesting_depth('[{"a":"]]]]"' + ",[" * 200 + "]" * 200 + "}]" * 0) == 202
    assert nesting_depth('"\\\\"' + "[" * 200) == 200  # an escaped backslash ends no string


def test_the_stores_reader_reads_json_as_json_does() -> None:
    with pytest.raises(ValueError, match="holds NaN, which JSON does not have"):
        loads(NAN)
    with pytest.raises(ValueError, match="nests lists and objects more than 128"):
        loads("[" * 100_000 + "]" * 100_000)  # refused before the parser could run out of stack
    assert loads('{"a":[1,2.5,"NaN"]}') == {"a": [1, 2.5, "NaN"]}


@pytest.mark.parametrize(
    ("column", "text", "message"),
    [
        ("payload", NAN, NAN_MESSAGE),
        ("cursor", DEEP, DEEP_MESSAGE),
        ("counters", LONG_INT, LONG_INT_MESSAGE),
    ],
)
def test_start_or_join_refuses_by_path_and_writes_nothing(
    column: str, text: str, message: str
) -> None:
    db = open_db()
    row = new_row(**{column: text})
    with pytest.raises(ValidationFailed) as caught:
        db.start_or_join(row.key, row, now=T0)
    assert [(e.path, e.message) for e in caught.value.errors] == [(f"row.{column}", message)]
    assert db.export_dump(now=T0).runs == ()


def test_start_or_join_keeps_text_that_is_not_json_verbatim() -> None:
    db = open_db()
    started(db, payload="{not json")
    assert read(db).payload == "{not json"


@pytest.mark.parametrize("door", ["patch", "commit_pass"])
@pytest.mark.parametrize(
    ("column", "text", "message"),
    [("cursor", NAN, NAN_MESSAGE), ("counters", DEEP, DEEP_MESSAGE)],
)
def test_a_patch_refuses_by_path_and_writes_nothing(
    door: str, column: str, text: str, message: str
) -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    before = read(db)
    changes: dict[str, Any] = {column: text}
    patch = attrs.evolve(advanced_patch(), **changes)
    with pytest.raises(ValidationFailed) as caught:
        getattr(db, door)("run-1", patch, "owner-1", now=at(1))
    assert [(e.path, e.message) for e in caught.value.errors] == [(f"patch.{column}", message)]
    assert read(db) == before


def test_record_step_refuses_a_result_by_path_and_writes_nothing() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    before = read(db)
    with pytest.raises(ValidationFailed) as caught:
        db.record_step("run-1", "a", LONG_INT, 1, None, T0, "owner-1", LEASE_MS, now=at(1))
    assert [(e.path, e.message) for e in caught.value.errors] == [("result", LONG_INT_MESSAGE)]
    assert (read(db), steps(db)) == (before, [])


@pytest.mark.parametrize(
    ("bad", "path", "message"),
    [
        ({"payload": NAN}, "dump.runs.0.payload", NAN_MESSAGE),
        ({"cursor": DEEP}, "dump.runs.0.cursor", DEEP_MESSAGE),
        ({"counters": LONG_INT}, "dump.runs.0.counters", LONG_INT_MESSAGE),
    ],
)
def test_an_import_refuses_the_row_by_path_and_writes_nothing(
    bad: dict[str, Any], path: str, message: str
) -> None:
    source = open_db()
    started(source)
    dump = source.export_dump(now=T0)
    dump = attrs.evolve(dump, runs=(attrs.evolve(dump.runs[0], **bad),))
    db = open_db(scope_id="scope-b")
    with pytest.raises(ValidationFailed) as caught:
        db.import_dump(dump, "scope-a", now=T0)
    assert [(e.path, e.message) for e in caught.value.errors] == [
        (path, f"{message} (run 'run-1')")
    ]
    assert db.export_dump(now=T0).runs == ()


def test_the_operator_read_shows_a_nan_column_empty_with_why() -> None:
    db = open_db()
    started(db, cursor='"c"')
    db.connection.execute("UPDATE _substrat_job_runs SET payload = ? WHERE id = 'run-1'", (NAN,))
    run = job_run_of(read(db))
    assert (run.payload, run.cursor) == (None, "c")
    assert run.decode_error == "payload is not valid JSON (holds NaN, which JSON does not have)"
