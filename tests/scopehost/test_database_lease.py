"""BEGIN, renewal, and every write a pass makes being conditional on still holding its lease."""

from __future__ import annotations

import attrs
import pytest

from driver import JobStepBoundary, JobStepRow, ValidationFailed

from .store_support import (
    LEASE_MS,
    T0,
    advanced_patch,
    at,
    claimed_and_begun,
    done_patch,
    open_db,
    read,
    started,
    steps,
)

MARGIN_MS = LEASE_MS * 0.25


# -- BEGIN ----------------------------------------------------------------------------------------


def test_begin_with_exactly_the_margin_left_fails() -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None
    before = read(db)

    assert db.begin("run-1", "owner-1", MARGIN_MS, now=at(750)) is False
    assert read(db) == before


def test_begin_with_one_ms_more_than_the_margin_left_succeeds() -> None:
    db = open_db()
    started(db, admission_misses=4)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None

    assert db.begin("run-1", "owner-1", MARGIN_MS, now=at(749)) is True
    row = read(db)
    assert (row.lease_began_at, row.admission_misses) == (at(749), None)


def test_begin_floors_a_fractional_margin() -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None

    # floor(250.9) = 250: at 749 ms the lease runs 251 ms past now, more than the margin.
    assert db.begin("run-1", "owner-1", 250.9, now=at(749)) is True


def test_begin_by_anyone_but_the_holder_fails() -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None

    assert db.begin("run-1", "owner-2", MARGIN_MS, now=T0) is False
    assert read(db).lease_began_at is None


def test_begin_of_an_unleased_run_fails_even_with_no_margin() -> None:
    db = open_db()
    started(db, next_attempt_at=at(5_000))

    assert db.begin("run-1", "owner-1", 0, now=T0) is False


@pytest.mark.parametrize(
    ("margin", "shown"),
    [(-1, "-1"), (float("nan"), "nan"), (float("inf"), "inf"), (None, "None"), (True, "True")],
)
def test_a_margin_that_is_not_a_finite_non_negative_number_is_refused(
    margin: object, shown: str
) -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None
    with pytest.raises(
        ValidationFailed,
        match=(
            rf"^margin_ms is {shown}; the BEGIN margin is a finite number of milliseconds, "
            r"0 or more$"
        ),
    ):
        db.begin("run-1", "owner-1", margin, now=T0)  # type: ignore[arg-type]
    assert read(db).lease_began_at is None


# -- patch and commit -----------------------------------------------------------------------------


def test_the_holders_patch_lands_and_releases_the_lease() -> None:
    db = open_db()
    row = started(db)
    claimed_and_begun(db)

    assert db.patch("run-1", done_patch(now=at(10)), "owner-1", now=at(10)) is True

    assert read(db) == attrs.evolve(
        row,
        status="done",
        cursor='"c-1"',
        counters='{"walked":5}',
        updated_at=at(10),
        ended_at=at(10),
    )


def test_a_stale_owners_patch_is_refused_and_writes_nothing() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    assert db.claim("run-1", "owner-2", LEASE_MS, now=at(LEASE_MS)) is not None
    before = read(db)

    assert db.patch("run-1", done_patch(), "owner-1", now=at(LEASE_MS + 1)) is False
    assert read(db) == before


def test_a_null_owner_patches_only_an_unleased_run() -> None:
    db = open_db()
    started(db)
    assert db.patch("run-1", advanced_patch(), None, now=T0) is True
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None

    assert db.patch("run-1", advanced_patch(), None, now=T0) is False


def test_a_finished_run_is_never_patched_again() -> None:
    db = open_db()
    started(db)
    assert db.patch("run-1", done_patch(), None, now=T0) is True

    assert db.patch("run-1", advanced_patch(), None, now=T0) is False
    assert read(db).status == "done"


def test_the_patch_never_writes_the_admission_miss_count() -> None:
    db = open_db()
    started(db, admission_misses=2)

    assert db.patch("run-1", advanced_patch(), None, now=T0) is True
    assert read(db).admission_misses == 2


def test_a_commit_writes_the_run_and_drops_only_its_own_ledger() -> None:
    db = open_db()
    started(db)
    started(db, "run-2", instance="other")
    claimed_and_begun(db)
    claimed_and_begun(db, "run-2")
    assert db.record_step("run-1", "a", "1", 1, None, T0, "owner-1", LEASE_MS, now=T0)
    assert db.record_step("run-2", "a", "2", 1, None, T0, "owner-1", LEASE_MS, now=T0)

    assert db.commit_pass("run-1", advanced_patch(), "owner-1", now=T0) is True

    assert read(db).cursor == '"c-1"'
    assert steps(db) == []
    assert steps(db, "run-2") == [JobStepRow("a", "2", 1, None)]


def test_a_refused_commit_keeps_the_ledger_of_the_pass_that_took_over() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    assert db.claim("run-1", "owner-2", LEASE_MS, now=at(LEASE_MS)) is not None
    assert db.record_step(
        "run-1", "a", "1", 1, None, at(LEASE_MS), "owner-2", LEASE_MS, now=at(LEASE_MS)
    )
    before = read(db)

    assert db.commit_pass("run-1", advanced_patch(), "owner-1", now=at(LEASE_MS)) is False

    assert read(db) == before
    assert steps(db) == [JobStepRow("a", "1", 1, None)]


