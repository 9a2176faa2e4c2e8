"""The page's service lanes: every call the world's services ran, where it ran, and the world's end.

A service lane has one row per operation ("bank.pay"). Each call is a thin line in its caller's
colour from when it was sent to when its caller stopped waiting, and a glyph where it ran at the
service: a filled dot for an effect, a ring for a read, a square for a repeat an idempotency key
answered, a red cross for a refusal, a grey ring where a request that never ran was lost. An
ambiguous call (it ran; its caller saw a timeout) gets an amber dashed line from where it ran to
where its caller gave up or its late reply came, and a ``?``; an effect that landed late (a stale
pass's, or after the scenario returned) a red ring. The world's end is drawn across every lane.
"""

from __future__ import annotations

from ._calls import HOVER_CHARS, call_label, call_sentence, shorten_ids, wire_words
from ._model import Effect, ServiceCall, short
from ._scale import fmt_ms
from ._svg import REFUSAL, RIGHT, WIDTH, Row, Shape, Sheet, cross, element, merged_title
from ._world_end import closing_words, cut_words

#: The colour of an ambiguous outcome: its caller does not know what happened.
AMBIGUOUS = "#b06f00"
#: The colour of the world's end, once everything stopped by itself.
QUIET = "#1d6b35"

#: Roughly how wide a character of the 9 px labels is, to tell whether a label fits.
_CHAR_PX = 5.6


def _need(label: str) -> float:
    return _CHAR_PX * len(label) + 6


def glyph_kind(call: ServiceCall) -> str:
    """The legend kind of the glyph a call is drawn with."""
    if call.copy > 1:
        return "duplicate"  # the same effect landed again, as on a scope's row
    return f"svc-{call.kind}" if call.kind is not None else "svc-lost"


def call_title(call: ServiceCall) -> str:
    """The call's hover: the story's sentence and where it came from, then, a line each, what
    crossed the wire: its arguments (and key), and its result."""
    step = f" in step {call.step}" if call.step else ""
    owner = f" by pass {short(call.owner)}" if call.owner else ""
    sentence = f"{call_sentence(call, short)} (sent at {fmt_ms(call.sent_at)} ms{step}{owner})"
    wire = wire_words(call, HOVER_CHARS, between="\n")
    return f"{sentence}\n{wire}"


def late_effect_title(effect: Effect) -> str:
    late = shorten_ids(effect.late or "", short)
    return f"LATE effect {shorten_ids(effect.key, short)} at {fmt_ms(effect.t)} ms: {late}"


