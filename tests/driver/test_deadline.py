"""A pass deadline: ``register_job(..., deadline_ms=N)`` cancels a handler that runs past it, and
the pass fails as any failed pass does. Without one (the default) a handler runs as long as it
likes, as the spec has it."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import pytest
import trio
import trio.testing

from driver import (
    JOB_LEASE_MAX_MS,
    JobDriver,
    JobDriveReport,
    JobPassContext,
    JobPassResult,
    JobRegistration,
    RetryPolicy,
    StartJobRunInput,
    UlidMint,
    ValidationFailed,
    parse_iso_ms,
    run_due_job_runs,
)
from scopehost import StoreClock, open_scope_host

from .support import JOB, MODULE, SCOPE, Trace, drive, start

TOLD = (
    "the handler ran past its pass deadline of 5000 ms and was cancelled; make a pass do less "
    "(return a cursor sooner) or raise deadline_ms in register_job"
)


async def hangs(ctx: JobPassContext) -> JobPassResult:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def test_a_handler_that_never_returns_fails_its_pass_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, trace)
        one.register_job(MODULE, JOB, hangs, deadline_ms=5_000)
        started = await one.start_job_run(SCOPE, start())
        before = trio.current_time()
        with trio.fail_after(60):  # a deadline that did not fire fails here, not hangs
            report = await one.run_due_jobs(SCOPE)
        # Virtual time: the drive came back at the deadline, not never.
        assert trio.current_time() - before == pytest.approx(5.0)
        assert (report.attempted, report.retrying) == (1, 1)
        assert [error.error for error in report.errors] == [TOLD]
        [run] = await one.job_runs(SCOPE)
        assert (run.id, run.status, run.attempts) == (started.id, "running", 1)
        assert run.last_error == TOLD
        assert run.lease_owner is None
        assert run.next_attempt_at is not None
        assert [fields["error"] for fields in trace.named("handler.end")] == [TOLD]


async def test_deadline_failures_are_counted_as_failed_passes_up_to_the_runs_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        one.register_job(MODULE, JOB, hangs, deadline_ms=5_000, retry=RetryPolicy(max_attempts=2))
        await one.start_job_run(SCOPE, start())
        with trio.fail_after(60):
            assert (await one.run_due_jobs(SCOPE)).retrying == 1
        await trio.sleep(10)  # past the backoff
        report = await one.run_due_jobs(SCOPE)
        assert report.failed == 1
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.attempts, run.last_error) == ("failed", 2, TOLD)


async def test_a_handler_cancelled_inside_a_step_writes_nothing_it_produced(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls = []

    async def walk(ctx: JobPassContext) -> JobPassResult:
        calls.append(ctx.cursor)
        ctx.count("seen", 5)
        await ctx.step("quick", lambda: 1)
        if len(calls) == 1:
            await ctx.step("slow", trio.sleep_forever)
        return JobPassResult(cursor=1, done=True)

    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        one.register_job(MODULE, JOB, walk, deadline_ms=5_000)
        await one.start_job_run(SCOPE, start())
        with trio.fail_after(60):
            assert (await one.run_due_jobs(SCOPE)).retrying == 1
        [run] = await one.job_runs(SCOPE)
        assert (run.cursor, run.counters, run.attempts) == (None, {}, 1)
        # The run is not stuck: once due again, a pass within the deadline commits.
        await trio.sleep(10)
        assert (await one.run_due_jobs(SCOPE)).completed == 1
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.cursor, run.counters, run.attempts) == ("done", 1, {"seen": 5}, 0)
        assert calls == [None, None]


async def test_a_handler_that_swallows_the_cancel_still_fails_its_pass(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def stubborn(ctx: JobPassContext) -> JobPassResult:
        with contextlib.suppress(trio.Cancelled):
            await trio.sleep_forever()
        return JobPassResult(cursor="never-trusted", done=True)

    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        one.register_job(MODULE, JOB, stubborn, deadline_ms=5_000)
        await one.start_job_run(SCOPE, start())
        with trio.fail_after(60):
            assert (await one.run_due_jobs(SCOPE)).retrying == 1
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.cursor, run.last_error) == ("running", None, TOLD)


async def test_a_handler_within_its_deadline_commits_and_no_deadline_is_the_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def sleeping(seconds: float) -> Any:
        async def handler(ctx: JobPassContext) -> JobPassResult:
            await trio.sleep(seconds)
            return JobPassResult(cursor=1, done=True)

        return handler

    async with open_scope_host(clock=StoreClock()) as host:
        bounded = drive(host, Trace(), name="bounded")
        bounded.register_job(MODULE, JOB, sleeping(4.999), deadline_ms=5_000)
        await bounded.start_job_run(SCOPE, start(instance="bounded"))
        assert await bounded.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)
        # No deadline: an hour-long handler is the spec's business, and it completes.
        free = drive(host, Trace(), name="free")
        free.register_job(MODULE, "long", sleeping(3_600))
        await free.start_job_run(SCOPE, StartJobRunInput(module_id=MODULE, job="long"))
        assert await free.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "5000", True, JOB_LEASE_MAX_MS + 1])
async def test_a_bad_deadline_is_refused_by_name(
    autojump_clock: trio.testing.MockClock, bad: object
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        with pytest.raises(ValidationFailed) as caught:
            one.register_job(MODULE, JOB, hangs, deadline_ms=bad)  # type: ignore[arg-type]
        assert [(e.path, e.message) for e in caught.value.errors] == [
            (
                "deadline_ms",
                f"is {bad!r}; a pass deadline must be an integer from 1 to {JOB_LEASE_MAX_MS} ms "
                "(a year), or None for no deadline",
            )
        ]


async def test_a_host_that_cannot_cancel_a_handler_takes_no_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class NoDeadlines:
        def __init__(self, host: Any) -> None:
            self.stub, self.door, self.check_link = host.stub, host.door, host.check_link
            self.clock, self.rng, self.monotonic_ms = host.clock, host.rng, host.monotonic_ms

        def __repr__(self) -> str:
            return "NoDeadlines()"

    async with open_scope_host(clock=StoreClock()) as host:
        one = JobDriver(NoDeadlines(host))
        with pytest.raises(ValidationFailed) as caught:
            one.register_job(MODULE, JOB, hangs, deadline_ms=5_000)
        assert [(e.path, e.message) for e in caught.value.errors] == [
            (
                "deadline_ms",
                "is 5000, but the host NoDeadlines() has no run_within to cancel a handler with; "
                "use a scopehost host, or no deadline",
            )
        ]
        one.register_job(MODULE, JOB, hangs)


async def test_the_kernel_without_a_way_to_cancel_refuses_a_deadline_before_the_claim(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        store = host.stub(SCOPE)
        one = drive(host, Trace())
        one.register_job(MODULE, JOB, hangs)
        started = await one.start_job_run(SCOPE, start())
        rng = random.Random(1)
        report = await run_due_job_runs(
            store=store,
            handler_for=lambda key: JobRegistration(handler=hangs, deadline_ms=5_000),
            now=host.clock.now,
            open_scope=lambda run, token: host.door(SCOPE, run.module_id),  # type: ignore[arg-type,return-value]
            monotonic=host.monotonic_ms,
            mint_owner=UlidMint(lambda: parse_iso_ms(host.clock.now()), rng),
            rng=rng,
        )
        assert [(e.run_id, e.error) for e in report.errors] == [
            (
                started.id,
                f"within is None, but job {MODULE}/{JOB} has deadline_ms 5000; pass the host's "
                "run_within to run_due_job_runs, which cancels the handler at the deadline",
            )
        ]
        [run] = await one.job_runs(SCOPE)
        assert (run.attempts, run.lease_owner) == (0, None)


async def test_a_simulated_world_says_it_does_not_model_deadlines(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from sims.world._recording import WorldJobDriver

    async with open_scope_host(clock=StoreClock()) as host:
        recording = WorldJobDriver(host, record=lambda event, fields: None)
        with pytest.raises(ValueError, match=r"^deadline_ms=5000: a simulated") as caught:
            recording.register_job(MODULE, JOB, hangs, deadline_ms=5_000)
        assert str(caught.value) == (
            "deadline_ms=5000: a simulated world does not model pass deadlines; register the job "
            "without one (test deadlines against a scope host directly)"
        )
