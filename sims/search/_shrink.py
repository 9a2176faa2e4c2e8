"""Shrinking a given failing plan to its smallest, whatever found it (a sweep's drawn plan, a
plan written by hand, a search).

Hypothesis shrinks what it drew itself; a plan from elsewhere has no draw to replay. This
shrinker works on the plan as a value: it drops faults while the world still fails, then makes
each fault's numbers smaller and rounder (``nth`` towards 1, durations towards whole numbers and
towards zero) while it still fails. Every candidate runs a whole world, so it stops after
``max_worlds`` of them and returns the smallest plan it has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from ..faults._check import PlanError
from ..faults._plan import Fault, FaultPlan


def shrink_plan(
    plan: FaultPlan, fails: Callable[[FaultPlan], bool], *, max_worlds: int = 300
) -> tuple[FaultPlan, int]:
    """The smallest plan found that still ``fails``, and how many worlds it took. ``plan`` must
    fail."""
    tried = 0

    def still_fails(candidate: FaultPlan) -> bool:
        nonlocal tried
        if tried >= max_worlds:
            return False
        tried += 1
        try:
            return fails(candidate)
        except PlanError:
            return False  # a simpler number the world refuses is no simpler plan

    best = plan
    changed = True
    while changed and tried < max_worlds:
        changed = False
        # Drop faults, the last first: later faults are more often the noise.
        for i in reversed(range(len(best.faults))):
            candidate = FaultPlan(best.faults[:i] + best.faults[i + 1 :])
            if still_fails(candidate):
                best, changed = candidate, True
        for i, fault in enumerate(best.faults):
            for simpler in _simpler(fault):
                candidate = FaultPlan((*best.faults[:i], simpler, *best.faults[i + 1 :]))
                if still_fails(candidate):
                    best, changed = candidate, True
                    break
    return best, tried


def _simpler(fault: Fault) -> Iterator[Fault]:
    """Each way to make one field of ``fault`` smaller or rounder, smallest first."""
    for field in attrs.fields(type(fault)):
        value = getattr(fault, field.name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        for smaller in _smaller(value, whole=isinstance(value, int)):
            changes: dict[str, Any] = {field.name: smaller}
            yield attrs.evolve(fault, **changes)


def _smaller(value: float, *, whole: bool) -> list[float]:
    if whole:
        return [v for v in dict.fromkeys((1, value // 2, value - 1)) if 1 <= v < value]
    candidates = (0.0, float(round(value, -3)), float(round(value, -2)), float(int(value)))
    return [v for v in dict.fromkeys(candidates) if 0 <= v < value]
