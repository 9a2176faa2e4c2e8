"""Where a search's worlds run: in this process, in worker processes of this machine, or on a
Dask cluster. Whichever it is, results come back in the order the plans were given.

That order is what makes a search's answer the same for any number of workers: the search reads
each world's result as if the worlds had run one after another, and stops at the first plan, in
the order its stage yielded them, under which the world failed. A worker that finished a later
plan first waits; a plan run past the one the search stops at is thrown away, never counted.

A worker sends back only what the search's feedback needs (:class:`WorldResult`: the features
the world reached, the service calls a fault struck, whether it failed), never the world's trace
or its :class:`~sims.runners._outcome.Simulation`: that keeps the messages small, and a long
search's memory flat.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from collections.abc import Callable, Generator, Iterable
from contextlib import ExitStack
from typing import Any, Protocol, TypeAlias, cast

import attrs

from ..faults._check import PlanError
from ..faults._plan import FaultPlan
from ..runners._dask import connect_to_cluster, summarise_chunk
from ..runners._simulate import WorldError, simulate
from ..runners._watchdog import BudgetSpent, within_budget
from ..scenarios._registry import ScenarioRef
from ._coverage import features_of, struck_service_calls
from ._shape import CallsMade, calls_made

#: Each job with its world's result, in the jobs' order.
Results: TypeAlias = Generator[tuple["WorldJob", "WorldResult"], None, None]

#: How many plans each worker may have queued: enough that the workers keep busy while this
#: process draws the next round of Hypothesis's plans (a queued plan the search no longer wants is
#: skipped, or cancelled on a cluster, so a deep queue costs little).
_QUEUED_PER_PROCESS = 64


@attrs.frozen
class WorldJob:
    """One world to run: the scenario (by a reference that pickles), its seed, the store and the
    plan."""

    scenario: ScenarioRef
    seed: int
    mutant: str | None
    plan: FaultPlan
    #: The seconds of CPU the search's time budget had left when it asked for this world (None:
    #: no time budget): the world is stopped there, not only at its own allowance.
    cpu_left_s: float | None = attrs.field(default=None, eq=False)


@attrs.frozen
class WorldResult:
    """What a search keeps of one world."""

    #: The windows, faults, probes and marks it reached (:func:`features_of`).
    features: frozenset[str] = frozenset()
    #: The service calls a fault struck, as ("SERVICE.OPERATION", count) pairs.
    struck: tuple[tuple[str, int], ...] = ()
    #: The calls its drives made: who did what under the plan (what a second fault aims at).
    made: CallsMade = attrs.field(factory=CallsMade)
    #: Whether a check reported a violation.
    violated: bool = False
    #: What the world raised instead of running to its end, or None.
    raised: str | None = None
    #: The world refused the plan (a name it does not have): no world ran.
    refused: bool = False
    #: The search's time budget ran out while the world ran, and where it was stopped (not a
    #: world at all: it is neither counted nor judged), or None.
    cut: str | None = None

    @property
    def failed(self) -> bool:
        return self.violated or self.raised is not None


def run_world(job: WorldJob) -> WorldResult:
    """Run one world and reduce it to its :class:`WorldResult`: in this process or a worker's."""
    try:
        with within_budget(job.cpu_left_s):
            simulation = simulate(
                job.scenario, job.seed, plan=job.plan, mutant=job.mutant, keep_trace=True
            )
    except PlanError:
        return WorldResult(refused=True)
    except (BudgetSpent, WorldError) as error:
        cut = budget_spent(error)
        if cut is not None:
            return WorldResult(cut=str(cut))
        if isinstance(error.__cause__, PlanError):
            return WorldResult(refused=True)
        return WorldResult(raised=str(error))
    return WorldResult(
        features=features_of(simulation),
        struck=tuple(sorted(struck_service_calls(simulation).items())),
        made=calls_made(simulation),
        violated=bool(simulation.report.violations),
    )


def budget_spent(error: BaseException) -> BudgetSpent | None:
    """The :class:`BudgetSpent` that stopped a world, or None: raised as itself by a world of the
    simulator's own, or as the cause of the ``WorldError`` a user's world raises."""
    for stopped in (error, error.__cause__):
        if isinstance(stopped, BudgetSpent):
            return stopped
    return None


class Executor(Protocol):
    """Runs worlds, and hands their results back in the order of the jobs."""

    #: How the report names where the worlds ran, after "N worlds in T s of ...".
    where: str

    def results(self, jobs: Iterable[WorldJob]) -> Results:
        """Each job with its result, in the jobs' order. The jobs are read lazily, a few ahead
        of the results; a caller that stops reading abandons the worlds still running."""
        ...

    def close(self) -> None: ...


class InProcess:
    """Every world in this process, one after another: nothing runs ahead."""

    where = "CPU"

    def results(self, jobs: Iterable[WorldJob]) -> Results:
        for job in jobs:
            yield job, run_world(job)

    def close(self) -> None:
        pass


#: In a worker process: the number of the batch of jobs the search still reads (see
#: :class:`Processes`).
_reading: Any = None


def _start_worker(reading: Any) -> None:
    global _reading
    _reading = reading
    # A Ctrl-C reaches every process of the terminal's group: the search stops its workers
    # itself, and a worker's traceback would only bury the summary it prints.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_if_read(job: WorldJob, batch: int) -> WorldResult | None:
    """Run ``job`` unless the search stopped reading its batch (it found what it wanted): a
    queued job the search abandoned costs nothing."""
    if _reading.value != batch:
        return None
    return run_world(job)


class Processes:
    """Worlds in ``processes`` worker processes of this machine, forked from this one (so they
    have the scenarios this process registered, as a sweep's workers do)."""

    def __init__(self, processes: int) -> None:
        self.where = f"wall-clock time on {processes} processes"
        self._window = processes * _QUEUED_PER_PROCESS
        context = multiprocessing.get_context("fork")
        self._reading = context.Value("q", 0, lock=False)
        self._pool = context.Pool(processes, initializer=_start_worker, initargs=(self._reading,))

    def results(self, jobs: Iterable[WorldJob]) -> Results:
        batch = self._reading.value

        def submit(job: WorldJob) -> Callable[[], WorldResult]:
            pending = self._pool.apply_async(_run_if_read, (job, batch))
            return lambda: cast(WorldResult, pending.get())

        try:
            yield from _in_order(jobs, submit, self._window)
        finally:
            self._reading.value = batch + 1  # what is still queued of this batch is skipped

    def close(self) -> None:
        # Worlds still running were run past the search's answer: they are not waited for.
        self._pool.terminate()
        self._pool.join()


class Cluster:
    """Worlds as tasks on the Dask cluster whose scheduler is at ``address``, as a sweep runs its
    seeds there (one world at a time per worker process, whatever its threads)."""

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
