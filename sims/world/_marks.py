"""``sometimes``: a mark a handler sets where something should happen in SOME world.

A check says what must never happen; a mark says what a search must reach for its clean result to
mean anything (Antithesis calls these "sometimes assertions"): a charge that was retried, a pass
taken over in the middle of a step. ``sometimes(condition, name)`` writes a ``user.mark`` event the
first time a world sees the name and the first time the condition holds; a search reports every
name it saw and never saw hold. Outside a simulated world it does nothing, so a handler keeps its
marks in production.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from .._trace import Trace

#: The running world's trace and the (name, held) pairs already written, for the world's tasks.
_WORLD: contextvars.ContextVar[tuple[Trace, set[tuple[str, bool]]] | None] = contextvars.ContextVar(
    "sims_world_marks", default=None
)


def sometimes(condition: object, name: str) -> None:
    """Mark that ``condition`` should hold in some world; a search reports a ``name`` that never
    held. ``name`` is one line of text; the condition is read for its truth."""
    if not isinstance(name, str) or not name or "\n" in name:
        raise ValueError(f"sometimes(..., name={name!r}): give the mark a one-line name")
    world = _WORLD.get()
    if world is None:
        return
    trace, written = world
    # One event when the name is first seen, one when it first holds: enough to report it.
    key = (name, bool(condition))
    if key not in written and (name, True) not in written:
        written.add(key)
        trace.record("user.mark", {"name": name, "held": key[1]})


@contextmanager
def marks_of(trace: Trace) -> Iterator[None]:
    """Inside, ``sometimes`` writes into ``trace`` (the world's tasks inherit it)."""
    token = _WORLD.set((trace, set()))
    try:
        yield
    finally:
        _WORLD.reset(token)


def marks_in(events: list[dict[str, object]]) -> dict[str, bool]:
    """Each mark a trace saw, and whether it ever held."""
    seen: dict[str, bool] = {}
    for event in events:
        if event["ev"] == "user.mark":
            name = str(event["name"])
            seen[name] = seen.get(name, False) or bool(event["held"])
    return seen
