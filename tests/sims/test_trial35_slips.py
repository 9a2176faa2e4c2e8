"""A new user's slips (``trial35_slips.py``), each caught by the plain random swarm on the seeds
the trial found, under the rule it breaks; with the code as it is, the same seeds are clean."""

from __future__ import annotations

import pytest

from sims import simulate
from sims.mutants._ablation import ablated

from .trial35_slips import CHECK, SLIPS


def _violations(seed: int) -> set[str]:
    sim = simulate("random", seed)
    return {finding.check for finding in sim.report.findings if finding.verdict == "violation"}


@pytest.mark.parametrize("name", sorted(SLIPS))
def test_each_slip_is_caught_by_the_rule_it_breaks(name: str) -> None:
    slip, seeds = SLIPS[name]
    assert len(seeds) >= 5
    with ablated(slip):
        found = _violations(seeds[0])
    assert CHECK[name] in found, found
    assert "world-raised" not in found


def test_the_slips_seeds_are_clean_without_them() -> None:
    seeds = sorted({seeds[0] for _, seeds in SLIPS.values()})
    assert all(not _violations(seed) for seed in seeds)
