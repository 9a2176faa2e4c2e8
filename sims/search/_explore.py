"""Exploring fault plans with Hypothesis, and shrinking a violation to its smallest cause.

Hypothesis draws whole fault plans (the world's seed stays fixed, so the plan is the only thing
that varies); when a plan makes a check report a violation, Hypothesis shrinks it — fewer faults,
earlier kinds, smaller numbers — to the smallest plan that still does, and that plan prints as a
command and as code that replay it.

Strategies list the leg faults first because they shrink towards the first alternative: a
violation that one late or dropped leg can cause is reported as that one leg.
"""

from __future__ import annotations

import attrs
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from driver import JOB_LEASE_ENTRY_MARGIN

from ..faults._plan import (
    NO_FAULTS,
    OPERATIONS,
    PAUSE_POINTS,
    UPSTREAM_KINDS,
    CrashDrive,
    DelayLeg,
    DropLeg,
    Evict,
    Fault,
    FaultPlan,
    LateRequest,
    PauseDrive,
    StoreClockFault,
    UpstreamFailure,
    boundary_delays,
)
from ..mutants._catalog import MUTANTS
from ..runners._outcome import Simulation, replay_command
from ..runners._simulate import simulate
from ..scenarios._registry import ScenarioRef, find_scenario


def fault_plans(
    *,
    drives: tuple[str, ...] = ("cron", "alarm"),
    scopes: tuple[str, ...] = ("scope-1", "scope-2"),
    lease_ms: int = 1_000,
    max_faults: int = 4,
    legs_only: bool = False,
) -> st.SearchStrategy[FaultPlan]:
    """Fault plans over a world's drives and scopes, with delays at the spec's boundaries;
    ``legs_only`` draws only late and dropped legs."""
    delays = st.sampled_from(boundary_delays(lease_ms, lease_ms * JOB_LEASE_ENTRY_MARGIN))
    drive = st.sampled_from(drives)
    legs = st.sampled_from(("request", "reply"))
    operation = st.sampled_from(OPERATIONS)
    nth = st.integers(1, 4)
    when = st.integers(0, 30).map(lambda s: s * 1_000.0)
    leg_fault: st.SearchStrategy[Fault] = st.one_of(
        st.builds(DelayLeg, drive=drive, operation=operation, nth=nth, leg=legs, ms=delays),
        st.builds(DropLeg, drive=drive, operation=operation, nth=nth, leg=legs),
    )
    if legs_only:
        return st.lists(leg_fault, max_size=max_faults).map(lambda faults: FaultPlan(tuple(faults)))
    fault: st.SearchStrategy[Fault] = st.one_of(
        leg_fault,
        st.builds(
            PauseDrive,
            drive=drive,
            nth=st.integers(1, 6),
            ms=delays,
            where=st.sampled_from(PAUSE_POINTS),
        ),
        st.builds(Evict, scope=st.sampled_from(scopes), at_ms=when),
        st.builds(CrashDrive, drive=drive, at_ms=when, down_ms=st.sampled_from((0.0, 2_000.0))),
        st.builds(
            UpstreamFailure,
            first=st.integers(1, 20),
            count=st.integers(1, 3),
            what=st.sampled_from(UPSTREAM_KINDS),
        ),
        # Every skew and drift but the true clock, which changes nothing and is refused.
        st.sampled_from(
            [(s, d) for s in (0.0, 100.0, -100.0) for d in (0.0, 0.01, -0.01) if s or d]
        ).map(lambda clock: StoreClockFault(skew_ms=clock[0], drift=clock[1])),
        st.builds(LateRequest, drive=drive, operation=operation, nth=nth, ms=delays),
    )
    return st.lists(fault, max_size=max_faults).map(_one_store_clock)


def _one_store_clock(faults: list[Fault]) -> FaultPlan:
    """The plan of ``faults`` with only the first store clock fault: the store has one clock."""
    clocks = [i for i, fault in enumerate(faults) if isinstance(fault, StoreClockFault)]
    return FaultPlan(tuple(fault for i, fault in enumerate(faults) if i not in clocks[1:]))


