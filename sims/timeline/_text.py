"""The timeline as a few lines of text: an axis, one line per drive, per (scope, run) row and per
service operation, and a line for the world's end."""

from __future__ import annotations

from collections.abc import Iterable

from .._trace import Trace
from ._calls import call_sentence, shorten_ids
from ._model import (
    MAX_OVERLAP_LABELS,
    Timeline,
    operations_shown,
    runs_shown,
    short,
    visible_lanes,
)
from ._reader import build_timeline
from ._scale import build_scale, fmt_ms, ticks
from ._world_end import closing_words

#: Sentences about single calls and effects (ambiguous, late) the notes give at most.
MAX_CALL_NOTES = 8

_TEXT_LEGEND = (
    (
        "drives:",
        "- claimed, not begun",
        "= handler",
        "s stale handler",
        "# step",
        "m memo hit",
        "! refused/lost",
        "X crash",
        "_ down",
        "~ delay",
        "p pause",
        "L late reply",
        "> request given up on, delivered late",
        "D dropped leg",
        "? saw a timeout of a call that ran",
        ". tick",
    ),
    (
        "scopes:",
        "a,b,.. lease held by that drive",
        "A,B,.. BEGIN",
        ": expired, not released",
        "* effect",
        "2 duplicate effect",
        "E eviction",
        "v abandoned request runs late",
        "! late effect (noted)",
    ),
    ("axis:", "/ idle gap cut out", "X (double run line) two handlers of one run at once"),
)

#: The legend of a service's rows (one per operation), shown when the world called a service.
_SERVICE_LEGEND = (
    "services:",
    "A,B,.. effect by that drive",
    "2 the same effect again",
    "a,b,.. read by it",
    "= repeat an idempotency key answered",
    "x refused",
    "- request lost, never ran",
    "? ambiguous: it ran, its caller saw a timeout (noted)",
    "! late effect (noted)",
)

#: The legend of the world's end line.
_END_LEGEND = (
    "world end:",
    "R the scenario returned",
    ". still running",
    "Q all stopped by themselves",
    "C cut after the grace",
)


