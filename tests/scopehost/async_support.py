"""Rows and runs for the async-layer tests of the scope host."""

from __future__ import annotations

from driver import JobRunKey, JobRunRow

STARTED = "2026-10-04T12:00:00.000Z"


def new_row(
    run_id: str, *, module_id: str = "mod", job: str = "walk", instance: str = "default"
) -> JobRunRow:
    return JobRunRow(
        id=run_id,
        module_id=module_id,
        job=job,
        instance=instance,
        payload="{}",
        subject_id=None,
        status="running",
        cursor=None,
        counters="{}",
        attempts=0,
        last_error=None,
        started_at=STARTED,
        updated_at=STARTED,
        next_attempt_at=None,
        ended_at=None,
    )


def key_of(row: JobRunRow) -> JobRunKey:
    return row.key
