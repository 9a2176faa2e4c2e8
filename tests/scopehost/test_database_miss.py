"""Admission misses: released, counted while consecutive, backed off, and failed at the tenth."""

from __future__ import annotations

import pytest

from driver import JOB_ADMISSION_MISS_MAX, JobMiss, ValidationFailed, parse_iso_ms

from .store_support import LEASE_MS, T0, advanced_patch, at, open_db, read, started

NOTE = "job mod/walk: claim not begun in time"


def test_nine_misses_back_off_by_doubling_and_the_tenth_fails_the_run() -> None:
    db = open_db()
    started(db, last_error="upstream 503")
    now_ms = 0
    waits = []
    for count in range(1, JOB_ADMISSION_MISS_MAX + 1):
        owner = f"owner-{count}"
        assert db.claim("run-1", owner, LEASE_MS, now=at(now_ms)) is not None
        miss = db.miss("run-1", owner, NOTE, now=at(now_ms + 10))
        row = read(db)
        assert (row.lease_owner, row.lease_began_at, row.admission_misses) == (None, None, count)
        assert row.updated_at == at(now_ms + 10)
        if count < JOB_ADMISSION_MISS_MAX:
            assert miss == JobMiss(count, failed=False)
            assert row.status == "running"
            assert row.last_error == "upstream 503"
            assert row.next_attempt_at is not None
            waits.append(parse_iso_ms(row.next_attempt_at) - parse_iso_ms(at(now_ms + 10)))
            now_ms = parse_iso_ms(row.next_attempt_at) - parse_iso_ms(T0)
        else:
            assert miss == JobMiss(count, failed=True)
            assert (row.status, row.next_attempt_at, row.ended_at, row.last_error) == (
                "failed",
                None,
                at(now_ms + 10),
                f"lease too short for this environment: {NOTE}",
            )
    assert waits == [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000]


def test_the_note_is_written_whole_after_the_prefix_exactly_once() -> None:
    db = open_db()
    started(db, admission_misses=JOB_ADMISSION_MISS_MAX - 1)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None

    assert db.miss("run-1", "owner-1", "  any text at all  ", now=T0) == JobMiss(10, failed=True)
    assert read(db).last_error == "lease too short for this environment:   any text at all  "


def test_begin_resets_the_count_so_misses_are_consecutive() -> None:
    db = open_db()
    started(db)
    for count in range(3):
        assert db.claim("run-1", f"o{count}", LEASE_MS, now=at(count * 10_000)) is not None
        assert db.miss("run-1", f"o{count}", NOTE, now=at(count * 10_000)) is not None
    assert read(db).admission_misses == 3
    assert db.claim("run-1", "o3", LEASE_MS, now=at(100_000)) is not None
    assert db.begin("run-1", "o3", 250, now=at(100_000))
    assert read(db).admission_misses is None
    assert db.commit_pass("run-1", advanced_patch(), "o3", now=at(100_001))

    assert db.claim("run-1", "o4", LEASE_MS, now=at(100_002)) is not None
    assert db.miss("run-1", "o4", NOTE, now=at(100_002)) == JobMiss(1, failed=False)


def test_a_miss_by_an_owner_that_no_longer_holds_the_run_writes_nothing() -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None
    assert db.claim("run-1", "owner-2", LEASE_MS, now=at(LEASE_MS)) is not None
    before = read(db)

    assert db.miss("run-1", "owner-1", NOTE, now=at(LEASE_MS)) is None
    assert read(db) == before


def test_a_miss_after_begin_writes_nothing() -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None
    assert db.begin("run-1", "owner-1", 250, now=T0)
    before = read(db)

    assert db.miss("run-1", "owner-1", NOTE, now=at(1)) is None
    assert read(db) == before


def test_a_miss_of_an_unleased_run_writes_nothing() -> None:
    db = open_db()
    started(db)

    assert db.miss("run-1", "owner-1", NOTE, now=T0) is None
    assert read(db).admission_misses is None


def test_a_miss_without_a_note_is_refused() -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None
    with pytest.raises(
        ValidationFailed, match=r"^note is None; pass the warning a tenth miss fails the run with$"
    ):
        db.miss("run-1", "owner-1", None, now=T0)  # type: ignore[arg-type]
    assert read(db).lease_owner == "owner-1"
