"""Every call gets an answer when its host closes: the call's value, ``HostClosed`` (it did not run,
or its reply was lost with the host), or ``UnsyncedWrite`` (it committed, and no sync covered it).
Never a wait that lasts for ever, and never a raw Trio error.

The callers here live outside the host's block, in a nursery of their own, as an embedder's tasks
do, and each calls after a different number of scheduler rounds: some while the block is still
running, some in the rounds in which the host's tasks are cancelled and end, some after its nursery
closed, some once the host is gone. Trio runs the tasks of one round in either order, so each
scenario runs several times over.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from driver import JobDriver, JobRunFilter
from scopehost import (
    HostClosed,
    Link,
    ScopeStub,
    StoreClock,
    UnsyncedWrite,
    open_scope_host,
)

#: The scheduler rounds after which the callers call (-1: in flight before the block ends).
PHASES = range(-1, 10)
ROUNDS = 6
#: What a caller may hear; anything else (a raw Trio error, a hang) fails the test.
ANSWERS = {"value", "HostClosed", "UnsyncedWrite"}


async def call_after(rounds: int, stub: ScopeStub, answers: list[str]) -> None:
    for _ in range(rounds):
        await trio.lowlevel.checkpoint()
    try:
        await stub.invoke("record", {"kind": "k"})
    except (HostClosed, UnsyncedWrite) as error:
        answers.append(type(error).__name__)
        return
    except Exception as error:  # what the test exists to catch, named in its failure
        answers.append(f"{type(error).__name__}: {error}")
        return
    answers.append("value")


async def callers_across_the_close(
    directory: Path | None, link: Link | None, *, timeout_s: float
) -> list[str]:
    """Three callers per phase, outside the host's block; what each heard."""
    answers: list[str] = []
    with trio.fail_after(timeout_s):  # a caller that waits for ever fails the test here
        async with (
            trio.open_nursery() as outside,
            open_scope_host(directory, clock=StoreClock()) as host,
        ):
            stub = host.stub("s1", link=link)
            await stub.invoke("record", {"kind": "warm"})  # the scope's actor is running
            for phase in PHASES:
                for _ in range(3):
                    outside.start_soon(call_after, max(phase, 0), stub, answers)
            await trio.lowlevel.checkpoint()  # the in-flight callers send before the close
    assert len(answers) == 3 * len(PHASES)
    return answers


@pytest.mark.parametrize("where", ["directory", "memory"])
@pytest.mark.parametrize("latency", [0, 3], ids=["direct-link", "link-with-latency"])
async def test_every_caller_outside_the_block_is_answered_as_the_host_closes(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, where: str, latency: float
) -> None:
    for round in range(ROUNDS):
        directory = tmp_path / str(round) if where == "directory" else None
        if directory is not None:
            directory.mkdir()
        link = Link(request_ms=latency, reply_ms=latency) if latency else None
        answers = await callers_across_the_close(directory, link, timeout_s=60)
        assert set(answers) <= ANSWERS, answers
        assert "HostClosed" in answers


async def test_every_caller_is_answered_as_a_host_with_group_commit_closes(
    tmp_path: Path,
) -> None:
    # Under the wall clock the gate syncs in a worker thread, and a reply may be held by it as the
    # host closes. The timeout only ends a failure: a run that passes never waits for it.
    for round in range(ROUNDS):
        directory = tmp_path / str(round)
        directory.mkdir()
        answers = await callers_across_the_close(directory, None, timeout_s=20)
        assert set(answers) <= ANSWERS, answers


async def test_a_call_in_flight_over_a_link_with_latency_hears_the_close(
    autojump_clock: trio.testing.MockClock,
) -> None:
    answers: dict[str, Any] = {}

    async def call(name: str, stub: ScopeStub) -> None:
        try:
            answers[name] = await stub.list(JobRunFilter())
        except HostClosed as error:
            answers[name] = str(error)

    with trio.fail_after(60):
        async with trio.open_nursery() as outside, open_scope_host(clock=StoreClock()) as host:
            stub = host.stub("s1", link=Link(name="slow", request_ms=10, reply_ms=10))
            await stub.list(JobRunFilter())
            outside.start_soon(call, "reply on the wire", stub)
            await host.sleep_ms(12)  # it ran at 10 ms; its reply arrives at 20
            outside.start_soon(call, "request on the wire", stub)
            await host.sleep_ms(3)  # its request would arrive at 22: the host closes at 15
    assert answers == {
        # The reply was on its way: the caller gets it, the operation having run.
        "reply on the wire": [],
        "request on the wire": (
            "request list #3 on link 'slow' to scope 's1' was on the wire when the scope host "
            "closed: the operation did not run"
        ),
    }


async def test_a_call_or_a_sleep_after_the_close_is_host_closed_over_any_link(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        slow = host.stub("s1", link=Link(request_ms=3, reply_ms=3))
        direct = host.stub("s1")
    closed = r"^list on scope 's1': the scope host is closed; the operation did not run$"
    with trio.fail_after(60):
        with pytest.raises(HostClosed, match=closed):
            await slow.list(JobRunFilter())
        with pytest.raises(HostClosed, match=closed):
            await direct.list(JobRunFilter())
        with pytest.raises(
            HostClosed,
            match=r"^the scope host is closed: nothing more happens in its time, and a sleep "
            r"on it would never end$",
        ):
            await host.sleep_ms(5)


async def test_a_drive_over_a_link_with_latency_hears_that_its_host_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        drive = JobDriver(host, link=Link(request_ms=3, reply_ms=3))
    with trio.fail_after(60), pytest.raises(HostClosed, match=re.escape("host is closed")):
        await drive.run_due_jobs("s1")


async def test_a_sleeper_outside_the_block_is_woken_by_the_close(
    autojump_clock: trio.testing.MockClock,
) -> None:
    woken: list[str] = []

    async def sleeper(host: Any) -> None:
        try:
            await host.sleep_ms(1_000)
        except HostClosed:
            woken.append("HostClosed")

    with trio.fail_after(60):
        async with trio.open_nursery() as outside, open_scope_host(clock=StoreClock()) as host:
            outside.start_soon(sleeper, host)
            await host.sleep_ms(10)
    assert woken == ["HostClosed"]
