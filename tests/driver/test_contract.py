"""The spec's contract through ``JobDriver`` over a real scope host."""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from driver import (
    JOB_DEFER_MS,
    JOB_ERASED_RUNNING_NOTE,
    JOB_STEP_REUSED,
    JOB_SUBJECT_MISMATCH,
    Conflict,
    JobDriveError,
    JobDriveReport,
    JobPassContext,
    JobPassResult,
    JobRunFilter,
    RetryPolicy,
    ValidationFailed,
    parse_iso_ms,
)
from scopehost import Link, LinkCall, StoreClock, Verdict, open_scope_host

from .support import JOB, MODULE, SCOPE, Trace, drive, start


async def finish(ctx: JobPassContext) -> JobPassResult:
    return JobPassResult(done=True)


async def idle(ctx: JobPassContext) -> None:
    return None


async def test_a_walk_resumes_from_its_cursor_after_an_eviction_mid_pass(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        link = Link(name="walker")
        walker = drive(host, trace, link=link)

        async def walk(ctx: JobPassContext) -> JobPassResult:
            at = ctx.cursor or 0
            end = min(at + 2, 5)
            scope = await ctx.scope()
            for index in range(at, end):
                effect = {"kind": "walk", "key": str(index)}

                async def record(effect: dict[str, Any] = effect) -> Any:
                    return await scope.invoke("record", effect)

                await ctx.step(f"item-{index}", record)
                ctx.count("walked")
            return JobPassResult(cursor=end, done=end == 5)

        walker.register_job(MODULE, JOB, walk, lease_ms=1000)
        started = await walker.start_job_run(SCOPE, start())
        assert await walker.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, advanced=1)
        killed = trio.CancelScope()

        async def evict_before_item_3(call: LinkCall) -> Verdict:
            if (
                call.operation == "begin_step"
                and call.args[1] == "item-3"
                and not killed.cancel_called
            ):
                host.evict(SCOPE)
                killed.cancel()  # the worker dies with its scope, mid-pass
                await trio.sleep(0)
            return None

        link.add_request_hook(evict_before_item_3)
        with killed:
            await walker.run_due_jobs(SCOPE)
        [run] = await walker.job_runs(SCOPE)
        assert (run.cursor, run.counters, run.status) == (2, {"walked": 2}, "running")
        await trio.sleep(1.0)  # the dead pass's lease expires
        report = await walker.run_due_jobs(SCOPE, max_passes=5)
        assert report == JobDriveReport(attempted=1, advanced=1, completed=1)
        [run] = await walker.job_runs(SCOPE)
        assert (run.id, run.status, run.cursor, run.counters, run.attempts) == (
            started.id,
            "done",
            5,
            {"walked": 5},
            0,
        )
        effects = await host.stub(SCOPE).invoke("items", {"kind": "walk"})
        assert [row["key"] for row in effects] == ["0", "1", "2", "3", "4"]
        # item-2 committed before the eviction: the takeover's replay read its memo.
        assert [f["step"] for f in trace.named("step.memo")] == ["item-2"]
        assert trace.named("claim.won")[2]["takeover"] is True


async def test_three_concurrent_starts_coalesce_into_one_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace(), link=Link(name="lan", request_ms=5, reply_ms=5))
        ids: list[str] = []

        async def begin_walk() -> None:
            ids.append((await one.start_job_run(SCOPE, start({"source": "s1"}))).id)

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(begin_walk)
        assert len(set(ids)) == 1
        assert [r.id for r in await one.job_runs(SCOPE)] == ids[:1]
        other = await one.start_job_run(SCOPE, start(instance="s2"))
        assert other.id != ids[0]


