"""A handler's service calls and fan-out starts on a real drive: one job definition, its calls
through the drive's service port, and the port's refusals where the job is registered."""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio
import trio.testing

from driver import (
    JobDefinition,
    JobDriver,
    JobPassContext,
    JobPassResult,
    ServiceDeclined,
    StartJobRunInput,
    ValidationFailed,
    service_call,
)
from scopehost import Link, StoreClock, open_scope_host
from serviceclients import InProcessServices

from .support import SCOPE, Trace


def begin(job: str, payload: Any, *, instance: str = "default") -> StartJobRunInput:
    return StartJobRunInput(module_id="crm", job=job, instance=instance, payload=payload)


def mailer() -> tuple[InProcessServices, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    def send(args: dict[str, Any]) -> dict[str, Any]:
        if "@" not in args["to"]:
            raise ServiceDeclined(f"no such address {args['to']!r}", code="bad_address")
        sent.append(args)
        return {"message": len(sent)}

    return InProcessServices({"mail": {"send": send}}), sent


async def notify(ctx: JobPassContext) -> JobPassResult:
    async def send() -> str:
        try:
            await ctx.call_service(
                "mail",
                "send",
                {"to": ctx.payload["to"]},
                timeout_ms=5_000,
                idempotency_key=f"{ctx.run.id}/notify",
            )
        except ServiceDeclined as declined:
            return f"declined: {declined.code}"  # an answer, not a failure
        return "sent"

    await ctx.step("send", send)
    return JobPassResult(done=True)


NOTIFY = JobDefinition("crm", "notify", notify, services=("mail",))


def drive_with(host: Any, services: Any, trace: Trace) -> JobDriver:
    return JobDriver(
        host,
        name="drive",
        link=Link(name="drive"),
        rng=random.Random(1),
        observer=trace,
        services=services,
    )


async def test_a_defined_job_calls_its_service_through_the_drive_port(
    autojump_clock: trio.testing.MockClock,
) -> None:
    port, sent = mailer()
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive_with(host, port, Trace())
        one.register(NOTIFY)
        for to in ("a@example.com", "nobody"):
            await one.start_job_run(SCOPE, begin("notify", {"to": to}, instance=to))
        await one.run_due_jobs(SCOPE, limit=10)
        runs = await one.job_runs(SCOPE)
        assert sorted(run.status for run in runs) == ["done", "done"]
    assert sent == [{"to": "a@example.com"}]


async def test_a_job_naming_a_service_the_port_lacks_is_refused_where_it_is_registered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        with pytest.raises(ValidationFailed, match=r"job crm/notify calls mail, which drive"):
            drive_with(host, None, Trace()).register(NOTIFY)
        port = InProcessServices({"card": {"charge": lambda args: None}})
        with pytest.raises(ValidationFailed, match="give JobDriver"):
            drive_with(host, port, Trace()).register(NOTIFY)


async def test_a_call_without_a_port_fails_the_pass_naming_the_remedy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive_with(host, None, Trace())
        one.register_job("crm", "notify", notify)
        await one.start_job_run(SCOPE, begin("notify", {"to": "a@example.com"}))
        report = await one.run_due_jobs(SCOPE)
        assert report.retrying == 1
        [run] = await one.job_runs(SCOPE)
        assert "this drive was given no service port" in str(run.last_error)


async def test_a_handler_fans_out_one_run_per_customer_and_a_retry_joins_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def month_end(ctx: JobPassContext) -> JobPassResult:
        for customer in ctx.payload["customers"]:
            await ctx.start_run("crm", "notify", instance=customer, payload={"to": customer})
        if ctx.cursor is None:
            return JobPassResult(cursor="again")  # a second pass starts them all again
        return JobPassResult(done=True)

    port, sent = mailer()
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive_with(host, port, Trace())
        one.register(NOTIFY)
        one.register(JobDefinition("crm", "month-end", month_end))
        customers = ["a@example.com", "b@example.com", "c@example.com"]
        await one.start_job_run(SCOPE, begin("month-end", {"customers": customers}))
        for _ in range(4):
            await one.run_due_jobs(SCOPE, limit=10)
        runs = await one.job_runs(SCOPE)
    assert sorted((run.job, run.status) for run in runs) == [
        ("month-end", "done"),
        *[("notify", "done")] * 3,
    ]
    assert sorted(message["to"] for message in sent) == customers


def test_a_call_is_checked_where_it_is_made() -> None:
    with pytest.raises(ValidationFailed, match=r"idempotency_key.*give a non-empty str"):
        service_call("r", "card", "charge", {}, None, 5)
    with pytest.raises(ValidationFailed, match="idempotency_key"):
        service_call("r", "card", "charge", {}, None, "")
    with pytest.raises(ValidationFailed, match=r"timeout_ms.*above 0"):
        service_call("r", "card", "charge", {}, 0, None)
    with pytest.raises(ValidationFailed, match="not JSON-safe"):
        service_call("r", "card", "charge", {"when": object()}, None, None)
    with pytest.raises(ValidationFailed, match="one word"):
        service_call("r", "card.x", "charge", {}, None, None)


async def test_a_handler_bug_is_logged_with_its_traceback_where_the_operator_looks(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def typo(ctx: JobPassContext) -> JobPassResult:
        return JobPassResult(done=ctx.payload["acount"])

    async with open_scope_host(clock=StoreClock()) as host:
        one = drive_with(host, None, Trace())
        one.register(JobDefinition("crm", "typo", typo))
        await one.start_job_run(SCOPE, begin("typo", {"account": 1}))
        with caplog.at_level("INFO", logger="driver.drive"):
            await one.run_due_jobs(SCOPE)
        [run] = await one.job_runs(SCOPE)
    assert run.last_error == "'acount'"  # the stored text is the message alone
    [record] = caplog.records
    assert "job crm/typo: run" in record.getMessage()
    assert "the handler raised KeyError; the pass will be retried" in record.getMessage()
    assert record.exc_info is not None
    assert "acount" in caplog.text
