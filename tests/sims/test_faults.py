"""Fault plans are data: drawn from a seed, printed, and read back safely."""

from __future__ import annotations

import random
import re

import pytest

from sims import (
    CrashDrive,
    DelayLeg,
    FaultPlan,
    LateRequest,
    PauseDrive,
    UpstreamFailure,
    draw_plan,
    plan_from_text,
    simulate,
    story_lines,
)
from sims.cli._main import main
from sims.timeline._reader import build_timeline


def _draw(seed: int) -> FaultPlan:
    return draw_plan(
        random.Random(seed),
        drives=("cron", "alarm"),
        scopes=("scope-1",),
        lease_ms=1000,
        margin_ms=250,
        horizon_ms=30_000,
    )


def test_a_plan_is_a_function_of_its_seed() -> None:
    assert _draw(5) == _draw(5)
    assert any(_draw(5) != _draw(seed) for seed in range(6, 10))


def test_swarm_draws_enable_different_subsets_of_kinds() -> None:
    kinds = {frozenset(type(fault) for fault in _draw(seed).faults) for seed in range(40)}
    assert len(kinds) > 10


def test_a_printed_plan_reads_back() -> None:
    plan = FaultPlan(
        (
            DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=1500.0),
            CrashDrive(drive="alarm", at_ms=30.0, down_ms=-0.0),
            PauseDrive(drive="cron", nth=2, ms=999.0, where="after-effect"),
            UpstreamFailure(first=3, count=2, what="page"),
            LateRequest(drive="cron", operation="record_step", nth=2, ms=1500.0),
        )
    )
    assert plan_from_text(repr(plan)) == plan
    assert plan_from_text(repr(plan.faults)) == plan


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "__import__('os').system('true')",
            r"calls something other than CrashAfter, CrashDrive, DelayCallback, DelayLeg",
        ),
        (
            "FaultPlan(faults=[x for x in ()])",
            r"holds an expression of kind ListComp, which a plan cannot",
        ),
        ("garbage", r"^plan 'garbage' names 'garbage', which is not a fault kind; the kinds are: "),
        ("DelayLeg(", r"is not Python"),
        ("3", r"is a int, not a FaultPlan"),
    ],
)
def test_a_plan_that_is_not_a_plan_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_from_text(text)


def test_an_abandoned_request_runs_late_and_the_story_says_so() -> None:
    plan = FaultPlan((LateRequest(drive="cron", operation="record_step", nth=2, ms=1500.0),))
    sim = simulate("late-begin", 0, plan=plan)
    events = sim.outcome.trace.events
    late = next(e for e in events if e["ev"] == "fault.late")
    legs = [
        (e["ev"], e["t"], e.get("result"))
        for e in events
        if e.get("link") == "cron" and e.get("seq") == late["seq"] and e["ev"] != "rpc.send"
    ]
    # The caller gives up at once; 1500 ms later the request runs, after the alarm finished the
    # run, so the stale owner's step record is refused; its reply goes nowhere.
    assert legs == [
        ("rpc.abandon", 19.0, None),
        ("rpc.late", 1519.0, None),
        ("rpc.exec", 1519.0, False),
        ("rpc.drop", 1519.0, False),
    ]
    assert sim.report.ok
    story = "\n".join(story_lines(events))
    assert (
        "fault: the caller gives up on record_step call 2; the wire delivers it 1500 ms later "
        "anyway" in story
    )
    # Every line about the struck call names it as the plan does, not by the link's sequence.
    assert "the abandoned record_step call 2 reaches scope scope-1 late, and runs there" in story
    assert "gives up on record_step #10" not in story


@pytest.mark.parametrize(
    ("faults", "held"),
    [((1,), "1"), (("x",), "'x'"), ((FaultPlan(),), "FaultPlan(faults=())")],
)
def test_a_plan_holds_only_faults(faults: tuple[object, ...], held: str) -> None:
    # Anything else would ride through a world as a "fault" that can never strike.
    with pytest.raises(TypeError, match=rf"^FaultPlan holds {re.escape(held)}, which is not a "):
        FaultPlan(faults)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"is given a list; pass a tuple of faults"):
        FaultPlan([DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=5.0)])  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["FaultPlan(faults=(1,))", "('x',)", "(FaultPlan(),)"])
