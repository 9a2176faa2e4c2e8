"""One world a search asks for, and what it keeps of it: the job a worker runs and its result.

A worker sends back only what the search's feedback needs (:class:`WorldResult`: the features
the world reached, the service calls a fault struck, whether it failed), never the world's trace
or its :class:`~sims.runners._outcome.Simulation`: that keeps the messages small, and a long
search's memory flat. The one exception is the clean world's trace, which the search compares
with the same world run in its own process (see ``WorldJob.trace``).
"""

from __future__ import annotations

import attrs

from ..faults._check import PlanError
from ..faults._plan import FaultPlan
from ..runners._simulate import WorldError, simulate
from ..runners._watchdog import BudgetSpent, WorldBlocked, within_budget
from ..scenarios._registry import ScenarioRef, given_inputs
from ._coverage import features_of, struck_service_calls
from ._shape import CallsMade, calls_made
from ._user_code import measuring


@attrs.frozen
class WorldJob:
    """One world to run: the scenario (by a reference that pickles), its seed, the store and the
    plan."""

    #: A reference any worker finds the scenario by, or the scenario as the search was given it
    #: (for a worker forked from the search's process, whose trace is to name it alike).
    scenario: ScenarioRef | str
    seed: int
    mutant: str | None
    plan: FaultPlan
    #: The seconds of CPU the search's time budget had left when it asked for this world (None:
    #: no time budget): the world is stopped there, not only at its own allowance.
    cpu_left_s: float | None = attrs.field(default=None, eq=False)
    #: Send the world's trace back (the clean world's, to compare with its run in the search's
    #: own process).
    trace: bool = attrs.field(default=False, eq=False)
    #: The scenario's inputs for this world, as JSON text (None: its simplest, or none for a
    #: scenario that takes none).
    inputs: str | None = None


@attrs.frozen
class WorldResult:
    """What a search keeps of one world."""

    #: The windows, faults, probes and marks it reached (:func:`features_of`), and the arcs of
    #: the user's code it took (:mod:`._user_code`).
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
    #: What the world was doing when it was found blocked in real time, or stuck in one call,
    #: past its allowance (after "world N"), or None. It ended the process it ran in.
    blocked: str | None = None
    #: The world's trace, as its bytes, when the job asked for it.
    trace: bytes | None = attrs.field(default=None, eq=False, repr=False)
    #: The CPU the world used, in seconds, in the process that ran it.
    cpu_s: float = attrs.field(default=0.0, eq=False)

    @property
    def failed(self) -> bool:
        return self.violated or self.raised is not None


def run_world(job: WorldJob) -> WorldResult:
    """Run one world and reduce it to its :class:`WorldResult`: in this process or a worker's."""
    try:
        with within_budget(job.cpu_left_s), measuring(job.scenario) as code:
            simulation = simulate(
                job.scenario,
                job.seed,
                plan=job.plan,
                mutant=job.mutant,
                keep_trace=True,
                inputs=given_inputs(job.inputs),
            )
    except PlanError:
        return WorldResult(refused=True)
    except (BudgetSpent, WorldBlocked, WorldError) as error:
        return _stopped(error)
    return WorldResult(
        features=features_of(simulation) | code.features(),
        struck=tuple(sorted(struck_service_calls(simulation).items())),
        made=calls_made(simulation),
        violated=bool(simulation.report.violations),
        trace=simulation.outcome.trace.to_bytes() if job.trace else None,
    )


def _stopped(error: BudgetSpent | WorldBlocked | WorldError) -> WorldResult:
    """What a search keeps of a world that did not run to its end."""
    cut = budget_spent(error)
    if cut is not None:
        return WorldResult(cut=str(cut))
    for cause in (error, error.__cause__):
        if isinstance(cause, WorldBlocked):
            return WorldResult(blocked=cause.words)
    if isinstance(error.__cause__, PlanError):
        return WorldResult(refused=True)
    return WorldResult(raised=str(error))


def budget_spent(error: BaseException) -> BudgetSpent | None:
    """The :class:`BudgetSpent` that stopped a world, or None: raised as itself by a world of the
    simulator's own, or as the cause of the ``WorldError`` a user's world raises."""
    for stopped in (error, error.__cause__):
        if isinstance(stopped, BudgetSpent):
            return stopped
    return None
