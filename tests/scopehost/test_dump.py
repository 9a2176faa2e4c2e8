"""Dumps: rows verbatim; a restore replaces the tables, a copy adds and never replaces, and a bad
dump is refused whole."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import attrs
import pytest

from driver import JOB_IMPORT_CLASH, Conflict, JobRunRow, ValidationFailed
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


def test_a_restore_replaces_the_scopes_job_tables_with_the_dumps_rows() -> None:
    _, dump = _source()
    db = open_db(scope_id="scope-a")
    # Since the dump: run-1 went on, a newer live run for run-1's key, and a step of its own.
    db.import_dump(dump, "scope-a", now=IMPORTED_AT)
    db.connection.execute(
        "UPDATE _substrat_job_runs SET status = 'failed', ended_at = ?, lease_owner = NULL, "
        "lease_began_at = NULL WHERE id = 'run-1'",
        (at(20),),
    )
    started(db, "run-9")
    db.connection.execute(
        "INSERT INTO _substrat_job_steps VALUES ('run-9', 'a', '\"local\"', 5, NULL, ?)", (T0,)
    )

    assert db.import_dump(dump, "scope-a", now=IMPORTED_AT) == 2

    assert db.export_dump(now=IMPORTED_AT) == dump
    live = db.connection.execute(
        "SELECT COUNT(*) FROM _substrat_job_runs WHERE status = 'running' AND module_id = 'mod' "
        "AND job = 'walk' AND instance = 'default'"
    ).fetchone()[0]
    assert live == 1


def test_a_copy_never_replaces_a_run_the_scope_holds() -> None:
    _, dump = _source()
    copy = open_db(scope_id="scope-b")
    started(copy, "run-2", instance="mine")
    before = copy.export_dump(now=IMPORTED_AT)

    with pytest.raises(
        Conflict,
        match=r"^dump.runs.1.id is 'run-2', which scope 'scope-b' already holds; a copy never "
        r"replaces a run — import into a scope without it, or restore into scope 'scope-a', "
        r"where the dump came from$",
    ) as caught:
        copy.import_dump(dump, "scope-a", now=IMPORTED_AT)

    assert caught.value.reason == JOB_IMPORT_CLASH
    assert copy.export_dump(now=IMPORTED_AT) == before


def test_an_import_that_fails_half_way_imports_nothing() -> None:
    _, dump = _source()
    db = open_db(scope_id="scope-a")
    started(db, "run-9")
    before = db.export_dump(now=IMPORTED_AT)
    db.connection.execute(
        "CREATE TRIGGER no_steps BEFORE INSERT ON _substrat_job_steps "
        "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    )

    with pytest.raises(sqlite3.IntegrityError, match=r"^injected failure$"):
        db.import_dump(dump, "scope-a", now=IMPORTED_AT)

    assert db.export_dump(now=IMPORTED_AT) == before


_RUN_1 = "(run 'run-1')"


@pytest.mark.parametrize(
    ("runs", "steps", "path", "message"),
    [
        (
            {0: {"status": "paused"}},
            {},
            "dump.runs.0.status",
            f"is 'paused', not one of 'running', 'done', 'failed' {_RUN_1}",
        ),
        (
            {0: {"started_at": "2026-10-04 12:00"}},
            {},
            "dump.runs.0.started_at",
            "is not a time in ISO-8601 UTC with milliseconds and Z, like "
            f"'2026-10-04T12:00:00.000Z' {_RUN_1}",
        ),
        (
            {0: {"next_attempt_at": "10000-01-01T00:00:00.000Z"}},
            {},
            "dump.runs.0.next_attempt_at",
            "is not a time in ISO-8601 UTC with milliseconds and Z, like "
            f"'2026-10-04T12:00:00.000Z' or NULL {_RUN_1}",
        ),
        (
            {0: {"attempts": -1}},
            {},
            "dump.runs.0.attempts",
            f"is -1, not a whole number of 0 or more {_RUN_1}",
        ),
        ({0: {"payload": None}}, {}, "dump.runs.0.payload", f"is not text {_RUN_1}"),
        (
            {0: {"last_error": "a\udc80b"}},
            {},
            "dump.runs.0.last_error",
            "holds a lone surrogate ('\\udc80' at index 1), which UTF-8 cannot carry — decode the "
            f"text properly before passing it {_RUN_1}",
        ),
        (
            {0: {"ended_at": T0}},
            {},
            "dump.runs.0.ended_at",
            f"is set on a running run, which has not ended {_RUN_1}",
        ),
        (
            {0: {"next_attempt_at": None}},
            {},
            "dump.runs.0.next_attempt_at",
            f"is NULL on a leased run: it is the lease's expiry {_RUN_1}",
        ),
        (
            {0: {"lease_owner": None}},
            {},
            "dump.runs.0.lease_began_at",
            f"is set with no lease_owner: nobody began {_RUN_1}",
        ),
        (
            {1: {"ended_at": None}},
            {},
            "dump.runs.1.ended_at",
            "is NULL on a done run, which has ended (run 'run-2')",
        ),
        (
            {1: {"lease_owner": "o9"}},
            {},
            "dump.runs.1.lease_owner",
            "is set on a done run, which no pass holds (run 'run-2')",
        ),
        ({1: {"id": "run-1"}}, {}, "dump.runs.1.id", f"appears twice in the dump {_RUN_1}"),
        (
            {1: {"instance": "default", "status": "running", "ended_at": None}},
            {},
            "dump.runs.1.status",
            "is 'running' for the key ('mod', 'walk', 'default'), which run 'run-1' already holds "
            "live: one live run per key (run 'run-2')",
        ),
        (
            {},
            {0: {"run_id": "run-7"}},
            "dump.steps.0.run_id",
            "names no run in the dump (step 'a' of run 'run-7')",
        ),
        (
            {},
            {1: {"step": "a"}},
            "dump.steps.1.step",
            "appears twice for its run in the dump (step 'a' of run 'run-1')",
        ),
        (
            {},
            {0: {"recorded_at": None}},
            "dump.steps.0.recorded_at",
            "is not a time in ISO-8601 UTC with milliseconds and Z, like "
            "'2026-10-04T12:00:00.000Z' (step 'a' of run 'run-1')",
        ),
    ],
)
@pytest.mark.parametrize("into", ["scope-a", "scope-b"])
def test_a_bad_dump_is_one_error_naming_the_row_and_nothing_is_written(
    runs: dict[int, dict[str, Any]],
    steps: dict[int, dict[str, Any]],
    path: str,
    message: str,
    into: str,
) -> None:
    _, dump = _source()
    bad = attrs.evolve(
        dump,
        runs=tuple(attrs.evolve(run, **runs.get(i, {})) for i, run in enumerate(dump.runs)),
        steps=tuple(attrs.evolve(step, **steps.get(i, {})) for i, step in enumerate(dump.steps)),
    )
    db = open_db(scope_id=into)
    started(db, "run-9")
    before = db.export_dump(now=IMPORTED_AT)

    with pytest.raises(ValidationFailed) as caught:
        db.import_dump(bad, "scope-a", now=IMPORTED_AT)

    assert [(e.path, e.message) for e in caught.value.errors] == [(path, message)]
    assert db.export_dump(now=IMPORTED_AT) == before


# -- a dump kept in a file ---------------------------------------------------------------------


def test_a_dump_written_to_a_file_reads_back_equal_and_restores_the_scope(tmp_path: Any) -> None:
    db, dump = _source()
    db.connection.execute(
        "UPDATE _substrat_job_runs SET payload = ? WHERE id = 'run-1'", ('{"n":"é😀"}',)
    )
    dump = db.export_dump(now=at(10))
    backup = tmp_path / "scope-a.dump.json"
    backup.write_text(dump.to_json(), encoding="ascii")  # ASCII: any text survives any encoding

    read_back = JobRunDump.from_json(backup.read_bytes())

    assert read_back == dump
    restored = open_db(scope_id="scope-a")
    assert restored.import_dump(read_back, "scope-a", now=IMPORTED_AT) == 2
    assert restored.export_dump(now=IMPORTED_AT) == dump


def _document(**changes: Any) -> str:
    data = json.loads(_source()[1].to_json())
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json", r"^dump is not JSON \(Expecting property name"),
        ("[]", r"^dump is \[\]; a dump's document is an object of format, scope_id, runs and "),
        (
            json.dumps({"runs": []}),
            r"^dump is \{'runs': \.\.\.\}; a dump's document is an object of ",
        ),
        (_document(format=2), r"^dump.format is 2; this version reads format 1 \(write the "),
        (_document(scope_id=""), r"^dump.scope_id is ''; name the scope the dump came from$"),
        (_document(runs={}), r"^dump.runs is \{\}, not a list of rows$"),
        (_document(steps=[7]), r"^dump.steps.0 is 7, not an object of columns \(a row's "),
    ],
)
def test_a_document_that_is_not_a_dump_is_refused_by_what_is_wrong(
    document: str, message: str
) -> None:
    with pytest.raises(ValidationFailed, match=message):
        JobRunDump.from_json(document)


def test_a_row_with_columns_missing_or_unknown_is_refused_by_name() -> None:
    data = json.loads(_source()[1].to_json())
    del data["runs"][1]["cursor"]
    data["runs"][1]["colour"] = "red"
    with pytest.raises(ValidationFailed) as refused:
        JobRunDump.from_json(json.dumps(data))
    assert str(refused.value).startswith(
        "dump.runs.1 lacks cursor; has unknown columns colour (a row's columns: id, module_id, "
    )


def test_a_row_read_from_a_file_is_checked_as_an_import_checks_it() -> None:
    data = json.loads(_source()[1].to_json())
    data["runs"][0]["status"] = "paused"
    with pytest.raises(ValidationFailed, match=r"^dump.runs.0.status "):
        JobRunDump.from_json(json.dumps(data))
