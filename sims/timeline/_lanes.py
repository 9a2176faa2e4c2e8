"""The page's lanes: a drive's passes and marks, a scope's leases, effects and marks (the
service lanes are :mod:`._service_lanes`')."""

from __future__ import annotations

from ._endings import ending_title, pass_ending, taken_over_words
from ._model import Lease, Mark, Pass, StoreClockFit, runs_shown, short
from ._scale import fmt_ms, fmt_store
from ._service_lanes import AMBIGUOUS, ServiceLanes
from ._svg import (
    REFUSAL,
    RIGHT,
    WIDTH,
    Row,
    Shape,
    cross,
    diamond,
    element,
    fmt_num,
    merged_title,
)

#: Colours of the drive lanes' marks, shared with the legend.
MARK_COLORS = {
    "delay": "#e07b00",
    "pause": "#8e44ad",
    "late": "#1f77b4",
    "slow": "#7f9fbf",
    "late-request": "#0f8b8d",
    "down": "#555555",
}


#: Roughly how wide a character of the 9–10 px labels is, to tell whether a label fits.
CHAR_PX = 5.6


def _need(label: str) -> float:
    return CHAR_PX * len(label) + 6


class Lanes(ServiceLanes):
    """Draws the drive lanes and the scope lanes of a :class:`Sheet`."""

    # -- drives -----------------------------------------------------------------------------------

    def drive_lanes(self) -> None:
        rows = self.layout.rows
        shown = {name for kind, name, _, _ in self.layout.lanes if kind == "drive"}
        passes_by_owner: dict[str, Pass] = {}
        for found in self.model.passes:
            passes_by_owner[found.owner] = found
            if found.drive in shown:
                self.draw_pass(found, rows[("drive", found.drive, found.row)])
        marks: list[tuple[Row, Mark]] = []
        for mark in self.model.marks:
            if mark.lane not in shown or mark.kind in ("evict", "start", "note"):
                continue
            owner = passes_by_owner.get(mark.owner or "")
            row = rows[("drive", mark.lane, owner.row if owner is not None else -1)]
            marks.append((row, mark))
        self.draw_marks(marks)

    def draw_pass(self, found: Pass, row: Row) -> None:
        svg, horizon = self.svg, self.model.end
        color = self.color(found.drive)
        mid = row.y + row.height / 2 + 3
        end = found.end(horizon)
        title = pass_title(found, horizon)
        handler = found.handler_span(horizon)
        admission_end = handler[0] if handler is not None else end
        x0, x1 = self.x(found.claimed_at), self.x(admission_end)
        svg.add(
            "rect",
            title=title,
            kind="claim",
            x=x0,
            y=mid - 1.5,
            width=max(x1 - x0, 1.0),
            height=3,
            fill=color,
            opacity=0.55,
        )
        if found.began_at is not None:
            bx = self.x(found.began_at)
            svg.add(
                "line",
                title=f"BEGIN of {short(found.owner)} acknowledged at {fmt_ms(found.began_at)} ms",
                kind="begin",
                x1=bx,
                y1=mid - 9,
                x2=bx,
                y2=mid + 9,
                stroke="#111111",
                stroke_width=2,
            )
        self.draw_ending(found, mid)
        if handler is None:
            return
        hx0, hx1 = self.x(handler[0]), self.x(handler[1])
        stale = found.stale_since is not None
        svg.add(
            "rect",
            title=title,
            kind="stale" if stale else "handler",
            x=hx0,
            y=mid - 9,
            width=max(hx1 - hx0, 2.0),
            height=18,
            fill=color,
            fill_opacity=0.3,
            stroke=REFUSAL if stale else color,
            stroke_width=1.5 if stale else 1,
            stroke_dasharray="4 2" if stale else None,
            rx=2,
        )
        self.draw_steps(found, mid)
        label = f"run {short(found.run)} · pass {short(found.owner)}" + (
            " · STALE" if stale else ""
        )
        svg.pin(
            hx0,
            element("text", text=label, x=hx0 + 1, y=mid - 11, font_size=9, fill="#333333"),
            fit=(self.room_after(found, hx0), _need(label)),
        )

    def draw_ending(self, found: Pass, mid: float) -> None:
        """Close the pass where it ended, labelled with how; mark where its lease was taken."""
        ending = pass_ending(found)
        title = ending_title(found)
        x = self.x(found.end(self.model.end))
        color = {"pass-failed": REFUSAL, "given-up": "#555555"}.get(ending.kind, "#111111")
        if ending.kind == "open":
            d = f"M{fmt_num(x)},{fmt_num(mid)} l-6,-5 l0,10 z"
            glyph = element("path", title=title, d=d, fill="#555555")
        else:
            glyph = element(
                "path",
                title=title,
                d=f"M{fmt_num(x - 3)},{fmt_num(mid - 7)} h3 v14 h-3",
                # Filled, invisibly, so that hovering inside the cap shows how the pass ended.
                fill=color,
                fill_opacity=0,
                stroke=color,
                stroke_width=2 if ending.kind != "end" else 1,
            )
        self.svg.pin(x, glyph, kind=ending.kind)
        if ending.label:
            label = element(
                "text",
                title=title,
                text=ending.label,
                x=x + (-8 if ending.kind == "open" else 3),
                y=mid + 3.5,
                font_size=9,
                font_weight="bold" if ending.kind == "pass-failed" else None,
                fill=color if ending.kind != "end" else "#333333",
                text_anchor="end" if ending.kind == "open" else None,
            )
            room = (
                x - self.x(found.claimed_at) if ending.kind == "open" else self.room_after(found, x)
            )
            self.svg.pin(x, label, fit=(room, _need(ending.label)))
        if found.taken_over_at is not None:
            tx = self.x(found.taken_over_at)
            words = taken_over_words(found) or ""
            d = f"M{fmt_num(tx)},{fmt_num(mid - 9)} l4,-5 l-8,0 z"
            self.svg.pin(
                tx,
                element("path", title=f"pass {short(found.owner)}: {words}", d=d, fill=REFUSAL),
                kind="taken-over",
            )

    def room_after(self, found: Pass, x: float) -> float:
        """Room for a label from ``x`` to the next pass in the same row (or the plot's end)."""
        later = [
            self.x(other.claimed_at)
            for other in self.model.passes
            if other.drive == found.drive
            and other.row == found.row
            and other.claimed_at > found.claimed_at
        ]
        return min([*later, WIDTH - RIGHT]) - x

    def draw_steps(self, found: Pass, mid: float) -> None:
        horizon = found.end(self.model.end)
        shapes = [
            Shape(
                step.start,
                step.end if step.end is not None else horizon,
                "error" if step.error else "ok",
                f"step {step.name} attempt {step.attempt}: {fmt_ms(step.start)}–"
                f"{fmt_ms(step.end) if step.end is not None else '?'} ms"
                + (f", error {step.error}" if step.error else "")
                + ("" if step.recorded is not False else ", NOT recorded"),
            )
            for step in found.steps
        ]
        names = {(step.start, "error" if step.error else "ok"): step for step in found.steps}
        for shape in self.merge(shapes, 1.0):
            x0, x1 = self.x(shape.t0), self.x(shape.t1)
            error = shape.key == "error"
            self.svg.add(
                "rect",
                title=merged_title(shape),
                kind="step-error" if error else "step",
                x=x0,
                y=mid - 6,
                width=max(x1 - x0, 1.5),
                height=12,
                fill=REFUSAL if error else self.color(found.drive),
                stroke="#ffffff",
                stroke_width=0.5,
            )
            step = names.get((shape.t0, shape.key))
            if shape.count == 1 and step is not None:
                label = step.name if step.attempt == 1 else f"{step.name} #{step.attempt}"
                self.svg.pin(
                    x0,
                    element("text", text=label, x=x0 + 2, y=mid + 3.5, font_size=9, fill="#fff"),
                    fit=(x1 - x0, _need(label)),
                )
        memos = [Shape(t, t, "memo", f"memo hit: step {name}") for t, name in found.memos]
        for shape in self.merge(memos, 2.0):
            x = self.x(shape.t0)
            self.svg.pin(
                x, diamond(x, mid, 4, "#ffffff", merged_title(shape), stroke="#111111"), kind="memo"
            )

    def draw_marks(self, marks: list[tuple[Row, Mark]]) -> None:
        spans = [(row, mark) for row, mark in marks if mark.since is not None]
        for row, mark in spans:
            self.draw_span_mark(row, mark)
        points: dict[tuple[str, int], list[Shape]] = {}
        rows: dict[tuple[str, int], Row] = {}
        for row, mark in marks:
            if mark.since is None or mark.kind in ("late", "slow"):
                key = (row.lane, row.index)
                rows[key] = row
                points.setdefault(key, []).append(Shape(mark.t, mark.t, mark.kind, mark.title))
        for key, shapes in points.items():
            row = rows[key]
            for shape in self.merge(shapes, 2.0):
                self.point_mark(row, shape)

    def draw_span_mark(self, row: Row, mark: Mark) -> None:
        assert mark.since is not None
        x0, x1 = self.x(mark.since), self.x(mark.t)
        y = row.y + row.height / 2 + (3 if mark.kind in ("late", "slow") else -3)
        if row.kind == "pass":
            y += 3
        stroke = MARK_COLORS.get(mark.kind, "#555555")
        if mark.kind == "down":
            self.svg.add(
                "rect",
                title=mark.title,
                kind="down",
                x=x0,
                y=row.y + 2,
                width=max(x1 - x0, 1.0),
                height=row.height - 4,
                fill="#555555",
                opacity=0.18,
            )
            return
        dash = {"late": "3 2", "slow": "3 2", "late-request": "1 2"}.get(mark.kind)
        self.svg.add(
            "line",
            title=mark.title,
            kind=mark.kind,
            x1=x0,
            y1=y,
            x2=max(x1, x0 + 1),
            y2=y,
            stroke=stroke,
            stroke_width=2,
            stroke_dasharray=dash,
        )
        if mark.kind in ("delay", "pause", "late-request"):
            self.svg.pin(x0, element("circle", title=mark.title, cx=x0, cy=y, r=3, fill=stroke))

    def point_mark(self, row: Row, shape: Shape) -> None:
        x, y = self.x(shape.t0), row.y + row.height / 2
        if row.kind == "pass":
            y += 3
        if shape.key in ("late", "slow"):
            y += 3
        title = merged_title(shape)
        glyph = None
        if shape.key == "refusal":
            glyph = cross(x, y, 4.5, REFUSAL, title)
        elif shape.key == "crash":
            glyph = cross(x, y, 6, "#111111", title, width=3)
        elif shape.key == "drop":
            glyph = cross(x, y, 4, "#e07b00", title)
        elif shape.key in ("late", "slow"):
            d = f"M{fmt_num(x)},{fmt_num(y)} l-7,-4 l0,8 z"
            glyph = element("path", title=title, d=d, fill=MARK_COLORS[shape.key])
        elif shape.key == "fence":
            glyph = cross(x, y, 3.5, "#777777", title)
        elif shape.key == "ambiguous":
            glyph = element(
                "text", title=title, text="?", x=x - 3, y=y + 4, font_size=12,
                font_weight="bold", fill=AMBIGUOUS,
            )  # fmt: skip
        elif shape.key == "tick":
            y0, y1 = row.y + 2, row.y + 7
            glyph = element("line", title=title, x1=x, y1=y0, x2=x, y2=y1, stroke="#999999")
        elif shape.key == "skip":
            glyph = element("circle", title=title, cx=x, cy=y, r=3, fill="none", stroke="#555555")
        if glyph is not None:
            self.svg.pin(x, glyph, kind=shape.key)

    # -- scopes -----------------------------------------------------------------------------------

    def scope_lanes(self) -> None:
        for lease in self.model.leases:
            row = self.run_rows.get((lease.run, lease.scope))
            if row is not None:
                self.draw_lease(lease, row)
        effects: dict[tuple[str, str], list[Shape]] = {}
        for effect in self.model.effects:
            kind = "duplicate" if effect.copy > 1 else "effect"
            title = f"effect {effect.key} at {fmt_ms(effect.t)} ms" + (
                f" (copy {effect.copy}: the work ran twice)" if effect.copy > 1 else ""
            )
            effects.setdefault((effect.run, effect.scope), []).append(
                Shape(effect.t, effect.t, kind, title)
            )
        for where, shapes in effects.items():
            row = self.run_rows.get(where)
            if row is not None:
                for shape in self.merge(shapes, 2.0):
                    self.draw_effect(row, shape)
        self.scope_marks()

    def draw_lease(self, lease: Lease, row: Row) -> None:
        svg = self.svg
        color = self.color(lease.drive)
        mid = row.y + row.height / 2
        title = lease_title(lease, self.model.clock)
        segments = lease.segments(self.model.end)
        for start, end, held in segments:
            x0, x1 = self.x(start), self.x(end)
            svg.add(
                "rect",
                title=title + ("" if held else " — EXPIRED here, not released"),
                kind="lease" if held else "lease-expired",
                x=x0,
                y=mid - 6,
                width=max(x1 - x0, 1.0),
                height=12,
                fill=color if held else "url(#hatch)",
                fill_opacity=0.8 if held else None,
                stroke=color,
                stroke_width=0.8,
                opacity=1.0 if held else 0.6,
            )
        if lease.takeover:
            x = self.x(lease.claimed_at)
            words = takeover_words(lease)
            svg.pin(
                x,
                element(
                    "path",
                    title=words,
                    d=f"M{fmt_num(x)},{fmt_num(mid - 7)} l4,-5 l-8,0 z",
                    fill=REFUSAL,
                ),
                kind="takeover",
            )
            if lease.charged is not None:
                self.draw_charge(lease, x, mid, words)
        if lease.began_at is not None:
            x = self.x(lease.began_at)
            svg.add(
                "line",
                title=f"BEGIN written for {short(lease.owner)} at {fmt_ms(lease.began_at)} ms",
                kind="begin",
                x1=x,
                y1=mid - 9,
                x2=x,
                y2=mid + 9,
                stroke="#111111",
                stroke_width=2.5,
            )
        if lease.ended_at is not None and lease.end_reason != "taken over":
            x = self.x(lease.ended_at)
            svg.add(
                "line",
                title=f"lease {lease.end_reason} at {fmt_ms(lease.ended_at)} ms",
                kind="release",
                x1=x,
                y1=mid - 8,
                x2=x,
                y2=mid + 8,
                stroke="#111111",
                stroke_width=1,
            )
        if segments:
            x0, x1 = self.x(segments[0][0]), self.x(segments[-1][1])
            label = f"{lease.drive} {short(lease.owner)}"
            svg.pin(
                x0,
                element("text", text=label, x=x0 + 4, y=mid + 3.5, font_size=9, fill="#ffffff"),
                fit=(x1 - x0, _need(label) + 4),
            )

    def draw_charge(self, lease: Lease, x: float, mid: float, words: str) -> None:
        """Say on the picture what the story says: the takeover charged an attempt, and the
        commit that later cleared it (the end table's attempts 0 is that commit's doing)."""
        label = f"+1 attempt (now {lease.charged})"
        self.svg.pin(
            x,
            element("text", title=words, text=label, x=x + 5, y=mid - 8, font_size=9, fill=REFUSAL),
            kind="charged",
            fit=(self.lease_room(lease, x), _need(label)),
        )
        if lease.cleared_at is None:
            return
        cx = self.x(lease.cleared_at)
        cleared = (
            f"the commit of {lease.cleared_by} at {fmt_ms(lease.cleared_at)} ms resets the "
            f"run's attempts to 0, clearing the attempt the takeover at "
            f"{fmt_ms(lease.claimed_at)} ms charged"
        )
        label = "commit: attempts → 0"
        # Written to the left of the commit, which is often the last thing on the row.
        self.svg.pin(
            cx,
            element("text", title=cleared, text=label, x=cx - 3, y=mid - 8, font_size=9,
                    fill="#1d6b35", text_anchor="end"),
            kind="cleared",
            fit=(cx - x - _need(f"+1 attempt (now {lease.charged})"), _need(label)),
        )  # fmt: skip

    def lease_room(self, lease: Lease, x: float) -> float:
        """Room after ``x`` up to the next lease of the same run (or the plot's end)."""
        later = [
            self.x(other.claimed_at)
            for other in self.model.leases
            if other.run == lease.run and other.claimed_at > lease.claimed_at
        ]
        return min([*later, WIDTH - RIGHT]) - x

    def draw_effect(self, row: Row, shape: Shape) -> None:
        y = row.y + row.height / 2
        duplicate = shape.key == "duplicate"
        x = self.x(shape.t0)
        circle = element(
            "circle",
            title=merged_title(shape),
            cx=x,
            cy=y,
            r=4.5 if duplicate else 2.5,
            fill=REFUSAL if duplicate else "#111111",
            stroke="#ffffff",
            stroke_width=0.8,
        )
        self.svg.pin(x, circle, kind=shape.key)

    def scope_marks(self) -> None:
        lanes = {name: (y, h) for kind, name, y, h in self.layout.lanes if kind == "scope"}
        for kind, name, _, _ in self.layout.lanes:
            if kind == "scope":
                for index, run in enumerate(runs_shown(self.model, name)):
                    row = self.layout.rows[("scope", name, index)]
                    self.svg.add(
                        "text",
                        title=f"run {run}",
                        text=f"run {short(run)}",
                        layer="over",
                        x=18,
                        y=row.y + 15,
                        fill="#555555",
                    )
        for mark in self.model.marks:
            if mark.lane not in lanes:
                continue
            y, h = lanes[mark.lane]
            x = self.x(mark.t)
            if mark.kind == "evict":
                self.svg.add(
                    "line",
                    title=mark.title,
                    kind="evict",
                    x1=x,
                    y1=y - 2,
                    x2=x,
                    y2=y + h + 2,
                    stroke="#111111",
                    stroke_width=2,
                    stroke_dasharray="5 3",
                )
                near_end = x > WIDTH - RIGHT - 50
                label = element(
                    "text",
                    text="evicted",
                    x=x - 3 if near_end else x + 3,
                    y=y + 10,
                    font_size=9,
                    text_anchor="end" if near_end else None,
                )
                self.svg.pin(x, label)
            elif mark.kind == "late-arrival":
                d = f"M{fmt_num(x)},{fmt_num(y + 12)} l-4,-7 l8,0 z"
                arrow = element("path", title=mark.title, d=d, fill=MARK_COLORS["late-request"])
                self.svg.pin(x, arrow, kind="late-arrival")
            elif mark.kind == "start":
                started = self.run_rows.get((mark.owner or "", mark.lane))
                if started is not None:
                    cy = started.y + started.height / 2
                    circle = element(
                        "circle", title=mark.title, cx=x, cy=cy, r=3, fill="none", stroke="#111"
                    )
                    self.svg.pin(x, circle, kind="start")


