"""The claim: one compare-and-set decides which drive runs a due run's pass, by the store clock."""

from __future__ import annotations

import attrs
import pytest

from driver import JOB_LEASE_EXPIRED_NOTE, JobRunClaim, ValidationFailed

from .store_support import LEASE_MS, T0, at, claimed_and_begun, open_db, read, started


def test_a_fresh_run_is_claimed_with_a_lease_from_the_store_now() -> None:
    db = open_db()
    row = started(db)

    claim = db.claim("run-1", "owner-1", LEASE_MS, now=at(5))

    expected = attrs.evolve(
        row, lease_owner="owner-1", next_attempt_at=at(5 + LEASE_MS), updated_at=at(5)
    )
    assert claim == JobRunClaim(expected, takeover=False)
    assert read(db) == expected


def test_a_live_lease_is_not_claimed_by_another_owner() -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None
    before = read(db)

    assert db.claim("run-1", "owner-2", LEASE_MS, now=at(LEASE_MS - 1)) is None

    assert read(db) == before


def test_a_live_lease_is_not_claimed_again_by_its_own_owner_either() -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None

    assert db.claim("run-1", "owner-1", LEASE_MS, now=at(1)) is None


def test_a_claim_at_exactly_the_expiry_wins() -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None

    claim = db.claim("run-1", "owner-2", LEASE_MS, now=at(LEASE_MS))

    assert claim is not None
    assert claim.run.lease_owner == "owner-2"
    assert claim.run.next_attempt_at == at(2 * LEASE_MS)


def test_taking_over_a_begun_lease_charges_one_attempt_and_says_why() -> None:
    db = open_db()
    started(db, attempts=2)
    claimed_and_begun(db)

    claim = db.claim("run-1", "owner-2", LEASE_MS, now=at(LEASE_MS))

    assert claim is not None
    assert claim.takeover is True
    assert claim.run.attempts == 3
    assert claim.run.last_error == JOB_LEASE_EXPIRED_NOTE
    assert claim.run.lease_began_at is None
    assert claim.run.lease_owner == "owner-2"


def test_taking_over_an_unbegun_lease_charges_nothing() -> None:
    db = open_db()
    started(db, attempts=2, last_error="upstream 503")
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None

    claim = db.claim("run-1", "owner-2", LEASE_MS, now=at(LEASE_MS))

    assert claim is not None
    assert claim.takeover is False
    assert claim.run.attempts == 2
    assert claim.run.last_error == "upstream 503"


def test_a_takeover_is_charged_once_not_again_by_the_next_takeover() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    first = db.claim("run-1", "owner-2", LEASE_MS, now=at(LEASE_MS))
    second = db.claim("run-1", "owner-3", LEASE_MS, now=at(2 * LEASE_MS))

    assert first is not None
    assert second is not None
    assert (first.takeover, second.takeover) == (True, False)
    assert second.run.attempts == 1


def test_a_run_waiting_on_its_backoff_is_claimed_from_exactly_its_due_time() -> None:
    db = open_db()
    started(db, next_attempt_at=at(500))

    assert db.claim("run-1", "owner-1", LEASE_MS, now=at(499)) is None
    assert db.claim("run-1", "owner-1", LEASE_MS, now=at(500)) is not None


@pytest.mark.parametrize("status", ["done", "failed"])
def test_a_finished_run_is_never_claimed(status: str) -> None:
    db = open_db()
    started(db)
    db.connection.execute("UPDATE _substrat_job_runs SET status = ?", (status,))

    assert db.claim("run-1", "owner-1", LEASE_MS, now=at(10_000)) is None


def test_claiming_a_run_that_does_not_exist_is_a_lost_claim() -> None:
    db = open_db()

    assert db.claim("nobody", "owner-1", LEASE_MS, now=T0) is None


def test_the_claim_does_not_touch_the_admission_miss_count() -> None:
    db = open_db()
    started(db, admission_misses=3)

    claim = db.claim("run-1", "owner-1", LEASE_MS, now=T0)

    assert claim is not None
    assert claim.run.admission_misses == 3


@pytest.mark.parametrize(
    ("lease_ms", "shown"),
    [
        (-5, "-5"),
        (0, "0"),
        (1.5, "1.5"),
        (True, "True"),
        (None, "None"),
        ("1000", "'1000'"),
        (31_536_000_001, "31536000001"),
    ],
)
def test_a_lease_that_is_not_a_whole_number_up_to_a_year_is_refused(
    lease_ms: object, shown: str
) -> None:
    db = open_db()
    started(db)
    with pytest.raises(
        ValidationFailed,
        match=rf"^lease_ms is {shown}; a lease is a whole number of milliseconds from 1 to "
        r"31536000000 \(a year\), which keeps its expiry a time the store can write$",
    ):
        db.claim("run-1", "owner-1", lease_ms, now=T0)  # type: ignore[arg-type]
    assert read(db).lease_owner is None


@pytest.mark.parametrize(("owner", "shown"), [(None, "None"), ("", "''"), (7, "7")])
def test_a_claim_without_an_owner_is_refused(owner: object, shown: str) -> None:
    db = open_db()
    started(db)
    with pytest.raises(
        ValidationFailed,
        match=rf"^owner is {shown}; pass the non-empty lease owner its claim was made with$",
    ):
        db.claim("run-1", owner, LEASE_MS, now=T0)  # type: ignore[arg-type]


@pytest.mark.parametrize("now", ["2026-10-04 12:00:00", "2026-10-04T12:00:00Z", ""])
def test_a_store_now_in_any_other_spelling_is_refused(now: str) -> None:
    db = open_db()
    started(db)
    with pytest.raises(
        ValidationFailed,
        match=(
            rf"^now is '{now}'; store times are ISO-8601 UTC with milliseconds and Z, "
            r"like '2026-10-04T12:00:00\.000Z'$"
        ),
    ):
        db.claim("run-1", "owner-1", LEASE_MS, now=now)
