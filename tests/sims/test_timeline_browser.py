"""The timeline page in a real browser: headless Chromium draws the double run and every violation,
and the reader can zoom and pan.

One Chromium serves the whole module (a start costs about a second). Without Chromium the module is
skipped on a developer's machine and FAILS in CI (``CI=true``), where ``.ci/run`` installs it.
Set ``TIMELINE_SCREENSHOTS=DIR`` to keep a screenshot of every page the tests open.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sims import DelayLeg, DropLeg, FaultPlan, Simulation, simulate
from sims._trace import Trace
from sims.faults._plan import HoldLeg, UpstreamFailure
from sims.timeline._render import build_timeline, render_html, short

from .chromium import Browser, Tab, chromium_path, png_pixels


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    if executable is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "chromium is not installed; CI must install it (.ci/run does, with apt-get)"
            )
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    with Browser(executable) as running:
        yield running


#: A BEGIN that reaches the store with 247 ms of a 1 000 ms lease left, inside the 250 ms margin.
_BEGIN_IN_THE_MARGIN = FaultPlan(
    (DelayLeg(drive="cron", operation="begin", nth=1, leg="request", ms=751.0),)
)

#: (scenario, plan, mutant): the late-BEGIN double run, and two mutants' violations.
WORLDS = {
    "late-begin": ("late-begin", None, None),
    "takeover-charge": ("late-begin", None, "takeover-charge"),
    "begin-margin": ("late-begin", _BEGIN_IN_THE_MARGIN, "begin-margin"),
}


def _simulation(name: str) -> Simulation:
    scenario, plan, mutant = WORLDS[name]
    return simulate(scenario, 1, plan=plan, mutant=mutant)


def _open(browser: Browser, tmp_path: Path, name: str) -> tuple[Simulation, Tab]:
    simulation = _simulation(name)
    path = tmp_path / f"{name}.html"
    page = render_html(
        simulation.outcome.trace,
        title=name,
        report=simulation.report,
        # A world whose plan was replaced is not held to its scenario's documented outcome.
        mismatches=None if WORLDS[name][1] else simulation.mismatches,
    )
    path.write_text(page, encoding="utf-8")
    tab = browser.open(path)
    keep = os.environ.get("TIMELINE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{name}.png").write_bytes(tab.screenshot())
    assert tab.errors() == []
    assert tab.eval("typeof window.timeline") == "object"
    return simulation, tab


#: Scrolls each match into view and says where it is drawn and whether it is what a pointer at
#: its centre would hit (so: painted, not hidden, not clipped away, not covered by the page).
_PLACES = """
Array.from(document.querySelectorAll(%r)).map((el) => {
  el.scrollIntoView({block: "center"});
  const r = el.getBoundingClientRect();
  const hits = document.elementsFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return {
    x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height,
    hit: hits.some((h) => el === h || el.contains(h)),
  };
})
"""


def _places(tab: Tab, selector: str) -> list[dict[str, Any]]:
    places: list[dict[str, Any]] = tab.eval(_PLACES % selector)
    return places


def _red_pixels(tab: Tab, clip: dict[str, float]) -> int:
    """Pixels in ``clip`` clearly redder than grey: the double run's tint, a violation's red."""
    rows = png_pixels(tab.screenshot(clip=clip))
    return sum(1 for row in rows for r, g, b in row if r > g + 10 and r > b + 10)


def _band_top(band: dict[str, Any]) -> dict[str, float]:
    # The band's top reaches above the lanes, where nothing else red is drawn.
    return {"x": band["x"] + 1, "y": band["y"] + 2, "width": band["width"] - 2, "height": 12}


def test_the_double_run_of_a_late_begin_is_drawn(browser: Browser, tmp_path: Path) -> None:
    simulation, tab = _open(browser, tmp_path, "late-begin")
    (overlap,) = build_timeline(simulation.outcome.trace).overlaps
    (band,) = _places(tab, ".double-run")
    assert band["hit"]
    assert band["width"] >= 3
    assert band["height"] > 100
    assert _red_pixels(tab, _band_top(band)) > 0.5 * (band["width"] - 2) * 12
    assert tab.eval("document.querySelector('.double-run').dataset.run") == overlap.run


@pytest.mark.parametrize("name", ["takeover-charge", "begin-margin"])
def test_each_violation_is_drawn(browser: Browser, tmp_path: Path, name: str) -> None:
    simulation, tab = _open(browser, tmp_path, name)
    violations = simulation.report.violations
    assert violations
    for number, finding in enumerate(violations, 1):
        (badge,) = _places(tab, f'a[data-finding="{number}"]')
        assert badge["hit"]
        assert _red_pixels(tab, badge) > 0.5 * badge["width"] * badge["height"]
        line, ring = (
            _places(tab, f'line[data-finding="{number}"]'),
            _places(tab, f'circle.finding-ring[data-finding="{number}"]'),
        )
        assert len(line) == 1
        assert line[0]["height"] > 100
        assert len(ring) == 1
        assert ring[0]["width"] > 10
        words = tab.eval(f"document.getElementById('finding-{number}').textContent")
        assert finding.text in words
        assert finding.check in words
    verdict = tab.eval("document.getElementById('verdict').textContent")
    assert verdict.startswith(f"VIOLATED — the spec was violated: {len(violations)} violation")


def test_zoom_and_pan(browser: Browser, tmp_path: Path) -> None:
    simulation, tab = _open(browser, tmp_path, "late-begin")
    (before,) = _places(tab, ".double-run")
    cx, cy = before["x"] + before["width"] / 2, before["y"] + 8
    scroll_y = tab.eval("scrollY")
    steps_shown = (
        "Array.from(document.querySelectorAll('g[data-w]')).filter((g) => "
        "g.textContent.startsWith('object-') && g.getAttribute('display') !== 'none').length"
    )
    shown_before = tab.eval(steps_shown)

    # The wheel zooms in around the pointer: the band widens and stays under it.
    tab.mouse("mouseWheel", cx, cy - scroll_y, deltaX=0, deltaY=-600)
    tab.settle()
    zoom = tab.eval("timeline.view().k")
    assert zoom > 2
    (after,) = _places(tab, ".double-run")
    assert after["width"] > 2 * before["width"]
    assert after["x"] <= cx <= after["x"] + after["width"]

    # Zoomed in, step names that did not fit now do; the axis is redrawn for the view.
    tab.eval(f"timeline.zoom(12, {build_timeline(simulation.outcome.trace).overlaps[0].start})")
    assert tab.eval(steps_shown) > shown_before
    labels = tab.eval("Array.from(document.querySelectorAll('#axis text')).map(t => t.textContent)")
    virtual = [float(label.replace("\u2009", "")) for label in labels if ":" not in label]
    assert len(virtual) >= 5
    assert virtual == sorted(virtual)
    assert virtual[-1] - virtual[0] < 400  # a window of the 2 s trace, not the whole of it

    # Dragging to the right shows earlier times.
    start = tab.eval("timeline.view().a")
    scroll_y = tab.eval("scrollY")
    (band,) = _places(tab, ".double-run")
    y = band["y"] + 8 - tab.eval("scrollY")
    tab.mouse("mousePressed", 700, y, button="left", clickCount=1)
    tab.mouse("mouseMoved", 900, y, button="left")
    tab.mouse("mouseReleased", 900, y, button="left", clickCount=1)
    tab.settle()
    assert tab.eval("timeline.view().a") < start

    # The whole trace again; then a finding's "show" button brings its instant to the middle.
    tab.eval("document.getElementById('zoom-fit').click()")
    tab.settle()
    assert tab.eval("timeline.view().k") == 1
    tab.eval("document.querySelector('button[data-show]').click()")
    assert tab.eval("timeline.view().k") >= 8
    (badge,) = _places(tab, 'a[data-finding="1"]')
    assert 600 < badge["x"] < 900
    assert tab.errors() == []


def _open_simulation(browser: Browser, tmp_path: Path, simulation: Simulation) -> Tab:
    path = tmp_path / "page.html"
    page = render_html(
        simulation.outcome.trace, title="page", report=simulation.report, mismatches=()
    )
    path.write_text(page, encoding="utf-8")
    tab = browser.open(path)
    assert tab.errors() == []
    return tab


def test_a_users_failing_check_is_headlined_as_theirs_and_marked_where_it_happened(
    browser: Browser, tmp_path: Path
) -> None:
    world = Path(__file__).parent / "worlds" / "email_twice.py"
    simulation = simulate(f"{world}:email-twice", 1)
    tab = _open_simulation(browser, tmp_path, simulation)
    verdict = tab.eval("document.getElementById('verdict').textContent")
    assert verdict.startswith("YOUR CHECK FAILED — your check `no-email-twice` failed at ")
    assert "the spec held" in verdict
    # Violations are listed first: 1 is the user's finding, 2 the spec's explained effect. Both
    # are the second email, so both badges stand at one place, not the user's at the world's end.
    (user,) = _places(tab, 'line[data-finding="1"]')
    (effect,) = _places(tab, 'line[data-finding="2"]')
    (end,) = _places(tab, "#axis")
    assert abs(user["x"] - effect["x"]) < 2
    assert user["x"] < end["x"] + 0.9 * end["width"]
    words = tab.eval("document.getElementById('finding-1').textContent")
    assert "no-email-twice (your check)" in words


def test_an_explained_double_run_is_marked_on_its_band(browser: Browser, tmp_path: Path) -> None:
    simulation = simulate("late-begin", 1)
    tab = _open_simulation(browser, tmp_path, simulation)
    [number] = [n for n, f in enumerate(simulation.report.explained, 1) if f.check == "double-run"]
    (line,) = _places(tab, f'line[data-finding="{number}"]')
    (band,) = _places(tab, ".double-run")
    assert band["x"] - 1 <= line["x"] <= band["x"] + band["width"] + 1


#: Each pin (a glyph or a label) of a kind or with a text: where it is drawn, whether it is shown
#: (a label is hidden where it does not fit) and what a pointer at its centre hits.
_PINS = """
Array.from(document.querySelectorAll("#zp > .p")).filter((g) => %s).map((g) => {
  g.scrollIntoView({block: "center"});
  const r = g.getBoundingClientRect();
  const hits = document.elementsFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return {
    shown: g.getAttribute("display") !== "none", width: r.width, height: r.height,
    // Near the middle of the picture, where a zoom to an instant puts it.
    center: Math.abs(r.left - innerWidth / 2) < 60,
    hit: hits.some((h) => g === h || g.contains(h)),
    title: Array.from(g.querySelectorAll("title")).map((t) => t.textContent).join(" "),
  };
})
"""


def _pins(tab: Tab, test: str) -> list[dict[str, Any]]:
    pins: list[dict[str, Any]] = tab.eval(_PINS % test)
    return pins


def _labelled(text: str) -> str:
    return (
        f"Array.from(g.querySelectorAll('text')).some((t) => t.lastChild.textContent === {text!r})"
    )


def test_every_pass_is_closed_and_labelled_on_the_page(browser: Browser, tmp_path: Path) -> None:
    # A dropped BEGIN request: the pass ends where the drive gave up on it, capped and labelled.
    dropped = FaultPlan((DropLeg(drive="cron", operation="begin", nth=1, leg="request"),))
    tab = _open_simulation(browser, tmp_path, simulate("late-begin", 1, plan=dropped))
    (cap,) = _pins(tab, "g.dataset.k === 'given-up'")
    assert cap["hit"]
    assert "the drive gave up on this pass" in cap["title"]
    (label,) = _pins(tab, _labelled("gave up"))
    assert label["shown"]
    assert label["hit"]
    assert not _pins(tab, "g.dataset.k === 'open'")

    # Three passes that failed and were retried: each capped in red and labelled (zoomed in
    # where three labels do not fit the whole trace).
    upstream = FaultPlan((UpstreamFailure(first=1, count=3),))
    simulation = simulate("late-begin", 1, plan=upstream)
    tab = _open_simulation(browser, tmp_path, simulation)
    caps = _pins(tab, "g.dataset.k === 'pass-failed'")
    assert len(caps) == 3
    assert all("wrote retrying" in cap["title"] for cap in caps)
    for found in build_timeline(simulation.outcome.trace).passes[:3]:
        assert found.outcome == "retrying"
        tab.eval(f"timeline.zoom(40, {found.ended_at})")
        (cap,) = [p for p in _pins(tab, "g.dataset.k === 'pass-failed'") if p["center"]]
        assert cap["hit"]
        shown = [p for p in _pins(tab, _labelled("FAILED · retried later")) if p["center"]]
        assert len(shown) == 1
        assert shown[0]["shown"]
        assert shown[0]["hit"]
    assert tab.errors() == []


def test_a_takeover_its_charge_and_the_commit_that_cleared_it_are_on_the_page(
    browser: Browser, tmp_path: Path
) -> None:
    tab = _open_simulation(browser, tmp_path, simulate("late-begin", 1))
    # The stale pass's lease was taken over while it was open: marked on its own row.
    (taken,) = _pins(tab, "g.dataset.k === 'taken-over'")
    assert taken["hit"]
    assert "by alarm pass" in taken["title"]
    (charged,) = _pins(tab, "g.dataset.k === 'charged'")
    assert charged["shown"]
    assert charged["hit"]
    assert "charged an attempt (attempts now 1" in charged["title"]
    (cleared,) = _pins(tab, "g.dataset.k === 'cleared'")
    assert cleared["shown"]
    assert cleared["hit"]
    assert "resets the run's attempts to 0" in cleared["title"]
    # The BEGIN reply is late, and says what it held up; nothing here is called slow.
    late = tab.eval(
        "Array.from(document.querySelectorAll('[data-k=late] title')).map((t) => t.textContent)"
    )
    assert late
    assert all("after its lease expired" in title for title in late)
    assert tab.eval("document.querySelectorAll('[data-k=slow]').length") == 0
    assert tab.errors() == []


def test_a_slow_step_reply_and_a_held_leg_are_drawn_for_what_they_are(
    browser: Browser, tmp_path: Path
) -> None:
    slow_step = DelayLeg(drive="cron", operation="begin_step", nth=2, leg="reply", ms=400.0)
    tab = _open_simulation(
        browser, tmp_path, simulate("late-begin", 1, plan=FaultPlan((slow_step,)))
    )
    assert tab.eval("document.querySelectorAll('[data-k=late]').length") == 0
    (line,) = _places(tab, "line[data-k=slow]")
    assert line["width"] > 10
    (arrow,) = _pins(tab, "g.dataset.k === 'slow'")
    assert arrow["hit"]
    assert "no BEGIN margin applies here" in arrow["title"]
    legend = tab.eval("document.querySelector('[data-legend=slow]').textContent")
    assert "margin" not in legend

    held = HoldLeg(drive="cron", operation="begin", nth=1, leg="reply", until="effect")
    tab = _open_simulation(browser, tmp_path, simulate("late-begin", 1, plan=FaultPlan((held,))))
    titles = tab.eval(
        "Array.from(document.querySelectorAll('line[data-k=delay]')).map((l) => l.textContent)"
    )
    assert any("released when alarm wrote the scope's record of" in t for t in titles)
    (line,) = _places(tab, "line[data-k=delay]")
    assert line["hit"]
    assert tab.errors() == []


def _open_trace(browser: Browser, tmp_path: Path, name: str, trace: Trace) -> Tab:
    path = tmp_path / f"{name}.html"
    path.write_text(render_html(trace, title=name), encoding="utf-8")
    tab = browser.open(path)
    keep = os.environ.get("TIMELINE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{name}.png").write_bytes(tab.screenshot())
    assert tab.errors() == []
    return tab


def test_a_service_lane_paints_its_calls_their_doubt_late_effects_and_the_worlds_end(
    browser: Browser, tmp_path: Path
) -> None:
    from .test_timeline_services import _world

    # A stale pass mails again after its lease was taken over and after the scenario returned.
    tab = _open_trace(browser, tmp_path, "stale", _world("stale").trace)
    for kind in ("svc-read", "svc-effect", "duplicate"):
        glyphs = _pins(tab, f"g.dataset.k === {kind!r}")
        assert glyphs
        assert all(glyph["hit"] for glyph in glyphs), kind
    rings = _places(tab, "[data-k=late-effect] circle")
    assert len(rings) == 2
    assert all(_red_pixels(tab, ring) > 20 for ring in rings)
    for label in ("scenario returned", "all stopped"):
        (end,) = _pins(tab, _labelled(label))
        assert end["shown"]
        assert end["hit"]
    (quiet,) = _places(tab, "line[data-k=world-quiet]")
    assert quiet["height"] > 100

    # A reply held past its caller's timeout: the doubt is painted, on the lane and the caller's.
    tab = _open_trace(browser, tmp_path, "timeout", _world("timeout").trace)
    marks = _pins(tab, "g.dataset.k === 'ambiguous'")
    assert len(marks) == 2
    assert all(mark["hit"] and "AMBIGUOUS" in mark["title"] for mark in marks)
    (span,) = _places(tab, "line[data-k=ambiguous]")
    assert span["width"] > 100

    # A call's label that does not fit at first is shown once the reader zooms in on it.
    tab = _open_trace(browser, tmp_path, "lanes", _world("lanes").trace)
    mailed = next(e for e in _world("lanes").trace.of("svc.exec") if e["op"] == "mailer.send")
    words = f"mailer.send · cron {short(mailed['run'])} · effect"
    (before,) = _pins(tab, _labelled(words))
    assert not before["shown"]
    tab.eval(f"timeline.zoom(8, {mailed['t']})")
    (after,) = _pins(tab, _labelled(words))
    assert after["shown"]
    assert after["hit"]
    assert tab.errors() == []
