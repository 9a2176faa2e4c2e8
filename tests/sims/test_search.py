"""The default search finds the bugs users write, says what it searched when it finds none, and
never reports a failure it cannot reproduce."""

from __future__ import annotations

from pathlib import Path

import pytest

from sims import (
    CrashAfter,
    FaultPlan,
    HoldLeg,
    PctSchedule,
    plan_from_text,
    search,
    shrink_plan,
    simulate,
    sweep,
)
from sims.cli._main import main

WORLDS = Path(__file__).parent / "worlds" / "racy_jobs.py"
EXAMPLES = Path(__file__).parents[2] / "examples"


def ref(name: str) -> str:
    return f"{WORLDS}:{name}"


@pytest.mark.parametrize("name", ["check-then-send", "effect-outside-a-step", "lock-then-send"])
def test_the_default_search_finds_a_users_bug_and_it_reproduces(name: str) -> None:
    report = search(ref(name))
    assert report.found is not None, "\n".join(report.lines())
    assert report.nondeterminism is None
    assert report.reproduced is True  # a fresh process gave the same trace, byte for byte
    again = simulate(ref(name), 1, plan=plan_from_text(repr(report.found.plan)))
    assert again.report.violations


def test_a_racy_check_then_act_is_found_by_a_hold_whatever_the_timings() -> None:
    plan = FaultPlan(
        (HoldLeg(drive="cron", operation="invoke", nth=1, leg="reply", until="effect"),)
    )
    simulation = simulate(ref("check-then-send"), 1, plan=plan)
    assert [f.check for f in simulation.report.violations] == ["sent-once"]
    events = [e["ev"] for e in simulation.outcome.trace.events]
    assert "fault.hold" in events
    release = next(simulation.outcome.trace.of("fault.release"))
    assert release["why"] == "effect"


def test_a_crash_after_a_call_lands_inside_the_pass() -> None:
    plan = FaultPlan((CrashAfter(drive="cron", operation="invoke", nth=2),))
    simulation = simulate(ref("lock-then-send"), 1, plan=plan)
    crash = next(simulation.outcome.trace.of("fault.crash"))
    assert crash["after"] == "invoke"
    assert crash["working"] is True
    assert simulation.report.violations


def test_state_kept_from_one_world_to_the_next_is_reported_not_blamed_on_a_plan() -> None:
    report = search(ref("remembers-in-memory"), max_worlds=60)
    assert report.nondeterminism is not None
    assert "differs" in report.nondeterminism or "more events" in report.nondeterminism
    assert any("not a function of its seed" in line for line in report.lines())


def test_the_safe_job_stays_clean_and_the_result_says_what_was_searched() -> None:
    report = search(ref("at-least-once"), max_worlds=120, max_seconds=None)
    assert report.found is None
    assert report.nondeterminism is None
    assert report.worlds == 120
    lines = "\n".join(report.lines())
    assert "no check failed in 120 worlds" in lines
    assert "windows entered:" in lines
    assert "a takeover" in lines
    assert "faults fired:" in lines


def test_a_mark_that_never_held_is_named() -> None:
    report = search(ref("lock-then-send"), max_worlds=3, max_seconds=None)
    # Three worlds (two clean, one fault) cannot find the lock taken: the mark is seen, never held.
    assert "a pass found the lock taken" in report.coverage.marks_never_held()


def test_the_repositorys_examples_are_found_by_the_default_explore(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for world in (
        "double_charge.py:double-charge",
        "double_charge.py:charge-look-first",
        "nightly_invoice.py:nightly-invoice-look-first",
    ):
        assert main(["explore", f"{EXAMPLES / world}", "--budget", "120"]) == 1
        out = capsys.readouterr().out
        assert "the smallest failing plan has 1 fault" in out
        assert "a fresh process reproduced it byte for byte" in out


def test_a_given_plan_is_shrunk_to_its_smallest() -> None:
    noisy = FaultPlan(
        (
            CrashAfter(drive="alarm", operation="claim", nth=3, down_ms=1000.0),
            HoldLeg(drive="cron", operation="invoke", nth=1, leg="reply", until="effect"),
        )
    )
    assert simulate(ref("check-then-send"), 1, plan=noisy).report.violations
    report = search(ref("check-then-send"), start=noisy, fresh_process=False)
    assert report.found is not None
    assert len(report.found.plan) == 1
    assert isinstance(report.found.plan.faults[0], HoldLeg)


def test_the_shrinker_rounds_numbers_and_drops_faults() -> None:
    def fails(plan: FaultPlan) -> bool:
        return any(isinstance(f, CrashAfter) and f.nth >= 2 for f in plan.faults)

    plan = FaultPlan(
        (
            PctSchedule(seed=9, depth=3),
            CrashAfter(drive="cron", operation="invoke", nth=7, down_ms=1234.5),
        )
    )
    smallest, _ = shrink_plan(plan, fails)
    assert smallest == FaultPlan((CrashAfter(drive="cron", operation="invoke", nth=2),))


def test_pct_scheduling_is_a_function_of_its_seed_and_changes_the_interleaving() -> None:
    one = simulate("random", 3, plan=FaultPlan((PctSchedule(seed=1, depth=3),)))
    same = simulate("random", 3, plan=FaultPlan((PctSchedule(seed=1, depth=3),)))
    assert one.outcome.trace.digest() == same.outcome.trace.digest()
    assert not one.outcome.unfired
    digests = {
        simulate(
            "overlapping-drives", 1, plan=FaultPlan((PctSchedule(seed=s),))
        ).outcome.trace.digest()
        for s in range(6)
    }
    assert len(digests) > 1, "PCT never changed an interleaving"


@pytest.mark.parametrize(
    ("budget", "message"),
    [("0", "--budget 0 must be 1 or more"), ("ten", "--budget 'ten': give a number")],
)
def test_a_bad_budget_is_a_usage_error(
    budget: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explore", "late-begin", "--budget", budget]) == 2
    assert message in capsys.readouterr().err


def test_a_sweep_reports_a_handler_that_reads_an_unseeded_random_source() -> None:
    report = sweep(ref("jittery"), range(3))
    [seed0] = [s for s in report.seeds if s.seed == 0]
    assert seed0.rerun
    assert seed0.nondeterministic.startswith("event ")
    assert not seed0.ok
    lines = "\n".join(report.lines())
    assert "not a function of its seed: event " in lines
    assert "1 differed" in lines


def test_a_world_that_raises_under_a_plan_is_reported_with_the_plan_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = search(ref("check-breaks"), fresh_process=False)
    assert report.raised is not None
    plan, error = report.raised
    assert len(plan) == 1
    assert "this check never expected a crash" in error
    assert report.failed
    assert main(["explore", ref("check-breaks")]) == 1
    out = capsys.readouterr().out
    assert "the world raised under a plan instead of running to its end" in out
    assert "run it again: python -m sims run " in out
