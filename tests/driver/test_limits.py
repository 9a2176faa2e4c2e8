"""What a run's JSON can carry, refused at every door by path, and a pass whose outcome could not
be written failing with the cause on its record instead of leaving its lease to expire."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from driver import (
    JOB_JSON_MAX_DEPTH,
    JOB_LEASE_MAX_MS,
    JobDriveError,
    JobDriveReport,
    JobPassContext,
    JobPassResult,
    RetryPolicy,
    StartJobRunInput,
    ValidationFailed,
    admission_miss_outcome,
)
from scopehost import StoreClock, open_scope_host

from .support import JOB, MODULE, SCOPE, Trace, drive, start


def nested(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


BIG = 10**4300  # 4301 digits
SURROGATE = "\ud800"
DEEP_PATH = "payload" + ".0" * JOB_JSON_MAX_DEPTH
DEEP_MESSAGE = (
    f"nests lists and objects more than {JOB_JSON_MAX_DEPTH} levels deep, more than a run's "
    "JSON carries — flatten it"
)
BIG_MESSAGE = (
    "is an int of more than 4300 digits, more than a run's JSON carries — pass a number that "
    "large as a str"
)
SURROGATE_MESSAGE = (
    "holds a lone surrogate ('\\ud800' at index 2), which UTF-8 cannot carry — decode the text "
    "properly before passing it"
)


@pytest.mark.parametrize(
    ("input", "path", "message"),
    [
        (start({"ids": [1, BIG]}), "payload.ids.1", BIG_MESSAGE),
        (start({"n": -BIG}), "payload.n", BIG_MESSAGE),
        (start(nested(JOB_JSON_MAX_DEPTH + 1)), DEEP_PATH, DEEP_MESSAGE),
        (start({"name": f"ab{SURROGATE}"}), "payload.name", SURROGATE_MESSAGE),
        (start(instance=f"ab{SURROGATE}"), "instance", SURROGATE_MESSAGE),
        (start(subject=f"ab{SURROGATE}"), "subject", SURROGATE_MESSAGE),
        (
            StartJobRunInput(module_id=f"ab{SURROGATE}", job=JOB),
            "module_id",
            SURROGATE_MESSAGE,
        ),
    ],
)
async def test_start_refuses_what_the_store_cannot_hold_by_path_and_writes_nothing(
    autojump_clock: trio.testing.MockClock, input: StartJobRunInput, path: str, message: str
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        with pytest.raises(ValidationFailed) as caught:
            await one.start_job_run(SCOPE, input)
        assert [(e.path, e.message) for e in caught.value.errors] == [(path, message)]
        assert await one.job_runs(SCOPE) == []


async def test_the_deepest_and_longest_values_allowed_are_carried_whole(
    autojump_clock: trio.testing.MockClock,
) -> None:
    payload = {"deep": nested(JOB_JSON_MAX_DEPTH - 1), "big": 10**4300 - 1}
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        await one.start_job_run(SCOPE, start(payload))
        [run] = await one.job_runs(SCOPE)
        assert run.payload == payload


def test_a_key_with_a_lone_surrogate_is_refused_at_its_parent() -> None:
    from driver import assert_queue_safe

    with pytest.raises(ValidationFailed, match=r"^payload.a has the key '\\udc00', which holds a"):
        assert_queue_safe({"a": {"\udc00": 1}})


@pytest.mark.parametrize(
    ("cursor", "error"),
    [
        ({"next": BIG}, f"cursor.next {BIG_MESSAGE}"),
        ({"at": nested(JOB_JSON_MAX_DEPTH)}, "cursor.at" + ".0" * 127 + f" {DEEP_MESSAGE}"),
        ({"token": f"ab{SURROGATE}"}, f"cursor.token {SURROGATE_MESSAGE}"),
    ],
)
async def test_a_cursor_the_store_cannot_hold_fails_the_pass_with_that_cause(
    autojump_clock: trio.testing.MockClock, cursor: Any, error: str
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())

        async def handler(ctx: JobPassContext) -> JobPassResult:
            return JobPassResult(cursor=cursor)

        one.register_job(MODULE, JOB, handler)
        started = await one.start_job_run(SCOPE, start())
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(
            attempted=1, retrying=1, errors=(JobDriveError(started.id, error),)
        )
        [run] = await one.job_runs(SCOPE)
        # The cause is on the record and the lease released: nothing waits to expire.
        assert (run.status, run.last_error, run.lease_owner, run.cursor) == (
            "running",
            error,
            None,
            None,
        )


async def test_a_count_that_overflows_fails_the_pass_with_that_cause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())

        async def handler(ctx: JobPassContext) -> JobPassResult:
            ctx.count("bytes", 1e308)
            ctx.count("bytes", 1e308)
            return JobPassResult(done=True)

        one.register_job(MODULE, JOB, handler, retry=RetryPolicy(max_attempts=1))
        started = await one.start_job_run(SCOPE, start())
        error = (
            "count.bytes overflows: adding 1e+308 to 1e+308 is not a finite number — "
            "count in smaller units"
        )
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(
            attempted=1, failed=1, errors=(JobDriveError(started.id, error),)
        )
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.last_error, run.counters, run.lease_owner) == (
            "failed",
            error,
            {},
            None,
        )


async def test_a_step_called_without_await_fails_its_pass_naming_the_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())

        async def handler(ctx: JobPassContext) -> JobPassResult:
            await ctx.step("first", lambda: ran.append("first"))
            ctx.step("forgotten", lambda: ran.append("forgotten"))  # no await
            return JobPassResult(done=True)

        one.register_job(MODULE, JOB, handler)
        started = await one.start_job_run(SCOPE, start())
        error = (
            "step 'forgotten' was called without await, so the body never ran — write "
            "`await ctx.step(...)`"
        )
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(
            attempted=1, retrying=1, errors=(JobDriveError(started.id, error),)
        )
        assert ran == ["first"]
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.last_error) == ("running", error)


async def test_a_step_awaited_twice_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        seen: list[str] = []

        async def handler(ctx: JobPassContext) -> JobPassResult:
            call = ctx.step("once", lambda: 1)
            await call
            try:
                await call
            except RuntimeError as err:
                seen.append(str(err))
            return JobPassResult(done=True)

        one.register_job(MODULE, JOB, handler)
        await one.start_job_run(SCOPE, start())
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)
        assert seen == ["step 'once' was already awaited; call ctx.step again"]


async def test_leases_and_retry_delays_past_a_year_are_refused_at_registration(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())

        async def handler(ctx: JobPassContext) -> None:
            return None

        one.register_job(MODULE, "longest", handler, lease_ms=JOB_LEASE_MAX_MS)
        with pytest.raises(
            ValidationFailed,
            match=r"^lease_ms is 31536000001; a job's lease must be an integer from 100 to "
            r"31536000000 ms \(a year\), or None for the default$",
        ):
            one.register_job(MODULE, JOB, handler, lease_ms=JOB_LEASE_MAX_MS + 1)
        with pytest.raises(
            ValidationFailed,
            match=r"^retry.max_delay_ms is 31536000001; it must be an int from 0 to 31536000000",
        ):
            one.register_job(
                MODULE, JOB, handler, retry=RetryPolicy(max_delay_ms=JOB_LEASE_MAX_MS + 1)
            )


def test_the_tenth_miss_writes_the_whole_failure_text_once() -> None:
    outcome = admission_miss_outcome(10, "2026-10-04T12:00:00.000Z", "job m/j: not begun")
    assert outcome.last_error == "lease too short for this environment: job m/j: not begun"
    assert admission_miss_outcome(9, "2026-10-04T12:00:00.000Z", "x").last_error is None
