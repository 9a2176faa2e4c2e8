"""The world's end, read from the trace and told in words.

A world does not end when its scenario returns: it waits for every pass still running (a stale
pass, a pass whose reply was held past its lease), every service call still on the wire and every
scope request its caller gave up on, for
``WorldSetup(grace_ms=...)`` at the most. ``world.closing`` says what was still running when the
scenario returned; ``world.quiet`` that it all stopped by itself; ``world.cut`` that the grace ran
out first, and what it cut off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._numbers import ms, plural
from ._model import Running, WorldEnd


def running_of(event: dict[str, Any]) -> Running:
    """What a ``world.closing`` or ``world.cut`` event says was still running."""
    passes = tuple(
        (str(entry.get("drive")), str(entry.get("run")))
        for entry in event.get("passes") or ()
        if isinstance(entry, dict)
    )
    ticks = tuple(str(drive) for drive in event.get("ticks") or ())
    calls, requests = event.get("calls"), event.get("requests")
    return Running(
        passes,
        ticks,
        calls if isinstance(calls, int) else 0,
        requests if isinstance(requests, int) else 0,
    )


def running_words(running: Running, short: Callable[[str], str]) -> str:
    """``1 pass still running (cron on run 16VHGG) and 1 service call on the wire``; empty when
    nothing was."""
    parts = []
    if running.passes:
        who = ", ".join(f"{drive} on run {short(run)}" for drive, run in running.passes)
        parts.append(f"{plural(len(running.passes), 'pass', 'passes')} still running ({who})")
    busy = {drive for drive, _ in running.passes}
    ticks = [drive for drive in running.ticks if drive not in busy]
    if ticks:
        parts.append(f"{plural(len(ticks), 'drive call')} still going ({', '.join(ticks)})")
    if running.calls:
        parts.append(f"{plural(running.calls, 'service call')} on the wire")
    if running.requests:
        given_up = plural(running.requests, "scope request")
        parts.append(f"{given_up} its caller gave up on, on the wire")
    if len(parts) > 1:
        return ", ".join(parts[:-1]) + " and " + parts[-1]
    return "".join(parts)


def _count(running: Running) -> int:
    busy = {drive for drive, _ in running.passes}
    return (
        len(running.passes)
        + len([drive for drive in running.ticks if drive not in busy])
        + running.calls
        + running.requests
    )


def closing_words(end: WorldEnd, short: Callable[[str], str]) -> str:
    """The scenario returned, with what was still running, and how that ended."""
    head = f"the scenario returned at {ms(end.closing_at)} ms"
    running = running_words(end.running, short)
    if not running:
        return f"{head} with nothing still running: the world ends"
    one = _count(end.running) == 1
    text = f"{head} with {running}"
    if end.how == "quiet" and end.ended_at is not None:
        stopped = "it stopped by itself" if one else "they stopped by themselves"
        return f"{text}; {stopped} at {ms(end.ended_at)} ms"
    if end.how == "cut" and end.ended_at is not None:
        was = "it was" if one else "they were"
        return (
            f"{text}; {was} cut at {ms(end.ended_at)} ms, after the grace of {ms(end.grace_ms)} ms"
        )
    return f"{text}; the trace ends before they stopped"


def cut_words(end: WorldEnd, short: Callable[[str], str]) -> str:
    """The grace ran out: what it cut off."""
    running = running_words(end.cut or end.running, short) or "nothing named"
    return (
        f"the grace of {ms(end.grace_ms)} ms after the scenario returned ran out with {running}: "
        "the world was cut, and what it would have done next was not checked"
    )


def read_world_end(event: dict[str, Any], end: WorldEnd | None) -> WorldEnd | None:
    """``end`` after ``event`` (a ``world.closing``, ``world.quiet`` or ``world.cut``)."""
    name, t = event["ev"], float(event["t"])
    if name == "world.closing":
        grace = event.get("grace_ms")
        return WorldEnd(
            t, float(grace) if isinstance(grace, int | float) else 0.0, running_of(event)
        )
    if end is None:
        return None
    if name == "world.quiet":
        return WorldEnd(end.closing_at, end.grace_ms, end.running, t, "quiet")
    if name == "world.cut":
        return WorldEnd(end.closing_at, end.grace_ms, end.running, t, "cut", running_of(event))
    return end
