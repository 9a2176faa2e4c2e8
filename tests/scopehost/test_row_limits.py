"""Every door refuses what would make a run unrunnable: a stored time in another spelling or out of
range, a restored lease longer than any store writes, a number that overflows to infinity, and
text past its cap under the platform's row limit. Each refusal is a ``ValidationFailed`` by path,
and nothing is written."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from driver import (
    JOB_COUNTERS_MAX_BYTES,
    JOB_CURSOR_MAX_BYTES,
    JOB_ERROR_MAX_BYTES,
    JOB_ID_MAX_BYTES,
    JOB_LEASE_MAX_MS,
    JOB_PAYLOAD_MAX_BYTES,
    JOB_STEP_RESULT_MAX_BYTES,
    JOB_TIME_AHEAD_MAX_MS,
    ValidationFailed,
)
from scopehost import JobRunDump

from ..refusals import refusal
from .store_support import (
    LEASE_MS,
    T0,
    advanced_patch,
    at,
    claimed_and_begun,
    new_row,
    open_db,
    started,
)
from .store_support import read as read_run

ISO = "store times are ISO-8601 UTC with milliseconds and Z, like '2026-10-04T12:00:00.000Z'"
AHEAD = (
    f"is more than {JOB_TIME_AHEAD_MAX_MS} ms (two years) past the store's now; a running run due "
    "that late would block its key for as long — write a time within a lease or a backoff of now"
)
OVERFLOW = (
    "holds a number too large for JSON's numbers, which reads as Infinity — store a number JSON "
    "carries, or a str"
)


#: Counters of many names, each fine, past the cap together.
BIG_COUNTERS = json.dumps({f"k{i}": i for i in range(10_000)}, separators=(",", ":"))
assert len(BIG_COUNTERS) > JOB_COUNTERS_MAX_BYTES


def too_big(cap: int, what: str, size: int | None = None) -> str:
    return (
        f"is {size if size is not None else cap + 1} bytes of UTF-8, more than the {cap} {what} "
        "may take (a row holds at most about 2 MB) — keep large data outside the run and store a "
        "reference to it"
    )


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ({"next_attempt_at": "never"}, "patch.next_attempt_at", f"is 'never'; {ISO}"),
        (
            {"next_attempt_at": "2026-13-45T99:99:99.999Z"},
            "patch.next_attempt_at",
            f"is '2026-13-45T99:99:99.999Z'; {ISO}",
        ),
        (
            {"next_attempt_at": "9999-12-31T23:59:59.999Z"},
            "patch.next_attempt_at",
            f"is '9999-12-31T23:59:59.999Z': it {AHEAD}",
        ),
        (
            {"updated_at": "2026-10-04 12:00:00"},
            "patch.updated_at",
            f"is '2026-10-04 12:00:00'; {ISO}",
        ),
        (
            {"ended_at": "2026-02-30T00:00:00.000Z"},
            "patch.ended_at",
            f"is '2026-02-30T00:00:00.000Z'; {ISO}",
        ),
        ({"counters": '{"n":1e309}'}, "patch.counters", OVERFLOW),
        ({"cursor": "[-1e999]"}, "patch.cursor", OVERFLOW),
        (
            {"cursor": '"' + "c" * JOB_CURSOR_MAX_BYTES + '"'},
            "patch.cursor",
            too_big(JOB_CURSOR_MAX_BYTES, "a cursor", JOB_CURSOR_MAX_BYTES + 2),
        ),
        (
            {"counters": BIG_COUNTERS},
            "patch.counters",
            too_big(JOB_COUNTERS_MAX_BYTES, "a run's counters", len(BIG_COUNTERS)),
        ),
        (
            {"last_error": "é" * (JOB_ERROR_MAX_BYTES // 2 + 1)},
            "patch.last_error",
            too_big(JOB_ERROR_MAX_BYTES, "an error", JOB_ERROR_MAX_BYTES + 2),
        ),
    ],
)
@pytest.mark.parametrize("operation", ["patch", "commit_pass"])
def test_a_patch_that_would_leave_the_run_unrunnable_is_refused_and_writes_nothing(
    operation: str, change: dict[str, Any], path: str, message: str
) -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    before = read_run(db)
    patch = attrs.evolve(advanced_patch(), **change)
    with pytest.raises(ValidationFailed) as caught:
        getattr(db, operation)("run-1", patch, "owner-1", now=T0)
    assert refusal(caught) == [(path, message)]
    assert read_run(db) == before
    # The run is not blocked: its holder's good patch still lands.
    assert getattr(db, operation)("run-1", advanced_patch(), "owner-1", now=T0)


def test_a_patch_may_write_a_backoff_a_year_ahead_from_a_clock_a_year_fast() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    patch = attrs.evolve(advanced_patch(), next_attempt_at=at(JOB_TIME_AHEAD_MAX_MS))
    assert db.patch("run-1", patch, "owner-1", now=T0)


def test_start_or_join_refuses_overflowing_oversized_and_far_off_rows() -> None:
    db = open_db()
    for change, path, message in [
        ({"counters": '{"n":1e309}'}, "row.counters", OVERFLOW),
        (
            {"payload": '"' + "p" * JOB_PAYLOAD_MAX_BYTES + '"'},
            "row.payload",
            too_big(JOB_PAYLOAD_MAX_BYTES, "a payload", JOB_PAYLOAD_MAX_BYTES + 2),
        ),
        ({"started_at": "9999-01-01T00:00:00.000Z"}, "row.started_at", None),
    ]:
        row = new_row(**change)
        with pytest.raises(ValidationFailed) as caught:
            db.start_or_join(row.key, row, now=T0)
        [(refused_path, refused)] = refusal(caught)
        assert refused_path == path
        assert message is None or refused == message
    long_instance = "i" * (JOB_ID_MAX_BYTES + 1)
    row = attrs.evolve(new_row(), instance=long_instance)
    with pytest.raises(ValidationFailed) as caught:
        db.start_or_join(row.key, row, now=T0)
    assert refusal(caught) == [("row.instance", too_big(JOB_ID_MAX_BYTES, "an instance"))]
    assert db.export_dump(now=T0).runs == ()


def test_record_step_refuses_an_oversized_result_error_and_name() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    big_result = "[" + ",".join(["1"] * (JOB_STEP_RESULT_MAX_BYTES // 2)) + "]"
    cases = [
        ("s", big_result, None, "result", too_big(JOB_STEP_RESULT_MAX_BYTES, "a step's result")),
        (
            "s",
            None,
            "e" * (JOB_ERROR_MAX_BYTES + 1),
            "last_error",
            too_big(JOB_ERROR_MAX_BYTES, "an error"),
        ),
        ("n" * (JOB_ID_MAX_BYTES + 1), "1", None, "name", too_big(JOB_ID_MAX_BYTES, "a step name")),
    ]
    for name, result, error, path, message in cases:
        with pytest.raises(ValidationFailed) as caught:
            db.record_step("run-1", name, result, 1, error, T0, "owner-1", LEASE_MS, now=T0)
        assert refusal(caught) == [(path, message)]
    assert db.export_dump(now=T0).steps == ()


def _leased_dump() -> JobRunDump:
    source = open_db()
    started(source)
    claimed_and_begun(source)
    return source.export_dump(now=T0)


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        (
            {"next_attempt_at": "9999-12-31T23:59:59.999Z"},
            "dump.runs.0.next_attempt_at",
            f"{AHEAD} (the import's now)",
        ),
        (
            {"next_attempt_at": at(JOB_LEASE_MAX_MS + 1)},
            "dump.runs.0.next_attempt_at",
            f"is {at(JOB_LEASE_MAX_MS + 1)!r}, a lease ending more than {JOB_LEASE_MAX_MS} ms (a "
            "year, the longest lease) past the import's now; no store wrote that lease — clear "
            "lease_owner, or export the dump again",
        ),
        (
            {"next_attempt_at": "2026-13-45T99:99:99.999Z"},
            "dump.runs.0.next_attempt_at",
            "is not a time in ISO-8601 UTC with milliseconds and Z, like "
            "'2026-10-04T12:00:00.000Z' or NULL",
        ),
        ({"counters": '{"n":1e309}'}, "dump.runs.0.counters", OVERFLOW),
        (
            {"last_error": "x" * (JOB_ERROR_MAX_BYTES + 1)},
            "dump.runs.0.last_error",
            too_big(JOB_ERROR_MAX_BYTES, "an error"),
        ),
    ],
)
@pytest.mark.parametrize("scope", ["scope-a", "scope-b"])  # a restore, and a copy
def test_an_import_refuses_a_run_that_could_never_run_again(
    scope: str, change: dict[str, Any], path: str, message: str
) -> None:
    dump = _leased_dump()
    dump = attrs.evolve(dump, runs=(attrs.evolve(dump.runs[0], **change),))
    db = open_db(scope_id=scope)
    with pytest.raises(ValidationFailed) as caught:
        db.import_dump(dump, "scope-a", now=T0)
    assert refusal(caught) == [(path, f"{message} (run 'run-1')")]
    assert db.export_dump(now=T0).runs == ()


def test_an_import_takes_a_lease_a_year_long_and_a_lease_taken_from_a_live_scope() -> None:
    dump = _leased_dump()
    assert open_db().import_dump(dump, "scope-a", now=T0) == 1
    year = attrs.evolve(
        dump, runs=(attrs.evolve(dump.runs[0], next_attempt_at=at(JOB_LEASE_MAX_MS)),)
    )
    assert open_db().import_dump(year, "scope-a", now=T0) == 1
