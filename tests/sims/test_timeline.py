"""The timeline: the late-BEGIN double run drawn as a page and as text, deterministically."""

from __future__ import annotations

import functools
import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from sims import CheckReport, Finding, Simulation, simulate
from sims._trace import Trace
from sims.faults._plan import DelayLeg, FaultPlan, LateRequest, PauseDrive, StoreClockFault
from sims.runners._run import WorldOutcome, WorldSetup, run_world
from sims.timeline._legend import legend_items
from sims.timeline._page import _short_ms
from sims.timeline._render import (
    Lease,
    StoreClockFit,
    build_scale,
    build_timeline,
    render_html,
    render_terminal,
    short,
    write_timeline,
)
from sims.world._world import DriveSpec, World

SVG = "{http://www.w3.org/2000/svg}"


async def _late_begin(world: World) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_drive(DriveSpec(name="alarm"))
    await world.start_walk("cron", "scope-1", objects=4, chunk=4)
    world.every("cron", "scope-1", every_ms=5000, first_ms=0, until_ms=20000)
    world.every("alarm", "scope-1", every_ms=5000, first_ms=1200, until_ms=20000)
    await world.sleep_until_ms(20000)


def _late_begin_plan(*, alarm_pause_ms: float, skew_ms: float = 0.0) -> FaultPlan:
    # cron's BEGIN reply comes back after its lease expired and alarm took the run over; a pause
    # at the start of alarm's pass keeps alarm's handler running when cron's finally starts.
    faults: list[DelayLeg | PauseDrive | StoreClockFault] = [
        DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=1500)
    ]
    if alarm_pause_ms:
        faults.append(PauseDrive(drive="alarm", nth=1, ms=alarm_pause_ms, where="pass-start"))
    if skew_ms:
        faults.append(StoreClockFault(skew_ms=skew_ms, drift=0.01))
    return FaultPlan(tuple(faults))


@functools.cache
def _world(alarm_pause_ms: float, skew_ms: float = 0.0) -> WorldOutcome:
    plan = _late_begin_plan(alarm_pause_ms=alarm_pause_ms, skew_ms=skew_ms)
    return run_world(3, WorldSetup(plan=plan, objects=4), _late_begin)


def _run_id(outcome: WorldOutcome) -> str:
    (run,) = outcome.runs["scope-1"]
    return run.id


def _svg(page: str) -> ET.Element:
    match = re.search(r"<svg.*</svg>", page, re.DOTALL)
    assert match is not None
    return ET.fromstring(match.group(0))


def test_page_highlights_the_double_run_of_a_late_begin() -> None:
    outcome = _world(400.0)
    run = _run_id(outcome)
    page = render_html(outcome.trace, title="late BEGIN, seed 3")
    svg = _svg(page)
    bands = [e for e in svg.iter(f"{SVG}rect") if e.get("class") == "double-run"]
    assert [band.get("data-run") for band in bands] == [run]
    texts = [e.text for e in svg.iter(f"{SVG}text")]
    assert f"double run: {short(run)}" in texts
    assert {"drive cron", "drive alarm", "scope-1"} <= set(texts)
    assert "<h1>late BEGIN, seed 3</h1>" in page
    titles = [e.text or "" for e in svg.iter(f"{SVG}title")]
    assert any("STALE" in title for title in titles)
    assert any("EXPIRED here, not released" in title for title in titles)
    assert any(title.startswith("BEGIN written") for title in titles)
    # Self-contained: the script and style are inline, nothing is fetched.
    assert not re.search(r"""\s(src|href)=["'](?!#)|@import|url\((?!#)""", page)
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        '"http://www.w3.org/2000/svg"', ""
    )


def test_text_has_one_line_per_lane_and_marks_the_double_run() -> None:
    outcome = _world(400.0)
    text = render_terminal(outcome.trace, width=100)
    lines = text.splitlines()
    lanes = [line for line in lines if re.match(r"^\S[^|]*\|.*\|$", line)]
    labels = [line.split("|")[0].strip() for line in lanes]
    assert labels == ["virtual ms", "cron", "alarm", "scope-1", "double run", "world end"]
    assert all(len(line) <= 100 for line in lines)
    assert "X" in lanes[-2].split("|")[1]
    # The world's end: where the scenario returned, nothing still running after it.
    assert lanes[-1].split("|")[1].strip() == "R"
    assert f"note: double run: {short(_run_id(outcome))} by alarm and cron" in text
    # Both owners' BEGINs on the store's row for the run, each in its drive's letter.
    assert "A" in lanes[3]
    assert "B" in lanes[3]