@attrs.frozen(kw_only=True)
class WorldShape:
    """The names a fault plan of one scenario can point at: its drives and scopes, its lease."""

    drives: tuple[str, ...]
    scopes: tuple[str, ...]
    lease_ms: int


def world_shape(scenario: str | ScenarioRef, *, seed: int = 1) -> WorldShape:
    """The drives and scopes ``scenario`` uses, learnt by running it once with no faults."""
    simulation = simulate(scenario, seed, plan=NO_FAULTS, keep_trace=True)
    drives: dict[str, None] = {}
    scopes: dict[str, None] = dict.fromkeys(simulation.outcome.setup.scopes)
    for event in simulation.outcome.trace.of("drive.tick", "drive.skip", "world.start"):
        drives.setdefault(str(event["drive"]), None)
    # Only the scopes the setup declares: those are what a plan is checked against.
    if not drives:
        raise ValueError(
            f"scenario {simulation.scenario} ticks no drive; a fault plan needs a drive to aim at"
        )
    return WorldShape(
        drives=tuple(drives), scopes=tuple(scopes), lease_ms=simulation.outcome.setup.lease_ms
    )


def fault_plans_for(
    scenario: str | ScenarioRef,
    *,
    seed: int = 1,
    max_faults: int = 4,
    legs_only: bool = False,
) -> st.SearchStrategy[FaultPlan]:
    """:func:`fault_plans` aimed at ``scenario``'s own drives, scopes and lease."""
    shape = world_shape(scenario, seed=seed)
    return fault_plans(
        drives=shape.drives,
        scopes=shape.scopes,
        lease_ms=shape.lease_ms,
        max_faults=max_faults,
        legs_only=legs_only,
    )


@attrs.frozen
class Exploration:
    """The smallest plan Hypothesis found that makes a check report a violation."""

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


def explore_plans(
    scenario: str | ScenarioRef = "random",
    *,
    seed: int = 1,
    mutant: str | None = None,
    max_examples: int = 300,
    max_faults: int = 4,
) -> Exploration | None:
    """Search fault plans aimed at ``scenario``'s drives and scopes for one under which a check
    reports a violation, and shrink it. None when ``max_examples`` plans found nothing.
    Deterministic: Hypothesis is derandomized."""
    if mutant is not None and mutant not in MUTANTS:
        raise ValueError(f"no mutant {mutant!r}; the mutants are: {', '.join(MUTANTS)}")
    shape = world_shape(scenario, seed=seed)
    shown = str(find_scenario(scenario).ref)

    def violates(plan: FaultPlan) -> bool:
        return bool(simulate(scenario, seed, plan=plan, mutant=mutant).report.violations)

    def plans(max_faults: int, legs_only: bool = False) -> st.SearchStrategy[FaultPlan]:
        return fault_plans(
            drives=shape.drives,
            scopes=shape.scopes,
            lease_ms=shape.lease_ms,
            max_faults=max_faults,
            legs_only=legs_only,
        )

    # Simplest causes first: the shrinker improves a plan locally and cannot always get from a
    # three-fault plan to a different single fault, so one late or dropped leg is searched for
    # first, then any one fault, then larger plans.
    stages = (plans(1, legs_only=True), plans(1), plans(max_faults))
    for strategy in stages:
        try:
            plan = find(
                strategy,
                violates,
                settings=settings(
                    max_examples=max(1, max_examples // len(stages)),
                    derandomize=True,
                    database=None,
                    deadline=None,
                    phases=(Phase.generate, Phase.shrink),
                    suppress_health_check=list(HealthCheck),
                ),
            )
        except NoSuchExample:
            continue
        simulation = simulate(scenario, seed, plan=plan, mutant=mutant)
        return Exploration(shown, seed, mutant, plan, simulation)
    return None
