"""The pure parts of the kernel: the tolerant operator read, the warning text, step JSON."""

from __future__ import annotations

import datetime as dt

import attrs
import pytest

from driver import JobRun, JobRunRow, admission_miss_warning, job_run_of
from driver._drive import format_ms, pick_runs
from driver._operator import ColumnDecodeError, decode_columns
from driver._pass import step_result_json
from driver._values import JobDueKey, JobPassResult, JobRegistration

ROW = JobRunRow(
    id="01J00000000000000000000000",
    module_id="crm",
    job="walk",
    instance="default",
    payload='{"source":"s1"}',
    subject_id=None,
    status="running",
    cursor="3",
    counters='{"walked":3}',
    attempts=1,
    last_error="upstream 503",
    started_at="2026-10-04T12:00:00.000Z",
    updated_at="2026-10-04T12:00:01.000Z",
    next_attempt_at=None,
    ended_at=None,
)


def with_columns(columns: dict[str, str]) -> JobRunRow:
    return JobRunRow.from_row({**ROW.as_dict(), **columns})


def test_job_run_of_decodes_a_whole_row() -> None:
    assert job_run_of(ROW) == JobRun(
        id=ROW.id,
        module_id="crm",
        job="walk",
        instance="default",
        status="running",
        payload={"source": "s1"},
        subject_id=None,
        cursor=3,
        counters={"walked": 3},
        attempts=1,
        last_error="upstream 503",
        started_at="2026-10-04T12:00:00.000Z",
        updated_at="2026-10-04T12:00:01.000Z",
        next_attempt_at=None,
        ended_at=None,
        lease_owner=None,
        admission_misses=0,
        decode_error=None,
    )


def test_a_null_cursor_is_a_fact_not_a_failure() -> None:
    run = job_run_of(attrs.evolve(ROW, cursor=None, admission_misses=4))
    assert (run.cursor, run.decode_error, run.admission_misses) == (None, None, 4)


@pytest.mark.parametrize(
    ("columns", "decode_error"),
    [
        (
            {"payload": "{nope"},
            "payload is not valid JSON (Expecting property name enclosed in "
            "double quotes: line 1 column 2 (char 1))",
        ),
        ({"cursor": "["}, "cursor is not valid JSON (Expecting value: line 1 column 2 (char 1))"),
        (
            {"counters": ""},
            "counters is not valid JSON (Expecting value: line 1 column 1 (char 0))",
        ),
        ({"counters": "[1]"}, "counters is JSON but not an object of finite numbers ([1])"),
        (
            {"counters": '{"a":"x"}'},
            'counters is JSON but not an object of finite numbers ({"a":"x"})',
        ),
        (
            {"payload": "", "cursor": "x"},
            "payload is not valid JSON (Expecting value: line 1 column 1 (char 0)); "
            "cursor is not valid JSON (Expecting value: line 1 column 1 (char 0))",
        ),
    ],
)
def test_job_run_of_is_tolerant_column_by_column_and_says_json(
    columns: dict[str, str], decode_error: str
) -> None:
    run = job_run_of(with_columns(columns))
    # Only the undecodable columns come back empty; the others keep what they hold.
    assert (run.payload, run.cursor, run.counters) == (
        None if "payload" in columns else {"source": "s1"},
        None if "cursor" in columns else 3,
        {} if "counters" in columns else {"walked": 3},
    )
    assert run.decode_error == decode_error
    assert (run.status, run.attempts, run.last_error) == ("running", 1, "upstream 503")
    with pytest.raises(ColumnDecodeError, match=r"^.*JSON.*$"):
        decode_columns(with_columns(columns))


def test_the_admission_miss_warning_is_the_designs_text() -> None:
    assert admission_miss_warning(
        module_id="crm", job="walk", lease_ms=100, waited_ms=80.0, miss=3
    ) == (
        "job crm/walk: claim not begun in time — leaseMs 100, margin 25 ms, "
        "claim and begin took 80 ms (admission miss 3 of 10)"
    )
    assert admission_miss_warning(
        module_id="m", job="j", lease_ms=150, waited_ms=112.54, miss=10
    ) == (
        "job m/j: claim not begun in time — leaseMs 150, margin 37.5 ms, "
        "claim and begin took 112.5 ms (admission miss 10 of 10)"
    )
    assert [format_ms(x) for x in (0, 75.0, 74.99, 900_000)] == ["0", "75", "75", "900000"]


def test_a_datetime_step_value_reads_as_the_same_iso_text_every_time() -> None:
    moment = dt.datetime(2026, 10, 4, 12, 0, tzinfo=dt.UTC)
    assert step_result_json({"at": moment, "day": moment.date()}) == (
        '{"at":"2026-10-04T12:00:00+00:00","day":"2026-10-04"}'
    )
    with pytest.raises(ValueError, match=r"^result is nan, which JSON cannot carry — "):
        step_result_json(float("nan"))
    with pytest.raises(
        ValueError, match=r"^result is set — pass a list; a run carries ids and configuration"
    ):
        step_result_json({1})


async def _handler(ctx: object) -> JobPassResult:
    return JobPassResult()


def test_pick_runs_steps_over_unregistered_jobs_and_repeats() -> None:
    known = JobRegistration(handler=_handler)

    def handler_for(key: JobDueKey) -> JobRegistration | None:
        return known if key.job == "walk" else None

    keys = [
        JobDueKey("a", "crm", "orphan"),
        JobDueKey("b", "crm", "walk"),
        JobDueKey("b", "crm", "walk"),
        JobDueKey("c", "crm", "orphan"),
        JobDueKey("d", "crm", "walk"),
        JobDueKey("e", "crm", "walk"),
    ]
    assert [key.id for key, _ in pick_runs(keys, handler_for, 2)] == ["b", "d"]
    assert [key.id for key, _ in pick_runs(keys, handler_for, 50)] == ["b", "d", "e"]
