"""The drive against the real scope actor and link: claims, BEGIN, leases, takeovers, misses.

Every interleaving is forced with the link's hooks and virtual time; nothing here is a mock.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from driver import (
    JOB_DRIVE_LIMIT,
    JOB_LEASE_EXPIRED_NOTE,
    JobDriveError,
    JobDriver,
    JobDriveReport,
    JobDriveWarning,
    JobPassContext,
    JobPassResult,
    JobRunFilter,
    RetryPolicy,
    StartJobRunInput,
    ValidationFailed,
    iso_from_ms,
    parse_iso_ms,
)
from scopehost import (
    DEFAULT_EPOCH_MS,
    Link,
    LinkCall,
    LinkOutcome,
    ReplyDropped,
    StoreClock,
    Verdict,
    open_scope_host,
)

from .support import JOB, MODULE, SCOPE, Trace, drive, is_op, start

Handler = Callable[[JobPassContext], Any]


def stepping(steps: int, *, step_ms: float = 0, done: bool = True) -> Handler:
    """A handler doing ``steps`` named steps (each taking ``step_ms`` of virtual time)."""

    async def handler(ctx: JobPassContext) -> JobPassResult:
        for index in range(steps):

            async def body(index: int = index) -> int:
                await trio.sleep(step_ms / 1000)
                return index

            await ctx.step(f"s{index}", body)
        return JobPassResult(cursor=steps, done=done)

    return handler


async def test_one_drive_completes_a_run(autojump_clock: trio.testing.MockClock) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, trace)

        async def handler(ctx: JobPassContext) -> JobPassResult:
            value = await ctx.step("fetch", lambda: {"n": 1})
            ctx.count("walked", value["n"])
            return JobPassResult(cursor="end", done=True)

        one.register_job(MODULE, JOB, handler)
        started = await one.start_job_run(SCOPE, start({"source": "s1"}))
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)
        [run] = await one.job_runs(SCOPE)
        assert (run.id, run.status, run.cursor, run.counters, run.lease_owner) == (
            started.id,
            "done",
            "end",
            {"walked": 1},
            None,
        )
        assert run.ended_at is not None
        assert trace.names() == [
            "claim.won",
            "begin.ok",
            "handler.invoke",
            "step.run",
            "step.end",
            "handler.end",
            "pass.outcome",
        ]
        assert await one.run_due_jobs(SCOPE) == JobDriveReport()


async def test_two_drives_that_both_snapshot_a_run_invoke_it_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        drives = [
            drive(host, trace, name=name, link=Link(name=name, request_ms=10, reply_ms=10))
            for name in ("a", "b")
        ]
        for each in drives:
            each.register_job(MODULE, JOB, stepping(1))
        await drives[0].start_job_run(SCOPE, start())
        snapshots = 0
        both = trio.Event()

        def gate(link: Link) -> None:
            async def hook(call: LinkCall, outcome: LinkOutcome) -> Verdict:
                nonlocal snapshots
                if call.operation == "due_keys":
                    snapshots += 1
                    if snapshots == 2:
                        both.set()
                    await both.wait()
                return None

            link.add_reply_hook(hook)

        reports: list[JobDriveReport] = []

        async def run(index: int) -> None:
            reports.append(await drives[index].run_due_jobs(SCOPE))

        for each in drives:
            assert isinstance(each.link, Link)
            gate(each.link)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, 0)
            nursery.start_soon(run, 1)
        assert sorted(reports, key=lambda r: r.attempted) == [
            JobDriveReport(),
            JobDriveReport(attempted=1, completed=1),
        ]
        assert len(trace.named("handler.invoke")) == 1
        assert len(trace.named("claim.lost")) == 1


async def test_a_live_lease_is_not_stolen(autojump_clock: trio.testing.MockClock) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        holder, rival = drive(host, trace, name="holder"), drive(host, trace, name="rival")
        holder.register_job(MODULE, JOB, stepping(1, step_ms=800), lease_ms=1000)
        rival.register_job(MODULE, JOB, stepping(1), lease_ms=1000)
        await holder.start_job_run(SCOPE, start())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(holder.run_due_jobs, SCOPE)
            await trio.sleep(0.5)
            assert await rival.run_due_jobs(SCOPE) == JobDriveReport()
        assert trace.names(drive="rival") == []
        assert [f["drive"] for f in trace.named("handler.invoke")] == ["holder"]


async def test_an_expired_begun_lease_is_taken_over_and_charged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        crashed, rescuer = drive(host, trace, name="crashed"), drive(host, trace, name="rescuer")
        crashed.register_job(MODULE, JOB, stepping(1), lease_ms=1000)
        rescuer.register_job(MODULE, JOB, stepping(1), lease_ms=1000)
        started = await crashed.start_job_run(SCOPE, start())
        # BEGIN ran and committed; its reply never came back: a crash between BEGIN and the
        # handler, which nothing can tell from a crash inside it.
        assert isinstance(crashed.link, Link)
        crashed.link.drop_replies(is_op("begin"))
        report = await crashed.run_due_jobs(SCOPE)
        assert report.errors[0].error.startswith("reply to begin #")
        assert trace.named("handler.invoke") == []
        assert await rescuer.run_due_jobs(SCOPE) == JobDriveReport()  # the lease still runs
        await trio.sleep(1.0)
        assert await rescuer.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)
        [won] = trace.named("claim.won", drive="rescuer")
        assert (won["takeover"], won["attempts"]) == (True, 1)
        [run] = await rescuer.job_runs(SCOPE)
        assert (run.id, run.status, run.attempts, run.last_error) == (started.id, "done", 0, None)


async def test_an_expired_unbegun_claim_is_taken_over_for_free(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        crashed, rescuer = drive(host, trace, name="crashed"), drive(host, trace, name="rescuer")
        for each in (crashed, rescuer):
            each.register_job(MODULE, JOB, stepping(1), lease_ms=1000)
        await crashed.start_job_run(SCOPE, start())
        assert isinstance(crashed.link, Link)
        crashed.link.drop_replies(is_op("claim"))
        report = await crashed.run_due_jobs(SCOPE)
        assert (report.attempted, len(report.errors)) == (0, 1)
        await trio.sleep(1.0)
        assert await rescuer.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)
        [won] = trace.named("claim.won", drive="rescuer")
        assert (won["takeover"], won["attempts"]) == (False, 0)


async def test_takeover_exhaustion_fails_the_run_without_invoking(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        crashed, rescuer = drive(host, trace, name="crashed"), drive(host, trace, name="rescuer")
        for each in (crashed, rescuer):
            each.register_job(
                MODULE, JOB, stepping(1), lease_ms=1000, retry=RetryPolicy(max_attempts=1)
            )
        started = await crashed.start_job_run(SCOPE, start())
        assert isinstance(crashed.link, Link)
        crashed.link.drop_replies(is_op("begin"))
        await crashed.run_due_jobs(SCOPE)
        await trio.sleep(1.0)
        # No handler ran, but the run was picked up, due and running: attempted, as the
        # original counts it, and failed with the expiry note.
        assert await rescuer.run_due_jobs(SCOPE) == JobDriveReport(
            attempted=1,
            failed=1,
            errors=(JobDriveError(started.id, JOB_LEASE_EXPIRED_NOTE),),
        )
        assert trace.named("handler.invoke") == []
        assert trace.named("takeover.exhausted") == [
            {
                "drive": "rescuer",
                "run": started.id,
                "owner": trace.named("claim.won")[1]["owner"],
                "attempts": 1,
            }
        ]
        [run] = await rescuer.job_runs(SCOPE)
        assert (run.status, run.attempts, run.last_error) == ("failed", 1, JOB_LEASE_EXPIRED_NOTE)
        assert run.ended_at is not None


@pytest.mark.parametrize("ending", ["returns", "raises"])
async def test_a_stale_holders_outcome_is_refused(
    autojump_clock: trio.testing.MockClock, ending: str
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        stale, rival = drive(host, trace, name="stale"), drive(host, trace, name="rival")
        resumed = trio.Event()

        async def slow(ctx: JobPassContext) -> JobPassResult:
            await resumed.wait()  # no step boundary: the lease is never renewed
            if ending == "raises":
                raise RuntimeError("upstream went away")
            return JobPassResult(cursor="stale", done=True)

        stale.register_job(MODULE, JOB, slow, lease_ms=1000)
        rival.register_job(MODULE, JOB, stepping(1, done=False), lease_ms=1000)
        await stale.start_job_run(SCOPE, start())
        reports: list[JobDriveReport] = []
        async with trio.open_nursery() as nursery:

            async def run_stale() -> None:
                reports.append(await stale.run_due_jobs(SCOPE))

            nursery.start_soon(run_stale)
            await trio.sleep(1.5)
            assert await rival.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, advanced=1)
            resumed.set()
        assert reports == [JobDriveReport(attempted=1, superseded=1)]
        [run] = await rival.job_runs(SCOPE)
        # The rival's commit stands; the stale pass wrote nothing.
        assert (run.status, run.cursor, run.attempts, run.last_error) == ("running", 1, 0, None)
        assert trace.named("pass.outcome", drive="stale") == [
            {
                "drive": "stale",
                "run": run.id,
                "owner": trace.named("claim.won")[0]["owner"],
                "status": "superseded",
                "error": None,
                "written": False,
            }
        ]


async def test_step_boundaries_renew_a_long_pass_against_rival_drives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        worker = drive(host, trace, name="worker")
        worker.register_job(MODULE, JOB, stepping(5, step_ms=700), lease_ms=1000)
        rivals = [drive(host, trace, name=f"rival{i}", seed=i + 2) for i in range(2)]
        for rival in rivals:
            rival.register_job(MODULE, JOB, stepping(5), lease_ms=1000)
        await worker.start_job_run(SCOPE, start())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(worker.run_due_jobs, SCOPE)
            for _ in range(14):  # every 300 ms across the 3.5 s pass
                await trio.sleep(0.3)
                for rival in rivals:
                    assert (await rival.run_due_jobs(SCOPE)).attempted == 0
        [run] = await worker.job_runs(SCOPE)
        assert (run.status, run.attempts) == ("done", 0)
        assert [f["drive"] for f in trace.named("handler.invoke")] == ["worker"]
        assert len(trace.named("step.run")) == 5


async def test_a_lost_lease_stops_the_pass_at_its_next_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        lost, rival = drive(host, trace, name="lost"), drive(host, trace, name="rival")
        ran: list[str] = []

        def handler_of(who: str, pause_ms: float) -> Handler:
            async def handler(ctx: JobPassContext) -> JobPassResult:
                await ctx.step("one", lambda: ran.append(f"{who}:one"))
                await trio.sleep(pause_ms / 1000)
                await ctx.step("two", lambda: ran.append(f"{who}:two"))
                return JobPassResult(done=True)

            return handler

        lost.register_job(MODULE, JOB, handler_of("lost", 1500), lease_ms=1000)
        rival.register_job(MODULE, JOB, handler_of("rival", 0), lease_ms=1000)
        await lost.start_job_run(SCOPE, start())
        reports: list[JobDriveReport] = []
        async with trio.open_nursery() as nursery:

            async def run_lost() -> None:
                reports.append(await lost.run_due_jobs(SCOPE))

            nursery.start_soon(run_lost)
            await trio.sleep(1.2)
            assert await rival.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)
        assert reports == [JobDriveReport(attempted=1, superseded=1)]
        # The rival's claim charged the begun pass, replayed "one" from its memo, ran "two".
        assert ran == ["lost:one", "rival:two"]
        assert [f["step"] for f in trace.named("step.lost", drive="lost")] == ["two"]
        assert trace.named("step.memo", drive="rival")[0]["step"] == "one"


@pytest.mark.parametrize(("claim_reply_ms", "begun"), [(750, False), (749, True)])
async def test_exactly_the_margin_left_is_a_miss_and_one_ms_more_is_not(
    autojump_clock: trio.testing.MockClock, claim_reply_ms: int, begun: bool
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        link = Link(name="slow", reply_ms={"claim": claim_reply_ms, "*": 0})
        one = drive(host, trace, link=link)
        one.register_job(MODULE, JOB, stepping(1), lease_ms=1000)
        started = await one.start_job_run(SCOPE, start())
        report = await one.run_due_jobs(SCOPE)
        if begun:
            assert report == JobDriveReport(attempted=1, completed=1)
            return
        warning = (
            "job crm/walk: claim not begun in time — leaseMs 1000, margin 250 ms, "
            "claim and begin took 750 ms (admission miss 1 of 10)"
        )
        # No handler ran: superseded, and not attempted.
        assert report == JobDriveReport(
            superseded=1, warnings=(JobDriveWarning(started.id, warning),)
        )
        assert trace.names() == ["claim.won", "admission.miss"]
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.admission_misses, run.lease_owner, run.attempts) == (
            "running",
            1,
            None,
            0,
        )


async def test_begin_delayed_in_transit_past_the_lease_is_a_miss(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, trace, link=Link(name="slow", request_ms={"begin": 1100, "*": 0}))
        one.register_job(MODULE, JOB, stepping(1), lease_ms=1000)
        started = await one.start_job_run(SCOPE, start())
        report = await one.run_due_jobs(SCOPE)
        assert report.warnings == (
            JobDriveWarning(
                started.id,
                "job crm/walk: claim not begun in time — leaseMs 1000, margin 250 ms, "
                "claim and begin took 1100 ms (admission miss 1 of 10)",
            ),
        )
        assert trace.names() == ["claim.won", "begin.refused", "admission.miss"]
        assert trace.named("admission.miss")[0]["misses"] == 1


@pytest.mark.parametrize("max_attempts", [5, 1])
async def test_a_begin_reply_held_past_the_lease_double_runs_and_the_late_pass_is_refused(
    autojump_clock: trio.testing.MockClock, max_attempts: int
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        late_link = Link(name="late")
        late, rival = (
            drive(host, trace, name="late", link=late_link),
            drive(host, trace, name="rival"),
        )
        retry = RetryPolicy(max_attempts=max_attempts)
        effects: list[str] = []

        def handler_of(who: str) -> Handler:
            async def handler(ctx: JobPassContext) -> JobPassResult:
                await ctx.step("effect", lambda: effects.append(who))
                return JobPassResult(done=True)

            return handler

        late.register_job(MODULE, JOB, handler_of("late"), lease_ms=1000, retry=retry)
        rival.register_job(MODULE, JOB, handler_of("rival"), lease_ms=1000, retry=retry)
        started = await late.start_job_run(SCOPE, start())
        release = trio.Event()

        async def hold_begin_reply(call: LinkCall, outcome: LinkOutcome) -> Verdict:
            if call.operation == "begin":
                assert outcome.value is True  # BEGIN wrote
                await release.wait()
            return None

        late_link.add_reply_hook(hold_begin_reply)
        reports: list[JobDriveReport] = []
        async with trio.open_nursery() as nursery:

            async def run_late() -> None:
                reports.append(await late.run_due_jobs(SCOPE))

            nursery.start_soon(run_late)
            await trio.sleep(1.5)
            rival_report = await rival.run_due_jobs(SCOPE)
            release.set()
        # The late drive never second-guesses BEGIN: its handler runs, and learns at its step.
        assert reports == [JobDriveReport(attempted=1, superseded=1)]
        assert trace.named("step.lost", drive="late")[0]["step"] == "effect"
        [run] = await rival.job_runs(SCOPE)
        if max_attempts == 1:
            assert rival_report == JobDriveReport(
                attempted=1,
                failed=1,
                errors=(JobDriveError(started.id, JOB_LEASE_EXPIRED_NOTE),),
            )
            assert [f["drive"] for f in trace.named("handler.invoke")] == ["late"]
            assert effects == []
            assert (run.status, run.last_error) == ("failed", JOB_LEASE_EXPIRED_NOTE)
        else:
            assert rival_report == JobDriveReport(attempted=1, completed=1)
            assert [f["drive"] for f in trace.named("handler.invoke")] == ["rival", "late"]
            assert effects == ["rival"]
            assert run.status == "done"


async def test_nine_misses_back_off_then_the_tenth_fails_the_run(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, trace, link=Link(name="slow", reply_ms={"claim": 800, "*": 0}))
        one.register_job(MODULE, JOB, stepping(1), lease_ms=1000)
        started = await one.start_job_run(SCOPE, start())
        waits = []
        with caplog.at_level(logging.WARNING, logger="driver.drive"):
            for miss in range(1, 11):
                report = await one.run_due_jobs(SCOPE)
                assert (report.attempted, report.superseded, report.failed) == (
                    (0, 1, 0) if miss < 10 else (0, 0, 1)
                )
                [run] = await one.job_runs(SCOPE)
                assert run.admission_misses == miss
                if miss < 10:
                    assert run.next_attempt_at is not None
                    wait = parse_iso_ms(run.next_attempt_at) - parse_iso_ms(run.updated_at)
                    waits.append(wait)
                    assert await one.run_due_jobs(SCOPE) == JobDriveReport()  # backing off
                    await trio.sleep(wait / 1000)
        assert waits == [1000 * 2**n for n in range(9)]
        assert waits[-1] == 256_000
        warning = (
            "job crm/walk: claim not begun in time — leaseMs 1000, margin 250 ms, "
            "claim and begin took 800 ms (admission miss 10 of 10)"
        )
        assert report.warnings == (JobDriveWarning(started.id, warning),)
        assert (run.status, run.attempts, run.next_attempt_at) == ("failed", 0, None)
        assert run.last_error == f"lease too short for this environment: {warning}"
        # The miss that failed the run is one error, carrying what was written on the record.
        assert report.errors == (JobDriveError(started.id, run.last_error),)
        assert trace.named("handler.invoke") == []
        assert trace.named("admission.miss")[-1]["failed"] is True
        records = [r for r in caplog.records if r.name == "driver.drive"]
        assert len(records) == 10
        assert records[-1].getMessage() == warning
        fields = vars(records[-1])
        assert (fields["job_run_id"], fields["admission_misses"]) == (started.id, 10)
        assert (fields["lease_ms"], fields["margin_ms"], fields["waited_ms"]) == (1000, 250, 800)
        assert fields["run_failed"] is True


async def test_begin_resets_the_miss_count(autojump_clock: trio.testing.MockClock) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        link = Link(name="slow", reply_ms={"claim": 800, "*": 0})
        one = drive(host, trace, link=link)
        one.register_job(MODULE, JOB, stepping(1, done=False), lease_ms=1000)
        await one.start_job_run(SCOPE, start())
        for wait in (1.0, 2.0):
            await one.run_due_jobs(SCOPE)
            await trio.sleep(wait)
        assert [r.admission_misses for r in await one.job_runs(SCOPE)] == [2]
        link.reply_ms = 0
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, advanced=1)
        assert [r.admission_misses for r in await one.job_runs(SCOPE)] == [0]
        link.reply_ms = {"claim": 800, "*": 0}
        report = await one.run_due_jobs(SCOPE)
        assert report.warnings[0].warning.endswith("(admission miss 1 of 10)")


@pytest.mark.parametrize("skew_ms", [100.0, -100.0])
async def test_store_skew_on_a_short_lease_refuses_and_fails_nothing(
    autojump_clock: trio.testing.MockClock, skew_ms: float
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock(skew_ms=skew_ms)) as host:
        one = JobDriver(
            host,
            link=Link(name="lan", request_ms=3, reply_ms=3),
            now=lambda: iso_from_ms(DEFAULT_EPOCH_MS + trio.current_time() * 1000),
            rng=random.Random(1),
            observer=trace,
        )

        async def handler(ctx: JobPassContext) -> JobPassResult:
            at = ctx.cursor or 0
            for index in range(at, at + 3):
                await ctx.step(f"item-{index}", lambda: trio.sleep(0.02))
            return JobPassResult(cursor=at + 3, done=at + 3 >= 12)

        one.register_job(MODULE, JOB, handler, lease_ms=100)
        await one.start_job_run(SCOPE, start())
        report = await one.run_due_jobs(SCOPE, max_passes=10)
        assert report == JobDriveReport(attempted=1, advanced=3, completed=1)
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.attempts, run.admission_misses, run.cursor) == ("done", 0, 0, 12)


async def test_a_per_run_failure_never_escapes_the_drive(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        link = Link(name="flaky")
        one = drive(host, trace, link=link)
        one.register_job(MODULE, JOB, stepping(1))
        first = await one.start_job_run(SCOPE, start(instance="a"))
        second = await one.start_job_run(SCOPE, start(instance="b"))
        link.drop_requests(is_op("claim"))
        report = await one.run_due_jobs(SCOPE)
        assert (report.completed, report.attempted) == (1, 1)
        assert report.errors == (
            JobDriveError(
                first.id,
                "request claim #4 on link 'flaky' to scope 's1' was dropped: "
                "the operation did not run",
            ),
        )
        assert {r.id: r.status for r in await one.job_runs(SCOPE)} == {
            first.id: "running",
            second.id: "done",
        }


@pytest.mark.parametrize("bad", [-1, 0, 2.7, True, float("nan"), "3"])
async def test_a_bad_limit_or_max_passes_is_refused_not_clamped(
    autojump_clock: trio.testing.MockClock, bad: Any
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        with pytest.raises(ValidationFailed) as limit_error:
            await one.run_due_jobs(SCOPE, limit=bad)
        assert str(limit_error.value) == (
            f"limit is {bad!r}; it must be an int of at least 1 (it is not clamped)"
        )
        with pytest.raises(ValidationFailed, match=r"^max_passes is "):
            await one.run_due_jobs(SCOPE, max_passes=bad)


async def test_limit_counts_runnable_runs_and_orphans_are_stepped_over(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        one, other = drive(host, trace), drive(host, trace, name="other", seed=2)
        one.register_job(MODULE, JOB, stepping(0))
        other.register_job(MODULE, "orphan", stepping(0))
        for index in range(3):
            await other.start_job_run(
                SCOPE, StartJobRunInput(module_id=MODULE, job="orphan", instance=f"o{index}")
            )
        for index in range(3):
            await one.start_job_run(SCOPE, start(instance=f"w{index}"))
        assert await one.run_due_jobs(SCOPE, limit=2) == JobDriveReport(attempted=2, completed=2)
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)
        assert JOB_DRIVE_LIMIT == 50
        orphans = await one.job_runs(SCOPE, JobRunFilter(job="orphan"))
        assert [r.status for r in orphans] == ["running"] * 3


async def test_a_reply_dropped_claim_is_reported_and_the_run_recovers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        link = Link(name="flaky")
        one = drive(host, Trace(), link=link)
        one.register_job(MODULE, JOB, stepping(1), lease_ms=1000)
        await one.start_job_run(SCOPE, start())
        link.drop_replies(is_op("commit_pass"))
        report = await one.run_due_jobs(SCOPE)
        assert report.errors[0].error.startswith("reply to commit_pass #")
        link.drop_replies(is_op("list"))
        with pytest.raises(ReplyDropped):
            await one.job_runs(SCOPE)
        [run] = await one.job_runs(SCOPE)
        assert run.status == "done"  # the commit ran; only its answer was lost
