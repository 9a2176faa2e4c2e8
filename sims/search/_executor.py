"""Where a search's worlds run: in worker processes of this machine (one by default), on a Dask
cluster, or (for a test of the search itself) in this process. Whichever it is, results come back
in the order the plans were given.

That order is what makes a search's answer the same for any number of workers: the search reads
each world's result as if the worlds had run one after another, and stops at the first plan, in
the order its stage yielded them, under which the world failed. A worker that finished a later
plan first waits; a plan run past the one the search stops at is thrown away, never counted.

Worker processes are where a world that blocks in real time, or is stuck in one C call, can be
stopped: the worker ends with it and a fresh one takes its place (:mod:`._worker`). A world run in
this process could only be stopped once its call returned.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable
from contextlib import ExitStack
from multiprocessing.connection import wait
from typing import Any, Protocol, TypeAlias, cast

from ..runners._dask import connect_to_cluster, summarise_chunk
from ._jobs import WorldJob, WorldResult, budget_spent, run_world
from ._worker import LOOK_AGAIN_S, Ticket, Worker

__all__ = [
    "Cluster",
    "Executor",
    "InProcess",
    "Processes",
    "Results",
    "WorldJob",
    "WorldResult",
    "budget_spent",
    "run_world",
]

#: Each job with its world's result, in the jobs' order.
Results: TypeAlias = Generator[tuple["WorldJob", "WorldResult"], None, None]

#: How many plans each worker may have queued: enough that the workers keep busy while this
#: process draws the next round of Hypothesis's plans (a queued plan the search no longer wants is
#: skipped, or cancelled on a cluster, so a deep queue costs little). A job is about 600 bytes
#: pickled, so a worker's queue fits in its pipe's buffer (200 kB): sending one never waits on a
#: worker that waits for this process to read its result.
_QUEUED_PER_PROCESS = 64


class Executor(Protocol):
    """Runs worlds, and hands their results back in the order of the jobs."""

    #: How the report names where the worlds ran, after "N worlds in T s of ...".
    where: str

    def clock(self) -> float:
        """The seconds a time budget counts: CPU time where the worlds run one at a time,
        wall-clock time where they run side by side."""
        ...

    def results(self, jobs: Iterable[WorldJob]) -> Results:
        """Each job with its result, in the jobs' order. The jobs are read lazily, a few ahead
        of the results; a caller that stops reading abandons the worlds still running."""
        ...

    def close(self) -> None: ...


class InProcess:
    """Every world in this process, one after another: nothing runs ahead, and nothing stops a
    world blocked in real time until its call returns (for tests of the search itself)."""

    where = "CPU"
    clock = staticmethod(time.process_time)

    def results(self, jobs: Iterable[WorldJob]) -> Results:
        for job in jobs:
            yield job, run_world(job)

    def close(self) -> None:
        pass


class Processes:
    """Worlds in ``processes`` worker processes of this machine, forked from this one (so they
    have the scenarios this process registered, as a sweep's workers do). With one, nothing runs
    ahead (the next world is sent once this process has read the last), and a time budget counts
    the CPU of both processes; with more, each has up to :data:`_QUEUED_PER_PROCESS` queued, and
    a time budget counts wall-clock time."""

    def __init__(self, processes: int) -> None:
        self.where = "CPU" if processes == 1 else f"wall-clock time on {processes} processes"
        self._ahead = 1 if processes == 1 else _QUEUED_PER_PROCESS
        context = multiprocessing.get_context("fork")
        #: The number of the batch of jobs the search still reads: a worker skips the others.
        self._reading: Any = context.Value("q", 0, lock=False)
        self._workers = [Worker(context, self._reading) for _ in range(processes)]
        #: The CPU the worlds used in the workers, as their results said.
        self._cpu_s = 0.0
        #: When to look next for a world stuck in one call.
        self._look_at = 0.0

    def clock(self) -> float:
        if len(self._workers) == 1:
            return time.process_time() + self._cpu_s
        return time.monotonic()

    def results(self, jobs: Iterable[WorldJob]) -> Results:
        batch = self._reading.value
        order: deque[Ticket] = deque()
        try:
            for job in jobs:
                order.append(self._send(Ticket(job, batch)))
                # Read results in order while every worker has its fill.
                while order and (order[0].done or self._full()):
                    if order[0].done:
                        yield _answer(order.popleft())
                    else:
                        self._collect()
            while order:
                while not order[0].done:
                    self._collect()
                yield _answer(order.popleft())
        finally:
            self._reading.value = batch + 1  # what is still queued of this batch is skipped

    def _full(self) -> bool:
        return all(len(worker.sent) >= self._ahead for worker in self._workers)

    def _send(self, ticket: Ticket) -> Ticket:
        min(self._workers, key=lambda worker: len(worker.sent)).send(ticket)
        return ticket

    def _collect(self) -> None:
        """Read whatever results have come, waiting for one; end a worker whose world is past
        its time (:mod:`._worker`)."""
        busy = {worker.connection: worker for worker in self._workers if worker.sent}
        ready = wait(list(busy), LOOK_AGAIN_S)
        for connection in ready:
            self._cpu_s += busy[cast(Any, connection)].receive()
        if time.monotonic() >= self._look_at:
            self._look_at = time.monotonic() + LOOK_AGAIN_S
            for worker in busy.values():
                worker.end_if_stuck()

    def close(self) -> None:
        # Worlds still running were run past the search's answer: they are not waited for.
        for worker in self._workers:
            worker.close()


def _answer(ticket: Ticket) -> tuple[WorldJob, WorldResult]:
    assert ticket.result is not None  # a ticket of the batch being read is never skipped
    return ticket.job, ticket.result


class Cluster:
    """Worlds as tasks on the Dask cluster whose scheduler is at ``address``, as a sweep runs its
    seeds there (one world at a time per worker process, whatever its threads)."""

    clock = staticmethod(time.monotonic)

    def __init__(self, address: str) -> None:
        self.where = f"wall-clock time on the cluster at {address}"
        self._exit = ExitStack()
        self._client, threads = self._exit.enter_context(connect_to_cluster(address))
        self._window = max(1, threads) * _QUEUED_PER_PROCESS
        self._futures: list[Any] = []

    def results(self, jobs: Iterable[WorldJob]) -> Results:
        def submit(job: WorldJob) -> Callable[[], WorldResult]:
            future = self._client.submit(summarise_chunk, run_world, [job], pure=False)
            self._futures.append(future)
            return lambda: cast(WorldResult, future.result()[0])

        try:
            yield from _in_order(jobs, submit, self._window)
        finally:
            for future in self._futures:
                future.cancel()
            self._futures.clear()

    def close(self) -> None:
        self._exit.close()


def _in_order(
    jobs: Iterable[WorldJob],
    submit: Callable[[WorldJob], Callable[[], WorldResult]],
    window: int,
) -> Results:
    """Submit up to ``window`` jobs ahead and yield their results in the jobs' order."""
    pending: deque[tuple[WorldJob, Callable[[], WorldResult]]] = deque()
    for job in jobs:
        pending.append((job, submit(job)))
        if len(pending) >= window:
            done, result = pending.popleft()
            yield done, result()
    while pending:
        done, result = pending.popleft()
        yield done, result()
