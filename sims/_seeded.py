"""Hypothesis draws that depend on their seed alone: not on what else is loaded, nor on the folder.

Hypothesis mixes "local constants" into what it draws: the literals of every module of the
running project it finds in ``sys.modules``, read from their source (and cached, as files, under
``.hypothesis/constants/`` in the folder it runs in). So the same seed drew other histories from
the command line (which loads the CLI's modules) than from the Python API, and a run left
``.hypothesis/`` wherever it ran. Inside :func:`seed_only` Hypothesis's local constants are fixed:
those of every module of the project's own packages (``driver``, ``scopehost``, ``sims``), read
from their files whether loaded or not, in a fixed order, and kept in memory, never on disk.

Why not none at all: the kit's histories were made to reach its rules with those constants in the
draw (a count or a limit of the code drawn now and then, which makes histories longer), and without
them the default size missed planted bugs on some seeds. Fixed, they are the same for a given
checkout in every process, and a seed means one history set.

Hypothesis has no setting for this (6.170); the hook is the module function its provider calls,
``providers._get_local_constants``, replaced for the duration and restored after, and the cache
of allowed constants it keeps per kind of draw, emptied on the way in and out (a draw made before,
in the same process, with the project's constants, would otherwise be read from it).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path

from hypothesis.internal.conjecture import providers
from hypothesis.internal.constants_ast import Constants, _constants_from_source
from hypothesis.internal.floats import float_to_int
from sortedcontainers import SortedSet  # type: ignore[import-untyped]

#: The packages whose literals are the draws' constants.
_PACKAGES = ("driver", "scopehost", "sims")
#: As Hypothesis does, a file larger than this gives none (it would take long to parse).
_LARGEST = 512 * 1024

_LOCK = threading.Lock()
_depth = 0
_original = providers._get_local_constants


@functools.cache
def project_constants() -> Constants:
    """The literals of the project's own modules; sorted sets, so that which one a draw takes
    does not depend on the process's string hashing."""
    found = Constants(
        integers=SortedSet(),
        floats=SortedSet(key=float_to_int),
        bytes=SortedSet(),
        strings=SortedSet(),
    )
    for package in _PACKAGES:
        spec = importlib.util.find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for path in sorted(Path(folder).rglob("*.py")):
                source = path.read_bytes()
                if len(source) <= _LARGEST:
                    with contextlib.suppress(Exception):  # as Hypothesis: a file it cannot read
                        found |= _constants_from_source(source, limit=True)
    return found


@contextlib.contextmanager
def seed_only() -> Iterator[None]:
    """Within: Hypothesis draws from its seed and fixed constants only (nested uses are fine)."""
    global _depth
    with _LOCK:
        if _depth == 0:
            providers._get_local_constants = project_constants
            providers.CONSTANTS_CACHE.cache.clear()
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                providers._get_local_constants = _original
                providers.CONSTANTS_CACHE.cache.clear()
