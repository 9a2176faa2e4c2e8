"""A fake external system for handlers to walk: numbered objects, transient failures, counted calls.

It stands for the spec's opening example, a walk of 100 000 objects in an external system
(docs/protocol.md, "The problem"): the walk
must survive its refusals by continuing where it stopped, and the counts afterwards say how often
each object was fetched, which is the evidence of at-least-once.
"""

from __future__ import annotations

from collections import Counter

import attrs

from ._fence import refuse_if_killed


class UpstreamUnavailable(Exception):
    """A transient refusal: the next attempt may well succeed."""


@attrs.define
class Upstream:
    """``page(start, size)`` and ``fetch(i)`` over ``range(objects)``. ``failing`` names the calls
    that fail, as (kind, number) with kind "any", "page" or "object" and numbers from 1."""

    objects: int
    failing: frozenset[tuple[str, int]] = frozenset()
    calls: Counter[str] = attrs.field(factory=Counter)
    fetched: Counter[int] = attrs.field(factory=Counter)
    #: The failing calls that were made, and refused: what of a plan's upstream faults fired.
    refused: set[tuple[str, int]] = attrs.field(factory=set)

    def _call(self, kind: str, what: str) -> None:
        # A killed drive's leftover code reaches no service: its call never left the process.
        refuse_if_killed(f"its upstream call ({what})")
        self.calls["any"] += 1
        self.calls[kind] += 1
        struck = {("any", self.calls["any"]), (kind, self.calls[kind])} & self.failing
        if struck:
            self.refused.update(struck)
            raise UpstreamUnavailable(f"upstream refused call {self.calls['any']} ({what})")

    def page(self, start: int, size: int) -> range:
        """The indexes of the page that starts at ``start``: one call."""
        self._call("page", f"page at {start}")
        return range(start, min(start + size, self.objects))

    def fetch(self, index: int) -> dict[str, int]:
        """One object: one call, counted per object."""
        self._call("object", f"object {index}")
        if not 0 <= index < self.objects:
            raise IndexError(f"object {index} is outside the upstream's 0..{self.objects - 1}")
        self.fetched[index] += 1
        return {"object": index}
