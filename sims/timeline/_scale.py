"""The piecewise-linear time scale both renderings draw against, its ticks and its labels.

Simulated worlds idle for long stretches between short bursts; a linear axis would squeeze each
burst into a few pixels, so the longest idle gaps are cut to a narrow band (:func:`build_scale`).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator

import attrs

from driver import iso_from_ms


@attrs.frozen
class Piece:
    """A stretch of time and where it is drawn; ``cut`` pieces are idle gaps at a fixed width."""

    t0: float
    t1: float
    x0: float
    x1: float
    cut: bool


@attrs.define
class Scale:
    pieces: list[Piece]
    starts: list[float] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.starts = [piece.t0 for piece in self.pieces]

    def x(self, t: float) -> float:
        index = max(0, bisect.bisect_right(self.starts, t) - 1)
        piece = self.pieces[index]
        if piece.t1 <= piece.t0:
            return (piece.x0 + piece.x1) / 2
        share = min(max((t - piece.t0) / (piece.t1 - piece.t0), 0.0), 1.0)
        return piece.x0 + share * (piece.x1 - piece.x0)

    @property
    def cuts(self) -> list[Piece]:
        return [piece for piece in self.pieces if piece.cut]


def build_scale(
    instants: list[float],
    start: float,
    end: float,
    *,
    left: float,
    width: float,
    cut_width: float,
    min_width: float,
    max_cuts: int,
) -> Scale:
    """Cut the longest idle gaps (at most ``max_cuts``, each longer than 1/20 of the trace) and
    share the width among the rest in proportion to their length."""
    end = max(end, start + 1.0)
    threshold = (end - start) / 20
    gaps = [(b - a, a, b) for a, b in itertools.pairwise(instants) if b - a > threshold]
    gaps.sort(key=lambda gap: (-gap[0], gap[1]))
    cuts = sorted((a, b) for _, a, b in gaps[:max_cuts])
    kept: list[tuple[float, float]] = []
    cursor = start
    for a, b in cuts:
        kept.append((cursor, a))
        cursor = b
    kept.append((cursor, end))
    room = width - cut_width * len(cuts)
    floor = min(min_width, room / len(kept))
    spare = max(room - floor * len(kept), 0.0)
    total = math.fsum(b - a for a, b in kept) or 1.0
    pieces: list[Piece] = []
    x = left
    for index, (a, b) in enumerate(kept):
        grown = floor + spare * (b - a) / total
        pieces.append(Piece(a, b, x, x + grown, False))
        x += grown
        if index < len(cuts):
            pieces.append(Piece(cuts[index][0], cuts[index][1], x, x + cut_width, True))
            x += cut_width
    return Scale(pieces)


def _nice_step(ms_per_unit: float) -> float:
    """The smallest 1-2-5 step at least ``ms_per_unit`` long."""
    if ms_per_unit <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(ms_per_unit))
    for factor in (1.0, 2.0, 5.0, 10.0):
        if factor * power >= ms_per_unit:
            return factor * power
    return 10.0 * power


def ticks(scale: Scale, *, spacing: float) -> Iterator[tuple[float, bool]]:
    """(t, starts a piece) per axis tick: 1-2-5 steps in each kept piece, and each piece's start."""
    for piece in scale.pieces:
        if piece.cut:
            continue
        yield piece.t0, True
        span = piece.t1 - piece.t0
        if span <= 0:
            continue
        step = _nice_step(span * spacing / max(piece.x1 - piece.x0, 1e-9))
        t = math.floor(piece.t0 / step + 1) * step
        while t < piece.t1:
            yield t, False
            t += step


def fmt_ms(t: float) -> str:
    """Virtual time as a label: whole milliseconds, thousands separated by thin spaces."""
    if abs(t - round(t)) < 1e-6:
        return f"{round(t):,}".replace(",", "\u2009")
    return f"{t:,.1f}".replace(",", "\u2009")


def fmt_store(ms: float) -> str:
    """Store time as a label: the clock part of its ISO form."""
    return iso_from_ms(ms)[11:23]
