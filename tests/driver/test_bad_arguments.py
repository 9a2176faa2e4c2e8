"""Arguments of the wrong type are refused where they are passed, by name, with the remedy — not
as a bare AttributeError or TypeError at their first use, and never silently."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
import trio
import trio.testing

from driver import (
    JobDriveError,
    JobDriver,
    JobDriveReport,
    JobPassContext,
    JobPassResult,
    RetryPolicy,
    ValidationFailed,
)
from scopehost import StoreClock, open_scope_host

from ..refusals import refusal
from .support import JOB, MODULE, SCOPE, Trace, drive, start


async def idle(ctx: JobPassContext) -> None:
    return None


# -- registration, starts and reads -------------------------------------------------------------


async def test_a_retry_that_is_not_a_policy_is_refused_at_registration(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        with pytest.raises(ValidationFailed) as caught:
            one.register_job(MODULE, JOB, idle, retry="x")  # type: ignore[arg-type]
        assert str(caught.value) == (
            "retry is 'x'; pass a RetryPolicy (or leave it out for the defaults)"
        )
        # Nothing was registered: the same job registers once it is given a policy.
        one.register_job(MODULE, JOB, idle, retry=RetryPolicy(max_attempts=2))


async def test_a_dict_for_a_start_or_a_filter_is_refused_by_name_and_writes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        with pytest.raises(ValidationFailed) as caught:
            await one.start_job_run(SCOPE, {"module_id": MODULE, "job": JOB})  # type: ignore[arg-type]
        assert refusal(caught) == [
            (
                "input",
                "is {'module_id': 'crm', 'job': 'walk'}; pass a StartJobRunInput(module_id=..., "
                "job=..., instance=..., payload=..., subject=...)",
            )
        ]
        with pytest.raises(ValidationFailed) as caught:
            await one.job_runs(SCOPE, {"status": "done"})  # type: ignore[arg-type]
        assert refusal(caught) == [
            (
                "filter",
                "is {'status': 'done'}; pass a JobRunFilter (e.g. JobRunFilter(status='done')), "
                "or None for every run",
            )
        ]
        assert await one.job_runs(SCOPE) == []


# -- the drive's own options ----------------------------------------------------------------------


async def test_a_drive_without_a_host_is_refused_when_it_is_built() -> None:
    with pytest.raises(ValidationFailed) as caught:
        JobDriver(None)  # type: ignore[arg-type]
    assert refusal(caught) == [
        (
            "host",
            "is None, which lacks stub, door, check_link, monotonic_ms, clock.now, rng (random "
            "and getrandbits); pass the scope host the drive works on (what "
            "scopehost.open_scope_host yields)",
        )
    ]


async def test_a_host_needs_no_clock_or_random_source_the_drive_was_given(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Bare:
        def __init__(self, host: Any) -> None:
            self.stub, self.door, self.check_link = host.stub, host.door, host.check_link

        def __repr__(self) -> str:
            return "Bare()"

    async with open_scope_host(clock=StoreClock()) as host:
        with pytest.raises(ValidationFailed, match=r"^host is Bare\(\), which lacks monotonic_ms"):
            JobDriver(Bare(host))  # type: ignore[arg-type]
        JobDriver(
            Bare(host),  # type: ignore[arg-type]
            now=host.clock.now,
            monotonic=host.monotonic_ms,
            rng=random.Random(1),
        )


async def test_a_link_the_host_cannot_use_is_refused_when_the_drive_is_built(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        with pytest.raises(ValidationFailed) as caught:
            JobDriver(host, link="x")
        assert refusal(caught) == [
            (
                "link",
                "is 'x'; pass a scopehost.Link (e.g. Link(request_ms=3, reply_ms=3)), or None for "
                "the host's zero-latency link",
            )
        ]


async def test_every_bad_option_of_a_drive_is_named_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        with pytest.raises(ValidationFailed) as caught:
            JobDriver(
                host,
                name="",
                now="2026-10-04T12:00:00.000Z",  # type: ignore[arg-type]
                monotonic=0.0,  # type: ignore[arg-type]
                rng=7,  # type: ignore[arg-type]
                observer=[],  # type: ignore[arg-type]
                log="driver",  # type: ignore[arg-type]
            )
        assert refusal(caught) == [
            ("name", "is ''; it must be a non-empty str"),
            (
                "now",
                "is '2026-10-04T12:00:00.000Z'; pass a function returning the time as ISO text, "
                "or None for the host's clock",
            ),
            ("monotonic", "is 0.0; pass a function returning ms, or None for the host's clock"),
            (
                "rng",
                "is 7; pass a random.Random (it needs random() and getrandbits()), or None for "
                "the host's",
            ),
            ("observer", "is []; pass a function of (event, fields), or None for no events"),
            (
                "log",
                "is 'driver'; pass a logging.Logger, or None for the drive's own (driver.drive)",
            ),
        ]
        JobDriver(host, name="cron", log=logging.getLogger("cron"))


# -- what a handler passes and returns -----------------------------------------------------------


async def run_one_pass(handler: Any) -> tuple[JobDriveReport, str, Any]:
    """One pass of ``handler`` on a fresh run: the report, and the run's status and error."""
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        one.register_job(MODULE, JOB, handler)
        await one.start_job_run(SCOPE, start())
        report = await one.run_due_jobs(SCOPE)
        [run] = await one.job_runs(SCOPE)
        assert (run.cursor, run.counters) == (None, {})  # a failed pass commits nothing
        return report, run.status, run.last_error


