"""One history's steps from what Hypothesis drew: random moves and boundary moves, mixed.

The random moves (``_history``) wander the whole protocol; the boundary moves (``_boundaries``)
each set up one edge where adapters go wrong and step onto it. Both kinds look at the reference's
tables as the history stands, so each step is made only after the one before it ran.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Final

from ._boundaries import BOUNDARY_MOVES
from ._history import RANDOM_MOVES, Choices, Step, View

#: Every kind of move, repeated by its weight; the first (a start) is what a shrunk move becomes.
_KINDS: Final = tuple(
    builder for builder, weight in (*RANDOM_MOVES, *BOUNDARY_MOVES) for _ in range(weight)
)

#: Coprime with the number of kinds, so successive places visit every kind before repeating.
_STRIDE: Final = next(n for n in range(7, 100) if math.gcd(n, len(_KINDS)) == 1)


def draw_steps(drawn: list[list[int]], view: View) -> Iterator[Step]:
    """The steps of one history, made from ``drawn`` (see ``_history.moves``) one at a time;
    ``view`` must be brought up to date (by the caller, from the reference) after each step is
    run, before the next one is made."""
    for position, integers in enumerate(drawn):
        draw = Choices(integers)
        # The kind turns with the move's place as well as its first choice: Hypothesis often
        # draws the same small integers again and again, and a history of repeated choices
        # still walks through the kinds instead of making one kind of move over and over.
        yield from _KINDS[(draw.number(0, 255) + position * _STRIDE) % len(_KINDS)](draw, view)
