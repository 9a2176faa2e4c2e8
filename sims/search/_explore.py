"""Searching fault plans for one that makes a check fail, guided, budgeted, and told honestly.

The world's seed stays fixed; the plan is what varies. The search learns the world's shape from a
clean run (its cadence, leases, calls and service calls, :mod:`._shape`), then looks in stages,
simplest causes first, because a shrinker improves a plan locally and cannot always get from three
faults to a different single one:

1. every single fault that strikes at an event of the world, tried in turn. The job's outside
   world first: each service call's reply lost after it ran, held past the caller's own timeout,
   its request delivered after the caller gave up, its reply held until another drive's effect,
   a crash right after it ran; each service down over windows of its calls. Then each scope call
   of each drive held until another drive takes over, steps, writes, commits or ticks; a crash
   and an eviction right after each call. These reach the spec's at-least-once windows, and a
   caller's timeout taken for a failure, whatever the timings;
2. guided by what those worlds reached: the single faults whose worlds entered the rarest
   windows, probes and marks (the feedback), combined in pairs, service faults among them;
3. Hypothesis, drawing plans of one fault, then of several (:mod:`._aimed`), with delays, crash
   times and outages in the world's own terms. (Hypothesis's own ``target`` phase is not used: on
   these strategies it spent minutes of its own time per few hundred worlds, which no budget
   could bound.)

A failing plan is shrunk, run again in this process and, for a world a command line can name, in a
fresh process, and reported only if it reproduces. A clean result says what was covered: worlds,
windows entered, faults fired, service calls struck, probes and the user's ``sometimes`` marks,
and marks never reached.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeAlias

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
    DelayLeg,
    DropLeg,
    EvictAfter,
    FaultPlan,
    HoldLeg,
    LateRequest,
    ServiceOutage,
)
from ..mutants._catalog import MUTANTS
from ..runners._outcome import Simulation, replay_command
from ..runners._rerun import NONDETERMINISM_HELP, first_difference
from ..runners._simulate import WorldError, simulate
from ..scenarios._registry import ScenarioRef, find_scenario
from ._aimed import aimed_plans, fault_plans
from ._coverage import Coverage, features_of, struck_service_calls
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
#: Of those, in a world with services, how many are service faults (the rest strike the scope).
_COMBINED_SERVICE = 4

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
    searching = _Search(
        scenario=scenario,
        shown=str(find_scenario(scenario).ref),
        seed=seed,
        mutant=mutant,
        max_worlds=max_worlds,
        max_seconds=max_seconds,
        fresh_process=fresh_process,
        clock=clock,
    )
    # The clean world twice: a world that is no function of its seed makes every verdict after
    # it meaningless, so this comes first.
    clean = searching.run(NO_FAULTS)
    differs = first_difference(clean.outcome.trace, searching.run(NO_FAULTS).outcome.trace)
    if differs is not None:
        return searching.report(
            nondeterminism=f"the clean world, run twice in one process: {differs}",
            stopped="nondeterminism",
        )
    if clean.report.violations:
        return searching.checked(NO_FAULTS, clean)
    if start is not None:
        if not searching.violates(start):
            return searching.report(stopped="the given plan makes no check fail")
        return searching.shrunk(start)
    shape = shape_of(clean)
    singles = _single_plans(shape, max(1, (max_worlds - searching.worlds) // 2))
    stages: tuple[Callable[[], _Outcome], ...] = (
        # 1: every single fault at an event, the job's outside world first.
        lambda: searching.first_failing(singles),
        # 2: the singles whose worlds reached the rarest windows, in pairs.
        lambda: searching.first_failing(_guided_pairs(searching, singles)),
        # 3: Hypothesis, one fault, then several.
        lambda: _hypothesis(searching, shape, max_faults),
    )
    for stage in stages:
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
    started: float = attrs.field(init=False)
    worlds: int = 0
    coverage: Coverage = attrs.field(factory=Coverage)
    #: What each plan's world reached: the feedback that picks the plans to combine.
    reached: dict[FaultPlan, frozenset[str]] = attrs.field(factory=dict)
    #: The plans under which the world raised, with what it raised.
    raised: dict[FaultPlan, str] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        self.started = self.clock()

    def over_budget(self) -> str | None:
        if self.worlds >= self.max_worlds:
            return "worlds"
        if self.max_seconds is not None and self.clock() - self.started >= self.max_seconds:
            return "seconds"
        return None

    def run(self, plan: FaultPlan) -> Simulation:
        self.worlds += 1
        try:
            simulation = simulate(
                self.scenario, self.seed, plan=plan, mutant=self.mutant, keep_trace=True
            )
        except WorldError as error:
            if isinstance(error.__cause__, PlanError):
                raise error.__cause__ from None  # a plan the world refuses: no world ran
            raise
        features = features_of(simulation)
        self.coverage.add(features, struck=struck_service_calls(simulation))
        self.reached[plan] = features
        return simulation

    def violates(self, plan: FaultPlan) -> bool:
        """Whether the world fails under ``plan``: a check's violation, or the world raised."""
        try:
            simulation = self.run(plan)
        except PlanError:
            return False
        except WorldError as error:
            self.raised[plan] = str(error)
            return True
        return bool(simulation.report.violations)

    def first_failing(self, plans: Iterable[FaultPlan]) -> _Outcome:
        """The first of ``plans`` under which the world fails, the report of a spent budget,
        or None when none failed."""
        for plan in plans:
            stop = self.over_budget()
            if stop is not None:
                return self.report(stopped=stop)
            if self.violates(plan):
                return plan
        return None

    def report(self, **fields: Any) -> SearchReport:
        return SearchReport(
            scenario=self.shown,
            seed=self.seed,
            mutant=self.mutant,
            worlds=self.worlds,
            seconds=self.clock() - self.started,
            coverage=self.coverage,
            **{"found": None, **fields},
        )

    def shrunk(self, plan: FaultPlan) -> SearchReport:
        smallest, _ = shrink_plan(plan, self.violates, max_worlds=150)
        # Every plan the shrinker kept was run by ``violates``, which noted a world that raised.
        if smallest in self.raised:
            return self.report(raised=(smallest, self.raised[smallest]), stopped="raised")
        return self.checked(smallest, self.run(smallest))

    def checked(self, plan: FaultPlan, simulation: Simulation) -> SearchReport:
        found = Exploration(self.shown, self.seed, self.mutant, plan, simulation)
        return _checked(found, self.report, self.run, self.fresh_process)


