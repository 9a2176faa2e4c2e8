"""The timeline as a self-contained HTML page: frame, axes, lanes, double runs, legend, notes."""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._timeline_lanes import Lanes
from ._timeline_model import MAX_LANES, MAX_OVERLAP_LABELS, short
from ._timeline_reader import build_timeline
from ._timeline_scale import fmt_ms, fmt_store, ticks
from ._timeline_svg import REFUSAL, RIGHT, WIDTH, fmt_num
from ._trace import Trace


class _Page(Lanes):
    """Draws a :class:`Timeline` as SVG."""

    # -- the frame --------------------------------------------------------------------------------

    def draw(self) -> str:
        bottom = self.layout.height
        self.frame(bottom)
        self.drive_lanes()
        self.scope_lanes()
        self.overlaps(bottom)
        self.world_notes()
        legend_y = self.store_axis(bottom) + 18
        end = self.legend(legend_y)
        end = self.notes(end + 10)
        height = end + 12
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{fmt_num(height)}" '
            f'viewBox="0 0 {WIDTH} {fmt_num(height)}" font-family="sans-serif" font-size="11">'
        )
        defs = (
            "<defs>"
            '<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/>'
            '<line x1="0" y1="0" x2="0" y2="6" stroke="#888888" stroke-width="2"/></pattern>'
            '<pattern id="cut" width="4" height="4" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(-45)"><rect width="4" height="4" fill="#f3f3f3"/>'
            '<line x1="0" y1="0" x2="0" y2="4" stroke="#d8d8d8" stroke-width="1.5"/></pattern>'
            "</defs>"
        )
        return head + defs + "".join(self.svg.parts) + "</svg>"

    def frame(self, bottom: float) -> None:
        svg, model = self.svg, self.model
        svg.add("rect", x=0, y=0, width=WIDTH, height="100%", fill="#ffffff")
        svg.add("text", text=self.title, x=12, y=24, font_size=18, font_weight="bold")
        summary = (
            f"{model.events} events · {fmt_ms(model.end - model.start)} ms of virtual time · "
            f"{len(model.drives)} drives · {len(model.scopes)} scopes · "
            f"{sum(len(r) for r in model.runs.values())} runs · "
            f"{len(model.overlaps)} double runs"
        )
        svg.add("text", text=summary, x=12, y=44, fill="#444444")
        if model.clock is not None:
            clock = (
                f"store clock: {fmt_store(model.clock.to_store(0.0))} at t=0, "
                f"rate {model.clock.rate:.4f}; leases are placed by it"
            )
            svg.add("text", text=clock, x=12, y=60, fill="#666666")
        for kind, name, y, h in self.layout.lanes:
            fill = "#f7f9fc" if kind == "drive" else "#f8f6f0"
            svg.add("rect", x=4, y=y - 2, width=WIDTH - 8, height=h + 4, fill=fill)
            label = name if name.startswith(kind) else f"{kind} {name}"
            svg.add("text", text=label, x=10, y=y + 12, font_weight="bold")
        self.idle_cuts(bottom)
        self.time_axis(bottom)

    def idle_cuts(self, bottom: float) -> None:
        svg = self.svg
        last = -math.inf
        for piece in self.scale.cuts:
            svg.add(
                "rect",
                title=f"idle {fmt_ms(piece.t1 - piece.t0)} ms cut: {fmt_ms(piece.t0)}–"
                f"{fmt_ms(piece.t1)} ms",
                x=piece.x0,
                y=self.top,
                width=piece.x1 - piece.x0,
                height=bottom - self.top,
                fill="url(#cut)",
            )
            if piece.x0 - last < 44:
                continue
            last = piece.x0
            svg.add(
                "text",
                text=f"≈{_short_ms(piece.t1 - piece.t0)}",
                x=(piece.x0 + piece.x1) / 2,
                y=self.top - 2,
                font_size=9,
                fill="#888888",
                text_anchor="middle",
            )

    def time_axis(self, bottom: float) -> None:
        svg = self.svg
        svg.add("text", text="virtual ms", x=10, y=self.top - 14, fill="#666666")
        last = -math.inf
        for t, first in ticks(self.scale, spacing=90):
            x = self.x(t)
            svg.add("line", x1=x, y1=self.top - 6, x2=x, y2=bottom, stroke="#e4e4e4")
            if x - last >= 56 or (first and x - last >= 30):
                svg.add(
                    "text", text=fmt_ms(t), x=x, y=self.top - 14, text_anchor="middle", font_size=10
                )
                last = x

    def store_axis(self, bottom: float) -> float:
        clock = self.model.clock
        if clock is None:
            return bottom
        svg = self.svg
        svg.add("text", text="store clock", x=10, y=bottom + 16, fill="#666666")
        last = -math.inf
        for t, _ in ticks(self.scale, spacing=90):
            x = self.x(t)
            if x - last >= 80:
                label = fmt_store(clock.to_store(t))
                anchor = "end" if x > WIDTH - RIGHT - 40 else "middle"
                svg.add("text", text=label, x=x, y=bottom + 16, text_anchor=anchor, font_size=10)
                svg.add("line", x1=x, y1=bottom, x2=x, y2=bottom + 5, stroke="#999999")
                last = x
        return bottom + 20

    # -- what spans lanes -------------------------------------------------------------------------

    def overlaps(self, bottom: float) -> None:
        labelled: list[float] = []
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
                x=x0,
                y=self.top,
                width=x1 - x0,
                height=bottom - self.top,
                fill=REFUSAL,
                fill_opacity=0.14,
                stroke=REFUSAL,
                stroke_width=1,
                class_="double-run",
                data_run=overlap.run,
            )
            if index < MAX_OVERLAP_LABELS and all(abs(x0 - seen) > 120 for seen in labelled):
                labelled.append(x0)
                self.svg.add(
                    "text",
                    text=label,
                    x=x0,
                    y=self.top - 30,
                    fill=REFUSAL,
                    font_weight="bold",
                    text_anchor="end" if x0 > WIDTH - 160 else "middle",
                )

    def world_notes(self) -> None:
        for mark in self.model.marks:
            if mark.kind == "note":
                x = self.x(mark.t)
                self.svg.diamond(x, self.top - 4, 4, "#555555", f"note: {mark.title}")

    # -- legend and notes -------------------------------------------------------------------------

    def legend(self, y: float) -> float:
        svg = self.svg
        x = 12.0
        svg.add("text", text="legend", x=x, y=y + 4, font_weight="bold")
        x += 56
        for drive in self.model.drives[:MAX_LANES]:
            svg.add("rect", x=x, y=y - 5, width=14, height=10, fill=self.color(drive))
            svg.add("text", text=drive, x=x + 18, y=y + 4)
            x += 26 + 6.5 * len(drive)
        y += 20
        x = 12.0
        for draw, text in self.legend_items():
            draw(x + 8, y)
            svg.add("text", text=text, x=x + 20, y=y + 4)
            x += 40 + 6.2 * len(text)
            if x > WIDTH - 200:
                x, y = 12.0, y + 18
        return y + 8

    def legend_items(self) -> list[tuple[Callable[[float, float], None], str]]:
        svg = self.svg

        def bar(fill: str, *, tall: float = 12, **more: Any) -> Callable[[float, float], None]:
            return lambda x, y: svg.add(
                "rect", x=x - 8, y=y - tall / 2, width=16, height=tall, fill=fill, **more
            )

        return [
            (bar("#3b6fd1", fill_opacity=0.8), "lease held (store's clock)"),
            (bar("url(#hatch)", stroke="#3b6fd1"), "lease expired, not released"),
            (
                lambda x, y: svg.add(
                    "line", x1=x, y1=y - 8, x2=x, y2=y + 8, stroke="#111", stroke_width=2.5
                ),
                "BEGIN",
            ),
            (bar("#3b6fd1", fill_opacity=0.35, stroke="#3b6fd1"), "handler (pass)"),
            (bar("#3b6fd1", tall=8), "step"),
            (bar("none", stroke=REFUSAL, stroke_dasharray="4 2"), "stale pass"),
            (lambda x, y: self.svg.diamond(x, y, 4, "#ffffff", "", stroke="#111"), "memo hit"),
            (lambda x, y: self.svg.cross(x, y, 4.5, REFUSAL, ""), "refused / lost"),
            (lambda x, y: self.svg.cross(x, y, 6, "#111111", "", width=3), "crash"),
            (
                lambda x, y: svg.add(
                    "line", x1=x - 8, y1=y, x2=x + 8, y2=y, stroke="#e07b00", stroke_width=2
                ),
                "delay",
            ),
            (
                lambda x, y: svg.add(
                    "line", x1=x - 8, y1=y, x2=x + 8, y2=y, stroke="#8e44ad", stroke_width=2
                ),
                "pause",
            ),
            (
                lambda x, y: svg.add(
                    "line",
                    x1=x - 8,
                    y1=y,
                    x2=x + 8,
                    y2=y,
                    stroke="#1f77b4",
                    stroke_width=2,
                    stroke_dasharray="3 2",
                ),
                "late reply",
            ),
            (lambda x, y: self.svg.cross(x, y, 4, "#e07b00", ""), "dropped leg"),
            (lambda x, y: svg.add("circle", cx=x, cy=y, r=2.5, fill="#111"), "effect"),
            (lambda x, y: svg.add("circle", cx=x, cy=y, r=4.5, fill=REFUSAL), "duplicate effect"),
            (bar(REFUSAL, fill_opacity=0.14, stroke=REFUSAL), "double run"),
            (bar("url(#cut)"), "idle gap cut"),
        ]

    def notes(self, y: float) -> float:
        notes = list(self.model.notes)
        if self.scale.cuts:
            notes.append(
                f"{len(self.scale.cuts)} idle gaps cut from the time axis (hatched grey bands)"
            )
        if self.merged:
            notes.append(
                f"aggregated: {self.merged} shapes closer than a pixel were merged into their "
                "neighbours (hover for counts)"
            )
        for note in notes:
            y += 15
            self.svg.add("text", text=note, x=12, y=y, fill="#8a4b00")
        return y


def _short_ms(ms: float) -> str:
    if ms >= 60_000:
        return f"{ms / 60_000:.1f} min"
    if ms >= 1_000:
        return f"{ms / 1_000:.1f} s"
    return f"{ms:.0f} ms"


_STYLE = (
    "body{margin:0;background:#ffffff;font-family:sans-serif}"
    "svg{display:block}"
    ".double-run:hover{fill-opacity:.3}"
)


def render_html(trace: Trace, *, title: str) -> str:
    """The trace as one self-contained HTML page: an inline SVG timeline, no scripts or assets."""
    svg = _Page(build_timeline(trace), title).draw()
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n"
        f"<body>\n{svg}\n</body></html>\n"
    )


def write_timeline(trace: Trace, path: str | Path, *, title: str) -> None:
    """Write :func:`render_html` of ``trace`` to ``path``."""
    Path(path).write_text(render_html(trace, title=title), encoding="utf-8")
