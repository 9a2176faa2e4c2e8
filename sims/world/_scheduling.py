"""Seeding Trio's scheduler, through private hooks that are checked before they are trusted.

Trio has no public way to make its scheduler deterministic. Its own Hypothesis plugin uses two
private names in ``trio._core._run``: the flag ``_ALLOW_DETERMINISTIC_SCHEDULING``, which makes
each scheduling batch sorted and then shuffled, and ``_r``, the ``random.Random`` that shuffles.
Setting the flag and seeding ``_r`` makes a world's interleavings a function of its seed. A trio
release may rename or drop either, and a simulation that silently lost its seeding would still
run, with traces that no longer replay. So the hooks are checked first, and a missing one stops
the simulation with a message saying what moved. ``pyproject.toml`` pins trio to the tested range.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import random
from collections.abc import Iterator
from typing import Any

import trio

#: The trio releases this project's seeded scheduling was tested with (as pinned in pyproject).
TESTED_TRIO = ">=0.25.1,<0.36"


class TrioHooksMoved(RuntimeError):
    """The private scheduling hooks seeded scheduling relies on are not where they were."""


@functools.cache
def check_trio_hooks() -> None:
    """Raise ``TrioHooksMoved`` unless trio still has both hooks and its scheduler reads them."""
    run_module = trio._core._run
    problems = []
    if not isinstance(getattr(run_module, "_ALLOW_DETERMINISTIC_SCHEDULING", None), bool):
        problems.append("the flag trio._core._run._ALLOW_DETERMINISTIC_SCHEDULING is gone")
    if not isinstance(getattr(run_module, "_r", None), random.Random):
        problems.append("trio._core._run._r is no longer a random.Random")
    if not problems:
        source = inspect.getsource(run_module)
        if "if _ALLOW_DETERMINISTIC_SCHEDULING:" not in source or "_r.shuffle(" not in source:
            problems.append("trio's scheduler no longer shuffles its batches by them")
    if problems:
        raise TrioHooksMoved(
            f"trio {trio.__version__} moved the private hooks seeded scheduling relies on: "
            f"{'; '.join(problems)} — install trio{TESTED_TRIO} (the tested range), or port "
            "sims/world/_scheduling.py to the new release"
        )


def seed_scheduler(seed: int) -> None:
    """Make Trio's scheduler a function of ``seed`` (README, "The simulator"): deterministic
    batches, shuffled by a random source seeded here, before each ``trio.run``."""
    check_trio_hooks()
    trio._core._run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
    trio._core._run._r.seed(seed)


class PctRandom(random.Random):
    """Trio's shuffle, replaced by PCT: priorities instead of a fresh shuffle at every batch.

    Trio runs each batch of ready tasks in the order its ``_r.shuffle`` leaves them (it pops from
    the end). Here ``shuffle`` orders the batch by a priority drawn once per task, the highest
    last, so the same task keeps winning until it blocks; and at ``depth - 1`` change points among
    the first ``within`` task steps, the task run at that step drops below every other (PCT,
    Burckhardt et al. 2010, as Coyote and shuttle do it, over Trio's batches). Every draw comes
    from ``seed``, so a world under it replays byte for byte."""

    def __init__(self, seed: int, *, depth: int, within: int) -> None:
        super().__init__(f"pct/{seed}")
        points = min(max(depth - 1, 0), within)
        self._changes = set(self.sample(range(1, within + 1), points))
        self._priority: dict[object, float] = {}
        self._step = 0
        self._demoted = 0.0

    def shuffle(self, x: list[Any]) -> None:  # type: ignore[override]
        priority = self._priority
        for task in x:  # sorted by the order tasks were created: priorities are drawn in it
            if task not in priority:
                priority[task] = 1.0 + self.random()
        x.sort(key=priority.__getitem__)
        # Trio runs the batch from its end: count the steps in that order.
        for task in reversed(x):
            self._step += 1
            if self._step in self._changes:
                self._demoted -= 1.0
                priority[task] = self._demoted


@contextlib.contextmanager
def pct_scheduling(seed: int, *, depth: int, within: int) -> Iterator[None]:
    """Run the ``trio.run`` inside under :class:`PctRandom` (after :func:`seed_scheduler`)."""
    check_trio_hooks()
    run_module = trio._core._run
    seeded = run_module._r
    run_module._r = PctRandom(seed, depth=depth, within=within)
    try:
        yield
    finally:
        run_module._r = seeded
