"""One task that wakes every timed waiter, in (due time, sequence) order.

Trio breaks ties between equal deadlines by memory address, which differs from process to process.
A simulation that must replay byte for byte therefore never lets two of its own waits race on
Trio's deadline heap: every leg delay and every simulated sleep is an entry in THIS heap, ordered by
(due, seq), and the one network task wakes them in that order. A zero-length wait returns at once:
a call still yields while the scope's actor serves it, which is where calls interleave, and a
checkpoint per leg would only double the scheduler's work for nothing a caller could observe.
"""

from __future__ import annotations

import heapq
import itertools
import math

import trio


class Network:
    """The deterministic timer of one scope host. Run :meth:`serve` in a nursery first."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, trio.Event]] = []
        self._seq = itertools.count()
        #: The cancel scope the network task sleeps in, its deadline the earliest entry's due
        #: time. A waiter with an earlier one moves that deadline itself, so adding a wait never
        #: costs the network task a wake-up of its own.
        self._timer: trio.CancelScope | None = None

    async def sleep_ms(self, ms: float) -> None:
        """Sleep ``ms`` milliseconds of virtual time, woken in (due, seq) order."""
        if not (ms >= 0 and math.isfinite(ms)):
            raise ValueError(f"a delay of {ms!r} ms is not a finite number >= 0")
        if ms == 0:
            return
        await self.sleep_until(trio.current_time() + ms / 1000.0)

    async def sleep_until(self, due: float) -> None:
        event = trio.Event()
        heapq.heappush(self._heap, (due, next(self._seq), event))
        timer = self._timer
        if timer is not None and due < timer.deadline:
            timer.deadline = due
        await event.wait()

    async def serve(self) -> None:
        """Deliver wake-ups forever (until cancelled with its nursery)."""
        heap = self._heap
        while True:
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                heapq.heappop(heap)[2].set()
            with trio.CancelScope(deadline=heap[0][0] if heap else math.inf) as timer:
                self._timer = timer
                await trio.sleep_forever()
            self._timer = None
