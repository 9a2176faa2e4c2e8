"""The spec's tables and indexes, and an older shape upgraded in place with no row lost."""

from __future__ import annotations

import sqlite3

import pytest

from driver import JobRunFilter, JobRunRow
from scopehost._database import ScopeDatabase
from scopehost._schema import _create_or_upgrade

from .store_support import LEASE_MS, OLD_RUNS_DDL, T0, at, connect, new_row, open_db, read

#: (name, type, notnull, default, pk) of each column, as the spec declares them.
RUN_COLUMNS = [
    ("id", "TEXT", 0, None, 1),
    ("module_id", "TEXT", 1, None, 0),
    ("job", "TEXT", 1, None, 0),
    ("instance", "TEXT", 1, None, 0),
    ("payload", "TEXT", 1, None, 0),
    ("subject_id", "TEXT", 0, None, 0),
    ("status", "TEXT", 1, None, 0),
    ("cursor", "TEXT", 0, None, 0),
    ("counters", "TEXT", 1, "'{}'", 0),
    ("attempts", "INTEGER", 1, "0", 0),
    ("last_error", "TEXT", 0, None, 0),
    ("started_at", "TEXT", 1, None, 0),
    ("updated_at", "TEXT", 1, None, 0),
    ("next_attempt_at", "TEXT", 0, None, 0),
    ("ended_at", "TEXT", 0, None, 0),
    ("lease_owner", "TEXT", 0, None, 0),
    ("lease_began_at", "TEXT", 0, None, 0),
    ("admission_misses", "INTEGER", 0, None, 0),
]
STEP_COLUMNS = [
    ("run_id", "TEXT", 1, None, 1),
    ("step", "TEXT", 1, None, 2),
    ("result", "TEXT", 0, None, 0),
    ("attempts", "INTEGER", 1, "0", 0),
    ("last_error", "TEXT", 0, None, 0),
    ("recorded_at", "TEXT", 1, None, 0),
]
LATER_COLUMNS = ("subject_id", "lease_owner", "lease_began_at", "admission_misses")


def _columns(conn: sqlite3.Connection, table: str) -> list[tuple[object, ...]]:
    return [tuple(info)[1:] for info in conn.execute(f"PRAGMA table_info({table})")]


def _old_scope(*, without: tuple[str, ...] = LATER_COLUMNS) -> sqlite3.Connection:
    conn = connect()
    conn.executescript(OLD_RUNS_DDL)
    for name in LATER_COLUMNS:
        if name not in without:
            kind = "INTEGER" if name == "admission_misses" else "TEXT"
            conn.execute(f"ALTER TABLE _substrat_job_runs ADD COLUMN {name} {kind}")
    conn.executemany(
        "INSERT INTO _substrat_job_runs (id, module_id, job, instance, payload, status, cursor, "
        "counters, attempts, started_at, updated_at) "
        "VALUES (?, 'mod', 'walk', ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            ("run-1", "default", '{"a":1}', "running", '"p-2"', '{"n":2}', 1, T0, T0),
            ("run-2", "other", "{}", "done", None, "{}", 0, T0, at(5)),
        ],
    )
    conn.execute(
        "INSERT INTO _substrat_job_steps VALUES ('run-1', 'fetch', '[1]', 1, NULL, ?)", (T0,)
    )
    return conn


def test_a_fresh_scope_has_the_spec_tables_column_for_column() -> None:
    conn = open_db().connection

    assert _columns(conn, "_substrat_job_runs") == RUN_COLUMNS
    assert _columns(conn, "_substrat_job_steps") == STEP_COLUMNS


def test_a_fresh_scope_has_the_spec_indexes() -> None:
    conn = open_db().connection
    indexes = dict(
        conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    )

    assert indexes == {
        "_substrat_job_runs_due": "CREATE INDEX _substrat_job_runs_due ON _substrat_job_runs "
        "(status, next_attempt_at, id)",
        "_substrat_job_runs_due_at": "CREATE INDEX _substrat_job_runs_due_at ON "
        "_substrat_job_runs (status, COALESCE(next_attempt_at, started_at), id)",
        "_substrat_job_runs_key": "CREATE INDEX _substrat_job_runs_key ON _substrat_job_runs "
        "(module_id, job, instance, id)",
    }


