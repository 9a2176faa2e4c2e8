"""Reads that lag: what a provider's search or list endpoint sees of its own writes.

A real provider's charge is at once in its ledger, and seconds later in its search. An operation
declared ``Operation(fn, lag_ms=...)`` is such a read: it runs on the service's state as it stood
``lag`` ms ago, not as it stands. The lag is fixed (``lag_ms=500``), or drawn from the seed for
each call within a bound (``lag_ms=(0, 2000)``); a ``StaleRead`` fault stretches one call's lag
to the bound (or to its own ``lag_ms`` within it).

So the world keeps, for a service with such a read, the states it went through and when: a
:class:`History`. A lagging read that answers other than a fresh one would have MISSED a write
that had happened: the call's ``svc.exec`` says so (``stale``: the lag, and the fresh answer),
and so does the story.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs


@attrs.define
class History:
    """The states a service went through, each from the moment (ms) it began."""

    #: The longest lag any of the service's reads may have: older states are forgotten.
    keep_ms: float
    states: list[tuple[float, Any]] = attrs.field(factory=list)

    def wrote(self, at_ms: float, state: Any) -> None:
        """The service's state became ``state`` at ``at_ms`` (a copy is kept)."""
        self.states.append((at_ms, copy.deepcopy(state)))
        # Keep the newest state older than the longest lag: it is what such a read sees.
        cut = at_ms - self.keep_ms
        while len(self.states) > 1 and self.states[1][0] <= cut:
            del self.states[0]

    def seen_at(self, at_ms: float) -> Any:
        """A copy of the state as it stood at ``at_ms``."""
        seen = self.states[0][1]
        for began, state in self.states:
            if began > at_ms:
                break
            seen = state
        return copy.deepcopy(seen)

    def writes_since(self, at_ms: float) -> int:
        """How many writes a view as of ``at_ms`` does not see."""
        return sum(1 for began, _ in self.states[1:] if began > at_ms)