def test_a_late_begin_without_overlap_is_a_stale_pass_not_a_double_run() -> None:
    outcome = _world(0.0)
    model = build_timeline(outcome.trace)
    assert model.overlaps == []
    (stale,) = [p for p in model.passes if p.stale_since is not None]
    assert stale.drive == "cron"
    assert 'class="double-run"' not in render_html(outcome.trace, title="t")
    assert "stale pass" in render_terminal(outcome.trace)


def test_rendering_is_deterministic() -> None:
    outcome = _world(400.0)
    again = Trace.from_lines(outcome.trace.to_bytes().decode("utf-8").splitlines())
    assert render_html(outcome.trace, title="x") == render_html(again, title="x")
    assert render_terminal(outcome.trace) == render_terminal(again)


def test_leases_are_placed_by_the_store_clock() -> None:
    outcome = _world(400.0, skew_ms=250.0)
    model = build_timeline(outcome.trace)
    assert model.clock is not None
    assert abs(model.clock.rate - 1.01) < 1e-3
    cron = next(lease for lease in model.leases if lease.drive == "cron")
    # Claimed at t≈5 for 1000 ms of the store's clock, which runs 1% fast: it expires earlier.
    (claimed_at, expiry), *_ = cron.renewals
    assert 985 < expiry - claimed_at < 995


def test_lease_segments_hatch_what_expired_unreleased() -> None:
    lease = Lease("s", "r", "o", "d", 0.0, False, renewals=[(0.0, 100.0), (150.0, 250.0)])
    lease.ended_at = 200.0
    assert lease.segments(1000.0) == [
        (0.0, 100.0, True),
        (100.0, 150.0, False),
        (150.0, 200.0, True),
    ]


def test_scale_cuts_long_idle_gaps_and_keeps_order() -> None:
    scale = build_scale(
        [0.0, 10.0, 5000.0, 5010.0],
        0.0,
        5010.0,
        left=0.0,
        width=100.0,
        cut_width=4.0,
        min_width=1.0,
        max_cuts=5,
    )
    assert [piece.cut for piece in scale.pieces] == [False, True, False]
    xs = [scale.x(t) for t in (0.0, 5.0, 10.0, 2000.0, 5000.0, 5010.0)]
    assert xs == sorted(xs)
    assert xs[-1] == 100.0


def test_store_clock_fit_without_pairs_or_slope() -> None:
    assert StoreClockFit.fit([]) is None
    assert StoreClockFit.fit([(5.0, 1000.0)]) == StoreClockFit(995.0, 1.0)


def test_an_empty_trace_renders() -> None:
    page = render_html(Trace(), title="empty")
    svg = _svg(page)
    assert svg.tag == f"{SVG}svg"
    text = render_terminal(Trace(), width=60)
    assert "0 events" in text
    assert all(len(line) <= 60 for line in text.splitlines())


def test_write_timeline(tmp_path: Path) -> None:
    path = tmp_path / "timeline.html"
    write_timeline(_world(400.0).trace, path, title="late BEGIN")
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_big_trace_is_aggregated_and_says_so() -> None:
    # Ten copies of the world, each shifted in time and with its own ids: many passes and steps.
    base = _world(400.0).trace.to_bytes().decode("utf-8")
    lines: list[str] = []
    for copy in range(100):
        shifted = Trace.from_lines(base.replace("01M43", f"{copy:05d}").splitlines())
        for event in shifted.events:
            event["t"] = event["t"] + copy * 25_000.0
        lines += list(shifted.lines())
    trace = Trace.from_lines(lines)
    assert len(trace.events) > 10_000
    page = render_html(trace, title="big")
    _svg(page)
    assert "aggregated:" in page
    assert "more runs not drawn" in page
    text = render_terminal(trace, width=80)
    assert all(len(line) <= 80 for line in text.splitlines())


# -- the page handed to someone alone ----------------------------------------------------------


def _pieces(page: str) -> list[list[float]]:
    match = re.search(r'<script type="application/json" id="timeline-data">(.*?)</script>', page)
    assert match is not None
    pieces: list[list[float]] = json.loads(match.group(1))["pieces"]
    return pieces


