"""Searching fault plans for one that makes a check fail, guided, budgeted, and told honestly.

The world's seed stays fixed; the plan is what varies. The search learns the world's shape from a
clean run (its cadence, leases and calls, :mod:`._shape`), then looks in stages, simplest causes
first, because a shrinker improves a plan locally and cannot always get from three faults to a
different single one:

1. every single fault that strikes at an event of the world, tried in turn: each call of each drive
   held until another drive takes over, steps, writes, commits or ticks; a crash and an eviction
   right after each call. These reach the spec's at-least-once windows whatever the timings;
2. guided by what those worlds reached: the single faults whose worlds entered the rarest
   windows, probes and marks (the feedback), combined in pairs;
3. Hypothesis, drawing plans of one fault, then of several (:mod:`._aimed`), with delays and crash
   times in the world's own terms. (Hypothesis's own ``target`` phase is not used: on these
   strategies it spent minutes of its own time per few hundred worlds, which no budget could
   bound.)

A failing plan is shrunk, run again in this process and, for a world a command line can name, in a
fresh process, and reported only if it reproduces. A clean result says what was covered: worlds,
windows entered, faults fired, probes and the user's ``sometimes`` marks, and marks never reached.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky, NoSuchExample

from .._numbers import plural
from .._trace import Trace
from ..faults._check import PlanError
from ..faults._plan import (
    NO_FAULTS,
    UNTIL_EVENTS,
    CrashAfter,
    EvictAfter,
    FaultPlan,
    HoldLeg,
)
from ..mutants._catalog import MUTANTS
from ..runners._outcome import Simulation, replay_command
from ..runners._rerun import NONDETERMINISM_HELP, first_difference
from ..runners._simulate import WorldError, simulate
from ..scenarios._registry import ScenarioRef, find_scenario
from ._aimed import aimed_plans, fault_plans
from ._coverage import Coverage, features_of
from ._shape import WorldShape, shape_of, world_shape
from ._shrink import shrink_plan

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

#: How many of the single faults that reached the rarest windows are combined in pairs.
_COMBINED = 10

#: The most worlds Hypothesis's stage of one-fault plans runs.
_ONE_FAULT_WORLDS = 200


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

    def command(self) -> str:
        """The command that runs the shrunk failure again."""
        return replay_command(self.scenario, self.seed, mutant=self.mutant, plan=repr(self.plan))

    def code(self) -> str:
        """The shrunk failure as code: paste it into a test."""
        mutant = f", mutant={self.mutant!r}" if self.mutant else ""
        names = sorted({type(fault).__name__ for fault in self.plan.faults})
        return (
            f"from sims import {', '.join([*names, 'FaultPlan', 'simulate'])}\n\n"
            f"simulation = simulate(\n    {self.scenario!r},\n    {self.seed},\n"
            f"    plan={self.plan!r}{mutant},\n)\n"
            "assert simulation.report.ok, simulation.report.violations"
        )


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
    #: plan to draw), "nondeterminism", or "raised".
    stopped: str = "worlds"
    #: The smallest plan under which the world raised instead of running to its end, and what it
    #: raised (None when no world raised).
    raised: tuple[FaultPlan, str] | None = None

    @property
    def failed(self) -> bool:
        return self.found is not None or self.nondeterminism is not None or self.raised is not None

    def lines(self) -> Iterator[str]:
        store = f" with mutant {self.mutant}" if self.mutant else ""
        head = f"explore {self.scenario}{store}, seed {self.seed}"
        budget = f"{plural(self.worlds, 'world')} in {self.seconds:.1f} s of CPU"
        if self.raised is not None:
            plan, error = self.raised
            yield f"{head}: the world raised under a plan instead of running to its end ({budget}):"
            yield f"  {error}"
            again = replay_command(self.scenario, self.seed, mutant=self.mutant, plan=repr(plan))
            yield f"  run it again: {again}"
            yield (
                "  a fault must never make a world raise: the world's code let it escape (a "
                "scenario's own calls, a check), or the simulator did"
            )
        if self.nondeterminism is not None:
            yield f"{head}: the world is not a function of its seed ({budget}):"
            yield f"  {self.nondeterminism}"
            yield f"  {NONDETERMINISM_HELP}"
        if self.found is not None:
            found = self.found
            yield (
                f"{head}: the smallest failing plan has {plural(len(found.plan), 'fault')}, "
                f"and the checks report "
                f"{plural(found.simulation.report.violation_count, 'violation')} ({budget}):"
            )
            for finding in found.simulation.report.violations:
                yield f"  {finding.line()}"
            if self.reproduced:
                yield "a fresh process reproduced it byte for byte."
        elif self.nondeterminism is None and self.raised is None:
            why = {
                "seconds": "the time budget ran out",
                "worlds": "the world budget ran out",
                "exhausted": "Hypothesis drew no new plan within the budget",
            }
            yield (
                f"{head}: no check failed in {budget} ({why.get(self.stopped, self.stopped)}). "
                "What was searched:"
            )
            yield from self.coverage.lines()


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
    clock: Callable[[], float] = time.process_time,
) -> SearchReport:
    """Search fault plans aimed at ``scenario`` for one under which a check reports a violation,
    within ``max_worlds`` worlds and ``max_seconds`` of CPU time (None: no time limit); shrink it
    and check that it reproduces. Given ``start``, a plan that already fails (a sweep seed's drawn
    plan, one written by hand), it searches nothing and shrinks that plan. Deterministic for a
    world budget: Hypothesis is derandomized and the stages run in a fixed order (a time budget
    stops where the machine's speed says)."""
    if mutant is not None and mutant not in MUTANTS:
        raise ValueError(f"no mutant {mutant!r}; the mutants are: {', '.join(MUTANTS)}")
    shown = str(find_scenario(scenario).ref)
    started = clock()
    coverage = Coverage()
    worlds = 0

    #: What each plan's world reached: the feedback that picks the plans to combine.
    reached: dict[FaultPlan, frozenset[str]] = {}

    def over_budget() -> str | None:
        if worlds >= max_worlds:
            return "worlds"
        if max_seconds is not None and clock() - started >= max_seconds:
            return "seconds"
        return None

    def run(plan: FaultPlan) -> Simulation:
        nonlocal worlds
        worlds += 1
        try:
            simulation = simulate(scenario, seed, plan=plan, mutant=mutant, keep_trace=True)
        except WorldError as error:
            if isinstance(error.__cause__, PlanError):
                raise error.__cause__ from None  # a plan the world refuses: no world ran
            raise
        features = features_of(simulation)
        coverage.add(features)
        reached[plan] = features
        return simulation

    def report(**fields: object) -> SearchReport:
        return SearchReport(
            scenario=shown,
            seed=seed,
            mutant=mutant,
            worlds=worlds,
            seconds=clock() - started,
            coverage=coverage,
            **fields,  # type: ignore[arg-type]
        )

    # The clean world twice: a world that is no function of its seed makes every verdict after
    # it meaningless, so this comes first.
    clean = run(NO_FAULTS)
    again = run(NO_FAULTS)
    differs = first_difference(clean.outcome.trace, again.outcome.trace)
    if differs is not None:
        return report(
            found=None,
            nondeterminism=f"the clean world, run twice in one process: {differs}",
            stopped="nondeterminism",
        )
    if clean.report.violations:
        found = Exploration(shown, seed, mutant, NO_FAULTS, clean)
        return _checked(found, report, run, fresh_process)
    shape = shape_of(clean)
    #: The plans under which the world raised, with what it raised.
    raised: dict[FaultPlan, str] = {}

    def violates(plan: FaultPlan) -> bool:
        try:
            simulation = run(plan)
        except PlanError:
            return False
        except WorldError as error:
            raised[plan] = str(error)
            return True
        return bool(simulation.report.violations)

    def shrunk(plan: FaultPlan) -> SearchReport:
        smallest, _ = shrink_plan(plan, violates, max_worlds=150)
        # Every plan the shrinker kept was run by ``violates``, which noted a world that raised.
        if smallest in raised:
            return report(found=None, raised=(smallest, raised[smallest]), stopped="raised")
        found = Exploration(shown, seed, mutant, smallest, run(smallest))
        return _checked(found, report, run, fresh_process)

    if start is not None:
        if not violates(start):
            return report(found=None, stopped="the given plan makes no check fail")
        return shrunk(start)

    # Stage 1: every single event fault, in a fixed order; in a world of many calls, an even
    # spread of them over at most half the budget, so Hypothesis gets the other half.
    singles = list(_single_event_plans(shape))
    share = max(1, (max_worlds - worlds) // 2)
    if len(singles) > share:
        singles = [singles[i * len(singles) // share] for i in range(share)]
    for plan in singles:
        stop = over_budget()
        if stop is not None:
            return report(found=None, stopped=stop)
        if violates(plan):
            return shrunk(plan)

    # Stage 2, guided by what the worlds reached: the single faults whose worlds entered the
    # rarest windows, probes and marks, combined in pairs (a takeover held open while another
    # pass crashes after its effect: the windows compose).
    rarest = sorted(
        (plan for plan in singles if plan in reached),
        key=lambda plan: -coverage.rarity(reached[plan]),
    )[:_COMBINED]
    for i, first in enumerate(rarest):
        for second in rarest[i + 1 :]:
            stop = over_budget()
            if stop is not None:
                return report(found=None, stopped=stop)
            plan = FaultPlan((*first.faults, *second.faults))
            if violates(plan):
                return shrunk(plan)

    # Stage 3: Hypothesis, one fault then several.
    # One-fault plans are few: past a couple of hundred, Hypothesis mostly draws plans it has run
    # already, and spends its time on that; the larger plans get the rest of the budget.
    stages = (
        (aimed_plans(shape, max_faults=1), _ONE_FAULT_WORLDS),
        (aimed_plans(shape, max_faults=max_faults), None),
    )
    for strategy, most in stages:

        def guided(plan: FaultPlan) -> bool:
            if over_budget() is not None:
                return False  # the budget is spent: let Hypothesis run out cheaply
            try:
                simulation = run(plan)
            except PlanError:
                return False
            except WorldError as error:
                raised[plan] = str(error)
                return True
            return bool(simulation.report.violations)

        stop = over_budget()
        if stop is not None:
            return report(found=None, stopped=stop)
        try:
            plan = find(
                strategy,
                guided,
                settings=settings(
                    max_examples=max(1, min(max_worlds - worlds, most or max_worlds)),
                    derandomize=True,
                    database=None,
                    deadline=None,
                    phases=(Phase.generate, Phase.shrink),
                    suppress_health_check=list(HealthCheck),
                ),
            )
        except NoSuchExample:
            continue
        except Flaky as error:
            return report(
                found=None,
                nondeterminism=(
                    "a plan that failed once passed when Hypothesis ran it again in this process "
                    f"({type(error).__name__})"
                ),
                stopped="nondeterminism",
            )
        return shrunk(plan)
    return report(found=None, stopped=over_budget() or "exhausted")


def _single_event_plans(shape: WorldShape) -> Iterator[FaultPlan]:
    """One event fault at a time, over every call the clean world made: replies held first (the
    at-least-once window of a step body), then crashes and evictions after a call."""
    calls = [(d, op, n) for d, op, count in shape.calls for n in range(1, count + 1)]
    if len(shape.drives) > 1:
        for until in ("effect", "commit", "takeover", "step", "tick"):
            assert until in UNTIL_EVENTS
            for drive, op, nth in calls:
                yield FaultPlan(
                    (
                        HoldLeg(
                            drive=drive,
                            operation=op,
                            nth=nth,
                            leg="reply",
                            until=until,
                            max_ms=shape.lease_ms * 10.0,
                        ),
                    )
                )
    for drive, op, nth in calls:
        yield FaultPlan((CrashAfter(drive=drive, operation=op, nth=nth),))
    for drive, op, nth in calls:
        yield FaultPlan((EvictAfter(drive=drive, operation=op, nth=nth),))


def _checked(
    found: Exploration,
    report: Callable[..., SearchReport],
    run: Callable[[FaultPlan], Simulation],
    fresh_process: bool,
) -> SearchReport:
    """A finding, held to reproducing: here, and in a fresh process when a command names it."""
    again = run(found.plan)
    differs = first_difference(found.simulation.outcome.trace, again.outcome.trace)
    if differs is not None:
        return report(
            found=found,
            nondeterminism=f"the failing plan, run twice in one process: {differs}",
            stopped="nondeterminism",
        )
    reproduced: bool | None = None
    if fresh_process and "database=" not in found.command():
        differs = _fresh_difference(found)
        if differs is not None:
            return report(
                found=found,
                nondeterminism=(
                    f"the failing plan, run again in a fresh process, gave another trace "
                    f"(state kept from earlier worlds in this process?): {differs}"
                ),
                reproduced=False,
                stopped="nondeterminism",
            )
        reproduced = True
    return report(found=found, reproduced=reproduced, stopped="found")


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