async def test_a_join_with_another_subject_is_a_conflict(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        live = await one.start_job_run(SCOPE, start(subject="p1"))
        for subject in ("p2", None):
            with pytest.raises(Conflict) as refused:
                await one.start_job_run(SCOPE, start(subject=subject))
            assert refused.value.reason == JOB_SUBJECT_MISMATCH
            assert str(refused.value) == (
                f"job crm/walk instance 'default' is already running as run {live.id} for "
                f"subject 'p1', not {subject!r} — wait for it to end, or start the other "
                "subject's walk under its own instance"
            )
        assert (await one.start_job_run(SCOPE, start(subject="p1"))).id == live.id


async def test_the_retry_policy_fails_a_run_at_max_attempts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        calls = 0

        async def flaky(ctx: JobPassContext) -> JobPassResult:
            await ctx.step("ok", lambda: "fine")

            def fetch() -> None:
                nonlocal calls
                calls += 1
                raise RuntimeError("upstream 503")

            await ctx.step("fetch", fetch)
            return JobPassResult(done=True)

        policy = RetryPolicy(max_attempts=3, base_delay_ms=1000, max_delay_ms=10_000)
        one.register_job(MODULE, JOB, flaky, retry=policy)
        started = await one.start_job_run(SCOPE, start())
        for attempt, raw in ((1, 1000), (2, 2000)):
            assert await one.run_due_jobs(SCOPE) == JobDriveReport(
                attempted=1, retrying=1, errors=(JobDriveError(started.id, "upstream 503"),)
            )
            [run] = await one.job_runs(SCOPE)
            assert (run.attempts, run.last_error, run.status) == (
                attempt,
                "upstream 503",
                "running",
            )
            assert run.next_attempt_at is not None
            wait = parse_iso_ms(run.next_attempt_at) - parse_iso_ms(run.updated_at)
            assert 0.8 * raw <= wait <= 1.2 * raw
            assert await one.run_due_jobs(SCOPE) == JobDriveReport()
            await trio.sleep(wait / 1000)
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(
            attempted=1, failed=1, errors=(JobDriveError(started.id, "upstream 503"),)
        )
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.attempts, run.last_error, run.next_attempt_at) == (
            "failed",
            3,
            "upstream 503",
            None,
        )
        assert run.ended_at is not None
        assert calls == 3


async def test_a_handler_error_counts_against_the_jobs_max_attempts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())

        async def broken(ctx: JobPassContext) -> JobPassResult:
            raise KeyError("token")

        one.register_job(MODULE, JOB, broken, retry=RetryPolicy(max_attempts=2, base_delay_ms=0))
        await one.start_job_run(SCOPE, start())
        assert (await one.run_due_jobs(SCOPE)).retrying == 1
        assert (await one.run_due_jobs(SCOPE)).failed == 1
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.attempts, run.last_error) == ("failed", 2, "'token'")


class Opaque:
    pass


def nothing() -> None:
    pass


def cyclic() -> dict[str, Any]:
    loop: dict[str, Any] = {"name": "a"}
    loop["self"] = loop
    return loop