class ServiceLanes(Sheet):
    """Draws the service lanes of a :class:`Sheet`, and the world's end."""

    def service_lanes(self) -> None:
        for op, row in self.operation_rows.items():
            self.svg.add(
                "text", title=f"operation {op}", text=op, layer="over", x=18, y=row.y + 15,
                fill="#555555",
            )  # fmt: skip
        rows: dict[str, list[ServiceCall]] = {}
        for call in self.model.calls:
            if call.op in self.operation_rows:
                rows.setdefault(call.op, []).append(call)
        for op, calls in rows.items():
            self.draw_calls(self.operation_rows[op], calls)

    def draw_calls(self, row: Row, calls: list[ServiceCall]) -> None:
        mid = row.y + row.height / 2
        lines = [
            Shape(
                call.sent_at,
                call.answered_at if call.answered_at is not None else self.model.end,
                f"svc-call|{call.drive}",
                call_title(call),
            )
            for call in calls
        ]
        for shape in self.merge(lines, 1.0):
            x0, x1 = self.x(shape.t0), self.x(shape.t1)
            self.svg.add(
                "rect", title=merged_title(shape), kind="svc-call", x=x0, y=mid + 5,
                width=max(x1 - x0, 1.0), height=2, fill=self.color(shape.key.split("|")[1]),
                opacity=0.55,
            )  # fmt: skip
        self.draw_ambiguity(mid, [call for call in calls if call.ambiguous])
        at = {id(call): self.where(call) for call in calls}
        glyphs = [
            Shape(at[id(call)], at[id(call)], f"{glyph_kind(call)}|{call.drive}", call_title(call))
            for call in calls
        ]
        alone = {(at[id(call)], f"{glyph_kind(call)}|{call.drive}"): call for call in calls}
        starts = sorted(at.values())
        for shape in self.merge(glyphs, 2.0):
            self.draw_glyph(shape, mid)
            call = alone.get((shape.t0, shape.key))
            if shape.count == 1 and call is not None:
                self.label_call(call, mid, starts)
        late = [
            Shape(at[id(call)], at[id(call)], "late-effect", call_title(call))
            for call in calls
            if call.late_effect is not None
        ]
        self.draw_late(late, mid)

    def where(self, call: ServiceCall) -> float:
        """Where a call is drawn: where it ran, else where its request was lost or sent."""
        for t in (call.ran_at, call.dropped_at, call.sent_at):
            if t is not None:
                return t
        return call.sent_at

    def draw_glyph(self, shape: Shape, mid: float) -> None:
        kind, drive = shape.key.split("|")
        x, color, title = self.x(shape.t0), self.color(drive), merged_title(shape)
        if kind == "svc-effect":
            glyph = element(
                "circle", title=title, cx=x, cy=mid, r=4, fill=color, stroke="#111111",
                stroke_width=1,
            )  # fmt: skip
        elif kind == "svc-read":
            glyph = element(
                "circle", title=title, cx=x, cy=mid, r=3.5, fill="#ffffff", stroke=color,
                stroke_width=1.5,
            )  # fmt: skip
        elif kind == "svc-repeat":
            glyph = element(
                "rect", title=title, x=x - 3.5, y=mid - 3.5, width=7, height=7, fill="#ffffff",
                stroke=color, stroke_width=1.5,
            )  # fmt: skip
        elif kind == "duplicate":
            glyph = element(
                "circle", title=title, cx=x, cy=mid, r=5, fill=REFUSAL, stroke=color,
                stroke_width=1.5,
            )  # fmt: skip
        elif kind == "svc-refused":
            glyph = cross(x, mid, 4, REFUSAL, title)
        elif kind == "svc-declined":
            glyph = element(
                "rect", title=title, x=x - 3.5, y=mid - 3.5, width=7, height=7, fill=REFUSAL,
                stroke=color, stroke_width=1,
            )  # fmt: skip
        else:
            glyph = element(
                "circle", title=title, cx=x, cy=mid, r=3.5, fill="none", stroke="#888888",
                stroke_width=1, stroke_dasharray="2 1",
            )  # fmt: skip
        self.svg.pin(x, glyph, kind=kind)

    def label_call(self, call: ServiceCall, mid: float, starts: list[float]) -> None:
        """The call's operation, caller and kind, after its glyph, where they fit."""
        t = self.where(call)
        x = self.x(t)
        later = [self.x(other) for other in starts if other > t]
        room = min([*later, WIDTH - RIGHT]) - x - 6
        label = call_label(call, short)
        self.svg.pin(
            x,
            element("text", text=label, x=x + 6, y=mid - 5, font_size=9, fill="#333333"),
            fit=(room, _need(label)),
        )

    def draw_ambiguity(self, mid: float, calls: list[ServiceCall]) -> None:
        """From where an ambiguous call ran to where its caller gave up (or its late reply
        came): what the caller does not know."""
        spans = []
        for call in calls:
            ends = [t for t in (call.ran_at, call.doubted_at, call.late_at) if t is not None]
            spans.append(Shape(min(ends), max(ends), "ambiguous", call_title(call)))
        for shape in self.merge(spans, 2.0):
            x0, x1 = self.x(shape.t0), self.x(shape.t1)
            title = merged_title(shape)
            self.svg.add(
                "line", title=title, kind="ambiguous", x1=x0, y1=mid + 9, x2=max(x1, x0 + 1),
                y2=mid + 9, stroke=AMBIGUOUS, stroke_width=1.5, stroke_dasharray="3 2",
            )  # fmt: skip
            mark = element(
                "text", title=title, text="?", x=x1 + 2, y=mid + 8, font_size=10,
                font_weight="bold", fill=AMBIGUOUS,
            )  # fmt: skip
            self.svg.pin(x1, mark, kind="ambiguous")

    def draw_late(self, shapes: list[Shape], mid: float) -> None:
        """A red ring round an effect that landed late, where it landed."""
        for shape in self.merge(shapes, 2.0):
            x = self.x(shape.t0)
            ring = element(
                "circle", title=merged_title(shape), cx=x, cy=mid, r=7, fill="none",
                stroke=REFUSAL, stroke_width=2,
            )  # fmt: skip
            self.svg.pin(x, ring, kind="late-effect")

    def late_effects(self) -> None:
        """The scope's effects that landed late, ringed on their run's row."""
        rows: dict[tuple[str, str], list[Shape]] = {}
        for effect in self.model.effects:
            if effect.late is not None:
                shape = Shape(effect.t, effect.t, "late-effect", late_effect_title(effect))
                rows.setdefault((effect.run, effect.scope), []).append(shape)
        for where, shapes in rows.items():
            row = self.run_rows.get(where)
            if row is not None:
                self.draw_late(shapes, row.y + row.height / 2)

    # -- the world's end --------------------------------------------------------------------------

    def world_end(self, bottom: float) -> None:
        """Where the scenario returned, and where what still ran stopped or was cut."""
        end = self.model.world_end
        if end is None:
            return
        words = closing_words(end, short)
        x0 = self.x(end.closing_at)
        y0, y1 = self.top - 4, bottom
        if end.ended_at is not None:
            x1 = self.x(end.ended_at)
            self.svg.add(
                "rect", title=words, kind="closing", x=x0, y=y0, width=max(x1 - x0, 1.0),
                height=y1 - y0, fill="#777777", fill_opacity=0.07,
            )  # fmt: skip
        self.svg.add(
            "line", title=words, kind="closing", x1=x0, y1=y0, x2=x0, y2=y1, stroke="#555555",
            stroke_width=1.5, stroke_dasharray="6 3",
        )  # fmt: skip
        self.end_label(x0, "scenario returned", words, x0 - self.x(self.model.start), "#555555")
        if end.how is None or end.ended_at is None:
            return
        x1 = self.x(end.ended_at)
        cut = end.how == "cut"
        color = REFUSAL if cut else QUIET
        title = cut_words(end, short) if cut else words
        self.svg.add(
            "line", title=title, kind="world-cut" if cut else "world-quiet", x1=x1, y1=y0, x2=x1,
            y2=y1, stroke=color, stroke_width=2,
        )  # fmt: skip
        label = f"cut after {fmt_ms(end.grace_ms)} ms of grace" if cut else "all stopped"
        self.end_label(x1, label, title, x1 - x0 - 4, color)

    def end_label(self, x: float, label: str, title: str, room: float, color: str) -> None:
        """A label written to the left of a line at the end of the axis, where it fits."""
        text = element(
            "text", title=title, text=label, x=x - 3, y=self.top - 1, font_size=9, fill=color,
            text_anchor="end", font_weight="bold",
        )  # fmt: skip
        self.svg.pin(x, text, fit=(room, _need(label)))