def test_the_due_read_uses_the_due_at_index() -> None:
    conn = open_db().connection
    plan = " ".join(
        str(row[3])
        for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT id, module_id, job FROM _substrat_job_runs "
            "WHERE status = 'running' AND (next_attempt_at IS NULL OR next_attempt_at <= ?) "
            "ORDER BY COALESCE(next_attempt_at, started_at), id LIMIT ?",
            (T0, 5),
        )
    )

    assert "_substrat_job_runs_due_at" in plan


def test_an_old_shape_gains_the_missing_columns_and_keeps_every_row() -> None:
    conn = _old_scope()
    before = [tuple(row) for row in conn.execute("SELECT * FROM _substrat_job_runs ORDER BY id")]

    db = ScopeDatabase(conn, "scope-a")

    assert db.added_columns == LATER_COLUMNS
    assert sorted(_columns(conn, "_substrat_job_runs")) == sorted(RUN_COLUMNS)
    after = [tuple(row) for row in conn.execute("SELECT * FROM _substrat_job_runs ORDER BY id")]
    assert after == [(*row, None, None, None, None) for row in before]
    assert conn.execute("SELECT count(*) FROM _substrat_job_steps").fetchone()[0] == 1
    assert {
        name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")
    } >= {
        "_substrat_job_runs_due",
        "_substrat_job_runs_due_at",
        "_substrat_job_runs_key",
    }


def test_an_upgraded_scope_reads_and_runs_as_a_fresh_one() -> None:
    db = ScopeDatabase(_old_scope(), "scope-a")

    assert [row.id for row in db.list(JobRunFilter(), now=T0)] == ["run-2", "run-1"]
    assert read(db) == JobRunRow(
        "run-1", "mod", "walk", "default", '{"a":1}', None, "running", '"p-2"', '{"n":2}', 1,
        None, T0, T0, None, None, None, None, None,
    )  # fmt: skip
    assert db.claim("run-1", "owner-1", LEASE_MS, now=at(1)) is not None
    assert db.miss("run-1", "owner-1", "too short", now=at(2)) is not None
    assert read(db).admission_misses == 1


@pytest.mark.parametrize("missing", LATER_COLUMNS)
def test_a_shape_missing_one_column_gains_only_that_one(missing: str) -> None:
    db = ScopeDatabase(_old_scope(without=(missing,)), "scope-a")

    assert db.added_columns == (missing,)
    assert sorted(_columns(db.connection, "_substrat_job_runs")) == sorted(RUN_COLUMNS)


def test_reopening_a_current_scope_changes_nothing() -> None:
    conn = connect()
    first = ScopeDatabase(conn, "scope-a")
    schema = list(conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name"))

    second = ScopeDatabase(conn, "scope-a")

    assert (first.added_columns, second.added_columns) == ((), ())
    assert list(conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name")) == schema


def test_a_schema_that_cannot_be_built_is_not_built_in_part() -> None:
    conn = connect()
    # An object squatting on an index's name makes the DDL fail after it created the run table.
    conn.execute("CREATE TABLE _substrat_job_runs_key (x)")

    with pytest.raises(sqlite3.OperationalError, match=r"_substrat_job_runs_key"):
        ScopeDatabase(conn, "scope-a")

    assert not conn.in_transaction
    names = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    assert names == {"_substrat_job_runs_key"}


def test_a_new_memory_scope_is_loaded_from_the_template_and_equals_one_built_by_the_ddl() -> None:
    built = connect()
    _create_or_upgrade(built)
    conn = connect()

    db = ScopeDatabase(conn, "scope-a")

    assert db.added_columns == ()
    # Loaded, not built: SQLite names a deserialized database's storage "x".
    assert [path for _, name, path in conn.execute("PRAGMA database_list")] == ["x"]
    schema = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
    assert [tuple(row) for row in conn.execute(schema)] == list(built.execute(schema))
    assert conn.serialize() == built.serialize()


def test_a_scope_reopened_on_its_loaded_memory_connection_writes_as_before() -> None:
    # An evicted in-memory scope reopens on the same connection, whose storage SQLite now names
    # "x": that is no file to watch, and no write may be refused as if one had gone.
    conn = connect()
    ScopeDatabase(conn, "scope-a")

    db = ScopeDatabase(conn, "scope-a")
    db.start_or_join(new_row().key, new_row(), now=T0)

    assert db.added_columns == ()
    assert read(db).id == "run-1"