REMEDY = "a run carries ids and configuration, never bytes, class instances or functions"
BYTES = "pass an id that finds the bytes, or text"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            {"source": {"bytes": b"x"}},
            f"payload.source.bytes is bytes — {BYTES}; {REMEDY}",
        ),
        (
            {"ratio": float("nan")},
            "payload.ratio is nan, which JSON cannot carry — pass None, or the number as a str",
        ),
        ([1, {"ids": {1, 2}}], f"payload.1.ids is set — pass a list; {REMEDY}"),
        ({"pair": (1, 2)}, f"payload.pair is tuple — pass a list; {REMEDY}"),
        (
            {"at": dt.datetime(2026, 1, 1)},
            f"payload.at is an instance of datetime.datetime — {REMEDY}",
        ),
        ({"fn": nothing}, f"payload.fn is function — {REMEDY}"),
        ({"obj": Opaque()}, f"payload.obj is an instance of {__name__}.Opaque — {REMEDY}"),
        (cyclic(), f"payload.self refers back to itself (a cycle) — {REMEDY}"),
        ({1: "x"}, f"payload has the key 1, which is not a str — {REMEDY}"),
    ],
)
async def test_a_payload_that_is_not_queue_safe_is_refused_before_any_row(
    autojump_clock: trio.testing.MockClock, payload: Any, message: str
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        with pytest.raises(ValidationFailed) as refused:
            await one.start_job_run(SCOPE, start(payload))
        assert str(refused.value) == message
        assert await one.job_runs(SCOPE) == []


async def test_a_bad_key_is_refused_with_its_paths(autojump_clock: trio.testing.MockClock) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        three: Any = 3
        bad = attrs.evolve(start(), module_id="", instance=three)
        with pytest.raises(
            ValidationFailed,
            match=r"^module_id is ''; it must be a non-empty str; "
            r"instance is 3; it must be a non-empty str$",
        ):
            await one.start_job_run(SCOPE, bad)


async def test_an_omitted_cursor_keeps_the_committed_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        seen: list[Any] = []
        results: list[JobPassResult | None] = [
            JobPassResult(cursor={"page": "t2"}),
            None,
            JobPassResult(),
            JobPassResult(cursor={"bad": b"x"}),
            JobPassResult(cursor=None, done=True),
        ]

        async def handler(ctx: JobPassContext) -> JobPassResult | None:
            seen.append(ctx.cursor)
            return results[len(seen) - 1]

        one.register_job(MODULE, JOB, handler, retry=RetryPolicy(base_delay_ms=0))
        await one.start_job_run(SCOPE, start())
        report = await one.run_due_jobs(SCOPE, max_passes=4)
        [run] = await one.job_runs(SCOPE)
        assert report == JobDriveReport(
            attempted=1,
            advanced=3,
            retrying=1,
            errors=(JobDriveError(run.id, f"cursor.bad is bytes — {BYTES}; {REMEDY}"),),
        )
        assert run.last_error == f"cursor.bad is bytes — {BYTES}; {REMEDY}"
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)
        assert seen == [None, {"page": "t2"}, {"page": "t2"}, {"page": "t2"}, {"page": "t2"}]
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.cursor, run.decode_error) == ("done", None, None)


async def test_a_step_returning_a_datetime_is_seen_identically_on_replay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        seen: list[Any] = []
        moment = dt.datetime(2026, 10, 4, 12, 0, tzinfo=dt.UTC)

        async def handler(ctx: JobPassContext) -> JobPassResult:
            seen.append(await ctx.step("stamp", lambda: {"at": moment}))
            if len(seen) == 1:
                await ctx.step("boom", lambda: 1 / 0)
            return JobPassResult(done=True)

        one.register_job(MODULE, JOB, handler, retry=RetryPolicy(base_delay_ms=0))
        await one.start_job_run(SCOPE, start())
        assert (await one.run_due_jobs(SCOPE)).retrying == 1
        assert (await one.run_due_jobs(SCOPE)).completed == 1
        assert seen == [{"at": "2026-10-04T12:00:00+00:00"}] * 2


async def test_a_step_returning_a_tuple_hands_back_a_list_on_the_first_run_and_on_replay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A step's value comes back through its stored JSON: a tuple is a JSON array, so the handler
    # gets a list, the same on the first run as from the memo.
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        seen: list[Any] = []

        async def handler(ctx: JobPassContext) -> JobPassResult:
            seen.append(await ctx.step("pair", lambda: (1, ("a", 2.5), {"k": (None,)})))
            if len(seen) == 1:
                await ctx.step("boom", lambda: 1 / 0)
            return JobPassResult(done=True)

        one.register_job(MODULE, JOB, handler, retry=RetryPolicy(base_delay_ms=0))
        await one.start_job_run(SCOPE, start())
        assert (await one.run_due_jobs(SCOPE)).retrying == 1
        assert (await one.run_due_jobs(SCOPE)).completed == 1
        assert seen == [[1, ["a", 2.5], {"k": [None]}]] * 2


async def test_a_payload_holding_a_tuple_is_still_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The queue-safety rule of a payload is its own: a payload must survive a queue message
    # unchanged, and a tuple would come back a list.
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        with pytest.raises(ValidationFailed, match=r"^payload.pair is tuple — "):
            await one.start_job_run(SCOPE, start(payload={"pair": (1, 2)}))


