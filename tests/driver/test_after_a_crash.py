"""What README's "After a crash" says, held: a process that dies mid-pass leaves its run running
under the dead pass's lease; on restart a start joins that run, nothing is attempted until the
lease expires, the takeover charges an attempt and notes why, completed steps come from their
memo, and the commit clears the attempt and the note.

The crash is the process's task cancelled in the middle of its handler, after BEGIN and one
recorded step: nothing of the dead pass reaches the store after that.
"""

from __future__ import annotations

import trio
import trio.testing

from driver import JOB_LEASE_EXPIRED_NOTE, JobDriveReport, JobPassContext, JobPassResult
from scopehost import StoreClock, open_scope_host

from .support import JOB, MODULE, SCOPE, Trace, drive, start

LEASE_MS = 5_000


async def test_a_restart_joins_the_run_waits_out_the_lease_and_the_commit_clears_the_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    bodies: list[str] = []
    async with open_scope_host(clock=StoreClock()) as host:
        hung = trio.Event()

        async def dying(ctx: JobPassContext) -> JobPassResult:
            async def first() -> str:
                bodies.append("first")
                return "one"

            await ctx.step("first", first)
            hung.set()
            await trio.sleep_forever()  # the process dies here
            raise AssertionError("unreachable")

        async def whole(ctx: JobPassContext) -> JobPassResult:
            async def first() -> str:
                bodies.append("first again")
                return "one"

            async def second() -> str:
                bodies.append("second")
                return "two"

            await ctx.step("first", first)
            await ctx.step("second", second)
            return JobPassResult(done=True)

        before = drive(host, trace, name="before")
        before.register_job(MODULE, JOB, dying, lease_ms=LEASE_MS)
        started = await before.start_job_run(SCOPE, start())
        async with trio.open_nursery() as process:
            process.start_soon(before.run_due_jobs, SCOPE)
            await hung.wait()
            crashed_at = trio.current_time()
            process.cancel_scope.cancel()

        seen: list[tuple[int, str | None]] = []

        async def watched(ctx: JobPassContext) -> JobPassResult:
            # While the new pass runs, the record shows the attempt charged and why.
            [record] = await after.job_runs(SCOPE)
            seen.append((record.attempts, record.last_error))
            return await whole(ctx)

        after = drive(host, trace, name="after")
        after.register_job(MODULE, JOB, watched, lease_ms=LEASE_MS)
        joined = await after.start_job_run(SCOPE, start())
        assert joined.id == started.id
        assert joined.status == "running"
        # Until the dead pass's lease expires, nothing is attempted.
        assert await after.run_due_jobs(SCOPE) == JobDriveReport()
        await trio.sleep_until(crashed_at + LEASE_MS / 1000 - 0.5)
        assert await after.run_due_jobs(SCOPE) == JobDriveReport()
        [waiting] = await after.job_runs(SCOPE)
        assert (waiting.status, waiting.attempts) == ("running", 0)

        await trio.sleep_until(crashed_at + LEASE_MS / 1000 + 0.1)
        assert await after.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)
        assert seen == [(1, JOB_LEASE_EXPIRED_NOTE)]
        # The recorded step came from its memo; only the unrecorded one ran.
        assert bodies == ["first", "second"]
        [done] = await after.job_runs(SCOPE)
        assert (done.status, done.attempts, done.last_error) == ("done", 0, None)