@pytest.mark.parametrize("status", ["paused", "", None])
def test_a_patch_with_a_status_the_spec_does_not_have_is_refused(status: object) -> None:
    db = open_db()
    started(db)
    patch = attrs.evolve(done_patch(), status=status)  # type: ignore[arg-type]
    with pytest.raises(
        ValidationFailed,
        match=(
            rf"^patch\.status is {status!r}; a run's status is one of "
            r"'running', 'done', 'failed'$"
        ),
    ):
        db.commit_pass("run-1", patch, None, now=T0)
    assert read(db).status == "running"


def test_a_patch_with_negative_attempts_is_refused() -> None:
    db = open_db()
    started(db)
    with pytest.raises(
        ValidationFailed,
        match=(
            r"^patch\.attempts is -1; attempts counts consecutive failed passes, "
            r"a whole number of 0 or more$"
        ),
    ):
        db.patch("run-1", attrs.evolve(done_patch(), attempts=-1), None, now=T0)


# -- step boundaries ------------------------------------------------------------------------------


def test_a_step_boundary_renews_the_lease_from_the_store_now_and_reads_the_step() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    assert db.record_step(
        "run-1", "fetch", '{"n":1}', 1, None, at(100), "owner-1", 500, now=at(100)
    )
    assert read(db).next_attempt_at == at(600)

    boundary = db.begin_step("run-1", "fetch", "owner-1", LEASE_MS, now=at(900))

    assert boundary == JobStepBoundary(True, JobStepRow("fetch", '{"n":1}', 1, None))
    assert read(db).next_attempt_at == at(900 + LEASE_MS)


def test_a_step_boundary_of_a_step_not_yet_recorded_reads_none() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)

    assert db.begin_step("run-1", "fetch", "owner-1", LEASE_MS, now=T0) == JobStepBoundary(
        True, None
    )


def test_a_step_boundary_after_a_takeover_is_not_held_and_renews_nothing() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    assert db.claim("run-1", "owner-2", LEASE_MS, now=at(LEASE_MS)) is not None
    before = read(db)

    boundary = db.begin_step("run-1", "fetch", "owner-1", LEASE_MS, now=at(LEASE_MS + 5))

    assert boundary == JobStepBoundary(False, None)
    assert read(db) == before


def test_recording_a_step_after_a_takeover_is_refused_and_writes_nothing() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    assert db.claim("run-1", "owner-2", LEASE_MS, now=at(LEASE_MS)) is not None
    before = read(db)

    held = db.record_step(
        "run-1", "fetch", "1", 1, None, at(LEASE_MS), "owner-1", LEASE_MS, now=at(LEASE_MS)
    )

    assert held is False
    assert steps(db) == []
    assert read(db) == before


def test_recording_a_step_of_a_settled_run_is_refused() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    assert db.patch("run-1", done_patch(), "owner-1", now=T0)

    assert db.record_step("run-1", "fetch", "1", 1, None, T0, "owner-1", LEASE_MS, now=T0) is False
    assert steps(db) == []


def test_a_step_attempt_is_recorded_over_the_last_one() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    assert db.record_step("run-1", "fetch", None, 1, "timeout", T0, "owner-1", LEASE_MS, now=T0)
    assert db.record_step("run-1", "fetch", "null", 2, None, at(1), "owner-1", LEASE_MS, now=at(1))

    assert steps(db) == [JobStepRow("fetch", "null", 2, None)]
    recorded_at = db.connection.execute("SELECT recorded_at FROM _substrat_job_steps").fetchone()
    assert recorded_at[0] == at(1)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"attempts": -1},
            r"^attempts is -1; a step's attempts is a whole number of 0 or more$",
        ),
        ({"result": 1}, r"^result is 1; a step result is JSON text or None$"),
        (
            {"last_error": ValueError("x")},
            r"^last_error is ValueError\('x'\); pass the error text or None$",
        ),
        (
            {"at": "yesterday"},
            r"^at is 'yesterday'; store times are ISO-8601 UTC with milliseconds and Z, "
            r"like '2026-10-04T12:00:00\.000Z'$",
        ),
    ],
)
def test_a_step_record_that_would_write_nonsense_is_refused(
    arguments: dict[str, object], message: str
) -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    before = read(db)
    values: dict[str, object] = {"result": "1", "attempts": 1, "last_error": None, "at": T0}
    values.update(arguments)
    with pytest.raises(ValidationFailed, match=message):
        db.record_step(
            "run-1",
            "fetch",
            values["result"],  # type: ignore[arg-type]
            values["attempts"],  # type: ignore[arg-type]
            values["last_error"],  # type: ignore[arg-type]
            values["at"],  # type: ignore[arg-type]
            "owner-1",
            LEASE_MS,
            now=at(1),
        )
    assert steps(db) == []
    assert read(db) == before
