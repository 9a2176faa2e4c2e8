"""Which operations are heavy enough to run in a worker thread, so other scopes are not kept
waiting while one scope works through them.

Every scope's actor runs in one event loop, and an operation runs synchronously in its actor: a
200 000-run import, or a payload of millions of elements checked and stored, would hold every other
scope's calls for seconds. So under the wall clock an actor hands a heavy operation to a worker
thread and awaits it. It still serves one message at a time (the next waits in its queue, as
behind any operation), and the store's now is still read in the actor when the message starts.

Heavy means: an operation whose cost grows with the scope itself (a whole-scope export or import,
an erasure that walks a subject's runs), or any operation whose arguments hold more than
``HEAVY_ARGUMENT_UNITS`` characters and elements, counted until that budget is spent, so that
weighing a message costs at most that much and a small one next to nothing.

Under a virtual clock nothing goes to a thread (Trio would take the thread's wait for idleness and
jump virtual time, and a simulation must replay byte for byte): there every operation runs inline,
as before, and nothing is even weighed.

One more thing would still stop every scope: a cyclic garbage collection. A heavy operation
allocates hundreds of thousands of objects (a 200 000-run export builds a row for each), which
sets off full collections of the whole heap, and a collection holds the interpreter's lock however
many threads there are (700 ms of a 200 000-run export's stall, measured). So while any heavy
operation runs, cyclic collection is paused (``PausedCollection``), and it resumes when the last one
ends, if it was on before. Reference counting frees everything as usual meanwhile; only cycles wait.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from typing import Any, Final

import attrs

#: Operations whose cost grows with the scope, not with their arguments.
HEAVY_OPERATIONS: Final = frozenset({"export_dump", "import_dump", "shred_subject"})

#: Characters of text plus elements of containers past which a message's arguments are heavy.
HEAVY_ARGUMENT_UNITS: Final = 64 * 1024


def is_heavy(operation: str, args: tuple[Any, ...]) -> bool:
    if operation in HEAVY_OPERATIONS:
        return True
    return _weigh(args, HEAVY_ARGUMENT_UNITS) < 0


def _weigh(value: Any, budget: int) -> int:
    """``budget`` less what ``value`` weighs; negative as soon as it is spent."""
    budget -= 1
    if isinstance(value, str | bytes):
        return budget - len(value)
    if isinstance(value, Mapping):
        for key, item in value.items():
            budget = _weigh(item, _weigh(key, budget))
            if budget < 0:
                break
        return budget
    if isinstance(value, list | tuple | set | frozenset):
        for item in value:
            budget = _weigh(item, budget)
            if budget < 0:
                break
        return budget
    if attrs.has(type(value)):
        for field in attrs.fields(type(value)):
            budget = _weigh(getattr(value, field.name), budget)
            if budget < 0:
                break
    return budget


class PausedCollection:
    """Cyclic garbage collection off while at least one heavy operation runs (entered and left in
    the event loop's thread, so the count needs no lock)."""

    __slots__ = ("_resume", "_running")

    def __init__(self) -> None:
        self._running = 0
        self._resume = False

    def __enter__(self) -> None:
        if self._running == 0:
            self._resume = gc.isenabled()
            gc.disable()
        self._running += 1

    def __exit__(self, *exc_info: object) -> None:
        self._running -= 1
        if self._running == 0 and self._resume:
            gc.enable()


#: One for the process: the collector is the process's.
PAUSED_COLLECTION: Final = PausedCollection()
