"""Rows and runs for the async-layer tests of the scope host."""

from __future__ import annotations

from driver import JobRunKey, JobRunRow

STARTED = "2026-10-04T12:00:00.000Z"


def new_row(
    run_id: str, *, module_id: str = "mod", job: str = "walk", instance: str = "default"
) -> JobRunRow:
    return JobRunRow.fresh(run_id, JobRunKey(module_id, job, instance), payload="{}", at=STARTED)
