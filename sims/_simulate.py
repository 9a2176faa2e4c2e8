"""``simulate(name, seed)``: one scenario, one seed, checked — what ``run``, ``sweep`` and the
tests all call."""

from __future__ import annotations

import attrs

from scopehost import DatabaseFactory

from . import _catalog  # noqa: F401  (registers the scenarios)
from ._faults import FaultPlan
from ._mutants import MUTANTS
from ._outcome import Simulation
from ._run import run_world
from ._scenarios import SCENARIOS


def _mutant_name(database: DatabaseFactory | None) -> str | None:
    if database is None:
        return None
    for name, mutant in MUTANTS.items():
        if mutant is database:
            return name
    return getattr(database, "__qualname__", repr(database))


def scenario_names() -> list[str]:
    return list(SCENARIOS)


def simulate(
    name: str,
    seed: int,
    *,
    plan: FaultPlan | None = None,
    database: DatabaseFactory | None = None,
    keep_trace: bool | None = None,
) -> Simulation:
    """Run scenario ``name`` with ``seed``. ``plan`` replaces the scenario's fault plan (its
    documented expectation is then not asserted, only the invariants); ``database`` swaps the
    scope store (a deliberately broken one, to show that a check notices)."""
    scenario = SCENARIOS.get(name)
    if scenario is None:
        raise ValueError(f"no scenario {name!r}; the scenarios are: {', '.join(SCENARIOS)}")
    setup = scenario.setup(seed)
    if plan is not None:
        setup = attrs.evolve(setup, plan=plan)
    if database is not None:
        setup = attrs.evolve(setup, database=database)
    if keep_trace is not None:
        setup = attrs.evolve(setup, trace=keep_trace)
    meta = {
        "scenario": name,
        "plan_overridden": plan is not None,
        "mutant": _mutant_name(database),
    }
    outcome = run_world(seed, setup, scenario.drive, settles=scenario.settles, meta=meta)
    simulation = Simulation(name, seed, outcome, outcome.report)
    if plan is None:
        simulation = attrs.evolve(simulation, mismatches=tuple(scenario.expect(simulation)))
    return simulation
