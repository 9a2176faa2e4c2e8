"""Verdict words that are true: "every check held" never above a violation, a run no drive ever
drove told as the scenario's mistake with its remedy, a step never awaited as the handler's.

The worlds are ``worlds/mistakes.py`` (each mistake beside the world written right) and
``worlds/process_state.py``'s ``raises-on-thirds``.
"""

from __future__ import annotations

import html
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sims import simulate, sweep
from sims.cli._main import main
from sims.oracle._report import MISTAKES, SPEC_CHECKS, verdict_words
from sims.timeline._render import render_html

WORLDS = Path(__file__).parent / "worlds"
MISTAKEN = f"{WORLDS / 'mistakes.py'}"
RAISES = f"{WORLDS / 'process_state.py'}:raises-on-thirds"

AWAIT = (
    "your handler created a step and never awaited it, so its body never ran and the pass failed"
)
DRIVE = (
    "your scenario drove no run after it was started (by the scenario, by a start the wire "
    "delivered late or sent again, or by a service's callback), so it could not end (1 × "
    "run-never-driven): drive its scope (world.tick, or world.every) past the moment the run was "
    "started, and wait for it with world.settle (the finding says what started it); the spec held"
)


def test_every_check_held_is_said_only_when_nothing_was_found() -> None:
    nothing: Counter[str] = Counter()
    assert verdict_words(nothing, {}, nothing) == "every check held"
    mistake = verdict_words(nothing, {}, nothing, mistakes={"step-never-awaited": "(1 × x)"})
    assert "every check held" not in mistake
    assert mistake.endswith("; the spec held")
    raised = verdict_words(nothing, {}, nothing, before=["the world raised"], held_in=None)
    assert raised == "the world raised"
    some = verdict_words(nothing, {}, nothing, before=["it raised"], held_in=" in the other 2")
    assert some == "it raised; every check held in the other 2"


def test_a_run_no_drive_ever_drove_is_the_scenarios_mistake_with_its_remedy() -> None:
    report = simulate(f"{MISTAKEN}:undriven", 1).report
    assert [f.check for f in report.violations] == ["run-never-driven"]
    assert report.spec_violations == ()
    assert report.verdict() == DRIVE
    (finding,) = report.mistakes
    assert finding.line().startswith("[violation] run-never-driven run ")
    assert " (your scenario): your scenario started run " in finding.line()
    assert finding.text.endswith(
        "and no drive was ever called on its scope scope-1, so the run is still running at the "
        "end: the scenario's mistake, not the spec's; drive its scope (world.tick, or "
        "world.every) and wait for the run with world.settle"
    )
    assert "  run-never-driven: FOUND (1 finding), your scenario's mistake" in list(
        report.check_lines()
    )
    assert simulate(f"{MISTAKEN}:driven", 1).report.findings == ()


def test_a_run_driven_that_never_ends_is_still_the_spec_to_judge() -> None:
    report = simulate(f"{MISTAKEN}:never-done", 1).report
    assert [f.check for f in report.violations] == ["runs-settle"]
    assert report.mistakes == ()
    assert report.verdict() == "the spec was violated: 1 violation (1 × runs-settle)"


def test_a_step_never_awaited_is_the_handlers_mistake_not_a_clean_world() -> None:
    simulation = simulate(f"{MISTAKEN}:unawaited", 1)
    report = simulation.report
    assert not simulation.ok
    assert {f.check for f in report.violations} == {"step-never-awaited"}
    assert report.spec_violations == ()
    first = report.mistakes[0]
    assert first.text == (
        "your handler created step 'send' and never awaited it, so the body never ran and the "
        "pass failed: write `await ctx.step(...)`"
    )
    assert first.line().startswith("[violation] step-never-awaited run ")
    assert " (your handler): " in first.line()
    # The kernel failed every pass for it, as the oracle's model of the outcome expects.
    run = simulation.facts.only_run()
    assert run.status == "failed"
    assert run.last_error == (
        "step 'send' was called without await, so the body never ran — write `await ctx.step(...)`"
    )
    assert report.verdict() == (
        f"{AWAIT} ({len(report.mistakes)} × step-never-awaited): write `await ctx.step(...)`; the "
        "spec held"
    )
    assert simulation.facts.count("hx.step") == 0
    (end, *_) = simulation.facts.of("hx.end")
    assert end["unawaited"] == ["send"]