def retrying(error: str) -> JobDriveReport:
    return JobDriveReport(attempted=1, retrying=1, errors=(JobDriveError("*", error),))


def with_any_id(report: JobDriveReport) -> JobDriveReport:
    return JobDriveReport(
        attempted=report.attempted,
        retrying=report.retrying,
        errors=tuple(JobDriveError("*", e.error) for e in report.errors),
    )


STEP_BODY = (
    "step 'load' was given 5 as its body; pass a function of no arguments (a def, an async def "
    "or a lambda), not its result"
)
STEP_RETRY = "step 'load' retry is 'x'; pass a RetryPolicy (or leave it out for the job's)"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (("load", 5), STEP_BODY),
        (("load", lambda: 1, "x"), STEP_RETRY),
        (
            ("load", lambda: 1, RetryPolicy(max_attempts=0)),
            "step 'load' retry.max_attempts is 0; it must be an int >= 1",
        ),
        (("", lambda: 1), "step name is ''; it must be a non-empty str"),
    ],
    ids=["body", "retry", "retry-numbers", "name"],
)
async def test_a_bad_step_argument_is_refused_when_the_step_is_called_and_fails_the_pass(
    autojump_clock: trio.testing.MockClock, arguments: tuple[Any, ...], error: str
) -> None:
    seen: list[str] = []

    async def handler(ctx: JobPassContext) -> JobPassResult:
        ctx.count("seen")
        try:
            ctx.step(*arguments)  # refused here, before anything awaits it
        except ValidationFailed as refused:
            seen.append(str(refused))
        # Caught, the refusal still fails the pass: it does not commit over a step never run.
        return JobPassResult(cursor="past the step", done=True)

    report, status, last_error = await run_one_pass(handler)
    assert seen == [error]
    assert with_any_id(report) == retrying(error)
    assert (status, last_error) == ("running", error)


@pytest.mark.parametrize("done", ["yes", 1, None])
async def test_a_pass_result_whose_done_is_not_a_bool_fails_the_pass(
    autojump_clock: trio.testing.MockClock, done: object
) -> None:
    error = (
        f"done is {done!r}; a JobPassResult's done must be a bool — True ends the run, False "
        "(the default) lets it go on"
    )
    with pytest.raises(ValidationFailed) as caught:
        JobPassResult(done=done)  # type: ignore[arg-type]
    assert str(caught.value) == error

    async def handler(ctx: JobPassContext) -> JobPassResult:
        ctx.count("seen")
        return JobPassResult(cursor={"at": 1}, done=done)  # type: ignore[arg-type]

    # Built inside the handler, the refusal is that pass's error: the drive goes on, the run is
    # not completed (as "yes" and 1 used to complete it) and keeps no cursor.
    report, status, last_error = await run_one_pass(handler)
    assert with_any_id(report) == retrying(error)
    assert (status, last_error) == ("running", error)