def test_the_cli_refuses_a_plan_of_things_that_are_not_faults(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "late-begin", "--seed", "3", "--plan", text]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: plan {text!r} does not build: FaultPlan holds ")
    assert captured.err.count("\n") == 1


def test_a_draw_narrowed_to_some_kinds_switches_on_subsets_of_those_alone() -> None:
    # A world without the built-in walk cannot fire pauses or upstream failures: it narrows the
    # draw, and each seed still switches on its own subset of what is left.
    kinds = (DelayLeg, LateRequest, CrashDrive)

    def draw(seed: int, kinds: tuple[type, ...] = kinds) -> FaultPlan:
        return draw_plan(
            random.Random(seed),
            drives=("cron",),
            scopes=("scope-1",),
            lease_ms=1000,
            margin_ms=250,
            horizon_ms=2_000,
            kinds=kinds,
        )

    drawn = {frozenset(type(fault) for fault in draw(seed).faults) for seed in range(40)}
    assert set().union(*drawn) == set(kinds)
    assert len(drawn) > 4  # subsets, not every kind in every seed
    with pytest.raises(ValueError, match=r"^kinds=\(\); give one or more of DelayLeg, "):
        draw(1, kinds=())
    with pytest.raises(ValueError, match=r"^kinds=\(<class 'str'>,\); give one or more of "):
        draw(1, kinds=(str,))


def test_a_late_request_due_after_the_world_ended_is_told_as_never_arrived() -> None:
    plan = FaultPlan((LateRequest(drive="cron", operation="commit_pass", nth=1, ms=1e9),))
    sim = simulate("late-begin", 3, plan=plan)
    events = sim.outcome.trace.events
    assert not [e for e in events if e["ev"] == "rpc.late"]  # the world ended first
    story = "\n".join(story_lines(events))
    assert (
        "fault: the caller gives up on commit_pass call 1; the wire was to deliver it "
        "1000000000 ms later, but the world ended first: it never reached the scope"
    ) in story
    assert "delivers it" not in story
    # The timeline neither claims the delivery nor stretches its axis out to it.
    timeline = build_timeline(sim.outcome.trace)
    [mark] = [m for m in timeline.marks if m.kind == "late-request"]
    assert mark.title == (
        "late request: cron gave up on commit_pass #1; the wire was to deliver it "
        "1000000000.0 ms later, but the world ended first: it never reached the scope"
    )
    assert mark.t == events[-1]["t"]
    # The world waited its grace for the request, then cut it: the axis ends there, not at 1e9.
    [cut] = [e for e in events if e["ev"] == "world.cut"]
    assert cut["requests"] == 1
    assert timeline.end < 100_000


def test_a_request_given_up_on_that_lands_after_the_scenario_returned_is_waited_for() -> None:
    # A stale pass's write on the wire is part of the world's end, as its pass would be: the
    # world waits for it (within its grace), it runs in the scope, and the checks judge it.
    plan = FaultPlan((LateRequest(drive="cron", operation="commit_pass", nth=1, ms=5_000.0),))
    sim = simulate("late-begin", 3, plan=plan)
    events = sim.outcome.trace.events
    [closing] = [e for e in events if e["ev"] == "world.closing"]
    assert (closing["passes"], closing["calls"], closing["requests"]) == ([], 0, 1)
    landed = [e["t"] for e in events if e["ev"] == "rpc.exec" and e["op"] == "commit_pass"]
    assert landed[-1] > closing["t"]
    ends = [e["ev"] for e in events if e["ev"] in ("world.quiet", "world.cut")]
    assert ends == ["world.quiet"]
    story = "\n".join(story_lines(events))
    assert "1 scope request its caller gave up on, on the wire" in story
    assert sim.report.ok


def test_the_story_writes_its_milliseconds_in_plain_digits() -> None:
    base = {"t": 0.0, "drive": "cron", "op": "begin", "seq": 1, "nth": 1}
    events = [
        {**base, "ev": "fault.delay", "leg": "reply", "ms": 2_500_000.0},
        {**base, "ev": "fault.pause", "where": "before-step", "ms": 3_600_000.0},
        {**base, "ev": "fault.crash", "down_ms": 7_200_000.0, "working": True},
    ]
    story = "\n".join(story_lines(events))
    assert "is held 2500000 ms" in story
    assert "stops for 3600000 ms" in story
    assert "back in 7200000 ms" in story
    assert "e+" not in story
