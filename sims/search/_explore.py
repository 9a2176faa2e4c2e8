"""Searching fault plans for one that makes a check fail, guided, budgeted, and told honestly.

The world's seed stays fixed; the plan is what varies. The search learns the world's shape from a
clean run (its cadence, leases, calls and service calls, :mod:`._shape`), then looks in stages,
simplest causes first, because a shrinker improves a plan locally and cannot always get from three
faults to a different single one. Each stage is a function that lists or yields the plans it
wants tried (:mod:`._stages`, :mod:`._drawn`); one executor (:mod:`._executor`) runs them, in this
process, on many cores or on a cluster, and the search reads what each world reached in the order
the stage gave them, so its answer does not depend on which worker finished first:

The stages are numbered as docs/search.md numbers them (1 is the clean world, twice):

2. every single fault that strikes at an event of the world, tried in turn. The job's outside
   world first: each service call's reply lost after it ran, held past the caller's own timeout,
   its request delivered after the caller gave up, its reply held until another drive's effect,
   a crash right after it ran; each service down over windows of its calls. Then each scope call
   of each drive held until another drive takes over, steps, writes, commits or ticks; a crash
   and an eviction right after each call; each drive kept away for a while. These reach the
   spec's at-least-once windows, and a caller's timeout taken for a failure, whatever the
   timings;
3. in a world with services, an answer in doubt and its service down just after it;
4. a second fault aimed at the world each single fault made: at the calls that world made and the
   clean one did not (a takeover's pass, a retry), or of the drives left by one kept away;
5. guided by what the single faults' worlds reached: those that entered the rarest windows,
   probes and marks (the feedback), combined in pairs, service faults among them;
6. Hypothesis, drawing plans of one fault, then of several (:mod:`._aimed`), with delays, crash
   times and outages in the world's own terms. (Hypothesis's own ``target`` phase is not used: on
   these strategies it spent minutes of its own time per few hundred worlds, which no budget
   could bound; without it, what Hypothesis draws does not depend on the answers, which is what
   lets its plans run on many workers.)

A failing plan is shrunk, run again in this process and, for a world a command line can name, in a
fresh process, and reported only if it reproduces. A clean result says what was covered: worlds,
windows entered, faults fired, service calls struck, probes and the user's ``sometimes`` marks,
and marks never reached.

The budget holds in every stage: each world is started only within it and may use only what is
left of it (a world still running when it runs out is stopped, and not counted), Hypothesis's
``find`` is stopped from inside its test function, and the shrinkers stop where it runs out,
keeping the smallest failing plan they have. A stop event (Ctrl-C, in the command line) ends the
search the same way, with the same report of what it searched.

The worlds run in worker processes (one, by default), so that a world blocked in real time (a
``time.sleep`` in a handler) or stuck in one C call, which no CPU allowance sees, can be ended
with its worker: the search then stops and names that world, what it was doing and its plan. Only
the clean world's second run and a finding's runs, whole simulations, run in this process, and
each only once the same world ended in a worker.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeAlias

import attrs
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from .._numbers import plural
from .._trace import Trace
from ..faults._check import PlanError
from ..faults._plan import NO_FAULTS, FaultPlan
from ..mutants._catalog import MUTANTS
from ..runners._outcome import Simulation, replay_command
from ..runners._rerun import NONDETERMINISM_HELP, first_difference
from ..runners._simulate import WorldError, simulate
from ..runners._watchdog import BudgetSpent, within_budget
from ..scenarios._registry import (
    SIMPLEST,
    ScenarioRef,
    find_scenario,
    given_inputs,
    inputs_text,
    world_inputs,
)
from ._aimed import fault_plans
from ._coverage import Coverage, features_of, struck_service_calls
from ._drawn import Drawn, Stopped, Trial, Tried, Varied
from ._executor import (
    Cluster,
    Executor,
    InProcess,
    Processes,
    WorldJob,
    WorldResult,
    budget_spent,
)
from ._findings import Finding, forget, not_remembered, recall, remember
from ._shape import CallsMade, WorldShape, merged, shape_of, world_shape
from ._shrink import shrink_in_batches
from ._stages import (
    answer_in_doubt_then_down,
    deploy_plans,
    guided_pairs,
    in_own_time,
    next_faults,
    single_plans,
    start_plans,
)
from ._user_code import measuring, new_code_first

__all__ = [
    "Exploration",
    "SearchReport",
    "WorldShape",
    "explore_plans",
    "fault_plans",
    "fault_plans_for",
    "search",
    "world_shape",
]

#: The default budget: this many worlds, or this many seconds, whichever ends first.
DEFAULT_WORLDS = 300
DEFAULT_SECONDS = 30.0

#: How the chains of stage 4 name their depths, as the search tells them.
_ORDINALS = {2: "a second fault", 3: "a third fault", 4: "a fourth fault", 5: "a fifth fault"}

#: The most worlds the search's own shrinker runs on one failing plan.
_SHRINK_WORLDS = 150


def fault_plans_for(
    scenario: str | ScenarioRef,
    *,
    seed: int = 1,
    max_faults: int = 4,
    legs_only: bool = False,
) -> st.SearchStrategy[FaultPlan]:
    """:func:`fault_plans` aimed at ``scenario``'s own drives, scopes, leases, cadence and
    calls, learnt from one clean run."""
    return fault_plans(
        shape=world_shape(scenario, seed=seed), max_faults=max_faults, legs_only=legs_only
    )


@attrs.frozen
class Exploration:
    """The smallest plan the search found that makes a check report a violation."""

    scenario: str
    seed: int
    mutant: str | None
    plan: FaultPlan
    simulation: Simulation
    #: The scenario's inputs the world failed on, as JSON text (None: a scenario without).
    inputs: str | None = None

    def command(self) -> str:
        """The command that runs the shrunk failure again."""
        return replay_command(
            self.scenario, self.seed, mutant=self.mutant, plan=repr(self.plan), inputs=self.inputs
        )

    def code(self) -> str:
        """The shrunk failure as code: paste it into a test."""
        mutant = f", mutant={self.mutant!r}" if self.mutant else ""
        inputs = "" if self.inputs is None else f"\n    inputs={json.loads(self.inputs)!r},"
        names = sorted({type(fault).__name__ for fault in self.plan.faults})
        return (
            f"from sims import {', '.join([*names, 'FaultPlan', 'simulate'])}\n\n"
            f"simulation = simulate(\n    {self.scenario!r},\n    {self.seed},\n"
            f"    plan={self.plan!r}{mutant},{inputs}\n)\n"
            "assert simulation.report.ok, simulation.report.violations"
        )


#: Why a search stopped, as its report says it.
_WHY = {
    "seconds": "the time budget ran out",
    "worlds": "the world budget ran out",
    "exhausted": "Hypothesis drew no new plan within the budget",
    "interrupted": "interrupted: Ctrl-C",
    "blocked": "a world was blocked in real time",
}


@attrs.frozen(kw_only=True)
class SearchReport:
    """What a search did: what it found (if anything), what it covered, and whether the world
    was a function of its seed."""

    scenario: str
    seed: int
    mutant: str | None
    found: Exploration | None
    worlds: int
    seconds: float
    coverage: Coverage
    #: Where the same world gave two traces (uncontrolled nondeterminism), or None.
    nondeterminism: str | None = None
    #: For a finding: whether a fresh process reproduced it byte for byte (None: not checked,
    #: as for a world on a store of the caller's own, which no command line names).
    reproduced: bool | None = None
    #: Why the search stopped: "found", "worlds" or "seconds" (the budget), "exhausted" (no new
    #: plan to draw), "nondeterminism", "raised", or "interrupted" (its stop event was set).
    stopped: str = "worlds"
    #: The smallest plan under which the world raised instead of running to its end, and what it
    #: raised (None when no world raised).
    raised: tuple[FaultPlan, str] | None = None
    #: What the seconds are: "CPU" (this process's, the worlds run here), or the wall-clock time
    #: of worlds run on many processes or a cluster.
    where: str = "CPU"
    #: For a finding: why its shrinking was cut short ("seconds", "interrupted"), or None.
    shrinking_cut: str | None = None
    #: Whether the finding is the plan remembered from an earlier search, tried first.
    recalled: bool = False
    #: Where the finding was remembered (:mod:`._findings`), or None (not asked to remember).
    remembered: Path | None = None
    #: Why the finding could not be remembered (the folder cannot hold it), or None.
    unremembered: str | None = None
    #: The world the time budget stopped while it ran, and where (it is not counted), or None.
    cut_world: str | None = None
    #: The plan under which a world was blocked in real time (or stuck in one call), and what it
    #: was doing ("world N was blocked ..."), or None. Its worker was ended, and the search
    #: stopped there.
    blocked: tuple[FaultPlan, str] | None = None
    #: The scenario's inputs the search's worlds ran on when it stopped, as JSON text (a
    #: finding's carries its own); None for a scenario without, or its simplest.
    inputs: str | None = None

    @property
    def failed(self) -> bool:
        """Whether the search found something wrong, or could not search at all (the budget
        ran out before the clean world ended: nothing was searched, which is no clean result)."""
        found = self.found is not None or self.nondeterminism is not None
        stuck = self.raised is not None or self.blocked is not None
        return found or stuck or self.searched_nothing

    @property
    def searched_nothing(self) -> bool:
        return self.cut_world is not None and self.worlds == 0

    def lines(self) -> Iterator[str]:
        store = f" with mutant {self.mutant}" if self.mutant else ""
        head = f"explore {self.scenario}{store}, seed {self.seed}"
        budget = f"{plural(self.worlds, 'world')} in {self.seconds:.1f} s of {self.where}"
        if self.raised is not None:
            plan, error = self.raised
            yield f"{head}: the world raised under a plan instead of running to its end ({budget}):"
            yield f"  {error}"
            again = replay_command(
                self.scenario, self.seed, mutant=self.mutant, plan=repr(plan), inputs=self.inputs
            )
            yield f"  run it again: {again}"
            yield (
                "  a fault must never make a world raise: the world's code let it escape (a "
                "scenario's own calls, a check), or the simulator did"
            )
            yield from self._remembered_lines()
        if self.blocked is not None:
            yield from self._blocked_lines(head, budget, *self.blocked)
        if self.nondeterminism is not None:
            yield f"{head}: the world is not a function of its seed ({budget}):"
            yield f"  {self.nondeterminism}"
            yield f"  {NONDETERMINISM_HELP}"
        if self.found is not None:
            yield from self._found_lines(head, budget, self.found)
        elif self.searched_nothing:
            yield f"{head}: nothing was searched: the clean world did not end within the budget."
            yield f"  {self.cut_world}"
            yield (
                "  a world that needs more CPU needs a larger --budget; a loop that never awaits "
                "is the world's bug (docs/search.md, A world that never ends)"
            )
        elif self.nondeterminism is None and self.raised is None and self.blocked is None:
            yield (
                f"{head}: no check failed in {budget} ({_WHY.get(self.stopped, self.stopped)}). "
                "What was searched:"
            )
            if self.cut_world is not None:
                yield f"  {self.cut_world}; it is not counted"
            yield from self.coverage.lines()

    def _found_lines(self, head: str, budget: str, found: Exploration) -> Iterator[str]:
        smallest = "smallest failing plan found" if self.shrinking_cut else "smallest failing plan"
        yield (
            f"{head}: the {smallest} has {plural(len(found.plan), 'fault')}, and the checks "
            f"report {plural(found.simulation.report.violation_count, 'violation')} ({budget}):"
        )
        if found.inputs is not None:
            yield f"  on the inputs {found.inputs}"
        for finding in found.simulation.report.violations:
            yield f"  {finding.line()}"
        if self.shrinking_cut is not None:
            yield (
                f"shrinking it was cut short ({_WHY[self.shrinking_cut]}): a smaller plan may "
                "fail too."
            )
        if self.reproduced:
            yield "a fresh process reproduced it byte for byte."
        elif self.stopped == "interrupted" and self.nondeterminism is None:
            yield "it failed again in this process; it was not run in a fresh process."
        if self.recalled:
            yield "it is the plan an earlier search of this world found, tried first."
        yield from self._remembered_lines()

    def _blocked_lines(self, head: str, budget: str, plan: FaultPlan, words: str) -> Iterator[str]:
        yield (
            f"{head}: a world blocked its process, so it was ended and the search stopped there "
            f"({budget}):"
        )
        yield f"  {words}"
        planned = repr(plan) if plan else None  # the clean world's command names no plan
        again = replay_command(
            self.scenario, self.seed, mutant=self.mutant, plan=planned, inputs=self.inputs
        )
        yield f"  run it again: {again}"
        yield from self._remembered_lines()

    def _remembered_lines(self) -> Iterator[str]:
        if self.remembered is not None:
            yield (
                f"remembered in {self.remembered}: tried first when this world is explored again "
                "(python -m sims findings lists and clears what is remembered)"
            )
        if self.unremembered is not None:
            yield self.unremembered


def search(
    scenario: str | ScenarioRef = "random",
    *,
    seed: int = 1,
    mutant: str | None = None,
    max_worlds: int = DEFAULT_WORLDS,
    max_seconds: float | None = DEFAULT_SECONDS,
    max_faults: int = 4,
    fresh_process: bool = True,
    start: FaultPlan | None = None,
    clock: Callable[[], float] | None = None,
    jobs: int = 1,
    scheduler: str | None = None,
    stop: threading.Event | None = None,
    progress: Callable[[str], None] | None = None,
    findings: str | Path | None = None,
    inputs: Any = SIMPLEST,
) -> SearchReport:
    """Search fault plans aimed at ``scenario`` for one under which a check reports a violation,
    within ``max_worlds`` worlds and ``max_seconds`` (None: no time limit); shrink it and check
    that it reproduces. Given ``start``, a plan that already fails (a sweep seed's drawn plan,
    one written by hand), it searches nothing and shrinks that plan.

    The worlds run in ``jobs`` worker processes (one by default, where a world that blocks in
    real time can be ended), or on the Dask cluster whose scheduler is at ``scheduler``. The
    seconds (``clock``) are CPU time, this process's and its worker's, with one worker, and
    wall-clock time with more, or on a cluster. Deterministic for a world
    budget, whatever the number of workers: the stages run in a fixed order, Hypothesis's rounds
    have fixed seeds, and results are read in the order the plans were given (a time budget stops
    where the machine's speed says). Setting ``stop`` ends the search at once, with the report of
    what it searched; ``progress`` is told, in a line, each stage as it begins.

    Given ``findings``, a folder (the command line's is ``.sims/findings``, see
    :mod:`._findings`), the plan an earlier search of the same world found there is tried first,
    and the failing plan this one finds is kept there; None (the default, and ``explore
    --no-remember``) reads and writes nothing.

    ``inputs`` are the scenario's inputs the search's own stages run on (by default its simplest;
    with ``start``, the inputs that plan failed on); a scenario with an inputs strategy has others
    drawn too, alone and with Hypothesis's plans, and a finding shrinks both."""
    if mutant is not None and mutant not in MUTANTS:
        raise ValueError(f"no mutant {mutant!r}; the mutants are: {', '.join(MUTANTS)}")
    found = find_scenario(scenario)
    given = None if inputs is SIMPLEST else inputs_text(world_inputs(found, inputs))
    executor = _executor(jobs, scheduler)
    try:
        searching = _Search(
            scenario=scenario,
            shown=str(found.ref),
            seed=seed,
            mutant=mutant,
            max_worlds=max_worlds,
            max_seconds=max_seconds,
            fresh_process=fresh_process,
            clock=clock or executor.clock,
            executor=executor,
            stop=stop,
            progress=progress,
            findings=None if findings is None else Path(findings),
            inputs=given,
        )
        try:
            return searching.kept(_search(searching, start, max_faults))
        except Stopped:  # the budget stopped a world that is not a stage's (the clean world)
            return searching.report(stopped=searching.over_budget() or "seconds")
    finally:
        executor.close()


def _executor(jobs: int, scheduler: str | None) -> Executor:
    if type(jobs) is not int or jobs < 1:
        raise ValueError(f"jobs={jobs!r}; pass a whole number of processes >= 1")
    if scheduler is not None:
        if jobs != 1:
            raise ValueError(
                f"jobs={jobs} with scheduler={scheduler!r}; a cluster sets its own parallelism "
                "(its workers' threads), so pass one or the other"
            )
        return Cluster(scheduler)
    return Processes(jobs)


def _search(searching: _Search, start: FaultPlan | None, max_faults: int) -> SearchReport:
    """The stages, in order: the clean world twice, then (or the given plan, shrunk) single
    faults, guided pairs and Hypothesis, until one finds a failing plan or the budget ends."""
    searching.tell("the clean world, twice")
    # A world that is no function of its seed makes every verdict after it meaningless, so this
    # comes first.
    clean, differs = searching.clean_world()
    if differs is not None:
        return searching.report(nondeterminism=differs, stopped="nondeterminism")
    if clean.report.violations:
        return searching.checked(NO_FAULTS, clean)
    if start is not None:
        if not searching.violates(start):
            return searching.report(stopped="the given plan makes no check fail")
        return searching.shrunk(start)
    remembered = searching.remembered()
    if remembered is not None:
        trial: Trial = remembered.plan
        if remembered.inputs is not None:
            trial = Varied(remembered.inputs, remembered.plan)
        outcome = searching.first_failing([trial])
        if isinstance(outcome, FaultPlan):
            searching.recalled = True
            return searching.shrunk(outcome)
        if outcome is not None:
            return outcome
        searching.forget(remembered)
    shape = shape_of(clean)
    if searching.strategy is not None:
        # Inputs alone, before any fault: a bug of inputs only costs clean worlds to find.
        searching.tell("inputs Hypothesis draws, with no fault")
        outcome = searching.hypothesis(shape, 0)
        if isinstance(outcome, FaultPlan):
            return searching.shrunk(outcome)
        if outcome is not None:
            return outcome
        # The faults are aimed at the calls a clean world makes, and the simplest inputs make
        # the fewest (an order under the limit never sends its approval): the stages go on from
        # the inputs whose clean world made the most calls.
        if searching.richest is not None and searching.richest[1] != searching.inputs:
            searching.inputs = searching.richest[1]
            searching.tell(f"the faults are aimed at the world on the inputs {searching.inputs}")
            try:
                shape = shape_of(searching.run(NO_FAULTS, budgeted=True))
            except Stopped:
                return searching.report(stopped=searching.over_budget() or "seconds")
    # A world with versions of its jobs is there to test its deploys: those come first, with at
    # most a quarter of the budget.
    deploys = deploy_plans(shape, max(1, (searching.max_worlds - searching.worlds) // 4))
    singles = single_plans(
        shape, max(1, (searching.max_worlds - searching.worlds - len(deploys)) // 2)
    )
    # The coordinated faults at a service take at most a quarter of what is left after them.
    doubted = answer_in_doubt_then_down(
        shape, max(1, (searching.max_worlds - searching.worlds - len(singles)) // 4)
    )
    stages: list[tuple[str, Callable[[], _Outcome]]] = []
    if deploys:
        stages.append(
            (
                f"deploys of {', '.join(shape.versions)} at the job's windows "
                f"({len(deploys)} plans)",
                lambda: searching.first_failing(deploys),
            )
        )
    stages.append(
        (
            f"single faults ({len(singles)} plans)",
            lambda: searching.first_failing(singles, remember=True),
        )
    )
    # A start is a call: lost, late, sent again. A few plans per start, from what is left.
    starts = start_plans(
        shape, max(1, (searching.max_worlds - searching.worlds - len(singles)) // 4)
    )
    if starts:
        stages.append(
            (
                f"starts lost, late and repeated ({len(starts)} plans)",
                lambda: searching.first_failing(starts),
            )
        )
    if doubted:  # a world with services
        stages.append(
            (
                f"an answer in doubt, then its service down ({len(doubted)} plans)",
                lambda: searching.first_failing(doubted),
            )
        )
    # The services' own times and the job's retry schedule: a quarter of what is left then.
    timed = in_own_time(
        shape, max(1, (searching.max_worlds - searching.worlds - len(singles) - len(doubted)) // 4)
    )
    if timed:
        stages.append(
            (
                f"faults in the services' own time and the retry schedule ({len(timed)} plans)",
                lambda: searching.first_failing(timed),
            )
        )
    stages += [
        (
            "faults added one by one, each aimed at the world the faults before it made",
            lambda: searching.chained(shape, max_faults),
        ),
        (
            "the rarest single faults, in pairs",
            lambda: searching.first_failing(
                guided_pairs(singles, searching.coverage, searching.reached)
            ),
        ),
        ("plans Hypothesis draws", lambda: searching.hypothesis(shape, max_faults)),
    ]
    for name, stage in stages:
        searching.tell(name)
        outcome = stage()
        if isinstance(outcome, FaultPlan):
            return searching.shrunk(outcome)
        if outcome is not None:
            return outcome
    return searching.report(stopped=searching.over_budget() or "exhausted")


#: What a stage ends with: a plan under which the world failed (to shrink), the search's report
#: (its budget ran out, Hypothesis found the world flaky), or None (nothing failed: go on).
_Outcome: TypeAlias = FaultPlan | SearchReport | None


@attrs.define(kw_only=True)
class _Search:
    """One search's worlds, budget and findings so far: what every stage shares."""

    scenario: str | ScenarioRef
    shown: str
    seed: int
    mutant: str | None
    max_worlds: int
    max_seconds: float | None
    fresh_process: bool
    clock: Callable[[], float]
    executor: Executor = attrs.field(factory=InProcess)
    stop: threading.Event | None = None
    progress: Callable[[str], None] | None = None
    started: float = attrs.field(init=False)
    #: The scenario as a worker finds it: a reference that pickles (a worker that did not fork
    #: from this process loads the user's file from its absolute path).
    ref: ScenarioRef = attrs.field(init=False)
    worlds: int = 0
    coverage: Coverage = attrs.field(factory=Coverage)
    #: What each single fault's world reached: the feedback that picks the plans to combine.
    #: (Only stage 2's, the single faults': a long search keeps no record of every plan it ran.)
    reached: dict[FaultPlan, frozenset[str]] = attrs.field(factory=dict)
    #: What each world of the single faults and of the chains made its drives do: what the
    #: next fault is aimed at.
    made: dict[FaultPlan, CallsMade] = attrs.field(factory=dict)
    #: Every call some world made (:func:`merged`): what Hypothesis draws faults at.
    seen: CallsMade = attrs.field(factory=CallsMade)
    #: The plans under which the world raised, with what it raised.
    raised: dict[Trial, str] = attrs.field(factory=dict)
    #: The plans run so far, so that Hypothesis's are new ones.
    tried: Tried = attrs.field(factory=Tried)
    #: The folder of remembered findings (None: none read, none kept).
    findings: Path | None = None
    #: Whether the plan being shrunk is the one remembered from an earlier search.
    recalled: bool = False
    #: The world the time budget stopped while it ran, and where, or None.
    cut_world: str | None = None
    #: The plan under which a world was blocked in real time, and what it was doing, or None.
    blocked: tuple[FaultPlan, str] | None = None
    #: The scenario's inputs every world runs on unless its trial carries its own, as JSON text
    #: (None: its simplest). Those of a failing trial once it failed: its plan is shrunk on them.
    inputs: str | None = None
    #: The scenario's inputs strategy (None: a scenario whose inputs are fixed).
    strategy: st.SearchStrategy[Any] | None = attrs.field(init=False)
    #: Of the clean worlds on drawn inputs, the one whose drives made the most calls (the
    #: first of the most), as (calls, inputs): what the faults are aimed at after them.
    richest: tuple[int, str] | None = None
    #: The round of inputs alone (with no fault) Hypothesis drew, to shrink the inputs of a
    #: finding from, and whether the inputs of the finding were shrunk already.
    inputs_drawn: Drawn | None = None
    inputs_shrunk: bool = False

    def __attrs_post_init__(self) -> None:
        self.started = self.clock()
        found = find_scenario(self.scenario)
        self.ref = found.ref
        self.strategy = found.inputs

    # -- the budget --

    def out_of_time(self) -> str | None:
        """ "blocked" (a world was blocked in real time), "interrupted" (the stop event),
        "seconds" (the time budget), or None."""
        if self.blocked is not None:
            return "blocked"
        if self.stop is not None and self.stop.is_set():
            return "interrupted"
        left = self.seconds_left()
        if self.cut_world is not None or (left is not None and left <= 0):
            return "seconds"
        return None

    def seconds_left(self) -> float | None:
        """What is left of the time budget (None: there is none): each world is stopped there."""
        if self.max_seconds is None:
            return None
        return self.max_seconds - (self.clock() - self.started)

    def over_budget(self) -> str | None:
        stop = self.out_of_time()
        if stop is None and self.worlds >= self.max_worlds:
            return "worlds"
        return stop

    def check_time(self) -> None:
        """Raise :class:`Stopped` when the time is up: how Hypothesis's ``find`` is stopped."""
        if self.out_of_time() is not None:
            raise Stopped

    def tell(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    # -- running worlds --

    def job(self, trial: Trial, *, trace: bool = False) -> WorldJob:
        """The job of the world under ``trial``; with its ``trace``, the scenario spelled as this
        process spells it (that job goes to a forked worker only), so the traces compare."""
        scenario = self.scenario if trace else self.ref
        left = self.seconds_left()
        plan, inputs = (trial.plan, trial.inputs) if isinstance(trial, Varied) else (trial, None)
        return WorldJob(
            scenario,
            self.seed,
            self.mutant,
            plan,
            cpu_left_s=left,
            trace=trace,
            inputs=self.inputs if inputs is None else inputs,
        )

    def adopt(self, trial: Trial) -> FaultPlan:
        """``trial``'s plan, its inputs (if it has its own) made the search's from here on: a
        failing trial's plan is shrunk, checked and reported on the inputs it failed on."""
        if isinstance(trial, Varied):
            self.inputs = trial.inputs
            return trial.plan
        return trial

    def was_cut(self, plan: Trial, result: WorldResult) -> bool:
        """Whether the budget stopped ``result``'s world while it ran, or it was blocked in real
        time (either way the search stops)."""
        if result.blocked is not None:
            self.blocked = (self.adopt(plan), f"world {self.worlds + 1} {result.blocked}")
        if result.cut is not None:
            self.cut_world = result.cut
        return result.cut is not None or result.blocked is not None

    def commit(self, plan: Trial, result: WorldResult, *, remember: bool = False) -> None:
        """Count one world and what it reached, in the order its stage gave it."""
        self.worlds += 1
        if result.raised is not None:
            self.raised[plan] = result.raised
        if result.refused or result.raised is not None:
            return
        self.coverage.add(result.features, struck=Counter(dict(result.struck)))
        self.seen = merged(self.seen, result.made)
        if isinstance(plan, Varied) and not plan.plan and not result.failed:
            calls = sum(result.made.counts().values())
            if self.richest is None or calls > self.richest[0]:
                self.richest = (calls, plan.inputs)
        if remember and isinstance(plan, FaultPlan):
            self.reached[plan] = result.features
            self.made[plan] = result.made

    def ran(self, plans: Iterable[Trial]) -> Iterator[tuple[Trial, WorldResult]]:
        """Each of ``plans`` with its world's result, in order, while the time lasts: a world is
        started only in time, and one still running when the time runs out is not waited for."""
        # The executor answers in the order it was given the jobs: each answer is the oldest
        # trial given and not yet answered.
        given: deque[Trial] = deque()

        def jobs() -> Iterator[WorldJob]:
            for plan in plans:
                if self.out_of_time() is not None:
                    return
                self.tried.add(plan)
                given.append(plan)
                yield self.job(plan)

        results = self.executor.results(jobs())
        try:
            while self.out_of_time() is None:
                job, result = next(results, (None, None))
                if job is None or result is None:
                    return
                trial = given.popleft()
                if self.was_cut(trial, result):
                    return
                yield trial, result
        finally:
            results.close()  # what still runs is abandoned

    def first_failing(self, plans: Iterable[Trial], *, remember: bool = False) -> _Outcome:
        """The first of ``plans`` under which the world fails (on its own inputs, if it has
        them, adopted: :meth:`adopt`), the report of a spent budget, or None when none failed."""
        left = max(0, self.max_worlds - self.worlds)
        for plan, result in self.ran(itertools.islice(plans, left)):
            self.commit(plan, result, remember=remember)
            if result.failed:
                return self.adopt(plan)
        stop = self.over_budget()
        return self.report(stopped=stop) if stop is not None else None

    def first_index(self, batch: list[FaultPlan]) -> int | None:
        """The index of the first of ``batch`` under which the world fails (None: none did, or
        the time ran out): what the shrinker asks."""
        for index, (plan, result) in enumerate(self.ran(batch)):
            self.commit(plan, result)
            if result.failed:
                return index
        return None

    def one(self, plan: Trial, *, trace: bool = False) -> WorldResult:
        """The world under ``plan``, run by the executor on its own, or :class:`Stopped` when
        the budget stopped it or it was blocked in real time."""
        results = self.executor.results([self.job(plan, trace=trace)])
        try:
            _, result = next(results)
        finally:
            results.close()
        if self.was_cut(plan, result):
            raise Stopped
        return result

    def violates(self, plan: Trial) -> bool:
        """Whether the world fails under ``plan``: a check's violation, or the world raised."""
        result = self.one(plan)
        self.commit(plan, result)
        return result.failed

    def clean_world(self) -> tuple[Simulation, str | None]:
        """The clean world, run twice, and where the two runs differ (None: byte for byte).

        The first run is the executor's, where a clean world blocked in real time is ended; the
        second, in this process, is the simulation the search goes on from (with worlds run in
        this process, both are)."""
        if not isinstance(self.executor, Processes):  # nothing to gain from a worker run
            first = self.run(NO_FAULTS, budgeted=True).outcome.trace
            where = "run twice in one process"
        else:
            result = self.one(NO_FAULTS, trace=True)
            self.commit(NO_FAULTS, result)
            if result.trace is None:  # it raised there: here it raises too, as the world's error
                clean = self.run(NO_FAULTS, budgeted=True)
                return clean, (
                    f"the clean world raised in the search's worker process ({result.raised}), "
                    "and not in this one"
                )
            first = Trace.from_lines(result.trace.decode("utf-8").splitlines())
            where = "run in the search's worker process, then in this one"
        clean = self.run(NO_FAULTS, budgeted=True)
        differs = first_difference(first, clean.outcome.trace)
        return clean, None if differs is None else f"the clean world, {where}: {differs}"

    def run(self, plan: FaultPlan, *, budgeted: bool = False) -> Simulation:
        """The world under ``plan`` as a whole simulation, in this process: the clean world
        (``budgeted``: stopped where the time budget runs out, raising :class:`Stopped`), and a
        finding's (it ended in time once already, so it is not cut short on its second run)."""
        try:
            with (
                within_budget(self.seconds_left() if budgeted else None),
                measuring(self.scenario) as code,
            ):
                simulation = simulate(
                    self.scenario,
                    self.seed,
                    plan=plan,
                    mutant=self.mutant,
                    keep_trace=True,
                    inputs=given_inputs(self.inputs),
                )
        except (BudgetSpent, WorldError) as error:
            cut = budget_spent(error)
            if cut is not None:
                self.cut_world = str(cut)
                raise Stopped from None
            if isinstance(error.__cause__, PlanError):
                raise error.__cause__ from None  # a plan the world refuses: no world ran
            raise
        self.commit(
            plan,
            WorldResult(
                features=features_of(simulation) | code.features(),
                struck=tuple(struck_service_calls(simulation).items()),
            ),
        )
        return simulation

    # -- remembered findings --

    def remembered(self) -> Finding | None:
        """The plan an earlier search of this world found, told as the stage it begins."""
        if self.findings is None:
            return None
        found = recall(self.findings, self.shown, self.seed, self.mutant)
        if found is not None:
            self.tell(f"the plan an earlier search found ({found.path})")
        return found

    def forget(self, found: Finding) -> None:
        """Forget a remembered plan under which the world passes now."""
        try:
            forget(found)
        except OSError as error:
            self.tell(
                f"it passes now, but {found.path} could not be removed ({error.strerror}); "
                "python -m sims findings clear removes it"
            )
        else:
            self.tell("it passes now: forgotten")

    def kept(self, report: SearchReport) -> SearchReport:
        """``report``, its failing plan remembered (a finding that reproduced, or a plan that
        made the world raise; not a plan of no faults: the clean world is run first anyway)."""
        plan = None
        if report.found is not None and report.nondeterminism is None:
            plan = report.found.plan
        elif report.raised is not None:
            plan = report.raised[0]
        elif report.blocked is not None:
            plan = report.blocked[0]
        path, unremembered = None, None
        # Not the clean world, unless on inputs of its own: a bug of inputs alone.
        if self.findings is not None and plan is not None and (plan or self.inputs is not None):
            try:
                path = remember(
                    self.findings, self.shown, self.seed, self.mutant, plan, inputs=self.inputs
                )
            except OSError as error:  # the finding is still told; only the keeping is lost
                unremembered = not_remembered(self.findings, error)
        return attrs.evolve(
            report, recalled=self.recalled, remembered=path, unremembered=unremembered
        )

    # -- Hypothesis's stage, shrinking, checking --

    def chained(self, shape: WorldShape, max_faults: int) -> _Outcome:
        """Stage 4 and on: a fault added to the world the faults before it made, depth by depth
        (a second fault to each single fault's world, a third to each world of two that did
        something new, and so on up to ``max_faults``) while the budget lasts, each depth with
        half of what is left of it, worlds or seconds (:func:`next_faults`). A depth's worlds
        are the next one's: what each did that the world before its last fault did not is what
        the next fault is aimed at."""
        clean = shape.made()
        # The single faults whose world opened a new path of the user's code come first.
        firsts = new_code_first(self.made, self.reached, self.coverage.first)
        worlds = {plan: (clean, made) for plan, made in firsts.items() if len(plan) == 1}
        seen: set[tuple[object, ...]] = set()
        # A depth can list more plans than a search of seconds runs: the chains leave the stages
        # after them half of the time there is left now.
        left = self.seconds_left()
        until = None if left is None else self.clock() + left / 2
        for depth in range(2, max_faults + 1):
            plans = next_faults(shape, worlds, max(1, (self.max_worlds - self.worlds) // 2), seen)
            if not plans:
                return None
            self.tell(
                f"{_ORDINALS.get(depth, f'fault {depth}')}, aimed at the worlds of "
                f"{plural(depth - 1, 'fault')} ({plural(len(plans), 'plan')})"
            )
            outcome = self.first_failing(self.before(until, plans), remember=True)
            if outcome is not None:
                return outcome
            worlds = {
                plan: (self.made[FaultPlan(plan.faults[:-1])], self.made[plan])
                for plan in plans
                if plan in self.made and FaultPlan(plan.faults[:-1]) in self.made
            }
        return None

    def before(self, until: float | None, plans: list[FaultPlan]) -> Iterator[FaultPlan]:
        """``plans``, while the search's clock is before ``until`` (all of them for None)."""
        for plan in plans:
            if until is not None and self.clock() >= until:
                return
            yield plan

    def hypothesis(self, shape: WorldShape, max_faults: int) -> _Outcome:
        """Stage 6: the plans Hypothesis draws (with the scenario's inputs, if it has them), run
        by the executor; one that fails is shrunk by Hypothesis, here, from the round that drew
        it. With ``max_faults`` 0, the early stage of inputs alone, with no fault."""
        drawn = Drawn(
            # Every call some world made, not only the clean world's: a takeover's drive, a
            # retry's, a fallback's calls are drawn as soon as one world made them.
            shape=shape.widened(self.seen),
            max_faults=max_faults,
            most=max(0, self.max_worlds - self.worlds),
            tried=self.tried,
            check=self.check_time,
            inputs=self.strategy,
            inputs_only=max_faults == 0,
        )
        if max_faults == 0:
            self.inputs_drawn = drawn
        outcome = self.first_failing(drawn.trials())
        if not isinstance(outcome, FaultPlan):
            return outcome
        failing: Trial = outcome
        if self.strategy is not None:
            assert self.inputs is not None  # adopted from the failing trial
            failing = Varied(self.inputs, outcome)
            self.tell(
                f"Hypothesis shrinks failing inputs and a plan of {plural(len(outcome), 'fault')}"
            )
        else:
            self.tell(f"Hypothesis shrinks a failing plan of {plural(len(outcome), 'fault')}")

        def fails(plan: Trial) -> bool:
            if self.over_budget() is not None:
                raise Stopped
            return self.violates(plan)

        try:
            shrunk = drawn.shrink_trial(failing, fails)
            self.inputs_shrunk = isinstance(shrunk, Varied)
            return self.adopt(shrunk)
        except Flaky as error:
            return self.report(
                nondeterminism=(
                    "a plan that failed once passed when Hypothesis ran it again in this process "
                    f"({type(error).__name__})"
                ),
                stopped="nondeterminism",
            )

    def shrunk(self, plan: FaultPlan) -> SearchReport:
        self.tell(f"shrinking a failing plan of {plural(len(plan), 'fault')}")
        smallest, _ = shrink_in_batches(plan, self.first_index, max_worlds=_SHRINK_WORLDS)
        self.shrink_inputs(smallest)
        # Every plan the shrinker kept was run, and a world that raised was noted.
        if smallest in self.raised:
            return self.report(raised=(smallest, self.raised[smallest]), stopped="raised")
        return self.checked(smallest, self.run(smallest), cut=self.out_of_time())

    def shrink_inputs(self, plan: FaultPlan) -> None:
        """The inputs ``plan`` fails on, shrunk by Hypothesis with the plan kept, when they are
        drawn inputs not shrunk yet (the plan's faults were aimed at the world on them): the
        round of inputs alone that drew them is drawn again, and shrunk from them."""
        if self.inputs_drawn is None or self.inputs is None or self.inputs_shrunk:
            return
        self.tell(f"Hypothesis shrinks the inputs {self.inputs}, the plan kept")

        def fails(trial: Trial) -> bool:
            if self.over_budget() is not None:
                raise Stopped
            assert isinstance(trial, Varied)
            return self.violates(Varied(trial.inputs, plan))

        try:
            shrunk = self.inputs_drawn.shrink_trial(Varied(self.inputs, NO_FAULTS), fails)
        except Flaky:
            return  # the inputs it failed on are kept: the finding is held to reproducing
        self.inputs_shrunk = True
        self.adopt(shrunk)

    def checked(
        self, plan: FaultPlan, simulation: Simulation, *, cut: str | None = None
    ) -> SearchReport:
        """A finding, held to reproducing: here, and in a fresh process when a command names it
        (not after Ctrl-C, which asked for the answer now)."""
        found = Exploration(
            self.shown, self.seed, self.mutant, plan, simulation, inputs=simulation.inputs
        )
        again = self.run(found.plan)
        differs = first_difference(found.simulation.outcome.trace, again.outcome.trace)
        if differs is not None:
            return self.report(
                found=found,
                nondeterminism=f"the failing plan, run twice in one process: {differs}",
                stopped="nondeterminism",
            )
        reproduced: bool | None = None
        if self.fresh_process and "database=" not in found.command() and not self._interrupted():
            self.tell("running the smallest failing plan again in a fresh process")
            differs = _fresh_difference(found)
            if self._interrupted():  # Ctrl-C reached the fresh process too
                return self.report(found=found, stopped="interrupted", shrinking_cut=cut)
            if differs is not None:
                return self.report(
                    found=found,
                    nondeterminism=(
                        f"the failing plan, run again in a fresh process, gave another trace "
                        f"(state kept from earlier worlds in this process?): {differs}"
                    ),
                    reproduced=False,
                    stopped="nondeterminism",
                )
            reproduced = True
        stopped = "interrupted" if self._interrupted() else "found"
        return self.report(found=found, reproduced=reproduced, stopped=stopped, shrinking_cut=cut)

    def _interrupted(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def report(self, **fields: Any) -> SearchReport:
        return SearchReport(
            scenario=self.shown,
            seed=self.seed,
            mutant=self.mutant,
            worlds=self.worlds,
            seconds=self.clock() - self.started,
            coverage=self.coverage,
            where=self.executor.where,
            cut_world=self.cut_world,
            blocked=self.blocked,
            inputs=self.inputs,
            **{"found": None, **fields},
        )


def _fresh_difference(found: Exploration) -> str | None:
    """Run the printed command's world in a new interpreter and compare its trace with ours."""
    ours = found.simulation.outcome.trace
    # The scenario as this process's trace spells it (a world file by the path it was given), so
    # the two traces can be the same byte for byte.
    begin = next(ours.of("world.begin"), {})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fresh.jsonl"
        command = [
            sys.executable,
            "-m",
            "sims",
            "run",
            str(begin.get("scenario") or found.scenario),
            "--seed",
            str(found.seed),
            "--plan",
            repr(found.plan),
            "--trace",
            str(path),
            *(["--mutant", found.mutant] if found.mutant else []),
            *(["--inputs", found.inputs] if found.inputs is not None else []),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if not path.exists():
            return (
                f"the fresh process wrote no trace (exit {done.returncode}): {done.stderr[-300:]}"
            )
        fresh = Trace.read(path)
    return first_difference(ours, fresh)


def explore_plans(
    scenario: str | ScenarioRef = "random",
    *,
    seed: int = 1,
    mutant: str | None = None,
    max_examples: int = DEFAULT_WORLDS,
    max_faults: int = 4,
) -> Exploration | None:
    """The smallest failing plan :func:`search` finds within ``max_examples`` worlds (no time
    limit, so the answer does not depend on the machine's speed), or None."""
    return search(
        scenario,
        seed=seed,
        mutant=mutant,
        max_worlds=max_examples,
        max_seconds=None,
        max_faults=max_faults,
        fresh_process=False,
    ).found
