"""The named scenarios: each a world, a way to drive it, and the outcome the spec promises.

A scenario's ``expect`` returns the ways the outcome differs from what the scenario documents (an
empty list is a pass). The invariant checks run on every scenario besides, so a scenario can be
"as expected" and still report a violation, and the reverse.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from ._faults import (
    NO_FAULTS,
    FaultPlan,
)
from ._outcome import Simulation
from ._run import WorldSetup
from ._world import World

SCOPE = "scope-1"
LEASE_MS = 1_000


@attrs.frozen(kw_only=True)
class Scenario:
    """A named, documented world."""

    name: str
    summary: str
    setup: Callable[[int], WorldSetup]
    drive: Callable[[World], Awaitable[None]]
    expect: Callable[[Simulation], list[str]]
    #: Every fault is bounded, so every run must end ``done`` or ``failed``.
    settles: bool = True


SCENARIOS: dict[str, Scenario] = {}


def scenario(
    name: str,
    *,
    setup: Callable[[int], WorldSetup],
    expect: Callable[[Simulation], list[str]],
) -> Callable[[Callable[[World], Awaitable[None]]], Callable[[World], Awaitable[None]]]:
    """Register the decorated world-driving function as scenario ``name``; its docstring's first
    paragraph is the summary ``python -m sims list`` prints."""

    def register(drive: Callable[[World], Awaitable[None]]) -> Callable[[World], Awaitable[None]]:
        summary = " ".join((drive.__doc__ or "").strip().split("\n\n")[0].split())
        SCENARIOS[name] = Scenario(
            name=name, summary=summary, setup=setup, drive=drive, expect=expect
        )
        return drive

    return register


def fixed(plan: FaultPlan = NO_FAULTS, **options: Any) -> Callable[[int], WorldSetup]:
    """A setup that does not depend on the seed (beyond scheduling and latency draws)."""
    return lambda seed: WorldSetup(plan=plan, **options)


def expect_all(*checks: tuple[bool, str]) -> list[str]:
    """The texts of the checks that failed."""
    return [text for ok, text in checks if not ok]