@pytest.mark.parametrize("swallow", [False, True])
async def test_a_step_name_used_twice_in_one_pass_fails_the_pass(
    autojump_clock: trio.testing.MockClock, swallow: bool
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        ran: list[str] = []
        reasons: list[str] = []

        async def handler(ctx: JobPassContext) -> JobPassResult:
            await ctx.step("page", lambda: ran.append("first"))
            try:
                await ctx.step("page", lambda: ran.append("second"))
            except Conflict as err:
                reasons.append(err.reason)
                if not swallow:
                    raise
            return JobPassResult(done=True)

        one.register_job(MODULE, JOB, handler)
        started = await one.start_job_run(SCOPE, start())
        assert (await one.run_due_jobs(SCOPE)).retrying == 1
        [run] = await one.job_runs(SCOPE)
        assert run.last_error == (
            f"step 'page' was already used in this pass of run {started.id} — give each step in "
            "a pass its own name, a pure function of the payload and prior results"
        )
        assert (run.status, run.cursor) == ("running", None)
        assert ran == ["first"]
        assert reasons == [JOB_STEP_REUSED]


async def test_a_malformed_restored_row_fails_its_pass_and_reads_with_decode_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        started = await drive(host, Trace()).start_job_run(SCOPE, start({"a": 1}))
        dump = await host.stub(SCOPE).export_dump()
    edited = attrs.evolve(dump, runs=(attrs.evolve(dump.runs[0], cursor="{oops"),))
    async with open_scope_host(clock=StoreClock()) as restored:
        one = drive(restored, Trace())
        invoked: list[str] = []

        async def handler(ctx: JobPassContext) -> JobPassResult:
            invoked.append(ctx.run.id)
            return JobPassResult(done=True)

        one.register_job(MODULE, JOB, handler, retry=RetryPolicy(max_attempts=2, base_delay_ms=0))
        await restored.stub(SCOPE).import_dump(edited, SCOPE)
        [read] = await one.job_runs(SCOPE)
        # Column by column: the bad cursor reads empty, the good payload still reads.
        assert (read.id, read.payload, read.cursor, read.counters) == (
            started.id,
            {"a": 1},
            None,
            {},
        )
        assert read.decode_error == (
            "cursor is not valid JSON (Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1))"
        )
        error = f"run {started.id} cannot be decoded: {read.decode_error}"
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(
            attempted=1, retrying=1, errors=(JobDriveError(started.id, error),)
        )
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(
            attempted=1, failed=1, errors=(JobDriveError(started.id, error),)
        )
        assert invoked == []
        [read] = await one.job_runs(SCOPE)
        assert (read.status, read.last_error) == ("failed", error)


@pytest.mark.parametrize(
    ("limit", "count"), [(-1, 1), (0, 1), (2.7, 2), (1_000_000, 60), (None, 50)]
)
async def test_the_operator_read_clamps_its_limit(
    autojump_clock: trio.testing.MockClock, limit: float | None, count: int
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        for index in range(60):
            await one.start_job_run(SCOPE, start(instance=f"i{index:02}"))
        runs = await one.job_runs(SCOPE, JobRunFilter(limit=limit))
        assert len(runs) == count
        assert runs[0].instance == "i59"  # newest first


async def test_erasure_before_a_pass_leaves_nothing_to_drive(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, trace)
        one.register_job(MODULE, JOB, finish)
        await one.start_job_run(SCOPE, start({"who": "p1"}, subject="p1"))
        assert await host.stub(SCOPE).shred_subject("p1") == 1
        assert await one.run_due_jobs(SCOPE) == JobDriveReport()
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.last_error) == ("failed", JOB_ERASED_RUNNING_NOTE)


async def test_erasure_during_a_pass_stops_it_and_it_writes_nothing_more(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, trace)
        ran: list[str] = []

        async def handler(ctx: JobPassContext) -> JobPassResult:
            await ctx.step("one", lambda: ran.append("one"))
            assert await host.stub(SCOPE).shred_subject("p1") == 1
            ctx.count("walked")
            await ctx.step("two", lambda: ran.append("two"))
            return JobPassResult(cursor={"subjectId": "p1"}, done=True)

        one.register_job(MODULE, JOB, handler)
        await one.start_job_run(SCOPE, start({"who": "p1"}, subject="p1"))
        before = await host.stub(SCOPE).export_dump()
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, superseded=1)
        assert ran == ["one"]
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.last_error, run.cursor, run.counters) == (
            "failed",
            JOB_ERASED_RUNNING_NOTE,
            None,
            {},
        )
        assert run.payload["_substratRedacted"]["subjectId"] == "p1"
        after = await host.stub(SCOPE).export_dump()
        assert after.steps == () or all(step.step == "one" for step in after.steps)
        assert before.runs[0].id == after.runs[0].id


