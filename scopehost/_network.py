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
``VirtualClock``) there is no network task at work: a Trio instrument moves virtual time from the
run loop itself. Just before the loop would wait for I/O with no task able to run, it jumps the
clock to the earliest entry (unless a Trio deadline comes first) and runs the entries due there,
so the tasks they wake run in that same pass of the loop; if they wake none, it goes on to the
next entry. A timed leg then costs no scheduler batch of its own. A request that arrives at an idle
scope is served by its entry (see ``ScopeActor.submit``), so a call with latency on both legs takes
one batch, the caller's; a call without latency takes two (the actor's, the caller's). Entries
run outside any task, which is why they must not block; one that raises takes the host down with
its error (the parked network task re-raises it), never silently. This is only right while nothing
else in the run waits for all tasks to be blocked (``trio.testing.wait_all_tasks_blocked``): the
clock would move before that waiter wakes. Tests that sequence tasks so keep the default.

When its host closes, the network closes too (:meth:`Network.close`): no time is left. An entry
that wakes a waiter (added with ``wakes=True``: a leg of a call, a sleep) runs at once, so a
request on the wire finds the host closed and wakes its caller with ``HostClosed``, a reply on
the wire is delivered, and a sleeper is woken with ``HostClosed``; one added later runs as it is
added. Every other entry (an idle check, a deadline) is dropped, since it could only schedule more
work on a host that does none. The host's own tasks are cancelled first, which withdraws their
entries; what is left belongs to tasks outside its block, which would otherwise wait for ever on a
timer nobody runs.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import outcome
import trio
import trio.testing

from ._errors import HostClosed

#: One heap entry: ``[due, seq, action, wakes]``; the action becomes None once the entry is
#: withdrawn, and ``wakes`` says whether it runs when the network closes.
Timed = list[Any]


class Network:
    """The deterministic timer of one scope host. Run :meth:`serve` in a nursery first."""

    def __init__(self, *, jump_clock: bool = False) -> None:
        self.jump_clock = jump_clock
        #: Virtual time in seconds, read from the run's clock itself: ``trio.current_time()`` is
        #: the same value through Trio's public wrapper, at a microsecond a read, and a world reads
        #: the time on every leg of every call. (A network belongs to one run: its host's.)
        self.now: Callable[[], float] = trio.lowlevel.current_clock().current_time
        self._heap: list[Timed] = []
        self._seq = itertools.count()
        #: The cancel scope the network task sleeps in, its deadline the earliest entry's due
        #: time. A waiter with an earlier one moves that deadline itself, so adding a wait never
        #: costs the network task a wake-up of its own.
        self._timer: trio.CancelScope | None = None
        #: Set once its host closes: from then on an entry runs as it is added.
        self.closed = False

    def at(self, due: float, action: Callable[[], None], *, wakes: bool = False) -> Timed:
        """Run ``action`` once virtual time reaches ``due`` (seconds), in (due, seq) order.

        ``action`` must not block: it runs between two other entries. Withdraw the entry with
        :func:`withdraw` (a waiter that was cancelled). ``wakes``: the action wakes a waiter,
        and runs at once when the network closes (see the module's docstring)."""
        if self.closed:
            if wakes:
                action()  # no time is left to wait for
            return [due, -1, None, False]
        entry: Timed = [due, next(self._seq), action, wakes]
        heapq.heappush(self._heap, entry)
        timer = self._timer
        if timer is not None and due < timer.deadline:
            timer.deadline = due
        return entry

    def after(self, seconds: float, action: Callable[[], None], *, wakes: bool = False) -> Timed:
        """:meth:`at` ``seconds`` from now."""
        return self.at(self.now() + seconds, action, wakes=wakes)

    async def sleep_ms(self, ms: float) -> None:
        """Sleep ``ms`` milliseconds of virtual time, woken in (due, seq) order."""
        if not (ms >= 0 and math.isfinite(ms)):
            raise ValueError(f"a delay of {ms!r} ms is not a finite number >= 0")
        if ms == 0:
            return
        await self.sleep_until(self.now() + ms / 1000.0)

    async def sleep_until(self, due: float) -> None:
        self._check_open()
        task = trio.lowlevel.current_task()
        entry = self.at(due, partial(trio.lowlevel.reschedule, task), wakes=True)

        def abort(_: Any) -> trio.lowlevel.Abort:
            withdraw(entry)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        if self.now() < due:
            self._check_open()  # woken before its time: by the close

    def _check_open(self) -> None:
        if self.closed:
            raise HostClosed(
                "the scope host is closed: nothing more happens in its time, and a sleep on it "
                "would never end"
            )

    def close(self) -> None:
        """The host closed: run every entry left that wakes a waiter, in (due, seq) order, now,
        and drop the rest (see the module's docstring). Call it once the host's own tasks are
        cancelled."""
        self.closed = True
        heap = self._heap
        while heap:
            _, _, action, wakes = heapq.heappop(heap)
            if action is not None and wakes:
                action()

    async def serve(self) -> None:
        """Run the entries as they fall due, forever (until cancelled with its nursery)."""
        if self.jump_clock:
            check_jumpable_clock()
            await self._jump_from_the_run_loop()
        while True:
            self._run_due()
            await self._sleep_until_first_due()

    async def _jump_from_the_run_loop(self) -> None:
        clock = trio.lowlevel.current_clock()
        assert isinstance(clock, trio.testing.MockClock | VirtualClock)
        if isinstance(clock, VirtualClock):
            clock.pending = lambda: bool(self._heap)
        jumper = _Jumper(self, clock, trio.lowlevel.current_task())
        trio.lowlevel.add_instrument(jumper)
        try:
            # Parked for good: the instrument does the work, and wakes this task only to raise
            # what an entry raised (an instrument's own exception would be swallowed by Trio).
            await trio.lowlevel.wait_task_rescheduled(_abort_parked)
        finally:
            trio.lowlevel.remove_instrument(jumper)
            if isinstance(clock, VirtualClock):
                clock.pending = lambda: False

    def _run_due(self) -> None:
        heap = self._heap
        now = self.now()
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


