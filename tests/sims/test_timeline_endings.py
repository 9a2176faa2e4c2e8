"""Every pass is closed and says how, in the story and on the page; late replies say what they
held up; held legs, fences and faults struck after a call are told; an attempt charged by a
takeover and cleared by a commit is explained."""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from sims import FaultPlan, Simulation, simulate, story_lines
from sims._trace import Trace
from sims.faults._plan import (
    CrashAfter,
    DelayLeg,
    DropLeg,
    EvictAfter,
    Fault,
    HoldLeg,
    UpstreamFailure,
)
from sims.timeline._legend import legend_items
from sims.timeline._render import build_timeline, render_html, short

from .test_crash_is_a_kill import KILL_WHILE_PRINTING, WORLD

SVG = "{http://www.w3.org/2000/svg}"

#: Worlds the tests below read, each the late-BEGIN world with one fault of its own.
PLANS: dict[str, Fault] = {
    "begin-request-dropped": DropLeg(drive="cron", operation="begin", nth=1, leg="request"),
    "begin-reply-dropped": DropLeg(drive="cron", operation="begin", nth=1, leg="reply"),
    "upstream-fails": UpstreamFailure(first=1, count=3),
    "slow-step-reply": DelayLeg(drive="cron", operation="begin_step", nth=2, leg="reply", ms=400.0),
    "held-until-effect": HoldLeg(
        drive="cron", operation="begin", nth=1, leg="reply", until="effect"
    ),
    "crash-after-begin": CrashAfter(drive="cron", operation="begin", nth=1, down_ms=100.0),
    "evict-after-begin": EvictAfter(drive="cron", operation="begin", nth=1),
}


@functools.cache
def _world(name: str) -> Simulation:
    if name == "late-begin":
        return simulate("late-begin", 1)
    return simulate("late-begin", 1, plan=FaultPlan((PLANS[name],)))


def _story(name: str) -> str:
    return "\n".join(story_lines(_world(name).outcome.trace.events, limit=10_000))


def _svg(page: str) -> ET.Element:
    match = re.search(r"<svg.*</svg>", page, re.DOTALL)
    assert match is not None
    return ET.fromstring(match.group(0))


def _drawn(name: str) -> list[ET.Element]:
    """Every element of the page drawn with a legend kind (``data-k``)."""
    trace = _world(name).outcome.trace
    return [e for e in _svg(render_html(trace, title=name)).iter() if e.get("data-k")]


def _titles(element: ET.Element) -> list[str]:
    # Numbers are written with a thin space between thousands; read them without it.
    return [(t.text or "").replace("\u2009", "") for t in element.iter(f"{SVG}title")]


def _texts(element: ET.Element) -> list[str]:
    """What each text element shows (its hover title, a child, is left out)."""
    return [(t.text or "") + "".join(c.tail or "" for c in t) for t in element.iter(f"{SVG}text")]


def _story_id(ident: str) -> str:
    return ident[-6:]


# -- given up ---------------------------------------------------------------------------------


def test_a_pass_whose_begin_request_was_dropped_ends_where_the_drive_gave_up_on_it() -> None:
    trace = _world("begin-request-dropped").outcome.trace
    model = build_timeline(trace)
    (cron,) = [p for p in model.passes if p.drive == "cron"]
    (report,) = [e for e in trace.events if e["ev"] == "drive.report" and e["drive"] == "cron"]
    # Closed where the drive call ended with the error, not drawn open to the world's end.
    assert cron.ended_at == report["t"] < model.end
    assert cron.given_up is not None
    assert "was dropped" in cron.given_up
    story = _story("begin-request-dropped")
    assert (
        f"gives up on pass {_story_id(cron.owner)} of run {_story_id(cron.run)} (request begin #"
    ) in story
    assert "its lease (never begun) stays until it expires" in story
    # The page closes it with a given-up cap, labelled, and its hover says why.
    ends = [e for e in _drawn("begin-request-dropped") if e.get("data-k") == "given-up"]
    assert len(ends) == 1
    (pin,) = [
        g
        for g in _svg(render_html(trace, title="t")).iter(f"{SVG}g")
        if g.get("class") == "p" and "gave up" in _texts(g)
    ]
    assert any("the drive gave up on this pass" in title for title in _titles(pin))


