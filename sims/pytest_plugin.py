"""The simulator's pytest plugin (loaded by pytest itself once this package is installed).

It adds the ``sims_worlds`` fixture: call it with a scenario, and the test runs that world over
seeds and fails, at the first world that goes wrong, with the checks' findings, the story and the
exact command that replays it::

    def test_my_job_survives_faults(sims_worlds):
        sims_worlds("worlds/my_job.py:nightly-import", seeds=range(20))

``pytest --sims-seeds 0..999`` replaces every such test's seeds, for a longer search than CI runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

from ._seeds import parse_seeds, require_seeds
from .faults._plan import FaultPlan
from .runners._testing import check_worlds
from .scenarios._registry import ScenarioRef


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--sims-seeds",
        default=None,
        metavar="N|A..B",
        help="seeds for every sims_worlds call, in place of the test's own: N (that one seed) "
        "or A..B (both included)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # A malformed --sims-seeds is the command line's mistake: say so once, before any test runs,
    # rather than failing every test that uses the fixture.
    seeds: str | None = config.getoption("--sims-seeds")
    if seeds is not None:
        try:
            parse_seeds(seeds)
        except ValueError as error:
            raise pytest.UsageError(f"--sims-seeds: {error}") from None


@pytest.fixture
def sims_worlds(request: pytest.FixtureRequest) -> Callable[..., int]:
    """``sims_worlds(scenario, seeds=range(10), *, plan=None, mutant=None)``: run the scenario
    once per seed; fail the test with the story and the replay command of the first world that
    breaks a check or differs from what its scenario documents."""
    override: str | None = request.config.getoption("--sims-seeds")

    def run(
        scenario: str | ScenarioRef,
        seeds: Iterable[int] = range(10),
        *,
        plan: FaultPlan | None = None,
        mutant: str | None = None,
        **options: Any,
    ) -> int:
        __tracebackhide__ = True
        seeds = require_seeds(seeds)  # before --sims-seeds replaces them: the test's mistake
        chosen = parse_seeds(override) if override is not None else seeds
        return check_worlds(scenario, chosen, plan=plan, mutant=mutant, **options)

    return run
