"""The drive against the real scope actor and link: claims, BEGIN, leases, takeovers, misses."""

from __future__ import annotations

import trio
import trio.testing

from driver import JobDriveReport, JobPassResult
from driver._pass import JobPassContext
from scopehost import open_scope_host

from .support import JOB, MODULE, SCOPE, Trace, drive, start


async def test_one_drive_completes_a_run(autojump_clock: trio.testing.MockClock) -> None:
    trace = Trace()
    async with open_scope_host() as host:
        one = drive(host, trace)

        async def handler(ctx: JobPassContext) -> JobPassResult:
            value = await ctx.step("fetch", lambda: {"n": 1})
            ctx.count("walked", value["n"])
            return JobPassResult(cursor="end", done=True)

        one.register_job(MODULE, JOB, handler)
        started = await one.start_job_run(SCOPE, start({"source": "s1"}))
        report = await one.run_due_jobs(SCOPE)
        assert report == JobDriveReport(attempted=1, completed=1)
        [run] = await one.job_runs(SCOPE)
        assert (run.id, run.status, run.cursor, run.counters) == (
            started.id,
            "done",
            "end",
            {"walked": 1},
        )
        assert run.ended_at is not None and run.lease_owner is None
        assert trace.names() == [
            "claim.won",
            "begin.ok",
            "handler.invoke",
            "step.run",
            "step.end",
            "handler.end",
            "pass.outcome",
        ]