def _spread(plans: list[FaultPlan], share: int) -> list[FaultPlan]:
    """At most ``share`` of ``plans``, spread evenly over them."""
    if len(plans) <= share:
        return plans
    return [plans[i * len(plans) // share] for i in range(share)]


def _guided_pairs(searching: _Search, singles: list[FaultPlan]) -> Iterator[FaultPlan]:
    """Stage 2, guided by what the worlds reached: the single faults whose worlds entered the
    rarest windows, probes and marks, combined in pairs (a takeover held open while another
    pass crashes after its effect: the windows compose). A world with services pairs the rarest
    of its service calls' faults and of its outages too, so a lost reply meets a takeover and an
    outage a crash."""
    coverage, reached = searching.coverage, searching.reached

    def rarest(plans: list[FaultPlan], most: int) -> list[FaultPlan]:
        ran = [plan for plan in plans if plan in reached]
        return sorted(ran, key=lambda plan: -coverage.rarity(reached[plan]))[:most]

    outages = [plan for plan in singles if plan.of(ServiceOutage)]
    calls = [plan for plan in singles if _strikes_a_service(plan) and plan not in outages]
    inside = [plan for plan in singles if not _strikes_a_service(plan)]
    if calls or outages:
        # One outage among the service faults: a service down meets a takeover or a crash.
        down = rarest(outages, 1)
        pool = [
            *rarest(inside, _COMBINED - _COMBINED_SERVICE),
            *rarest(calls, _COMBINED_SERVICE - len(down)),
            *down,
        ]
    else:
        pool = rarest(inside, _COMBINED)
    for i, first in enumerate(pool):
        for second in pool[i + 1 :]:
            yield FaultPlan((*first.faults, *second.faults))


def _strikes_a_service(plan: FaultPlan) -> bool:
    return any(
        isinstance(fault, ServiceOutage) or "." in str(getattr(fault, "operation", ""))
        for fault in plan.faults
    )


def _hypothesis(searching: _Search, shape: WorldShape, max_faults: int) -> _Outcome:
    """Stage 3: Hypothesis, one fault then several. One-fault plans are few: past a couple of
    hundred, Hypothesis mostly draws plans it has run already, and spends its time on that; the
    larger plans get the rest of the budget."""
    stages = (
        (aimed_plans(shape, max_faults=1), _ONE_FAULT_WORLDS),
        (aimed_plans(shape, max_faults=max_faults), None),
    )

    def guided(plan: FaultPlan) -> bool:
        if searching.over_budget() is not None:
            return False  # the budget is spent: let Hypothesis run out cheaply
        return searching.violates(plan)

    for strategy, most in stages:
        stop = searching.over_budget()
        if stop is not None:
            return searching.report(stopped=stop)
        left = searching.max_worlds - searching.worlds
        try:
            return find(
                strategy,
                guided,
                settings=settings(
                    max_examples=max(1, min(left, most or searching.max_worlds)),
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
            return searching.report(
                nondeterminism=(
                    "a plan that failed once passed when Hypothesis ran it again in this process "
                    f"({type(error).__name__})"
                ),
                stopped="nondeterminism",
            )
    return None


def _single_plans(shape: WorldShape, share: int) -> list[FaultPlan]:
    """Stage 1: one fault at a time, in a fixed order, at most ``share`` of them (in a world of
    many calls, spread evenly over them, so Hypothesis gets the other half of the budget). The
    job's outside world first, and whole when it fits (few calls, and the effects a job exists
    for are there): each service call's faults, then each service's outages; then every scope
    call's event faults."""
    outside = _spread([*_service_call_plans(shape), *_outage_plans(shape)], share)
    return outside + _spread(list(_single_event_plans(shape)), share - len(outside))


def _service_call_plans(shape: WorldShape) -> Iterator[FaultPlan]:
    """For every service call of the clean world: its reply lost after it ran, held past the
    caller's own timeout, its request delivered after the caller gave up and moved on, its reply
    held until another drive's effect, and a crash right after it ran. (Never an eviction: a
    service call runs in no scope.)"""
    for call in shape.service_calls:
        drive, op, nth = call.drive, call.operation, call.nth
        yield FaultPlan((DropLeg(drive=drive, operation=op, nth=nth, leg="reply"),))
        late = shape.past_timeout_ms(call)
        yield FaultPlan((DelayLeg(drive=drive, operation=op, nth=nth, leg="reply", ms=late),))
        gone = shape.moved_on_ms(call)
        yield FaultPlan((LateRequest(drive=drive, operation=op, nth=nth, ms=gone),))
        if len(shape.drives) > 1:
            held = HoldLeg(
                drive=drive,
                operation=op,
                nth=nth,
                leg="reply",
                until="effect",
                max_ms=shape.lease_ms * 10.0,
            )
            yield FaultPlan((held,))
        yield FaultPlan((CrashAfter(drive=drive, operation=op, nth=nth),))


def _outage_plans(shape: WorldShape) -> Iterator[FaultPlan]:
    """Each service down over each of its windows (:meth:`WorldShape.outage_windows`)."""
    for service in shape.services:
        for begin, end in shape.outage_windows(service.name):
            yield FaultPlan((ServiceOutage(service=service.name, from_ms=begin, to_ms=end),))


def _single_event_plans(shape: WorldShape) -> Iterator[FaultPlan]:
    """One event fault at a time, over every scope call the clean world made: replies held first
    (the at-least-once window of a step body), then crashes and evictions after a call."""
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
