"""The SVG writer and the page's geometry: where each lane and row goes, and what every part
of the page draws with (:class:`Sheet`).

Shapes of one kind closer than a pixel are merged into one with a count in its hover title
(:func:`merge_shapes`), so the size of the page tracks the picture, not the trace.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

import attrs

from ._model import MAX_RUN_ROWS, Timeline, operations_shown, runs_shown, visible_lanes
from ._scale import Scale, build_scale

PALETTE = ("#3b6fd1", "#d9822b", "#2e9e6a", "#8e5bc4", "#c2407e", "#2a9fb5", "#8a7a2a", "#6b6b6b")
REFUSAL = "#d62728"
WIDTH = 1400
LEFT = 170
RIGHT = 24
PASS_ROW = 30
RUN_ROW = 22
STRIP = 16
LANE_GAP = 8
CUT_WIDTH = 18
#: Where the lanes start: above them, the findings' badges, double-run labels and the axis.
TOP = 96.0
#: Rows per drive lane (passes that overlap in one drive).
MAX_PASS_ROWS = 4


def fmt_num(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _attrs(values: dict[str, Any]) -> str:
    parts = []
    for name, value in values.items():
        if value is None:
            continue
        shown = fmt_num(value) if isinstance(value, float) else str(value)
        parts.append(f'{name.rstrip("_").replace("_", "-")}="{html.escape(shown)}"')
    return " ".join(parts)


#: The most characters of one line of a hover: a title says a thing in a sentence, and a page's
#: size follows its picture, not what its trace holds. A hover of several lines (a service call's
#: sentence, then its arguments, then its result) gets that many for each.
TITLE_LINE_CHARS = 400


def _title(text: str) -> str:
    lines = [
        line if len(line) <= TITLE_LINE_CHARS else line[: TITLE_LINE_CHARS - 1] + "…"
        for line in text.split("\n")
    ]
    shown = "\n".join(lines)
    return f"<title>{html.escape(shown)}</title>"


def element(tag: str, title: str | None = None, text: str | None = None, **a: Any) -> str:
    """One SVG element; ``title`` becomes its hover text."""
    inner = (_title(title) if title else "") + (html.escape(text) if text else "")
    return f"<{tag} {_attrs(a)}>{inner}</{tag}>" if inner else f"<{tag} {_attrs(a)}/>"


def cross(x: float, y: float, r: float, color: str, title: str, *, width: float = 2) -> str:
    d = f"M{fmt_num(x - r)},{fmt_num(y - r)} L{fmt_num(x + r)},{fmt_num(y + r)} "
    d += f"M{fmt_num(x - r)},{fmt_num(y + r)} L{fmt_num(x + r)},{fmt_num(y - r)}"
    return element("path", title=title, d=d, stroke=color, stroke_width=width, fill="none")


def diamond(x: float, y: float, r: float, fill: str, title: str, *, stroke: str = "none") -> str:
    d = f"M{fmt_num(x)},{fmt_num(y - r)} L{fmt_num(x + r)},{fmt_num(y)} "
    d += f"L{fmt_num(x)},{fmt_num(y + r)} L{fmt_num(x - r)},{fmt_num(y)} z"
    return element("path", title=title, d=d, fill=fill, stroke=stroke)


#: The page's layers, in drawing order. ``under`` and ``over`` stay put; ``stretch`` is scaled
#: horizontally as one group when the reader zooms; each ``pin`` (a point glyph or a label) only
#: moves, so that zooming never distorts a glyph or a letter; ``axis`` is redrawn on every zoom.
LAYERS = ("under", "axis", "stretch", "pin", "over")


class Svg:
    """The page's elements by layer, in drawing order, and the kinds of thing drawn."""

    def __init__(self) -> None:
        self.layers: dict[str, list[str]] = {name: [] for name in LAYERS}
        self.kinds: set[str] = set()

    def add(
        self,
        tag: str,
        title: str | None = None,
        text: str | None = None,
        *,
        layer: str = "stretch",
        kind: str | None = None,
        **a: Any,
    ) -> None:
        """An element in ``layer``; ``kind`` names the legend entry that explains it."""
        if kind is not None:
            self.kinds.add(kind)
            a["data_k"] = kind
        self.layers[layer].append(element(tag, title, text, **a))

    def pin(
        self,
        x: float,
        inner: str,
        *,
        kind: str | None = None,
        fit: tuple[float, float] | None = None,
    ) -> None:
        """``inner`` (drawn at ``x``) as a pin: moved, never stretched, when the reader zooms.
        ``fit`` = (room, need): a label shown only while its room, zoomed, is at least ``need``."""
        a: dict[str, Any] = {"class_": "p", "data_x": x}
        if kind is not None:
            self.kinds.add(kind)
            a["data_k"] = kind
        if fit is not None:
            room, need = fit
            a["data_w"], a["data_n"] = room, need
            if room < need:
                a["display"] = "none"
        self.layers["pin"].append(f"<g {_attrs(a)}>{inner}</g>")

    def text(self) -> str:
        """The layers, the zoomed ones inside the plot's clip."""
        layers = self.layers
        return (
            "".join(layers["under"])
            + '<g id="axis">'
            + "".join(layers["axis"])
            + '</g><g clip-path="url(#plot-clip)"><g id="zs">'
            + "".join(layers["stretch"])
            + '</g><g id="zp">'
            + "".join(layers["pin"])
            + "</g></g>"
            + "".join(layers["over"])
        )


