"""One transaction per operation: an operation that fails half way leaves nothing behind, and the
database serves the next one."""

from __future__ import annotations

import sqlite3

import pytest

from driver import JobRunFilter, JobStepRow, ValidationFailed
from scopehost._database import ScopeDatabase

from .store_support import (
    LEASE_MS,
    T0,
    advanced_patch,
    at,
    claimed_and_begun,
    connect,
    open_db,
    read,
    started,
    steps,
)


def _fail_on(db: ScopeDatabase, event: str, *, when: str = "1") -> None:
    """A trigger that aborts the statement it fires on, to break an operation between statements."""
    table, action = event.split(":")
    db.connection.execute(
        f"CREATE TRIGGER fail_{action.lower()} BEFORE {action} ON {table} WHEN {when} "
        "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    )


def test_a_commit_whose_ledger_drop_fails_leaves_the_run_unpatched() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    assert db.record_step("run-1", "a", "1", 1, None, T0, "owner-1", LEASE_MS, now=T0)
    before = read(db)
    _fail_on(db, "_substrat_job_steps:DELETE")

    with pytest.raises(sqlite3.IntegrityError, match=r"^injected failure$"):
        db.commit_pass("run-1", advanced_patch(), "owner-1", now=at(1))

    assert read(db) == before
    assert steps(db) == [JobStepRow("a", "1", 1, None)]
    assert not db.connection.in_transaction


def test_a_tenth_miss_whose_settle_fails_leaves_the_claim_and_the_count() -> None:
    db = open_db()
    started(db, admission_misses=9)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None
    before = read(db)
    _fail_on(db, "_substrat_job_runs:UPDATE", when="NEW.status = 'failed'")

    with pytest.raises(sqlite3.IntegrityError, match=r"^injected failure$"):
        db.miss("run-1", "owner-1", "too short", now=at(1))

    assert read(db) == before
    assert (before.lease_owner, before.admission_misses) == ("owner-1", 9)


def test_a_step_record_that_fails_leaves_the_lease_unrenewed() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    before = read(db)
    _fail_on(db, "_substrat_job_steps:INSERT")

    with pytest.raises(sqlite3.IntegrityError, match=r"^injected failure$"):
        db.record_step("run-1", "a", "1", 1, None, at(500), "owner-1", LEASE_MS, now=at(500))

    assert read(db) == before


def test_the_database_serves_the_next_operation_after_a_failed_one() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    _fail_on(db, "_substrat_job_steps:INSERT")
    with pytest.raises(sqlite3.IntegrityError):
        db.record_step("run-1", "a", "1", 1, None, T0, "owner-1", LEASE_MS, now=T0)
    db.connection.execute("DROP TRIGGER fail_insert")

    assert db.record_step("run-1", "a", "1", 1, None, T0, "owner-1", LEASE_MS, now=T0)
    assert db.commit_pass("run-1", advanced_patch(), "owner-1", now=T0)
    assert [row.cursor for row in db.list(JobRunFilter(), now=T0)] == ['"c-1"']


def test_a_refused_input_opens_no_transaction() -> None:
    db = open_db()
    started(db)
    with pytest.raises(ValidationFailed):
        db.claim("run-1", "owner-1", -1, now=T0)

    assert not db.connection.in_transaction
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None


def test_every_operation_commits_what_it_wrote() -> None:
    conn = connect()
    db = open_db(conn=conn)
    started(db)
    claimed_and_begun(db)

    assert not conn.in_transaction
    assert conn.total_changes > 0


def test_a_connection_with_implicit_transactions_is_refused() -> None:
    conn = sqlite3.connect(":memory:")
    with pytest.raises(
        ValueError,
        match=(
            r"^the connection has isolation_level ''; open it with "
            r"sqlite3\.connect\(\.\.\., isolation_level=None\) so each operation's explicit "
            r"transaction is the only one$"
        ),
    ):
        ScopeDatabase(conn, "scope-a")


@pytest.mark.parametrize(("scope_id", "shown"), [("", "''"), (None, "None")])
def test_a_scope_without_a_name_is_refused(scope_id: object, shown: str) -> None:
    with pytest.raises(
        ValidationFailed, match=rf"^scope_id is {shown}; name the scope with a non-empty str$"
    ):
        ScopeDatabase(connect(), scope_id)  # type: ignore[arg-type]


def test_a_connection_already_in_a_transaction_is_refused() -> None:
    conn = connect()
    conn.execute("BEGIN")
    with pytest.raises(
        RuntimeError,
        match=(
            r"^the scope database's connection is inside a transaction; "
            r"finish it before opening the scope$"
        ),
    ):
        ScopeDatabase(conn, "scope-a")
