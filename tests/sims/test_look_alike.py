"""An error in the door's words that the door did not throw: the random swarm throws one in some
seeds, the pass fails (never defers), the probe counts it, and a host that decided deferral by
the error's shape rather than by identity is caught on every such seed."""

from __future__ import annotations

import random

import pytest

import driver._coordinator as coordinator
from driver import SYSTEM_DOOR_WAIT
from sims import simulate
from sims.scenarios._swarm import draw_swarm


def _look_alike_seeds(count: int) -> list[int]:
    return [
        seed
        for seed in range(60)
        if (swarm := draw_swarm(random.Random(f"{seed}/swarm"))).look_alike and swarm.chores
    ][:count]


def test_some_seeds_throw_a_look_alike_and_the_pass_fails_rather_than_defers() -> None:
    seeds = _look_alike_seeds(4)
    assert len(seeds) == 4
    for seed in seeds:
        simulation = simulate("random", seed)
        assert simulation.report.ok, simulation.report.violations
        ends = [e for e in simulation.outcome.trace.of("hx.end") if e.get("looks_like_door")]
        assert ends, seed
        assert all(e["door"] is False for e in ends)


def test_a_host_that_defers_by_shape_is_caught_on_every_look_alike_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def by_shape(self: object, err: BaseException, token: object) -> bool:
        return getattr(err, "reason", None) == SYSTEM_DOOR_WAIT  # the slip

    monkeypatch.setattr(coordinator._DoorMarks, "deferral", by_shape)
    for seed in _look_alike_seeds(4):
        simulation = simulate("random", seed)
        checks = {finding.check for finding in simulation.report.violations}
        assert "pass-outcome" in checks, seed
