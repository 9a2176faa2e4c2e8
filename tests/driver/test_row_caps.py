"""The kernel keeps every row under the platform's limit: what a caller passes past a cap is refused
by path before the store is asked; what a handler produces past one fails its pass with the cause
on the record (never an outcome write the store refuses, which would leave the lease to expire);
an error's text, the handler's own, is cut to fit."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from driver import (
    JOB_COUNTERS_MAX_BYTES,
    JOB_CURSOR_MAX_BYTES,
    JOB_ERROR_MAX_BYTES,
    JOB_ID_MAX_BYTES,
    JOB_PAYLOAD_MAX_BYTES,
    JOB_STEP_RESULT_MAX_BYTES,
    JobPassContext,
    JobPassResult,
    RetryPolicy,
    StartJobRunInput,
    ValidationFailed,
)
from scopehost import StoreClock, open_scope_host

from .support import JOB, MODULE, SCOPE, Trace, drive, start


def too_big(cap: int, what: str, size: int) -> str:
    return (
        f"is {size} bytes of UTF-8, more than the {cap} {what} may take (a row holds at most "
        "about 2 MB) — keep large data outside the run and store a reference to it"
    )


async def test_a_start_past_a_cap_is_refused_by_path_before_the_store(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        payload = "p" * JOB_PAYLOAD_MAX_BYTES  # its JSON adds two quotes
        with pytest.raises(ValidationFailed) as caught:
            await one.start_job_run(SCOPE, start(payload))
        assert [(e.path, e.message) for e in caught.value.errors] == [
            (
                "payload",
                too_big(JOB_PAYLOAD_MAX_BYTES, "a payload's JSON", JOB_PAYLOAD_MAX_BYTES + 2),
            )
        ]
        name = "n" * (JOB_ID_MAX_BYTES + 1)
        with pytest.raises(ValidationFailed) as caught:
            await one.start_job_run(
                SCOPE, StartJobRunInput(module_id=MODULE, job=JOB, instance=name, subject=name)
            )
        assert [e.path for e in caught.value.errors] == ["instance", "subject"]
        with pytest.raises(ValidationFailed, match=r"^name is 1025 bytes of UTF-8"):
            one.register_job(MODULE, name, lambda ctx: None)  # type: ignore[arg-type,return-value]
        assert await one.job_runs(SCOPE) == []
        # At the cap exactly, it is carried.
        await one.start_job_run(SCOPE, start("p" * (JOB_PAYLOAD_MAX_BYTES - 2)))


async def _one_pass(handler: Any) -> tuple[Any, Any]:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        one.register_job(MODULE, JOB, handler, retry=RetryPolicy(max_attempts=2))
        await one.start_job_run(SCOPE, start())
        report = await one.run_due_jobs(SCOPE)
        [run] = await one.job_runs(SCOPE)
        return report, run


async def test_a_cursor_past_its_cap_fails_the_pass_with_the_cause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(ctx: JobPassContext) -> JobPassResult:
        ctx.count("seen", 1)
        return JobPassResult(cursor="c" * JOB_CURSOR_MAX_BYTES)

    report, run = await _one_pass(handler)
    told = "cursor " + too_big(JOB_CURSOR_MAX_BYTES, "a cursor's JSON", JOB_CURSOR_MAX_BYTES + 2)
    assert [e.error for e in report.errors] == [told]
    assert (run.status, run.last_error, run.cursor, run.counters, run.lease_owner) == (
        "running",
        told,
        None,
        {},
        None,
    )


async def test_counters_past_their_cap_fail_the_pass_with_the_cause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(ctx: JobPassContext) -> JobPassResult:
        for index in range(10_000):
            ctx.count(f"name-{index}", 1)
        return JobPassResult(done=True)

    report, run = await _one_pass(handler)
    [error] = [e.error for e in report.errors]
    assert error.startswith("counters is ")
    assert f"more than the {JOB_COUNTERS_MAX_BYTES} a run's counters' JSON may take" in error
    assert (run.status, run.last_error, run.counters) == ("running", error, {})


async def test_a_step_result_past_its_cap_fails_the_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(ctx: JobPassContext) -> JobPassResult:
        await ctx.step("fetch", lambda: "r" * JOB_STEP_RESULT_MAX_BYTES)
        return JobPassResult(done=True)

    report, run = await _one_pass(handler)
    told = "step 'fetch' returned a value whose JSON " + too_big(
        JOB_STEP_RESULT_MAX_BYTES, "a step's result", JOB_STEP_RESULT_MAX_BYTES + 2
    )
    assert [e.error for e in report.errors] == [told]
    assert (run.status, run.last_error) == ("running", told)


async def test_a_huge_error_is_cut_to_fit_and_the_pass_still_fails_cleanly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    message = "é" * JOB_ERROR_MAX_BYTES  # twice the cap in UTF-8

    async def handler(ctx: JobPassContext) -> JobPassResult:
        raise RuntimeError(message)

    report, run = await _one_pass(handler)
    note = f" … (cut: the whole text was {2 * JOB_ERROR_MAX_BYTES} bytes)"
    assert run.last_error is not None
    assert run.last_error.endswith(note)
    assert run.last_error.startswith("éé")
    assert len(run.last_error.encode()) <= JOB_ERROR_MAX_BYTES
    assert (run.status, run.attempts, run.lease_owner) == ("running", 1, None)
    assert [e.error for e in report.errors] == [run.last_error]