def _x_of(pieces: list[list[float]], t: float) -> float:
    """The page's time scale, read back from the page: the last piece starting at or before t."""
    t0, t1, x0, x1, _ = next(p for p in reversed(pieces) if p[0] <= t)
    return (x0 + x1) / 2 if t1 <= t0 else x0 + min(max((t - t0) / (t1 - t0), 0), 1) * (x1 - x0)


@functools.cache
def _mutant_simulation() -> Simulation:
    # A store that charges no attempt for a takeover of a BEGUN lease: two violations at once.
    return simulate("late-begin", 1, mutant="takeover-charge")


def _mutant_page() -> str:
    simulation = _mutant_simulation()
    return render_html(
        simulation.outcome.trace,
        title="late-begin with a mutant",
        report=simulation.report,
        mismatches=simulation.mismatches,
        replay=simulation.replay_command,
    )


def test_page_states_verdict_words_plan_and_mutant() -> None:
    simulation = _mutant_simulation()
    page = _mutant_page()
    # The invariant check and the oracle's store model both name the uncharged takeover.
    assert len(simulation.report.violations) == 3
    assert "VIOLATED — the spec was violated: 3 violations (" in page
    for finding in simulation.report.findings:
        assert html.escape(finding.text) in page
        assert f"[{finding.verdict}] {finding.check}</b>" in page
    assert "<b>mutant takeover-charge</b>" in page
    assert "A claim that takes over a BEGUN lease charges no attempt" in page
    (fault,) = simulation.outcome.setup.plan.faults
    assert f"<code>{html.escape(repr(fault))}</code>" in page
    assert "--mutant takeover-charge</code>" in page
    for mismatch in simulation.mismatches:
        assert f"NOT AS DOCUMENTED: {html.escape(mismatch)}" in page


def test_a_clean_page_says_so_and_checks_the_trace_itself_when_given_no_report() -> None:
    outcome = _world(400.0)
    page = render_html(outcome.trace, title="t")
    assert '<p class="verdict ok" id="verdict">no invariant violated</p>' in page
    assert "the checks were run on this trace when the page was drawn" in page
    assert "the real scope store (no mutant)" in page
    # A page given no report still finds a violation: it checks the trace itself.
    mutated = render_html(_mutant_simulation().outcome.trace, title="t")
    assert "VIOLATED — the spec was violated: 3 violations (" in mutated


def test_each_violation_is_marked_where_it_happened() -> None:
    simulation = _mutant_simulation()
    page = _mutant_page()
    svg = _svg(page)
    pieces = _pieces(page)
    runs = {
        e.get("data-finding"): e
        for e in svg.iter(f"{SVG}circle")
        if e.get("class") == "finding-ring"
    }
    badges = {e.get("data-finding"): e for e in svg.iter(f"{SVG}a")}
    lines = {e.get("data-finding"): e for e in svg.iter(f"{SVG}line") if e.get("data-finding")}
    (run_label,) = [e for e in svg.iter(f"{SVG}text") if e.get("x") == "18"]  # the run's row
    for number, finding in enumerate(simulation.report.violations, 1):
        key = str(number)
        x = _x_of(pieces, finding.t)
        badge = badges[key].find(f"{SVG}circle")
        assert badge is not None
        assert badge.get("fill") == "#d62728"
        assert abs(float(badge.get("cx", "nan")) - x) < 0.1
        assert abs(float(lines[key].get("x1", "nan")) - x) < 0.1
        assert badges[key].get("href") == f"#finding-{number}"
        assert f'<li id="finding-{number}" class="violation">' in page
        # The ring sits on the run's own row.
        ring = runs[key]
        assert abs(float(ring.get("cx", "nan")) - x) < 0.1
        assert abs(float(ring.get("cy", "nan")) - float(run_label.get("y", "nan"))) < 10
    # Two violations at one instant: their badges stack instead of hiding each other.
    ys = {badges[str(n)].find(f"{SVG}circle").get("cy") for n in (1, 2)}  # type: ignore[union-attr]
    assert len(ys) == 2


