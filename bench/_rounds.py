"""Yardsticks for the simulator's speed: Trio's own round trip, and scheduler batches counted.

A figure in worlds per second moves with the machine's load; worlds per 1 000 bare Trio
request/reply round trips, measured in the same run, moves much less, because both pay the same
interpreter and the same scheduler. A *batch* is one pass of Trio's run loop that runs at least one
task (a pass in which nothing runs is counted apart, as an idle round).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import trio
import trio.testing

from driver import JobRunFilter
from scopehost import Link, open_scope_host


def bare_round_trips_per_s(n: int = 20_000) -> float:
    """Request/reply round trips per CPU second between two Trio tasks over memory channels."""

    async def main() -> float:
        requests, serve = trio.open_memory_channel[int](math.inf)
        replies, answers = trio.open_memory_channel[int](math.inf)

        async def server() -> None:
            async for request in serve:
                replies.send_nowait(request)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(server)
            started = time.process_time()
            for index in range(n):
                requests.send_nowait(index)
                await answers.receive()
            elapsed = time.process_time() - started
            nursery.cancel_scope.cancel()
        return n / elapsed

    rate: float = trio.run(main)
    return rate


class Rounds(trio.abc.Instrument):
    """Counts the run loop's passes: batches (some task ran) and idle rounds (none did)."""

    def __init__(self) -> None:
        self.batches = 0
        self.idle = 0
        self._ran = True

    def before_io_wait(self, timeout: float) -> None:
        if not self._ran:
            self.idle += 1
        self._ran = False

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if not self._ran:
            self._ran = True
            self.batches += 1

    def snapshot(self) -> tuple[int, int]:
        return self.batches, self.idle


def rounds_per_call(*, request_ms: float, reply_ms: float, calls: int = 200) -> tuple[float, float]:
    """(batches, idle rounds) per plain store call (``list``), no hooks or faults, as a world's
    host runs it (``MockClock(autojump_threshold=0)``, the network moving the clock)."""
    rounds = Rounds()

    async def main() -> tuple[float, float]:
        async with open_scope_host(jump_clock=True) as host:
            stub = host.stub("bench", link=Link(request_ms=request_ms, reply_ms=reply_ms))
            await stub.list(JobRunFilter())  # the actor starts and the schema is made
            trio.lowlevel.add_instrument(rounds)
            before = rounds.snapshot()
            for _ in range(calls):
                await stub.list(JobRunFilter())
            after = rounds.snapshot()
            trio.lowlevel.remove_instrument(rounds)
        return (after[0] - before[0]) / calls, (after[1] - before[1]) / calls

    result: tuple[float, float] = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return result


def counting_rounds(work: Callable[[], Any]) -> tuple[Any, Rounds]:
    """Run ``work`` with every ``trio.run`` it makes counted by one ``Rounds``."""
    rounds = Rounds()
    original = trio.run

    def counted(*args: Any, **kwargs: Any) -> Any:
        kwargs["instruments"] = [*kwargs.get("instruments", ()), rounds]
        return original(*args, **kwargs)

    setattr(trio, "run", counted)  # noqa: B010 (a bench wraps every run a world makes)
    try:
        return work(), rounds
    finally:
        setattr(trio, "run", original)  # noqa: B010
