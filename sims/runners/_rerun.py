"""Uncontrolled nondeterminism: the same world run twice, compared event by event.

A seed decides everything the simulator controls. A handler that reads ``random``, the wall
clock, or state it kept from an earlier world (a module-level cache) is outside that control:
the same seed then gives another trace, and a replay command may not reproduce what it claims.
Running a world again and comparing the traces finds it, as shuttle and FoundationDB check that
a seed replays; the first differing event says where the world stopped being a function of its
seed.
"""

from __future__ import annotations

import json

from .._trace import Trace


def first_difference(first: Trace, again: Trace) -> str | None:
    """None when the two traces are byte for byte the same; else where they first differ."""
    if first.to_bytes() == again.to_bytes():
        return None
    for index, (a, b) in enumerate(zip(first.events, again.events, strict=False)):
        if a != b:
            return f"event {index + 1} differs: first {_short(a)}, then {_short(b)}"
    shorter, longer = sorted((first.events, again.events), key=len)
    return (
        f"one run wrote {len(longer) - len(shorter)} more events after event {len(shorter)}: "
        f"{_short(longer[len(shorter)])}"
    )


def _short(event: dict[str, object]) -> str:
    text = json.dumps(event, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 300 else text[:297] + "..."


NONDETERMINISM_HELP = (
    "a world must be a function of its seed: a handler may not read random, the wall clock or "
    "state kept from an earlier world (docs/simulating-your-jobs.md, 'Determinism, and what to "
    "keep out of a handler')"
)