def _pack(items: Iterable[str], width: int, *, sep: str = "  ") -> list[str]:
    """Items joined by ``sep``, wrapped between items (continuations indented) within ``width``."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(sep) + len(item) <= width:
            lines[-1] += sep + item
        else:
            lines.append(item if not lines else "    " + item)
    return lines


class _Canvas:
    """One text row: each cell keeps the highest-priority character painted on it."""

    def __init__(self, cols: int) -> None:
        self.cells = [" "] * cols
        self.ranks = [0] * cols

    def put(self, col: int, char: str, rank: int) -> None:
        if 0 <= col < len(self.cells) and rank >= self.ranks[col]:
            self.cells[col], self.ranks[col] = char, rank

    def span(self, c0: int, c1: int, char: str, rank: int) -> None:
        for col in range(c0, max(c1, c0) + 1):
            self.put(col, char, rank)

    def text(self) -> str:
        return "".join(self.cells)


_MARK_CHARS = {
    "refusal": ("!", 8),
    "crash": ("X", 9),
    "drop": ("D", 7),
    "late": ("L", 7),
    "tick": (".", 1),
    "skip": ("_", 2),
    "ambiguous": ("?", 8),
}


class _Text:
    """Draws a :class:`Timeline` as lines of text."""

    def __init__(self, model: Timeline, width: int) -> None:
        self.model = model
        self.width = width
        self.label = max(8, min(18, width // 6))
        self.cols = max(width - self.label - 2, 10)
        self.scale = build_scale(
            model.instants(),
            model.start,
            model.end,
            left=0,
            width=self.cols,
            cut_width=1,
            min_width=1,
            max_cuts=self.cols // 10,
        )
        self.letters = {d: chr(ord("a") + i) if i < 26 else "?" for i, d in enumerate(model.drives)}

    def col(self, t: float) -> int:
        return min(int(self.scale.x(t)), self.cols - 1)

    def line(self, label: str, body: str) -> str:
        name = label if len(label) <= self.label else label[: self.label - 1] + "…"
        return f"{name:<{self.label}}|{body}|"

    def render(self) -> list[str]:
        model = self.model
        drives, scopes, services = visible_lanes(model)
        head = (
            f"timeline {fmt_ms(model.start)}–{fmt_ms(model.end)} ms, {model.events} events, "
            f"drives: {len(model.drives)}, scopes: {len(model.scopes)}, "
            f"double runs: {len(model.overlaps)}"
        ).replace("\u2009", "")
        lines = [*_pack(head.split(" "), self.width, sep=" "), *self.axis()]
        lines += [self.line(drive, self.drive_row(drive)) for drive in drives]
        for scope in scopes:
            runs = runs_shown(model, scope) or [""]
            for run in runs:
                label = f"{scope} {short(run)}" if len(runs) > 1 else scope
                lines.append(self.line(label, self.run_row(scope, run)))
        for service in services:
            for op in operations_shown(model, service):
                lines.append(self.line(op, self.operation_row(op)))
        lines.append(self.line("double run", self.overlap_row()))
        if model.world_end is not None:
            lines.append(self.line("world end", self.end_row()))
        letters = [f"{letter}={drive}" for drive, letter in self.letters.items()]
        legend = [*_TEXT_LEGEND]
        if model.calls:
            legend.append(_SERVICE_LEGEND)
        if model.world_end is not None:
            legend.append(_END_LEGEND)
        for items in (*legend, ("drive letters:", *letters) if letters else ()):
            lines += _pack(items, self.width)
        for note in self.notes():
            lines += _pack(f"note: {note}".split(" "), self.width, sep=" ")
        return lines

    def axis(self) -> list[str]:
        ruler, labels = _Canvas(self.cols), [" "] * (self.cols + 12)
        for piece in self.scale.cuts:
            ruler.span(self.col(piece.t0) + 1, int(piece.x1) - 1, "/", 5)
        free = 0
        for t, _ in ticks(self.scale, spacing=12):
            col = self.col(t)
            if ruler.cells[col] == "/":
                continue
            ruler.put(col, "+", 3)
            label = fmt_ms(t).replace("\u2009", "")
            if col >= free and col + len(label) <= self.cols:
                labels[col : col + len(label)] = list(label)
                free = col + len(label) + 1
        for col, cell in enumerate(ruler.cells):
            if cell == " ":
                ruler.put(col, "-", 0)
        return [
            self.line("virtual ms", "".join(labels[: self.cols])),
            self.line("", ruler.text()),
        ]

    def drive_row(self, drive: str) -> str:
        canvas, horizon = _Canvas(self.cols), self.model.end
        for found in self.model.passes:
            if found.drive != drive:
                continue
            span = found.handler_span(horizon)
            admission_end = span[0] if span is not None else found.end(horizon)
            canvas.span(self.col(found.claimed_at), self.col(admission_end), "-", 3)
            if span is not None:
                char = "s" if found.stale_since is not None else "="
                canvas.span(self.col(span[0]), self.col(span[1]), char, 4)
            for step in found.steps:
                end = step.end if step.end is not None else found.end(horizon)
                canvas.span(self.col(step.start), self.col(end), "#", 5)
            for t, _ in found.memos:
                canvas.put(self.col(t), "m", 6)
        for mark in self.model.marks:
            if mark.lane != drive:
                continue
            if mark.kind in ("delay", "pause") and mark.since is not None:
                char = "~" if mark.kind == "delay" else "p"
                canvas.span(self.col(mark.since), self.col(mark.t), char, 2)
                canvas.put(self.col(mark.since), char, 7)
            elif mark.kind == "late-request" and mark.since is not None:
                canvas.span(self.col(mark.since), self.col(mark.t), ">", 2)
            elif mark.kind == "down" and mark.since is not None:
                canvas.span(self.col(mark.since), self.col(mark.t), "_", 2)
            elif mark.kind in _MARK_CHARS:
                char, rank = _MARK_CHARS[mark.kind]
                canvas.put(self.col(mark.t), char, rank)
        return canvas.text()

    def run_row(self, scope: str, run: str) -> str:
        canvas, horizon = _Canvas(self.cols), self.model.end
        for lease in self.model.leases:
            if lease.scope != scope or lease.run != run:
                continue
            letter = self.letters.get(lease.drive, "?")
            for start, end, held in lease.segments(horizon):
                c0, c1 = self.col(start), self.col(end)
                canvas.span(c0 + (0 if held else 1), c1, letter if held else ":", 3 if held else 2)
            if lease.began_at is not None:
                canvas.put(self.col(lease.began_at), letter.upper(), 6)
        for effect in self.model.effects:
            if effect.scope == scope and effect.run == run:
                canvas.put(
                    self.col(effect.t), "2" if effect.copy > 1 else "*", 7 if effect.copy > 1 else 5
                )
                if effect.late is not None:
                    canvas.put(self.col(effect.t), "!", 9)
        for mark in self.model.marks:
            if mark.lane == scope and mark.kind == "evict":
                canvas.put(self.col(mark.t), "E", 8)
            elif mark.lane == scope and mark.kind == "late-arrival":
                canvas.put(self.col(mark.t), "v", 8)
        return canvas.text()

    def operation_row(self, op: str) -> str:
        """A service operation's calls, each where it ran, in its caller's letter."""
        canvas = _Canvas(self.cols)
        for call in self.model.calls:
            if call.op != op:
                continue
            if call.ambiguous:
                ends = [t for t in (call.ran_at, call.doubted_at, call.late_at) if t is not None]
                # At least one column after the call's own, where the doubt is seen.
                last = max(self.col(max(ends)), self.col(min(ends)) + 1)
                canvas.span(self.col(min(ends)), last, "?", 2)
            letter = self.letters.get(call.drive, "?")
            if call.kind == "effect":
                char, rank = ("2", 7) if call.copy > 1 else (letter.upper(), 6)
            elif call.kind in ("read", "repeat"):
                char, rank = (letter.lower(), 4) if call.kind == "read" else ("=", 4)
            elif call.kind == "refused":
                char, rank = "x", 5
            else:
                char, rank = "-", 3
            at = next(t for t in (call.ran_at, call.dropped_at, call.sent_at) if t is not None)
            canvas.put(self.col(at), "!" if call.late_effect is not None else char, rank + 3)
        return canvas.text()

    def end_row(self) -> str:
        """Where the scenario returned, and where what still ran stopped or was cut."""
        end = self.model.world_end
        canvas = _Canvas(self.cols)
        if end is None:
            return canvas.text()
        start = self.col(end.closing_at)
        if end.ended_at is not None and end.how is not None:
            stop = self.col(end.ended_at)
            canvas.span(start, stop, ".", 1)
            canvas.put(stop, "Q" if end.how == "quiet" else "C", 5)
        canvas.put(start, "R", 6)
        return canvas.text()

    def overlap_row(self) -> str:
        canvas = _Canvas(self.cols)
        for overlap in self.model.overlaps:
            canvas.span(self.col(overlap.start), self.col(overlap.end), "X", 1)
        return canvas.text()

    def notes(self) -> list[str]:
        notes = list(self.model.notes)
        for overlap in self.model.overlaps[:MAX_OVERLAP_LABELS]:
            notes.append(
                f"double run: {short(overlap.run)} by {overlap.drives[0]} and {overlap.drives[1]}, "
                f"{fmt_ms(overlap.start)}–{fmt_ms(overlap.end)} ms"
            )
        hidden = len(self.model.overlaps) - MAX_OVERLAP_LABELS
        if hidden > 0:
            notes.append(f"{hidden} more double runs")
        for found in self.model.passes:
            if found.stale_since is not None:
                notes.append(
                    f"stale pass: {short(found.owner)} on {found.drive} began its handler after "
                    f"its lease of {short(found.run)} was taken over at "
                    f"{fmt_ms(found.stale_since)} ms"
                )
        notes += self.call_notes()
        if self.model.world_end is not None:
            notes.append(f"world end: {closing_words(self.model.world_end, short)}")
        if self.scale.cuts:
            notes.append(f"{len(self.scale.cuts)} idle gaps cut from the axis ('/')")
        return [note.replace("\u2009", "") for note in notes]

    def call_notes(self) -> list[str]:
        """The calls and effects the rows mark but cannot say: ambiguous ones, late ones."""
        told = [
            f"{'ambiguous' if call.ambiguous else 'late effect'}: {call_sentence(call, short)}"
            for call in self.model.calls
            if call.ambiguous or call.late_effect is not None
        ]
        told += [
            f"late effect: {shorten_ids(effect.key, short)} at {fmt_ms(effect.t)} ms in scope "
            f"{effect.scope}: {shorten_ids(effect.late, short)}"
            for effect in self.model.effects
            if effect.late is not None
        ]
        if len(told) > MAX_CALL_NOTES:
            hidden = len(told) - MAX_CALL_NOTES
            told = [*told[:MAX_CALL_NOTES], f"{hidden} more ambiguous calls or late effects"]
        return told


def render_terminal(trace: Trace, *, width: int = 100) -> str:
    """The trace as text: an axis, one line per drive and per (scope, run) row, then the legend."""
    return "\n".join(_Text(build_timeline(trace), width).render()) + "\n"
