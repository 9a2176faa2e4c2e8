"""The timeline as a self-contained HTML page: the verdict and the findings on top, then the
picture (frame, axes, lanes, double runs, the findings marked where they happened, legend, notes),
zoomable and pannable by an inline script. Nothing is fetched from anywhere."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path

from .._trace import Trace
from ..faults._plan import FaultPlan
from ..oracle._report import CheckReport, Finding
from ._calls import HOVER_CHARS, value_words
from ._head import PageFacts, facts_of, head_html
from ._lanes import Lanes
from ._legend import BADGE_R, EXPLAINED, legend_items
from ._model import MAX_LANES, MAX_OVERLAP_LABELS, Timeline, short
from ._reader import build_timeline
from ._scale import fmt_ms, fmt_store, ticks
from ._script import SCRIPT, STYLE, page_data
from ._svg import LEFT, REFUSAL, RIGHT, WIDTH, diamond, element, fmt_num

#: Rows of finding badges above the lanes; badges closer than one badge stack into the next row.
BADGE_ROWS = (12.0, 29.0, 46.0)
#: At most zoom, one virtual millisecond is at least this many pixels wide.
_MAX_ZOOM_PX_PER_MS = 40.0


class _Page(Lanes):
    """Draws a :class:`Timeline` and the findings of its checks as SVG."""

    def __init__(self, model: Timeline, findings: Sequence[Finding]) -> None:
        self.findings = list(findings)
        for finding in self.findings:
            # A finding's instant is kept on the axis (never inside a cut) and its run drawn.
            model.busy.add(finding.t)
            model.end = max(model.end, finding.t)
            if finding.run is not None:
                model.flagged.add(finding.run)
        self.badge_rows: list[int] = []
        super().__init__(model)

    def plot_top(self) -> float:
        """Room above the lanes for the rows of badges in use, the double-run labels and the
        axis; badges closer than one badge stack into the next row."""
        ends = [-math.inf] * len(BADGE_ROWS)
        for finding in self.findings:
            x = self.x(finding.t)
            free = [i for i, end in enumerate(ends) if x - end >= 2 * BADGE_R + 1]
            row = free[0] if free else len(BADGE_ROWS) - 1
            ends[row] = x
            self.badge_rows.append(row)
        rows = max(self.badge_rows) + 1 if self.badge_rows else 0
        return 44.0 + 17.0 * rows + (16.0 if self.model.overlaps else 0.0)

    # -- the frame --------------------------------------------------------------------------------

    def draw(self) -> str:
        bottom = self.layout.height
        self.frame(bottom)
        self.drive_lanes()
        self.scope_lanes()
        self.service_lanes()
        self.late_effects()
        self.world_end(bottom)
        self.overlaps(bottom)
        self.mark_findings(bottom)
        self.world_notes()
        legend_y = self.store_axis(bottom) + 22
        end = self.legend(legend_y)
        end = self.notes(end + 6)
        height = end + 12
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="{WIDTH}" '
            f'height="{fmt_num(height)}" viewBox="0 0 {WIDTH} {fmt_num(height)}" '
            'font-family="sans-serif" font-size="11">'
        )
        defs = (
            "<defs>"
            '<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/>'
            '<line x1="0" y1="0" x2="0" y2="6" stroke="#888888" stroke-width="2"/></pattern>'
            '<pattern id="cut" width="4" height="4" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(-45)"><rect width="4" height="4" fill="#f3f3f3"/>'
            '<line x1="0" y1="0" x2="0" y2="4" stroke="#d8d8d8" stroke-width="1.5"/></pattern>'
            f'<clipPath id="plot-clip"><rect x="{LEFT - 8}" y="0" '
            f'width="{WIDTH - RIGHT - LEFT + 16}" height="{fmt_num(bottom + 4)}"/></clipPath>'
            "</defs>"
        )
        return head + defs + self.svg.text() + "</svg>"

    def frame(self, bottom: float) -> None:
        svg = self.svg
        svg.add("rect", layer="under", x=0, y=0, width=WIDTH, height="100%", fill="#ffffff")
        for kind, name, y, h in self.layout.lanes:
            fill = "#f7f9fc" if kind == "drive" else "#f8f6f0"
            svg.add("rect", layer="under", x=4, y=y - 2, width=WIDTH - 8, height=h + 4, fill=fill)
            label = name if name.startswith(kind) else f"{kind} {name}"
            svg.add(
                "text", title=self.lane_title(kind, name), text=label, layer="over", x=10,
                y=y + 12, font_weight="bold",
            )  # fmt: skip
        self.idle_cuts(bottom)
        self.time_axis(bottom)

    def lane_title(self, kind: str, name: str) -> str | None:
        """A service lane's label says, when hovered, what the service held at the world's end."""
        states = self.model.service_states
        if kind != "service" or name not in states:
            return None
        return f"service {name} at the world's end: {value_words(states[name], HOVER_CHARS)}"

    def idle_cuts(self, bottom: float) -> None:
        svg = self.svg
        for piece in self.scale.cuts:
            length = _short_ms(piece.t1 - piece.t0)
            title = (
                f"{length} of idle time cut from the axis: {fmt_ms(piece.t0)}–"
                f"{fmt_ms(piece.t1)} ms, where nothing but polling happened"
            )
            svg.add(
                "rect",
                title=title,
                kind="cut",
                x=piece.x0,
                y=self.top,
                width=piece.x1 - piece.x0,
                height=bottom - self.top,
                fill="url(#cut)",
            )
            # Every cut says how long it is, written down its band so that it always fits.
            cx, y = (piece.x0 + piece.x1) / 2, self.top + 4
            label = element(
                "text",
                text=f"{length} cut",
                x=cx - 3,
                y=y,
                transform=f"rotate(90 {fmt_num(cx - 3)} {fmt_num(y)})",
                font_size=9,
                fill="#666666",
                class_="cut-label",
            )
            svg.pin(cx, label)

    def time_axis(self, bottom: float) -> None:
        svg = self.svg
        svg.add("text", text="virtual ms", layer="over", x=10, y=self.top - 14, fill="#666666")
        last = -math.inf
        for t, first in ticks(self.scale, spacing=90):
            x = self.x(t)
            svg.add("line", layer="axis", x1=x, y1=self.top - 6, x2=x, y2=bottom, stroke="#e4e4e4")
            if x - last >= 56 or (first and x - last >= 30):
                svg.add(
                    "text",
                    layer="axis",
                    text=fmt_ms(t),
                    x=x,
                    y=self.top - 14,
                    text_anchor="middle",
                    font_size=10,
                )
                last = x

    def store_axis(self, bottom: float) -> float:
        clock = self.model.clock
        if clock is None:
            return bottom
        svg = self.svg
        svg.add("text", text="store clock", layer="over", x=10, y=bottom + 16, fill="#666666")
        last_right = -math.inf
        for t, _ in ticks(self.scale, spacing=90):
            x = self.x(t)
            # A label is about 70 px wide; the last one is right-aligned to stay on the page.
            end = x > WIDTH - RIGHT - 40
            left, right = (x - 70, x) if end else (x - 35, x + 35)
            if left >= last_right + 8:
                svg.add(
                    "text",
                    layer="axis",
                    text=fmt_store(clock.to_store(t)),
                    x=x,
                    y=bottom + 16,
                    text_anchor="end" if end else "middle",
                    font_size=10,
                )
                svg.add(
                    "line", layer="axis", x1=x, y1=bottom, x2=x, y2=bottom + 5, stroke="#999999"
                )
                last_right = right
        return bottom + 20

    # -- what spans lanes -------------------------------------------------------------------------

    def overlaps(self, bottom: float) -> None:
        for index, overlap in enumerate(self.model.overlaps):
            x0, x1 = self.x(overlap.start), self.x(overlap.end)
            if x1 - x0 < 3:
                x0, x1 = (x0 + x1) / 2 - 1.5, (x0 + x1) / 2 + 1.5
            label = f"double run: {short(overlap.run)}"
            title = (
                f"{label} — {overlap.drives[0]} ({short(overlap.owners[0])}) and "
                f"{overlap.drives[1]} ({short(overlap.owners[1])}) both ran the handler "
                f"{fmt_ms(overlap.start)}–{fmt_ms(overlap.end)} ms"
            )
            self.svg.add(
                "rect",
                title=title,
                kind="double-run",
                x=x0,
                y=self.top - 26,
                width=x1 - x0,
                height=bottom - self.top + 26,
                fill=REFUSAL,
                fill_opacity=0.14,
                stroke=REFUSAL,
                stroke_width=1,
                class_="double-run",
                data_run=overlap.run,
            )
            if index < MAX_OVERLAP_LABELS:
                text = element(
                    "text",
                    text=label,
                    x=x0 - 3,
                    y=self.top - 28,
                    fill=REFUSAL,
                    font_weight="bold",
                    text_anchor="end",
                )
                self.svg.pin(x0, text, fit=(x0 - LEFT, 7.0 * len(label)))

    def mark_findings(self, bottom: float) -> None:
        """Each finding: a numbered badge above the lanes (a link to its words), a line down
        through every lane at its instant, and a ring on its run's row."""
        scope_of = {run: scope for scope, runs in self.model.runs.items() for run in runs}
        for number, (finding, row) in enumerate(
            zip(self.findings, self.badge_rows, strict=True), 1
        ):
            x = self.x(finding.t)
            kind = "violation" if finding.verdict == "violation" else "explained"
            color = REFUSAL if kind == "violation" else EXPLAINED
            title = f"{number}. {finding.line()}"
            self.svg.add(
                "line",
                title=title,
                kind=kind,
                x1=x,
                y1=BADGE_ROWS[0],
                x2=x,
                y2=bottom,
                stroke=color,
                stroke_width=1.5,
                stroke_dasharray="5 3",
                data_finding=number,
            )
            y = BADGE_ROWS[row]
            badge = (
                f'<a href="#finding-{number}" data-finding="{number}" class="finding-badge">'
                + element("circle", title=title, cx=x, cy=y, r=BADGE_R, fill=color)
                + element(
                    "text",
                    text=str(number),
                    x=x,
                    y=y + 3.5,
                    font_size=10 if number < 100 else 8,
                    font_weight="bold",
                    fill="#ffffff",
                    text_anchor="middle",
                )
                + "</a>"
            )
            self.svg.pin(x, badge, kind=kind)
            run_row = self.run_rows.get((finding.run or "", scope_of.get(finding.run or "", "")))
            if run_row is not None:
                cy = run_row.y + run_row.height / 2
                ring = element(
                    "circle",
                    title=title,
                    cx=x,
                    cy=cy,
                    r=8,
                    fill="none",
                    stroke=color,
                    stroke_width=2.5,
                    data_finding=number,
                    class_="finding-ring",
                )
                self.svg.pin(x, ring, kind=kind)

    def world_notes(self) -> None:
        for mark in self.model.marks:
            if mark.kind == "note":
                x = self.x(mark.t)
                glyph = diamond(x, self.top - 4, 4, "#555555", f"note: {mark.title}")
                self.svg.pin(x, glyph, kind="note")

    # -- legend and notes -------------------------------------------------------------------------

    def legend(self, y: float) -> float:
        svg = self.svg
        svg.add("text", text="legend", layer="over", x=12, y=y + 4, font_weight="bold")
        x = 68.0
        for drive in self.model.drives[:MAX_LANES]:
            svg.add("rect", layer="over", x=x, y=y - 5, width=14, height=10, fill=self.color(drive))
            svg.add("text", text=f"drive {drive}", layer="over", x=x + 18, y=y + 4)
            x += 60 + 6.5 * len(drive)
        y += 22
        column = (WIDTH - 24) / 3
        items = legend_items()
        per_column = math.ceil(len(items) / 3)
        for index, (kind, draw, text) in enumerate(items):
            cx = 12 + column * (index // per_column) + 10
            cy = y + 18 * (index % per_column)
            glyph = draw(cx, cy)
            words = element("text", text=text, x=cx + 16, y=cy + 4)
            faded = "" if kind in svg.kinds else ' opacity="0.45"'
            svg.layers["over"].append(f'<g data-legend="{kind}"{faded}>{glyph}{words}</g>')
        return y + 18 * per_column

    def notes(self, y: float) -> float:
        notes = ["legend entries drawn faded do not occur in this trace", *self.model.notes]
        if self.scale.cuts:
            notes.append(
                f"{len(self.scale.cuts)} idle gaps cut from the time axis (hatched grey bands, "
                "each labelled with its length); elsewhere the axis is linear"
            )
        if self.merged:
            notes.append(
                f"aggregated: {self.merged} shapes closer than a pixel were merged into their "
                "neighbours (hover for counts)"
            )
        for note in notes:
            y += 15
            self.svg.add("text", text=note, layer="over", x=12, y=y, fill="#8a4b00")
        return y

    def data(self) -> str:
        pieces = [
            [piece.t0, piece.t1, piece.x0, piece.x1, int(piece.cut)] for piece in self.scale.pieces
        ]
        kept_ms = sum(p.t1 - p.t0 for p in self.scale.pieces if not p.cut)
        kept_px = sum(p.x1 - p.x0 for p in self.scale.pieces if not p.cut)
        px_per_ms = kept_px / kept_ms if kept_ms > 0 else _MAX_ZOOM_PX_PER_MS
        clock = self.model.clock
        return page_data(
            left=LEFT,
            right=WIDTH - RIGHT,
            top=self.top,
            bottom=self.layout.height,
            pieces=pieces,
            clock=None if clock is None else [clock.origin_ms, clock.rate],
            maxZoom=max(20.0, round(_MAX_ZOOM_PX_PER_MS / max(px_per_ms, 1e-9), 1)),
        )


def _short_ms(ms: float) -> str:
    if ms >= 60_000:
        return f"{ms / 60_000:.3g} min"
    if ms >= 1_000:
        return f"{ms / 1_000:.3g} s"
    return f"{ms:.3g} ms"


_CONTROLS = (
    '<div class="controls"><button id="zoom-out" title="zoom out (-)">−</button>'
    '<button id="zoom-in" title="zoom in (+)">+</button>'
    '<button id="zoom-fit" title="the whole trace (0)">whole trace</button>'
    '<span id="zoom-level">whole trace</span><span class="hint">wheel or + and − zoom, drag '
    "or ← → pan, double-click zooms in, 0 shows the whole trace; hover anything for its "
    "details</span></div>"
)


def render_html(
    trace: Trace,
    *,
    title: str,
    report: CheckReport | None = None,
    mismatches: Sequence[str] | None = None,
    replay: str | None = None,
    plan: FaultPlan | str | None = None,
    plan_replaced: bool | None = None,
    mutant: str | None = None,
    summary: str | None = None,
) -> str:
    """The trace as one self-contained HTML page: the verdict, the world and the checks' findings,
    then the timeline as inline SVG, zoomable by an inline script. ``report`` is the check report
    (by default the page checks the trace itself); ``mismatches``, what the scenario documents
    and the world did not do (None: not compared); ``plan``, ``plan_replaced`` (whether it
    replaced the scenario's own) and ``mutant`` default to what the trace's ``world.begin``
    recorded."""
    facts: PageFacts = facts_of(
        trace,
        title=title,
        report=report,
        mismatches=mismatches,
        replay=replay,
        plan=plan,
        plan_replaced=plan_replaced,
        mutant=mutant,
        summary=summary,
    )
    model = build_timeline(trace)
    page = _Page(model, facts.shown)
    svg = page.draw()
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
        f"<body>\n<header>\n{head_html(facts, model, trace)}\n</header>\n{_CONTROLS}\n{svg}\n"
        f'<script type="application/json" id="timeline-data">{page.data()}</script>\n'
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def write_timeline(
    trace: Trace,
    path: str | Path,
    *,
    title: str,
    report: CheckReport | None = None,
    mismatches: Sequence[str] | None = None,
    replay: str | None = None,
    plan: FaultPlan | str | None = None,
    plan_replaced: bool | None = None,
    mutant: str | None = None,
    summary: str | None = None,
) -> None:
    """Write :func:`render_html` of ``trace`` to ``path``."""
    page = render_html(
        trace,
        title=title,
        report=report,
        mismatches=mismatches,
        replay=replay,
        plan=plan,
        plan_replaced=plan_replaced,
        mutant=mutant,
        summary=summary,
    )
    Path(path).write_text(page, encoding="utf-8")