# -- merging shapes closer than a pixel -----------------------------------------------------------


@attrs.define
class Shape:
    """A drawn stretch (or point, ``t0 == t1``) with its hover text; ``count`` > 1 once merged."""

    t0: float
    t1: float
    key: str
    title: str
    count: int = 1
    last_title: str = ""


def merge_shapes(shapes: Iterable[Shape], scale: Scale, *, within: float) -> list[Shape]:
    """Merge neighbours of one key that would be drawn less than ``within`` apart."""
    merged: list[Shape] = []
    for shape in sorted(shapes, key=lambda s: (s.key, s.t0, s.t1)):
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.key == shape.key
            and (scale.x(shape.t0) - scale.x(last.t1) < within)
        ):
            last.t1 = max(last.t1, shape.t1)
            last.count += 1
            last.last_title = shape.title
        else:
            merged.append(attrs.evolve(shape))
    return merged


def merged_title(shape: Shape) -> str:
    if shape.count == 1:
        return shape.title
    return f"{shape.count} merged: {shape.title} … {shape.last_title}"


# -- the layout ----------------------------------------------------------------------------------


@attrs.frozen
class Row:
    """One drawn row: its lane key, what it shows, and its vertical place."""

    lane: str
    kind: str  # "strip" | "pass" | "run" | "operation"
    index: int
    y: float
    height: float


@attrs.define
class Layout:
    rows: dict[tuple[str, str, int], Row] = attrs.field(factory=dict)
    lanes: list[tuple[str, str, float, float]] = attrs.field(factory=list)  # kind, name, y, h
    height: float = 0.0


def pack_passes(model: Timeline) -> None:
    """Give each pass a row in its drive's lane so that passes of one drive never overlap."""
    ends: dict[str, list[float]] = {}
    crowded: set[str] = set()
    for found in sorted(model.passes, key=lambda p: (p.drive, p.claimed_at, p.owner)):
        rows = ends.setdefault(found.drive, [])
        free = [i for i, end in enumerate(rows) if end <= found.claimed_at]
        if free:
            found.row = free[0]
        elif len(rows) < MAX_PASS_ROWS:
            found.row = len(rows)
            rows.append(0.0)
        else:
            found.row = MAX_PASS_ROWS - 1
            crowded.add(found.drive)
        rows[found.row] = max(rows[found.row], found.end(model.end))
    for drive in sorted(crowded):
        model.notes.append(f"{drive}: more than {MAX_PASS_ROWS} passes at once; extra stacked")


