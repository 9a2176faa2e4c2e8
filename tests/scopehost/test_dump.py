"""Dumps replay rows verbatim; a running run copied to another scope is not carried."""

from __future__ import annotations

import sqlite3

import attrs
import pytest

from driver import JobRunRow, ValidationFailed
from scopehost._database import JobRunDump, JobStepDumpRow, ScopeDatabase

from .store_support import LEASE_MS, T0, at, claimed_and_begun, connect, open_db, read, started

IMPORTED_AT = at(90_000)


def _source() -> tuple[ScopeDatabase, JobRunDump]:
    db = open_db(scope_id="scope-a")
    started(db, "run-1", subject_id="p", cursor='"c"', counters='{"n":1}')
    claimed_and_begun(db, "run-1")
    assert db.record_step("run-1", "b", None, 2, "timeout", T0, "owner-1", LEASE_MS, now=T0)
    assert db.record_step("run-1", "a", '"x"', 1, None, T0, "owner-1", LEASE_MS, now=T0)
    started(db, "run-2", instance="two", payload="{not json")
    db.connection.execute(
        "UPDATE _substrat_job_runs SET status = 'done', ended_at = ? WHERE id = 'run-2'", (at(3),)
    )
    return db, db.export_dump(now=at(10))


def test_an_export_holds_every_run_and_step_row_verbatim_in_order() -> None:
    db, dump = _source()

    assert dump == JobRunDump(
        "scope-a",
        (read(db, "run-1"), read(db, "run-2")),
        (
            JobStepDumpRow("run-1", "a", '"x"', 1, None, T0),
            JobStepDumpRow("run-1", "b", None, 2, "timeout", T0),
        ),
    )


def test_a_dump_is_a_frozen_value() -> None:
    _, dump = _source()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        dump.scope_id = "elsewhere"  # type: ignore[misc]


def test_an_import_into_its_own_scope_keeps_a_running_run_resumable() -> None:
    _, dump = _source()
    restored = open_db(scope_id="scope-a")

    assert restored.import_dump(dump, "scope-a", now=IMPORTED_AT) == 2

    assert restored.export_dump(now=IMPORTED_AT) == dump
    claim = restored.claim("run-1", "owner-2", LEASE_MS, now=IMPORTED_AT)
    assert claim is not None
    assert claim.takeover is True


def test_an_import_into_another_scope_fails_its_running_runs_as_not_carried() -> None:
    _, dump = _source()
    copy = open_db(scope_id="scope-b")

    assert copy.import_dump(dump, "scope-a", now=IMPORTED_AT) == 2

    assert read(copy, "run-1") == attrs.evolve(
        dump.runs[0],
        status="failed",
        last_error=(
            "not carried: copied from scope scope-a before it ran; "
            "it runs in the scope that asked for it, never in a copy"
        ),
        updated_at=IMPORTED_AT,
        next_attempt_at=None,
        ended_at=IMPORTED_AT,
        lease_owner=None,
        lease_began_at=None,
    )
    assert read(copy, "run-2") == dump.runs[1]
    assert copy.export_dump(now=IMPORTED_AT).steps == dump.steps
    assert copy.claim("run-1", "owner-2", LEASE_MS, now=IMPORTED_AT) is None


def test_an_import_replaces_rows_with_the_same_keys() -> None:
    _, dump = _source()
    db = open_db(scope_id="scope-a")
    started(db, "run-1", payload='{"local":true}')
    db.connection.execute(
        "INSERT INTO _substrat_job_steps VALUES ('run-1', 'a', '\"local\"', 5, NULL, ?)", (T0,)
    )

    db.import_dump(dump, "scope-a", now=IMPORTED_AT)

    assert db.export_dump(now=IMPORTED_AT) == dump


def test_an_import_that_fails_half_way_imports_nothing() -> None:
    _, dump = _source()
    broken = attrs.evolve(
        dump,
        steps=(*dump.steps, JobStepDumpRow("run-1", "c", None, 0, None, None)),  # type: ignore[arg-type]
    )
    db = open_db(scope_id="scope-a")

    with pytest.raises(sqlite3.IntegrityError):
        db.import_dump(broken, "scope-a", now=IMPORTED_AT)

    assert db.export_dump(now=IMPORTED_AT) == JobRunDump("scope-a", (), ())


def test_a_dump_from_an_old_shape_scope_reads_its_missing_columns_as_null() -> None:
    conn = connect()
    conn.executescript(
        "CREATE TABLE _substrat_job_runs (id TEXT PRIMARY KEY, module_id TEXT NOT NULL, "
        "job TEXT NOT NULL, instance TEXT NOT NULL, payload TEXT NOT NULL, status TEXT NOT NULL, "
        "cursor TEXT, counters TEXT NOT NULL DEFAULT '{}', attempts INTEGER NOT NULL DEFAULT 0, "
        "last_error TEXT, started_at TEXT NOT NULL, updated_at TEXT NOT NULL, "
        "next_attempt_at TEXT, ended_at TEXT);"
        f"INSERT INTO _substrat_job_runs (id, module_id, job, instance, payload, status, "
        f"started_at, updated_at) VALUES ('old', 'm', 'j', 'i', '{{}}', 'done', '{T0}', '{T0}');"
    )

    dump = ScopeDatabase(conn, "scope-old").export_dump(now=T0)

    assert dump.runs == (
        JobRunRow(
            "old", "m", "j", "i", "{}", None, "done", None, "{}", 0, None, T0, T0, None, None
        ),
    )


def test_a_source_that_is_not_where_the_dump_came_from_is_refused() -> None:
    _, dump = _source()
    with pytest.raises(
        ValidationFailed,
        match=(
            r"^source_scope_id is 'scope-z' but the dump was exported from scope 'scope-a'; "
            r"pass the scope the dump came from$"
        ),
    ):
        open_db(scope_id="scope-b").import_dump(dump, "scope-z", now=IMPORTED_AT)


def test_something_that_is_not_a_dump_is_refused() -> None:
    with pytest.raises(
        ValidationFailed,
        match=r"^dump is \{\}; pass the JobRunDump that export_dump returned$",
    ):
        open_db().import_dump({}, "scope-a", now=IMPORTED_AT)  # type: ignore[arg-type]
