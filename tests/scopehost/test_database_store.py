"""Coalescing, the due snapshot and the operator read."""

from __future__ import annotations

import sqlite3

import pytest

from driver import JOB_RUN_LIST_LIMIT, JobDueKey, JobRunFilter, JobRunKey, ValidationFailed
from scopehost._database import ScopeDatabase

from .store_support import LEASE_MS, T0, at, done_patch, new_row, open_db, read, started

# -- start_or_join --------------------------------------------------------------------------------


def test_a_start_with_no_live_run_inserts_the_row_whole() -> None:
    db = open_db()
    row = new_row(subject_id="person-7", payload='{"a":[1,2]}', counters='{"x":1}')

    assert db.start_or_join(row.key, row, now=T0) == row
    assert read(db) == row


def test_a_start_against_a_live_run_returns_it_unchanged_and_inserts_nothing() -> None:
    db = open_db()
    live = started(db, cursor='"page-3"', counters='{"walked":3}', lease_owner="owner-1")
    second = new_row("run-2", payload='{"other":true}')

    assert db.start_or_join(second.key, second, now=at(5)) == live
    assert db.connection.execute("SELECT count(*) FROM _substrat_job_runs").fetchone()[0] == 1


@pytest.mark.parametrize("status", ["done", "failed"])
def test_a_finished_run_is_not_joined(status: str) -> None:
    db = open_db()
    started(db, status="running")
    db.connection.execute("UPDATE _substrat_job_runs SET status = ?", (status,))
    fresh = new_row("run-2")

    assert db.start_or_join(fresh.key, fresh, now=T0) == fresh


def test_the_newest_of_two_live_runs_is_joined() -> None:
    db = open_db()
    started(db, "run-1")
    # Two live rows for one key can only come from outside start_or_join (an imported dump).
    newest = new_row("run-2", payload='{"newest":true}')
    db.connection.execute(
        "INSERT INTO _substrat_job_runs (id, module_id, job, instance, payload, status, "
        "started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ("run-2", "mod", "walk", "default", newest.payload, "running", T0, T0),
    )
    another = new_row("run-3")

    assert db.start_or_join(another.key, another, now=T0) == newest


def test_runs_of_other_keys_are_not_joined() -> None:
    db = open_db()
    started(db)
    for index, key in enumerate(
        [
            JobRunKey("mod", "walk", "other"),
            JobRunKey("mod", "sync", "default"),
            JobRunKey("m2", "walk", "default"),
        ]
    ):
        row = new_row(f"run-x{index}", module_id=key.module_id, job=key.job, instance=key.instance)
        assert db.start_or_join(key, row, now=T0) == row


def test_a_row_for_another_key_is_refused() -> None:
    db = open_db()
    row = new_row()
    with pytest.raises(
        ValidationFailed,
        match=(
            r"^row has the key JobRunKey\(module_id='mod', job='walk', instance='default'\) "
            r"but the join asked for JobRunKey\(module_id='mod', job='walk', instance='b'\); "
            r"build the row for the key being joined$"
        ),
    ):
        db.start_or_join(JobRunKey("mod", "walk", "b"), row, now=T0)


def test_a_row_that_is_not_running_is_refused() -> None:
    db = open_db()
    row = new_row(status="done")
    with pytest.raises(
        ValidationFailed,
        match=(
            r"^row\.status is 'done'; start_or_join inserts a live run, "
            r"whose status is 'running'$"
        ),
    ):
        db.start_or_join(row.key, row, now=T0)


def test_an_id_already_taken_is_an_integrity_error_that_writes_nothing() -> None:
    db = open_db()
    started(db)
    assert db.patch("run-1", done_patch(), None, now=T0)
    clash = new_row("run-1", payload='{"clash":1}')

    with pytest.raises(sqlite3.IntegrityError):
        db.start_or_join(clash.key, clash, now=T0)

    assert read(db).payload == '{"source":"s3"}'
    assert not db.connection.in_transaction


# -- due_keys -------------------------------------------------------------------------------------


def test_the_due_snapshot_orders_by_when_each_run_became_due_then_id() -> None:
    db = open_db()
    started(db, "a-started-late", started_at=at(300), updated_at=at(300))
    started(db, "b-backed-off", instance="b", started_at=at(0), next_attempt_at=at(200))
    started(db, "c-started-early", instance="c", started_at=at(100), updated_at=at(100))
    started(db, "d-same-time", instance="d", started_at=at(100), updated_at=at(100))
    started(db, "e-not-yet", instance="e", next_attempt_at=at(10_000))
    started(db, "f-done", instance="f")
    db.connection.execute("UPDATE _substrat_job_runs SET status = 'done' WHERE id = 'f-done'")

    keys = db.due_keys(at(1_000), 10, now=at(1_000))

    assert keys == [
        JobDueKey("c-started-early", "mod", "walk"),
        JobDueKey("d-same-time", "mod", "walk"),
        JobDueKey("b-backed-off", "mod", "walk"),
        JobDueKey("a-started-late", "mod", "walk"),
    ]