def build_layout(model: Timeline, top: float) -> Layout:
    layout = Layout()
    drives, scopes, services = visible_lanes(model)
    rows_per_drive: dict[str, int] = {}
    for found in model.passes:
        rows_per_drive[found.drive] = max(rows_per_drive.get(found.drive, 1), found.row + 1)
    y = top
    for drive in drives:
        start = y
        layout.rows[("drive", drive, -1)] = Row(drive, "strip", -1, y, STRIP)
        y += STRIP
        for index in range(rows_per_drive.get(drive, 1)):
            layout.rows[("drive", drive, index)] = Row(drive, "pass", index, y, PASS_ROW)
            y += PASS_ROW
        layout.lanes.append(("drive", drive, start, y - start))
        y += LANE_GAP
    for scope in scopes:
        start = y
        layout.rows[("scope", scope, -1)] = Row(scope, "strip", -1, y, STRIP)
        y += STRIP
        runs = runs_shown(model, scope) or [""]
        for index, run in enumerate(runs):
            layout.rows[("scope", scope, index)] = Row(run, "run", index, y, RUN_ROW)
            y += RUN_ROW
        hidden = len(model.runs.get(scope, [])) - len(runs)
        if hidden > 0:
            model.notes.append(f"{scope}: {hidden} more runs not drawn (at most {MAX_RUN_ROWS})")
        layout.lanes.append(("scope", scope, start, y - start))
        y += LANE_GAP
    for service in services:
        start = y
        # The strip holds the lane's name, above its operations' names.
        layout.rows[("service", service, -1)] = Row(service, "strip", -1, y, STRIP)
        y += STRIP
        operations = operations_shown(model, service)
        for index, op in enumerate(operations):
            layout.rows[("service", service, index)] = Row(op, "operation", index, y, RUN_ROW)
            y += RUN_ROW
        hidden = len(model.services[service]) - len(operations)
        if hidden > 0:
            model.notes.append(
                f"service {service}: {hidden} more operations not drawn (at most {MAX_RUN_ROWS})"
            )
        layout.lanes.append(("service", service, start, y - start))
        y += LANE_GAP
    layout.height = y
    return layout


class Sheet:
    """What every part of the page draws with: the model, its scale and layout, the SVG."""

    def __init__(self, model: Timeline) -> None:
        self.model = model
        self.svg = Svg()
        self.merged = 0
        pack_passes(model)
        self.colors = {d: PALETTE[i % len(PALETTE)] for i, d in enumerate(model.drives)}
        self.scale = build_scale(
            model.instants(),
            model.start,
            model.end,
            left=LEFT,
            width=WIDTH - LEFT - RIGHT,
            cut_width=CUT_WIDTH,
            # No floor under a kept piece: the axis is linear wherever it is not cut.
            min_width=0,
            # Without events (a trace not kept) nothing says a gap was idle: cut nothing.
            max_cuts=(WIDTH - LEFT - RIGHT) // 40 if model.events else 0,
        )
        self.top = self.plot_top()
        self.layout = build_layout(model, self.top + 8)
        self.run_rows = {
            (row.lane, key[1]): row for key, row in self.layout.rows.items() if row.kind == "run"
        }
        #: A service lane's rows, by operation ("bank.pay").
        self.operation_rows = {
            row.lane: row for row in self.layout.rows.values() if row.kind == "operation"
        }

    def plot_top(self) -> float:
        """Where the lanes start; the room above them is the axis's and the page's marks'."""
        return TOP

    def x(self, t: float) -> float:
        return self.scale.x(t)

    def color(self, drive: str) -> str:
        return self.colors.get(drive, "#777777")

    def merge(self, shapes: list[Shape], within: float) -> list[Shape]:
        merged = merge_shapes(shapes, self.scale, within=within)
        self.merged += len(shapes) - len(merged)
        return merged
