"""The timeline page's legend: every kind of thing the picture draws, with its glyph and words.

Each drawn element carries its kind (``data-k``) and each legend entry names one
(``data-legend``), so a test can hold the legend to everything the page draws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._lanes import MARK_COLORS
from ._service_lanes import AMBIGUOUS, QUIET
from ._svg import REFUSAL, cross, diamond, element

#: The colour of a finding the spec explains (a violation's is ``REFUSAL``).
EXPLAINED = "#c98a00"
#: The radius of a finding's numbered badge.
BADGE_R = 7.5


def _line(color: str, *, dash: str | None = None, width: float = 2) -> Callable[..., str]:
    return lambda x, y: element(
        "line",
        x1=x - 8,
        y1=y,
        x2=x + 8,
        y2=y,
        stroke=color,
        stroke_width=width,
        stroke_dasharray=dash,
    )


def _bar(fill: str, *, tall: float = 12, **more: Any) -> Callable[..., str]:
    return lambda x, y: element(
        "rect", x=x - 8, y=y - tall / 2, width=16, height=tall, fill=fill, **more
    )


def _vline(color: str, *, width: float = 2, dash: str | None = None) -> Callable[..., str]:
    return lambda x, y: element(
        "line", x1=x, y1=y - 8, x2=x, y2=y + 8, stroke=color, stroke_width=width,
        stroke_dasharray=dash,
    )  # fmt: skip


def _cap(color: str, *, width: float = 2) -> Callable[..., str]:
    return lambda x, y: element(
        "path", d=f"M{x - 3},{y - 7} h3 v14 h-3", fill="none", stroke=color, stroke_width=width
    )


def _word(text: str, color: str) -> Callable[..., str]:
    return lambda x, y: element(
        "text", text=text, x=x - 8, y=y + 3.5, font_size=9, fill=color, font_weight="bold"
    )


def legend_items() -> list[tuple[str, Callable[[float, float], str], str]]:
    """(kind, glyph, words) for every kind of thing the picture draws."""
    blue = "#3b6fd1"
    return [
        ("claim", _bar(blue, tall=3, opacity=0.55), "claimed; handler not started yet"),
        ("begin", _vline("#111111", width=2.5), "BEGIN: written (scope) / acknowledged (drive)"),
        ("handler", _bar(blue, fill_opacity=0.3, stroke=blue), "handler running (one pass)"),
        (
            "stale",
            _bar(blue, fill_opacity=0.3, stroke=REFUSAL, stroke_dasharray="4 2"),
            "stale pass: began after its lease was taken over",
        ),
        ("end", _cap("#111111", width=1), "pass ended (outcome written, refused, or killed)"),
        (
            "pass-failed",
            _cap(REFUSAL),
            "pass FAILED: the run retried later, or failed (labelled)",
        ),
        ("given-up", _cap("#555555"), "pass given up: its drive call ended, no outcome"),
        (
            "open",
            lambda x, y: element("path", d=f"M{x},{y} l-6,-5 l0,10 z", fill="#555555"),
            "pass still open when the world ended",
        ),
        (
            "taken-over",
            lambda x, y: element("path", d=f"M{x},{y + 3} l4,-5 l-8,0 z", fill=REFUSAL),
            "pass's lease taken over while it was open",
        ),
        ("step", _bar(blue), "step (its name inside, where it fits)"),
        ("step-error", _bar(REFUSAL), "step attempt that failed"),
        (
            "memo",
            lambda x, y: diamond(x, y, 4, "#ffffff", "", stroke="#111111"),
            "memo hit: a recorded step replayed",
        ),
        ("lease", _bar(blue, fill_opacity=0.8), "lease held (placed by the store's clock)"),
        (
            "lease-expired",
            _bar("url(#hatch)", stroke=blue, opacity=0.6),
            "lease expired, not released: open to takeover",
        ),
        ("release", _vline("#111111", width=1), "lease released (outcome written or missed)"),
        (
            "takeover",
            lambda x, y: element("path", d=f"M{x},{y + 3} l4,-5 l-8,0 z", fill=REFUSAL),
            "takeover of a BEGUN lease",
        ),
        ("charged", _word("+1", REFUSAL), "attempt charged by that takeover (attempts now)"),
        ("cleared", _word("→0", "#1d6b35"), "a commit reset the run's attempts to 0"),
        (
            "start",
            lambda x, y: element("circle", cx=x, cy=y, r=3, fill="none", stroke="#111"),
            "run started",
        ),
        ("effect", lambda x, y: element("circle", cx=x, cy=y, r=2.5, fill="#111"), "effect"),
        (
            "duplicate",
            lambda x, y: element("circle", cx=x, cy=y, r=4.5, fill=REFUSAL),
            "duplicate effect: the same work landed again",
        ),
        ("evict", _vline("#111111", dash="5 3"), "scope evicted (its actor aborted)"),
        (
            "refusal",
            lambda x, y: cross(x, y, 4.5, REFUSAL, ""),
            "refused or lost: the store did not take it",
        ),
        ("crash", lambda x, y: cross(x, y, 6, "#111111", "", width=3), "drive crashed"),
        ("down", _bar("#555555", opacity=0.18), "drive down"),
        (
            "delay",
            _line(MARK_COLORS["delay"]),
            "delayed or held leg (dot: when; hover: why let go)",
        ),
        ("pause", _line(MARK_COLORS["pause"]), "drive paused"),
        (
            "late",
            _line(MARK_COLORS["late"], dash="3 2"),
            "late claim or BEGIN reply: the lease ran down first",
        ),
        (
            "slow",
            _line(MARK_COLORS["slow"], dash="3 2"),
            "slow reply to another call (a quarter of the lease)",
        ),
        ("drop", lambda x, y: cross(x, y, 4, "#e07b00", ""), "dropped leg"),
        (
            "fence",
            lambda x, y: cross(x, y, 3.5, "#777777", ""),
            "a killed drive's call: never sent, or answered too late",
        ),
        (
            "late-request",
            _line(MARK_COLORS["late-request"], dash="1 2"),
            "request given up on, delivered late",
        ),
        (
            "late-arrival",
            lambda x, y: element(
                "path", d=f"M{x},{y + 4} l-4,-7 l8,0 z", fill=MARK_COLORS["late-request"]
            ),
            "abandoned request reaches the scope, runs",
        ),
        *_service_items(),
        ("tick", _vline("#999999", width=1), "drive tick: it polls the scope"),
        (
            "skip",
            lambda x, y: element("circle", cx=x, cy=y, r=3, fill="none", stroke="#555555"),
            "tick skipped: the drive is down",
        ),
        ("note", lambda x, y: diamond(x, y, 4, "#555555", ""), "a note the world wrote"),
        (
            "double-run",
            _bar(REFUSAL, fill_opacity=0.14, stroke=REFUSAL),
            "double run: two handlers of one run at once",
        ),
        (
            "violation",
            lambda x, y: element("circle", cx=x, cy=y, r=BADGE_R, fill=REFUSAL),
            "violation, numbered as in the checks above",
        ),
        (
            "explained",
            lambda x, y: element("circle", cx=x, cy=y, r=BADGE_R, fill=EXPLAINED),
            "finding the spec explains, numbered",
        ),
        ("cut", _bar("url(#cut)"), "idle gap cut from the axis, with its length"),
        (
            "closing",
            _vline("#555555", width=1.5, dash="6 3"),
            "the scenario returned (then shaded)",
        ),
        ("world-quiet", _vline(QUIET), "what still ran then stopped by itself"),
        ("world-cut", _vline(REFUSAL), "cut: the grace after the scenario ran out"),
    ]


def _service_items() -> list[tuple[str, Callable[[float, float], str], str]]:
    """The service lanes' kinds: a call, what it was where it ran, and what its caller knew."""
    blue = "#3b6fd1"
    return [
        (
            "svc-call",
            _bar(blue, tall=2, opacity=0.55),
            "service call: sent → its caller stopped waiting",
        ),
        (
            "svc-effect",
            lambda x, y: element("circle", cx=x, cy=y, r=4, fill=blue, stroke="#111111"),
            "call that changed its service's state: an effect",
        ),
        (
            "svc-read",
            lambda x, y: element(
                "circle", cx=x, cy=y, r=3.5, fill="#ffffff", stroke=blue, stroke_width=1.5
            ),
            "call that changed nothing at the service",
        ),
        (
            "svc-repeat",
            lambda x, y: element(
                "rect",
                x=x - 3.5,
                y=y - 3.5,
                width=7,
                height=7,
                fill="#ffffff",
                stroke=blue,
                stroke_width=1.5,
            ),
            "repeat an idempotency key answered (not run)",
        ),
        (
            "svc-refused",
            lambda x, y: cross(x, y, 4, REFUSAL, ""),
            "call the service refused for now (not run)",
        ),
        (
            "svc-declined",
            lambda x, y: element(
                "rect",
                x=x - 3.5,
                y=y - 3.5,
                width=7,
                height=7,
                fill=REFUSAL,
                stroke=blue,
                stroke_width=1,
            ),
            "call the service declined: an answer (not run, and will not be)",
        ),
        (
            "svc-lost",
            lambda x, y: element(
                "circle", cx=x, cy=y, r=3.5, fill="none", stroke="#888888", stroke_dasharray="2 1"
            ),
            "request lost on the way: it never ran",
        ),
        (
            "ambiguous",
            lambda x, y: (
                _line(AMBIGUOUS, dash="3 2", width=1.5)(x, y)
                + element(
                    "text",
                    text="?",
                    x=x + 9,
                    y=y + 4,
                    font_size=10,
                    font_weight="bold",
                    fill=AMBIGUOUS,
                )
            ),
            "ambiguous: it ran, its caller saw a timeout",
        ),
        (
            "late-effect",
            lambda x, y: element(
                "circle", cx=x, cy=y, r=7, fill="none", stroke=REFUSAL, stroke_width=2
            ),
            "late effect: a stale pass's, or after the scenario",
        ),
    ]