def test_the_due_snapshot_reads_at_most_max_keys() -> None:
    db = open_db()
    for index in range(5):
        started(db, f"run-{index}", instance=str(index))

    assert [key.id for key in db.due_keys(T0, 2, now=T0)] == ["run-0", "run-1"]
    assert db.due_keys(T0, 0, now=T0) == []


def test_the_due_snapshot_binds_the_callers_now_not_the_stores() -> None:
    db = open_db()
    started(db, next_attempt_at=at(500))

    assert db.due_keys(at(499), 10, now=at(10_000)) == []
    assert db.due_keys(at(500), 10, now=T0) == [JobDueKey("run-1", "mod", "walk")]


def test_a_leased_run_is_not_due_until_its_lease_expires() -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None

    assert db.due_keys(at(LEASE_MS - 1), 10, now=T0) == []
    assert len(db.due_keys(at(LEASE_MS), 10, now=T0)) == 1


@pytest.mark.parametrize(("bad", "shown"), [(-1, "-1"), (2.5, "2.5"), (None, "None")])
def test_a_max_that_is_not_a_whole_number_of_zero_or_more_is_refused(
    bad: object, shown: str
) -> None:
    db = open_db()
    with pytest.raises(
        ValidationFailed,
        match=(
            rf"^max is {shown}; a due snapshot reads a whole number of keys, 0 or more "
            r"\(SQLite would read a negative limit as no limit\)$"
        ),
    ):
        db.due_keys(T0, bad, now=T0)  # type: ignore[arg-type]


# -- list -----------------------------------------------------------------------------------------


def _many(count: int) -> ScopeDatabase:
    db = open_db()
    db.connection.executemany(
        "INSERT INTO _substrat_job_runs (id, module_id, job, instance, payload, status, "
        "started_at, updated_at) VALUES (?, 'mod', 'walk', ?, '{}', 'running', ?, ?)",
        [(f"run-{index:04d}", str(index), T0, T0) for index in range(count)],
    )
    return db


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (None, JOB_RUN_LIST_LIMIT),
        (float("nan"), JOB_RUN_LIST_LIMIT),
        (float("inf"), JOB_RUN_LIST_LIMIT),
        (-1, 1),
        (0, 1),
        (2.7, 2),
        (1_000_000, 500),
    ],
)
def test_the_operator_read_clamps_its_limit(limit: float | None, expected: int) -> None:
    db = _many(600)

    rows = db.list(JobRunFilter(limit=limit), now=T0)

    assert len(rows) == expected
    assert rows[0].id == "run-0599"


def test_the_operator_read_is_newest_first_and_every_field_narrows() -> None:
    db = open_db()
    started(db, "run-1")
    started(db, "run-2", instance="b")
    started(db, "run-3", job="sync")
    started(db, "run-4", module_id="m2")
    db.connection.execute("UPDATE _substrat_job_runs SET status = 'done' WHERE id = 'run-2'")

    def ids(filter: JobRunFilter) -> list[str]:
        return [row.id for row in db.list(filter, now=T0)]

    assert ids(JobRunFilter()) == ["run-4", "run-3", "run-2", "run-1"]
    assert ids(JobRunFilter(module_id="mod")) == ["run-3", "run-2", "run-1"]
    assert ids(JobRunFilter(module_id="mod", job="walk")) == ["run-2", "run-1"]
    assert ids(JobRunFilter(instance="b")) == ["run-2"]
    assert ids(JobRunFilter(status="running", job="walk")) == ["run-4", "run-1"]
    assert ids(JobRunFilter(status="failed")) == []


def test_the_operator_read_returns_whole_rows() -> None:
    db = open_db()
    row = started(db, subject_id="p", lease_owner="o", admission_misses=2)

    assert db.list(JobRunFilter(), now=T0) == [row]


@pytest.mark.parametrize(
    ("filter", "message"),
    [
        (
            JobRunFilter(status="paused"),  # type: ignore[arg-type]
            r"^filter\.status is 'paused'; a run's status is one of 'running', 'done', 'failed'$",
        ),
        (
            JobRunFilter(job=3),  # type: ignore[arg-type]
            r"^filter\.job is 3; a filter field is a str, or None to leave it open$",
        ),
        (
            JobRunFilter(limit="10"),  # type: ignore[arg-type]
            r"^filter\.limit is '10'; a limit is a number, or None for the default$",
        ),
    ],
)
def test_a_filter_that_would_silently_match_nothing_is_refused(
    filter: JobRunFilter, message: str
) -> None:
    with pytest.raises(ValidationFailed, match=message):
        open_db().list(filter, now=T0)


def test_a_row_is_unchanged_by_being_read() -> None:
    db = open_db()
    row = started(db)
    db.list(JobRunFilter(), now=at(5))
    db.due_keys(at(5), 5, now=at(5))

    assert read(db) == row