# -- hover titles ---------------------------------------------------------------------------------


def pass_title(found: Pass, horizon: float) -> str:
    parts = [
        f"pass {found.owner} of run {found.run} on {found.drive}",
        f"claimed {fmt_ms(found.claimed_at)} ms" + (" (takeover)" if found.takeover else ""),
    ]
    if found.began_at is not None:
        parts.append(f"BEGIN acknowledged {fmt_ms(found.began_at)} ms")
    span = found.handler_span(horizon)
    if span is not None:
        parts.append(f"handler {fmt_ms(span[0])}–{fmt_ms(span[1])} ms")
    if found.stale_since is not None:
        parts.append(
            f"STALE: its lease was taken over at {fmt_ms(found.stale_since)} ms, "
            "before its handler started"
        )
    else:
        parts.append(taken_over_words(found) or "")
    parts.append(f"how it ended: {pass_ending(found).words}")
    parts.append(f"{len(found.steps)} steps run, {len(found.memos)} memo hits")
    if found.outcome is not None:
        parts.append(f"outcome {found.outcome} (written: {found.written})")
    if found.error:
        parts.append(f"error: {found.error}")
    return "; ".join(part for part in parts if part)


def lease_title(lease: Lease, clock: StoreClockFit | None) -> str:
    parts = [f"lease of run {lease.run} held by {lease.owner} ({lease.drive})"]
    parts.append(
        f"claimed {fmt_ms(lease.claimed_at)} ms" + (" by takeover" if lease.takeover else "")
    )
    if lease.renewals:
        expiry = lease.renewals[-1][1]
        store = f" (store {fmt_store(clock.to_store(expiry))})" if clock is not None else ""
        parts.append(f"last expiry {fmt_ms(expiry)} ms{store}")
        if len(lease.renewals) > 1:
            parts.append(f"renewed {len(lease.renewals) - 1} times")
    if lease.began_at is not None:
        parts.append(f"BEGIN {fmt_ms(lease.began_at)} ms")
    if lease.ended_at is not None:
        parts.append(f"{lease.end_reason} {fmt_ms(lease.ended_at)} ms")
    return "; ".join(parts)


def takeover_words(lease: Lease) -> str:
    """The takeover of a BEGUN lease, and the attempt it charged, as the story tells it."""
    words = f"takeover of a BEGUN lease by {short(lease.owner)} ({lease.drive})"
    if lease.charged is None:
        return words
    words += (
        f": the dead pass is charged an attempt (attempts now {lease.charged}; a commit resets "
        "attempts to 0, so a run that later commits ends with 0)"
    )
    if lease.cleared_at is not None:
        words += (
            f"; here {lease.cleared_by}'s commit at {fmt_ms(lease.cleared_at)} ms reset them to 0"
        )
    return words