def _abort_parked(_: Any) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.SUCCEEDED


class _Jumper(trio.abc.Instrument):
    """Moves the clock from Trio's run loop: when no task can run, to the network's earliest
    entry or Trio's earliest deadline, whichever comes first, and runs the entries due there. The
    tasks they wake (and those whose deadline expired) run in the very same pass of the loop. While
    the entries wake no task, it goes on to the next one."""

    def __init__(
        self,
        network: Network,
        clock: trio.testing.MockClock | VirtualClock,
        guard: trio.lowlevel.Task,
    ) -> None:
        self._network = network
        self._clock = clock
        self._guard: trio.lowlevel.Task | None = guard
        runner = trio._core._run.GLOBAL_RUN_CONTEXT.runner
        self._runq = runner.runq
        self._next_deadline = _trio_next_deadline()

    def before_io_wait(self, timeout: float) -> None:
        if self._runq or self._guard is None:
            return
        heap = self._network._heap
        try:
            # Entries that wake no task (a request served off the wire, whose reply leg is still
            # travelling) leave nothing to run: the clock goes on to the next one here, rather
            # than after a pass of the run loop that would run no task.
            while not self._runq:
                while heap and heap[0][2] is None:
                    heapq.heappop(heap)
                deadline = self._next_deadline()
                due = min(heap[0][0] if heap else math.inf, deadline)
                if due == math.inf:
                    return  # nothing anywhere is timed: the run waits as it would have
                now = self._clock.current_time()
                if due > now:
                    self._clock.jump(due - now)
                if heap and heap[0][0] <= due:
                    self._network._run_due()
                if deadline <= due:
                    return  # a Trio deadline is due too: the run loop expires it next
        except BaseException as error:
            guard, self._guard = self._guard, None
            trio.lowlevel.reschedule(guard, outcome.Error(error))


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


class VirtualClock(trio.abc.Clock):
    """Virtual time that moves only when a scope host's network jumps it (``jump_clock=True``).

    What ``MockClock(autojump_threshold=0)`` is to such a host, without reading the real clock on
    every ``current_time()``: at rate 0 that read is multiplied by zero, yet Trio's run loop and a
    world's trace ask for the time tens of thousands of times a second. Only a host opened with
    ``jump_clock=True`` moves it (it jumps to Trio's deadlines as well as the network's entries);
    without one, a run under it never sees time pass."""

    def __init__(self) -> None:
        self._now = 0.0
        #: Whether the network serving this clock has anything timed (set by the network).
        self.pending: Callable[[], bool] = lambda: False

    def __repr__(self) -> str:
        return f"VirtualClock(time={self._now!r})"

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self._now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        # Never sleep while anything is timed: the network jumps the clock before the run loop
        # would wait. With nothing timed anywhere, the run waits as under a MockClock.
        if deadline < math.inf or self.pending():
            return 0.0
        return math.inf

    def jump(self, seconds: float) -> None:
        if not seconds >= 0:
            raise ValueError(f"a clock jumps forward, not by {seconds!r} s")
        self._now += seconds


def check_jumpable_clock() -> None:
    """Refuse ``jump_clock=True`` under a clock the network cannot move as the clock would."""
    clock = trio.lowlevel.current_clock()
    if not (
        isinstance(clock, VirtualClock)
        or (
            isinstance(clock, trio.testing.MockClock)
            and clock.autojump_threshold == 0
            and clock.rate == 0
        )
    ):
        raise ValueError(
            f"jump_clock=True moves a VirtualClock, or a MockClock(autojump_threshold=0) at rate "
            f"0, but this run's clock is {clock!r}; run under one or pass jump_clock=False"
        )


def withdraw(entry: Timed) -> None:
    """Make a heap entry do nothing when it falls due."""
    entry[2] = None
