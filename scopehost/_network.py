"""One task that runs every timed wake-up, in (due time, sequence) order.

Trio breaks ties between equal deadlines by memory address, which differs from process to process.
A simulation that must replay byte for byte therefore never lets two of its own waits race on
Trio's deadline heap: every leg delay and every simulated sleep is an entry in THIS heap, ordered by
(due, seq), and the one network task runs them in that order. An entry is a plain function run in
the network task: it reschedules a sleeping task directly (no event, no cancel scope per waiter),
or hands a request that needs nobody's attention straight to its scope's actor, so a leg costs the
scheduler one round of the network task and nothing more. A zero-length wait returns at once: a
call still yields while the scope's actor serves it, which is where calls interleave.

By default the network task sleeps in a cancel scope whose deadline is its earliest entry. With
``jump_clock=True`` (what the simulator asks for: its world is the whole run and its clock a
``MockClock(autojump_threshold=0)``) the network task moves virtual time itself: it waits until
every task is blocked and jumps the clock to its earliest entry, or to an earlier Trio deadline if
some other wait has one. That is the jump the clock would have made, without a cancel scope set,
fired and unwound per wake-up, and one scheduler round fewer per wake-up (the clock's own jump
takes a round in which nothing runs). It is only right while nothing else in the run waits for all
tasks to be blocked (``trio.testing.wait_all_tasks_blocked``): woken together, the network task
would move the clock under that waiter's feet. Tests that sequence tasks so keep the default.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import trio
import trio.testing

#: One heap entry: ``[due, seq, action]``; the action becomes None once the entry is withdrawn.
Timed = list[Any]


class Network:
    """The deterministic timer of one scope host. Run :meth:`serve` in a nursery first."""

    def __init__(self, *, jump_clock: bool = False) -> None:
        self.jump_clock = jump_clock
        self._heap: list[Timed] = []
        self._seq = itertools.count()
        #: The cancel scope the network task sleeps in, its deadline the earliest entry's due
        #: time. A waiter with an earlier one moves that deadline itself, so adding a wait never
        #: costs the network task a wake-up of its own.
        self._timer: trio.CancelScope | None = None
        #: Trio's earliest deadline (see ``_trio_next_deadline``), read when the clock jumps.
        self._next_deadline: Callable[[], float] = _public_next_deadline
        #: The network task, while it sleeps with nothing in its heap (an entry wakes it).
        self._idle: trio.lowlevel.Task | None = None

    def at(self, due: float, action: Callable[[], None]) -> Timed:
        """Run ``action`` in the network task once virtual time reaches ``due`` (seconds).

        ``action`` must not block: it runs between two other entries. Withdraw the entry with
        :func:`withdraw` (a waiter that was cancelled)."""
        entry: Timed = [due, next(self._seq), action]
        heapq.heappush(self._heap, entry)
        timer = self._timer
        if timer is not None and due < timer.deadline:
            timer.deadline = due
        idle = self._idle
        if idle is not None:
            self._idle = None
            trio.lowlevel.reschedule(idle)
        return entry

    async def sleep_ms(self, ms: float) -> None:
        """Sleep ``ms`` milliseconds of virtual time, woken in (due, seq) order."""
        if not (ms >= 0 and math.isfinite(ms)):
            raise ValueError(f"a delay of {ms!r} ms is not a finite number >= 0")
        if ms == 0:
            return
        await self.sleep_until(trio.current_time() + ms / 1000.0)

    async def sleep_until(self, due: float) -> None:
        task = trio.lowlevel.current_task()
        entry = self.at(due, partial(trio.lowlevel.reschedule, task))

        def abort(_: Any) -> trio.lowlevel.Abort:
            withdraw(entry)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    async def serve(self) -> None:
        """Run the entries as they fall due, forever (until cancelled with its nursery)."""
        clock = trio.lowlevel.current_clock()
        if self.jump_clock:
            check_jumpable_clock()
            self._next_deadline = _trio_next_deadline()
        while True:
            self._run_due()
            if self.jump_clock:
                assert isinstance(clock, trio.testing.MockClock)
                await self._jump_when_idle(clock)
            else:
                await self._sleep_until_first_due()

    def _run_due(self) -> None:
        heap = self._heap
        now = trio.current_time()
        while heap and (heap[0][0] <= now or heap[0][2] is None):
            action = heapq.heappop(heap)[2]
            if action is not None:
                action()

    async def _sleep_until_first_due(self) -> None:
        heap = self._heap
        with trio.CancelScope(deadline=heap[0][0] if heap else math.inf) as timer:
            self._timer = timer
            await trio.sleep_forever()
        self._timer = None

    async def _jump_when_idle(self, clock: trio.testing.MockClock) -> None:
        heap = self._heap
        # Waiting for idle even with an empty heap: an entry added meanwhile then costs no
        # wake-up of its own. (While a task waits for idle, the clock does not jump by itself.)
        await trio.testing.wait_all_tasks_blocked()
        while heap and heap[0][2] is None:
            heapq.heappop(heap)
        # Nothing can run before the clock moves; move it where the clock would have.
        wait = self._next_deadline() - trio.current_time()
        if heap:
            wait = min(wait, heap[0][0] - trio.current_time())
        if wait == math.inf:
            # Nothing anywhere is timed: sleep until an entry is added.
            self._idle = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort_idle)
        elif wait > 0:
            clock.jump(wait)

    def _abort_idle(self, _: Any) -> trio.lowlevel.Abort:
        self._idle = None
        return trio.lowlevel.Abort.SUCCEEDED


def _trio_next_deadline() -> Callable[[], float]:
    """Trio's earliest deadline, read from its run's deadline heap.

    ``trio.lowlevel.current_statistics()`` says the same, but gathers the I/O manager's figures on
    every call, which cost the network a tenth of a simulated RPC; reading the heap is private
    Trio, so it is looked up here once and, if it ever moved, the public figure is used instead
    (same value, only slower). ``tests/scopehost/test_link.py`` fails loudly if it moved."""
    runner = getattr(trio._core._run.GLOBAL_RUN_CONTEXT, "runner", None)
    next_deadline = getattr(getattr(runner, "deadlines", None), "next_deadline", None)
    if callable(next_deadline):
        return next_deadline  # type: ignore[no-any-return]
    return _public_next_deadline


def _public_next_deadline() -> float:
    return trio.current_time() + trio.lowlevel.current_statistics().seconds_to_next_deadline


def check_jumpable_clock() -> None:
    """Refuse ``jump_clock=True`` under a clock the network cannot move as the clock would."""
    clock = trio.lowlevel.current_clock()
    if not (
        isinstance(clock, trio.testing.MockClock)
        and clock.autojump_threshold == 0
        and clock.rate == 0
    ):
        raise ValueError(
            f"jump_clock=True moves a MockClock(autojump_threshold=0) at rate 0, but this "
            f"run's clock is {clock!r}; run under such a clock or pass jump_clock=False"
        )


def withdraw(entry: Timed) -> None:
    """Make a heap entry do nothing when it falls due."""
    entry[2] = None