def test_a_pass_whose_begin_reply_was_dropped_is_told_to_be_charged_by_the_takeover() -> None:
    # The store wrote BEGIN; the drive never heard: the story says what that costs the pass.
    story = _story("begin-reply-dropped")
    assert "gives up on pass" in story
    assert (
        "its BEGUN lease stays until it expires; the drive that then takes the run over " in story
    )
    assert "charges this pass an attempt" in story
    assert "takes over run" in story


def test_a_world_that_gave_up_on_nothing_tells_no_giving_up() -> None:
    for name in ("late-begin", "upstream-fails", "crash-after-begin"):
        assert "gives up on pass" not in _story(name)
        assert not [e for e in _drawn(name) if e.get("data-k") == "given-up"]


# -- failed and retrying, taken over, stale, open --------------------------------------------


def test_a_pass_that_failed_and_retries_is_drawn_failed_and_labelled() -> None:
    trace = _world("upstream-fails").outcome.trace
    retrying = [e for e in trace.events if e["ev"] == "pass.outcome" and e["status"] == "retrying"]
    assert len(retrying) == 3
    failed = [e for e in _drawn("upstream-fails") if e.get("data-k") == "pass-failed"]
    assert len(failed) == 3
    svg = _svg(render_html(trace, title="t"))
    labels = [text for text in _texts(svg) if text == "FAILED · retried later"]
    assert len(labels) == 3
    assert all("wrote retrying: the run is tried again" in " ".join(_titles(e)) for e in failed)
    assert "the pass FAILED; the run is tried again when due" in _story("upstream-fails")


def test_a_pass_whose_lease_was_taken_over_is_marked_where_and_by_whom() -> None:
    trace = _world("late-begin").outcome.trace
    model = build_timeline(trace)
    cron, alarm = model.passes
    (takeover,) = [
        e
        for e in trace.events
        if e["ev"] == "rpc.exec" and e["op"] == "claim" and e["link"] == "alarm"
    ]
    assert cron.taken_over_at == takeover["t"]
    assert cron.taken_over_by == f"alarm pass {short(alarm.owner)}"
    assert alarm.taken_over_at is None
    (mark,) = [e for e in _drawn("late-begin") if e.get("data-k") == "taken-over"]
    assert f"taken over at {takeover['t']:.0f} ms by alarm pass" in " ".join(_titles(mark))
    # The stale pass is closed too: its outcome was refused, and its cap says so.
    assert cron.stale_since is not None
    ends = [e for e in _drawn("late-begin") if e.get("data-k") == "end"]
    assert any("the store refused its outcome" in " ".join(_titles(e)) for e in ends)
    assert "superseded" in _texts(_svg(render_html(trace, title="t")))


def test_a_pass_open_when_the_trace_ends_says_so() -> None:
    # A trace cut as the alarm's handler starts, the cron's BEGIN reply still held: nothing
    # closed either pass.
    events = _world("late-begin").outcome.trace.events
    cut = next(i for i, e in enumerate(events) if e["ev"] == "handler.invoke")
    trace = Trace(events=events[: cut + 1])
    opened = [p.drive for p in build_timeline(trace).passes if p.ended_at is None]
    assert opened == ["cron", "alarm"]
    page = render_html(trace, title="cut")
    marks = [e for e in _svg(page).iter() if e.get("data-k") == "open"]
    assert len(marks) == 2
    assert all("still open when the world ended" in " ".join(_titles(m)) for m in marks)
    # A trace that ran to its end leaves none open.
    assert not [e for e in _drawn("late-begin") if e.get("data-k") == "open"]


# -- late replies ---------------------------------------------------------------------------------


def test_a_late_begin_reply_says_the_handler_starts_after_its_lease_expired() -> None:
    (late,) = [
        e for e in _drawn("late-begin") if e.get("data-k") == "late" and e.tag == f"{SVG}line"
    ]
    (title,) = _titles(late)
    assert title.startswith("late BEGIN reply: begin #")
    assert "the handler starts 253.0 ms after its lease expired (at 1005.0 ms)" in title


def test_a_slow_step_reply_is_not_called_late_for_a_margin() -> None:
    drawn = _drawn("slow-step-reply")
    assert not [e for e in drawn if e.get("data-k") == "late"]
    (slow,) = [e for e in drawn if e.get("data-k") == "slow" and e.tag == f"{SVG}line"]
    (title,) = _titles(slow)
    assert title.startswith("slow reply: begin_step #")
    assert "(step object-1)" in title
    assert "had about 599.0 ms left when the pass heard back" in title
    legend = {kind: words for kind, _, words in legend_items()}
    assert "margin" not in legend["slow"]
    assert "margin" not in legend["late"]


