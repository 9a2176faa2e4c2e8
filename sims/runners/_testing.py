"""Worlds inside a user's own tests: run a scenario over seeds, fail with the story and the command.

``check_worlds`` is what the pytest plugin's ``sims_worlds`` fixture calls; it works from any test
runner, since a failure is an ``AssertionError``.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._numbers import plural
from .._seeds import require_seeds
from ..faults._plan import FaultPlan
from ..scenarios._registry import ScenarioRef
from ..timeline._story import story_lines
from ._outcome import Simulation
from ._simulate import simulate


class WorldFailed(AssertionError):
    """A world broke a check or differed from what its scenario documents; the message has the
    findings, the story and the command that replays it."""

    def __init__(self, simulation: Simulation, *, story_limit: int) -> None:
        self.simulation = simulation
        super().__init__(describe_failure(simulation, story_limit=story_limit))


def describe_failure(simulation: Simulation, *, story_limit: int = 60) -> str:
    """What went wrong in ``simulation``, in words, with its story and its replay command."""
    lines = [
        f"{simulation.scenario}, seed {simulation.seed}: "
        f"{plural(simulation.report.violation_count, 'violation')}, "
        f"{plural(len(simulation.mismatches), 'mismatch', 'mismatches')} with what the scenario "
        "documents"
    ]
    lines += [f"  {finding.line()}" for finding in simulation.report.violations]
    lines += [f"  NOT AS DOCUMENTED: {text}" for text in simulation.mismatches]
    # The same sentence as run's, a sweep's and the page's verdict.
    lines.append(f"verdict: {simulation.report.verdict()}")
    lines.append("story:")
    lines += list(story_lines(simulation.outcome.trace.events, limit=story_limit))
    lines.append(f"replay with: {simulation.replay_command}")
    return "\n".join(lines)


def check_worlds(
    scenario: str | ScenarioRef,
    seeds: Iterable[int] = range(10),
    *,
    plan: FaultPlan | None = None,
    mutant: str | None = None,
    story_limit: int = 60,
) -> int:
    """Run ``scenario`` (``NAME`` or ``FILE.py:NAME``) once per seed; raise :class:`WorldFailed`
    at the first world that breaks a check (the spec's or the scenario's own) or differs from what
    the scenario documents. Returns how many worlds ran."""
    __tracebackhide__ = True  # pytest shows the test's line and the message, not this loop
    count = 0
    for seed in require_seeds(seeds):
        simulation = simulate(scenario, seed, plan=plan, mutant=mutant)
        count += 1
        if not simulation.ok:
            raise WorldFailed(simulation, story_limit=story_limit)
    if count == 0:
        raise ValueError("no seeds were given; pass a non-empty range, e.g. range(10)")
    return count