@pytest.mark.parametrize("name", ["awaited", "awaited-later"])
def test_a_step_awaited_now_or_later_is_a_clean_world(name: str) -> None:
    simulation = simulate(f"{MISTAKEN}:{name}", 1)
    assert simulation.report.findings == (), simulation.report.findings
    assert simulation.ok
    assert all("unawaited" not in end for end in simulation.facts.of("hx.end"))
    assert simulation.facts.only_run().status == "done"


def test_run_says_the_mistake_not_as_documented_and_no_invariant_violated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", f"{MISTAKEN}:unawaited", "--seed", "1", "--story-lines", "0"]) == 1
    out = capsys.readouterr().out
    verdict = out.split("\nverdict:\n")[1]
    assert "no invariant violated" not in verdict
    assert f"  checks: {AWAIT} (" in verdict
    checks = out.split("\nchecks:\n")[1].split("\n\n")[0]
    assert "  step-never-awaited: FOUND (5 findings), your handler's mistake" in checks
    assert (
        "  no mistake in how your world is written: handler-raised, run-failed, run-never-driven"
        in checks
    )
    for check in SPEC_CHECKS:
        assert check in checks


def test_the_page_headlines_a_mistake_as_the_users_not_as_a_clean_world() -> None:
    simulation = simulate(f"{MISTAKEN}:undriven", 1)
    page = render_html(simulation.outcome.trace, title="t", report=simulation.report, mismatches=())
    verdict = html.escape(simulation.report.verdict())
    assert f'<p class="verdict bad" id="verdict">YOUR MISTAKE — {verdict}</p>' in page
    assert "no invariant violated" not in page
    counts = "0 violations of the spec, 0 explained by it, 1 mistake in how your world is written"
    assert counts in page


def test_a_world_that_raises_in_every_seed_never_reads_every_check_held(tmp_path: Path) -> None:
    path = tmp_path / "raises.py"
    path.write_text(
        "from sims import DriveSpec, World, scenario\n\n\n"
        "@scenario('raises')\n"
        "async def raises(world: World) -> None:\n"
        "    world.add_drive(DriveSpec(name='cron'))\n"
        "    settings = {}\n"
        "    settings['horizon_ms']\n"
    )
    report = sweep(f"{path}:raises", range(4))
    assert report.verdict() == (
        "the world raised in 4 of 4 seeds (4 × world-raised), so no check ran on them"
    )
    lines = list(report.lines())
    assert lines[1] == f"  verdict: {report.verdict()}"
    assert "  violations: 4 × world-raised (the world raised) in 4 seeds" in lines
    assert not any("every check held" in line or "the spec held" in line for line in lines)


def test_a_sweep_says_what_held_only_in_the_seeds_that_did_not_raise() -> None:
    report = sweep(RAISES, range(6))
    assert report.verdict() == (
        "the world raised in 2 of 6 seeds (2 × world-raised), so no check ran on them; your "
        "check `one-receipt-each` failed in 2 of 6 seeds; the spec held in the other 4 seeds; "
        "the spec's checks explained what happened (2 × effects)"
    )


def test_a_sweep_tells_the_users_mistakes_apart_from_the_spec() -> None:
    report = sweep(f"{MISTAKEN}:undriven", range(3))
    assert report.verdict() == (
        "your scenario drove no run after it was started (by the scenario, by a start the wire "
        "delivered late or sent again, or by a service's callback), so it could not end in 3 of 3 "
        "seeds: drive its scope (world.tick, or world.every) past the moment the run was "
        "started, and wait for it with world.settle (the finding says what started it); the "
        "spec held"
    )
    assert "  violations: 3 × run-never-driven (your scenario's mistake) in 3 seeds" in list(
        report.lines()
    )


def test_every_mistake_names_whose_it_is_and_its_remedy() -> None:
    assert set(MISTAKES) == {
        "step-never-awaited",
        "handler-raised",
        "run-failed",
        "run-never-driven",
    }
    assert not set(MISTAKES) & set(SPEC_CHECKS)
    for mistake in MISTAKES.values():
        assert mistake.whose in ("your handler", "your scenario")
        assert mistake.did.startswith(mistake.whose)
        assert mistake.remedy


def test_the_command_line_sweep_of_a_mistake_exits_1_and_says_whose(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sims", "sweep", f"{MISTAKEN}:unawaited", "--seeds", "0..1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    verdict = done.stdout.splitlines()[1]
    assert verdict.startswith(f"  verdict: {AWAIT} in 2 of 2 seeds: write `await ctx.step(...)`")
