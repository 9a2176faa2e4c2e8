"""Shrinking a given failing plan to its smallest, whatever found it (a sweep's drawn plan, a
plan written by hand, a search).

Hypothesis shrinks what it drew itself; a plan from elsewhere has no draw to replay. This
shrinker works on the plan as a value: it drops faults while the world still fails, then makes
each fault's numbers smaller and rounder (``nth`` towards 1, durations towards whole numbers and
towards zero) while it still fails. Every candidate runs a whole world, so it stops after
``max_worlds`` of them and returns the smallest plan it has.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

import attrs

from ..faults._check import PlanError
from ..faults._plan import Fault, FaultPlan

#: Candidates to try in order, and the index of the first that fails (None: none did).
Batches = Generator[list[FaultPlan], "int | None", FaultPlan]


def shrink_plan(
    plan: FaultPlan, fails: Callable[[FaultPlan], bool], *, max_worlds: int = 300
) -> tuple[FaultPlan, int]:
    """The smallest plan found that still ``fails``, and how many worlds it took. ``plan`` must
    fail."""

    def first_failing(batch: list[FaultPlan]) -> int | None:
        for index, candidate in enumerate(batch):
            try:
                if fails(candidate):
                    return index
            except PlanError:
                pass  # a simpler number the world refuses is no simpler plan
        return None

    return shrink_in_batches(plan, first_failing, max_worlds=max_worlds)


def shrink_in_batches(
    plan: FaultPlan,
    first_failing: Callable[[list[FaultPlan]], int | None],
    *,
    max_worlds: int = 300,
) -> tuple[FaultPlan, int]:
    """:func:`shrink_plan`, handing ``first_failing`` whole batches of candidates (which it may
    run at once, on many workers) and told the index of the first that fails. The plans tried
    and the plan found are those of trying the candidates one at a time: a candidate after the
    first that fails counts as never tried."""
    steps = shrink_steps(plan)
    tried = 0
    try:
        batch = next(steps)
        while True:
            # Past max_worlds every candidate counts as passing, and the shrinker winds down.
            batch = batch[: max(0, max_worlds - tried)]
            hit = first_failing(batch) if batch else None
            tried += len(batch) if hit is None else hit + 1
            batch = steps.send(hit)
    except StopIteration as done:
        smallest: FaultPlan = done.value
        return smallest, tried


def shrink_steps(plan: FaultPlan) -> Batches:
    """The shrinker as batches: it drops faults while the world still fails (the last first:
    later faults are more often the noise), then makes each fault's numbers smaller and rounder
    while it still fails, again and again until nothing changes. Each batch lists the candidates
    in the order they are tried; the shrinker is sent the index of the first that failed."""
    best = plan
    changed = True
    while changed:
        changed = False
        indices = list(reversed(range(len(best.faults))))
        while indices:
            batch = [FaultPlan(best.faults[:i] + best.faults[i + 1 :]) for i in indices]
            hit = yield batch
            if hit is None:
                break
            best, changed, indices = batch[hit], True, indices[hit + 1 :]
        faults = best.faults  # each fault as the pass began: a change at i leaves the others
        position = 0
        while position < len(faults):
            owners, batch = [], []
            for i in range(position, len(faults)):
                for simpler in _simpler(faults[i]):
                    owners.append(i)
                    batch.append(FaultPlan((*best.faults[:i], simpler, *best.faults[i + 1 :])))
            if not batch:
                break
            hit = yield batch
            if hit is None:
                break
            best, changed, position = batch[hit], True, owners[hit] + 1
    return best


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
