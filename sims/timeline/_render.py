"""A trace as a picture: a self-contained HTML page with an SVG timeline, or a few lines of text.

Theory of operation. A trace is read once into a model (:class:`Timeline`) and the model is drawn
twice, as SVG and as text, against the same piecewise-linear time scale.

- **Lanes.** One lane per drive and one per scope. A drive lane holds the drive's PASSES (one per
  lease owner: a thin line from the claim to the handler's invocation, then a bar from the
  invocation to the handler's end or the outcome, with its steps inside) and a strip above them
  for what happened to the drive itself: faults, late replies, dropped legs. A scope lane is the
  store's view, one row per run: which owner holds the run's lease, where it BEGAN, its effects.
  A service lane is the job's outside world, one row per operation: each call where it ran at the
  service, what it was (an effect, a read, a repeat, a refusal), and whether its caller knows.
- **The store's clock.** A lease lives by the store's clock, not the drive's, so its bar is placed
  by it: ``rpc.exec`` events pair virtual time with the store's time, a least-squares line maps
  one to the other (the store's clock may be skewed and may drift), and a lease's expiry (store
  time) becomes a point on the virtual axis through it. A lease starts at its claim, is renewed by
  each held step boundary, and ends at its release or at the next owner's claim; the stretch after
  its expiry that nobody released yet is hatched, because that is where a takeover may happen.
- **Ambiguous outcomes and late effects.** A call that ran while its caller was told it did not
  know (a timeout, a lost reply, a reply after the caller gave up, a request given up and
  delivered late) is marked from where it ran to where the caller gave up; an effect made after
  its pass lost its lease, or after the scenario returned, is ringed where it landed.
- **Double runs.** Two owners of one run whose handler spans overlap: explained inside a window
  the spec allows (a late BEGIN reply, a stretch longer than the lease), a violation anywhere else.
  They get a red band across every lane. A pass whose handler started after its lease had been
  taken over is drawn STALE (dashed).
- **Cut gaps.** Simulated worlds idle for long stretches between short bursts; a linear axis would
  squeeze each burst into a few pixels. Gaps with no event longer than a twentieth of the trace
  are cut to a narrow hatched band labelled with their length. Every instant that matters (an
  expiry, the end of a delay) is kept on the axis, so a cut only ever removes idle time.
- **Big traces.** Shapes of one kind closer than a pixel (or a character) are merged into one with
  a count in its hover title, so the size of the output tracks the picture, not the trace; the
  page says when it did so. Rows are capped (runs per scope, passes per drive) and the page says
  what it left out.

Rendering is a pure function of the trace: same trace, same bytes.

- **The page stands alone.** Above the picture: the verdict, the store (or mutant), the fault
  plan and every finding of the checks in their own words, numbered; each finding is marked in the
  picture where it happened, with the same number. The axis is linear wherever it is not cut.
  An inline script zooms and pans horizontally: bars stretch, glyphs and labels only move, and a
  label is shown only where it fits. Nothing is fetched from anywhere.

Where each part lives: the model in ``_model`` and how a trace is read into it in ``_reader``
(service calls in ``_calls``, the world's end in ``_world_end``); the time scale in ``_scale``;
the page in ``_svg`` (the writer and the layout), ``_lanes``, ``_service_lanes``, ``_legend``,
``_head`` (the facts above the picture), ``_script`` (zoom and pan) and ``_page``; the text in
``_text``; the story in ``_story``.
"""

from __future__ import annotations

from ._lanes import lease_title, pass_title
from ._model import (
    MAX_LANES,
    MAX_OVERLAP_LABELS,
    MAX_RUN_ROWS,
    Effect,
    Lease,
    Mark,
    Overlap,
    Pass,
    Step,
    StoreClockFit,
    Timeline,
    find_overlaps,
    short,
)
from ._page import render_html, write_timeline
from ._reader import build_timeline
from ._scale import Piece, Scale, build_scale, fmt_ms, fmt_store, ticks
from ._svg import MAX_PASS_ROWS, Shape, merge_shapes, merged_title, pack_passes
from ._text import render_terminal

__all__ = [
    "MAX_LANES",
    "MAX_OVERLAP_LABELS",
    "MAX_PASS_ROWS",
    "MAX_RUN_ROWS",
    "Effect",
    "Lease",
    "Mark",
    "Overlap",
    "Pass",
    "Piece",
    "Scale",
    "Shape",
    "Step",
    "StoreClockFit",
    "Timeline",
    "build_scale",
    "build_timeline",
    "find_overlaps",
    "fmt_ms",
    "fmt_store",
    "lease_title",
    "merge_shapes",
    "merged_title",
    "pack_passes",
    "pass_title",
    "render_html",
    "render_terminal",
    "short",
    "ticks",
    "write_timeline",
]