async def test_a_dump_imported_elsewhere_does_not_run_but_restored_home_resumes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        one.register_job(MODULE, JOB, finish)
        started = await one.start_job_run(SCOPE, start())
        dump = await host.stub(SCOPE).export_dump()
        await host.stub("s2").import_dump(dump, SCOPE)
        [copy] = await one.job_runs("s2")
        assert (copy.status, copy.last_error) == (
            "failed",
            "not carried: copied from scope s1 before it ran; "
            "it runs in the scope that asked for it, never in a copy",
        )
        assert await one.run_due_jobs("s2") == JobDriveReport()
    async with open_scope_host(clock=StoreClock()) as fresh:
        home = drive(fresh, Trace())
        home.register_job(MODULE, JOB, finish)
        await fresh.stub(SCOPE).import_dump(dump, SCOPE)
        assert await home.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)
        assert [(r.id, r.status) for r in await home.job_runs(SCOPE)] == [(started.id, "done")]


async def test_a_held_system_door_defers_the_pass_without_charging_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    trace = Trace()
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, trace)

        async def handler(ctx: JobPassContext) -> JobPassResult:
            scope = await ctx.scope()
            await ctx.step("write", lambda: scope.invoke("record", {"kind": "w"}))
            return JobPassResult(done=True)

        one.register_job(MODULE, JOB, handler)
        await one.start_job_run(SCOPE, start())
        host.hold_door(SCOPE, MODULE)
        report = await one.run_due_jobs(SCOPE)
        assert report == JobDriveReport(attempted=1, deferred=1)
        [run] = await one.job_runs(SCOPE)
        assert (run.status, run.attempts, run.last_error) == ("running", 0, None)
        assert run.next_attempt_at is not None
        assert parse_iso_ms(run.next_attempt_at) - parse_iso_ms(run.updated_at) == JOB_DEFER_MS
        [outcome] = trace.named("pass.outcome")
        assert outcome["status"] == "deferred"
        assert outcome["error"].startswith("the system door of module 'crm' on scope 's1' is held")
        host.release_door(SCOPE, MODULE)
        await trio.sleep(JOB_DEFER_MS / 1000)
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(attempted=1, completed=1)


async def test_an_error_shaped_like_a_door_refusal_does_not_defer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())

        class LooksLikeWaiting(Exception):
            reason = "system_door_wait"

        async def handler(ctx: JobPassContext) -> JobPassResult:
            raise LooksLikeWaiting("not now, says the step")

        one.register_job(MODULE, JOB, handler)
        started = await one.start_job_run(SCOPE, start())
        assert await one.run_due_jobs(SCOPE) == JobDriveReport(
            attempted=1,
            retrying=1,
            errors=(JobDriveError(started.id, "not now, says the step"),),
        )


async def test_register_job_refuses_duplicates_and_bad_leases(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        one.register_job(MODULE, JOB, idle)
        with pytest.raises(
            Conflict,
            match=r"^job crm/walk is already registered with drive 'drive' — register each job "
            r"once$",
        ):
            one.register_job(MODULE, JOB, idle)
        with pytest.raises(ValidationFailed, match=r"^lease_ms is 99; a job's lease must be"):
            one.register_job(MODULE, "other", idle, lease_ms=99)
        with pytest.raises(
            ValidationFailed, match=r"^retry.max_attempts is 0; it must be an int >= 1$"
        ):
            one.register_job(MODULE, "other", idle, retry=RetryPolicy(max_attempts=0))