def test_a_late_claim_reply_says_what_the_margin_made_of_it() -> None:
    simulation = simulate("late-claim", 1)
    page = render_html(simulation.outcome.trace, title="late-claim")
    late = [e for e in _svg(page).iter() if e.get("data-k") == "late"]
    titles = [title for e in late for title in _titles(e)]
    assert any(
        title.startswith("late claim reply") and "it counts an admission miss" in title
        for title in titles
    )


# -- held legs, fences, faults after a call --------------------------------------------------------


def test_a_held_leg_is_drawn_like_a_delay_and_says_why_it_was_let_go() -> None:
    story = _story("held-until-effect")
    assert (
        "fault: the reply of begin call 1 is held until another drive makes an effect (through "
        "the scope's door, or at a service) (at most 60 000 ms)"
    ) in story.replace("60000", "60 000")
    # What released it is named: the drive, and the effect it wrote.
    run = _world("held-until-effect").outcome.runs["scope-1"][0].id
    assert (
        "the held reply of begin call 1 is released when alarm wrote the scope's record of "
        f"{_story_id(run)}/0 (an effect)"
    ) in story
    delays = [e for e in _drawn("held-until-effect") if e.get("data-k") == "delay"]
    titles = [title for e in delays for title in _titles(e)]
    assert any(
        title.startswith("held reply: begin call 1")
        and f"released when alarm wrote the scope's record of {short(run)}/0 (an effect)" in title
        for title in titles
    )


def test_a_crash_and_an_eviction_after_a_call_say_which_call() -> None:
    assert (
        "fault: killed right after its begin call 1 ran in the scope, before its reply left; "
        "back in 100 ms"
    ) in _story("crash-after-begin")
    crash = [e for e in _drawn("crash-after-begin") if e.get("data-k") == "crash"]
    assert any("killed right after its begin call 1 (#4)" in t for e in crash for t in _titles(e))
    assert "fault: scope scope-1 evicted right after its begin call 1 ran in the scope" in _story(
        "evict-after-begin"
    )
    evict = [e for e in _drawn("evict-after-begin") if e.get("data-k") == "evict"]
    assert any("right after cron's begin call 1" in t for e in evict for t in _titles(e))


def test_a_killed_drives_refused_call_is_drawn(tmp_path: Path) -> None:
    world = tmp_path / "printer_world.py"
    world.write_text(WORLD)
    simulation = simulate(f"{world}:printer", 1, plan=KILL_WHILE_PRINTING)
    page = render_html(simulation.outcome.trace, title="fence")
    (fence,) = [e for e in _svg(page).iter() if e.get("data-k") == "fence"]
    assert _titles(fence) == ["killed: its invoke call never left it (the process is gone)"]
    story = "\n".join(story_lines(simulation.outcome.trace.events))
    assert "killed: its invoke never left it (the process is gone)" in story


# -- an attempt charged, then cleared ---------------------------------------------------------


def test_an_attempt_charged_by_a_takeover_and_cleared_by_a_commit_is_explained() -> None:
    trace = _world("late-begin").outcome.trace
    model = build_timeline(trace)
    (taken,) = [lease for lease in model.leases if lease.takeover]
    (commit,) = [e for e in trace.events if e["ev"] == "pass.outcome" and e["written"]]
    assert taken.charged == 1
    assert taken.cleared_at == commit["t"]
    drawn = _drawn("late-begin")
    (takeover,) = [e for e in drawn if e.get("data-k") == "takeover"]
    (words,) = _titles(takeover)
    assert "the dead pass is charged an attempt (attempts now 1" in words
    assert f"commit at {commit['t']:.0f} ms reset them to 0" in words
    texts = _texts(_svg(render_html(trace, title="t")))
    assert "+1 attempt (now 1)" in texts
    assert "commit: attempts → 0" in texts
    story = _story("late-begin")
    assert "(attempts now 1; a commit resets attempts to 0" in story
    assert "ends completed; the commit resets attempts to 0, clearing what 1 takeover charged" in (
        story
    )


def test_a_commit_without_a_takeover_before_it_clears_nothing() -> None:
    assert "clearing what" not in _story("upstream-fails")
    assert not [e for e in _drawn("upstream-fails") if e.get("data-k") in ("charged", "cleared")]