def test_the_axis_is_linear_where_it_is_not_cut_and_every_cut_says_its_length() -> None:
    for page in (render_html(_world(400.0).trace, title="t"), _mutant_page()):
        pieces = _pieces(page)
        rates = [(x1 - x0) / (t1 - t0) for t0, t1, x0, x1, cut in pieces if not cut and t1 > t0]
        assert max(rates) - min(rates) < 1e-6 * max(rates)
        cuts = [p for p in pieces if p[4]]
        labels = [
            e.text or "" for e in _svg(page).iter(f"{SVG}text") if e.get("class") == "cut-label"
        ]
        assert cuts
        assert labels == [f"{_short_ms(t1 - t0)} cut" for t0, t1, *_ in cuts]
        # Every labelled tick sits where the scale puts its time.
        axis = re.search(r'<g id="axis">(.*?)</g>', page)
        assert axis is not None
        ticks = re.findall(
            r'<text x="([\d.]+)" y="[\d.]+" [^>]*>([\d\u2009.]+)</text>', axis.group(1)
        )
        assert len(ticks) >= 5
        for x, label in ticks:
            assert abs(_x_of(pieces, float(label.replace("\u2009", ""))) - float(x)) < 0.1


def test_the_legend_explains_everything_drawn() -> None:
    pages = [
        render_html(_world(400.0).trace, title="t"),
        _mutant_page(),
        render_html(simulate("lease-expiry-between-steps", 1).outcome.trace, title="t"),
        render_html(simulate("crash-after-begin", 1).outcome.trace, title="t"),
        render_html(simulate("erasure-mid-pass", 1).outcome.trace, title="t"),
        render_html(simulate("random", 35).outcome.trace, title="t"),
        render_html(_late_request_world().trace, title="t"),
    ]
    drawn: set[str] = set()
    for page in pages:
        svg = _svg(page)
        kinds = {e.get("data-k") for e in svg.iter() if e.get("data-k")}
        legend = {e.get("data-legend") for e in svg.iter() if e.get("data-legend")}
        assert kinds <= legend, kinds - legend
        drawn |= {k for k in kinds if k}
    # The pages above draw most kinds; the legend lists no kind that is never drawn by anything.
    assert len(drawn) >= 20
    assert {kind for kind, _, _ in legend_items()} >= drawn


def _late_request_world() -> WorldOutcome:
    # cron gives up on its BEGIN, which the wire delivers 1 s later: the store runs it anyway.
    plan = FaultPlan((LateRequest(drive="cron", operation="begin", nth=1, ms=1000.0),))
    return run_world(3, WorldSetup(plan=plan, objects=4), _late_begin)


def test_a_request_given_up_on_and_delivered_late_is_drawn() -> None:
    svg = _svg(render_html(_late_request_world().trace, title="t"))
    kinds = [e.get("data-k") for e in svg.iter() if e.get("data-k")]
    assert kinds.count("late-request") == 1
    assert kinds.count("late-arrival") == 1


def test_labels_are_shown_only_where_they_fit() -> None:
    trace = _world(400.0).trace
    svg = _svg(render_html(trace, title="t"))
    fitted = [e for e in svg.iter(f"{SVG}g") if e.get("data-w") is not None]
    steps = [e for e in fitted if (e.findtext(f"{SVG}text") or "").startswith("object-")]
    # One name per step run (none is merged here: the steps are far wider than a pixel).
    assert len(steps) == sum(len(p.steps) for p in build_timeline(trace).passes) > 0
    for label in fitted:
        fits = float(label.get("data-w", "nan")) >= float(label.get("data-n", "nan"))
        assert (label.get("display") != "none") == fits
    assert any(e.get("display") != "none" for e in fitted)


def test_a_world_that_kept_no_trace_says_so_and_still_marks_its_findings() -> None:
    trace = Trace(enabled=False, counts={"drive.tick": 2, "world.end": 1})
    finding = Finding("effects", "explained", "01ABC", 1500.0, "effect landed 2 times")
    page = render_html(
        trace,
        title="big",
        report=CheckReport((finding,)),
        mismatches=(),
        plan=FaultPlan(),
        plan_replaced=False,
    )
    assert "3 events happened, but this world did not keep its trace" in page
    assert "none: no fault was injected" in page
    (badge,) = [e for e in _svg(page).iter(f"{SVG}a") if e.get("data-finding") == "1"]
    assert badge.get("href") == "#finding-1"
    # With no events nothing says a gap was idle, so nothing is cut from the axis.
    assert not [p for p in _pieces(page) if p[4]]
