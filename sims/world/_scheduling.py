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

import functools
import inspect
import random

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
