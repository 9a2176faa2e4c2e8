"""A user's failing check reads as the user's, in every verdict: "your check failed at T; the spec
held", in run, a sweep, a test's failure and the page, with the finding placed where it happened.

The world is ``worlds/email_twice.py``: a step body that sends an email twice once its step's
record is lost. The spec's checks explain the second email; the user's check fails.
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest

import sims
from sims import UserFinding, WorldError, check_worlds, simulate, sweep
from sims.cli._main import main
from sims.oracle._report import SPEC_CHECKS
from sims.timeline._render import render_html

WORLD = str(Path(__file__).parent / "worlds" / "email_twice.py")
FAILS = f"{WORLD}:email-twice"
PLAIN = f"{WORLD}:plain-email-twice"


def _second_email_at(simulation: sims.Simulation) -> float:
    [times] = sims.effects_at(simulation.outcome.trace).values()
    return times[1]


def test_the_verdict_says_the_users_check_failed_when_and_that_the_spec_held() -> None:
    simulation = simulate(FAILS, 1)
    at = _second_email_at(simulation)
    report = simulation.report
    assert [f.check for f in report.user_violations] == ["no-email-twice"]
    assert report.spec_violations == ()
    assert report.verdict() == (
        f"your check `no-email-twice` failed at {at:g} ms; the spec held; the spec's checks "
        "explained what happened (1 × effects)"
    )
    # A spec violation is said to be one, and apart from the user's.
    mutated = simulate("late-begin", 1, mutant="takeover-charge").report
    assert mutated.verdict().startswith("the spec was violated: 3 violations (")
    assert "your check" not in mutated.verdict()


def test_a_user_finding_has_its_time_and_run_and_a_plain_string_keeps_the_end() -> None:
    placed, plain = simulate(FAILS, 1), simulate(PLAIN, 1)
    (finding,) = placed.report.user_violations
    (effect,) = placed.report.explained
    assert finding.t == _second_email_at(placed) == effect.t
    assert finding.run == effect.run
    assert finding.by_user
    (string,) = plain.report.user_violations
    assert string.t == plain.outcome.trace.events[-1]["t"] > finding.t
    assert string.run is None
    assert string.text == finding.text


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"at_ms": -1}, "UserFinding at_ms=-1 is not a time"),
        ({"at_ms": True}, "UserFinding at_ms=True is not a time"),
        ({"at_ms": float("nan")}, "UserFinding at_ms=nan is not a time"),
        ({"run": 7}, "UserFinding run=7 is not a run id"),
    ],
)
def test_a_user_finding_refuses_what_is_no_time_or_run(given: dict[str, object], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        UserFinding("x", **given)  # type: ignore[arg-type]


def test_a_finding_after_the_worlds_end_is_refused_with_the_checks_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "late.py").write_text(
        "from sims import UserFinding, World, scenario\n"
        "def too_late(trace):\n"
        "    return [UserFinding('x', at_ms=10**9)]\n"
        "@scenario('late', checks=[too_late])\n"
        "async def late(world: World) -> None:\n"
        "    pass\n"
    )
    with pytest.raises(WorldError, match="check too-late returned UserFinding\\(at_ms=1000000000"):
        simulate("late.py:late", 1)


def test_run_lists_every_check_that_ran_and_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", FAILS, "--seed", "1", "--story-lines", "0"]) == 1
    out = capsys.readouterr().out
    checks = out.split("\nchecks:\n")[1].split("\n\n")[0]
    for check in SPEC_CHECKS:
        assert check in checks
    assert "  effects: explained (1 × allowed by the spec)" in checks
    assert "  your check no-email-twice: FAILED (1 finding)" in checks
    verdict = out.split("\nverdict:\n")[1].splitlines()
    [said] = [line for line in verdict if line.startswith("  checks: ")]
    assert said.startswith("  checks: your check `no-email-twice` failed at ")
    assert "; the spec held;" in said
    # A check that held is named as holding.
    assert main(["run", f"{WORLD}:email-once", "--seed", "1", "--story-lines", "0"]) == 0
    assert "  your check no-email-twice: held" in capsys.readouterr().out


def test_every_check_name_the_oracle_reports_is_one_of_the_spec_checks() -> None:
    names = {
        f.check
        for mutant in sims.MUTANTS
        for f in simulate("late-begin", 1, mutant=mutant).report.findings
    }
    names |= {f.check for seed in range(3) for f in simulate("random", seed).report.findings}
    assert names
    assert names <= set(SPEC_CHECKS)


def test_a_sweep_counts_violations_by_check_and_lists_at_most_show_seeds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = sweep(FAILS, range(6))
    assert report.verdict() == (
        "your check `no-email-twice` failed in 6 of 6 seeds; the spec held; the spec's checks "
        "explained what happened (6 × effects)"
    )
    lines = list(report.lines(show=2))
    assert "  violations: 6 × no-email-twice (your check) in 6 seeds" in lines
    assert sum(1 for line in lines if line.startswith("  seed ")) == 2
    assert lines[-1].startswith("  … and 4 more failing seeds, not listed (--show 2 lists 2): ")
    assert "--show 6 lists them all" in lines[-1]
    assert main(["sweep", FAILS, "--seeds", "0..5", "--show", "1"]) == 1
    out = capsys.readouterr().out
    assert sum(1 for line in out.splitlines() if line.startswith("  seed ")) == 1
    assert main(["sweep", FAILS, "--seeds", "0..1", "--show", "-1"]) == 2


def test_the_pytest_helper_fails_with_the_same_verdict() -> None:
    with pytest.raises(AssertionError) as failed:
        check_worlds(FAILS, [1])
    assert simulate(FAILS, 1).report.verdict() in str(failed.value)
    assert "verdict: your check `no-email-twice` failed at " in str(failed.value)


def test_the_page_headlines_the_users_check_not_a_violation_of_the_spec() -> None:
    simulation = simulate(FAILS, 1)
    page = render_html(simulation.outcome.trace, title="t", report=simulation.report, mismatches=())
    verdict = html.escape(simulation.report.verdict())
    assert f'<p class="verdict bad" id="verdict">YOUR CHECK FAILED — {verdict}</p>' in page
    assert "VIOLATED" not in page
    assert "0 violations of the spec, 1 explained by it, 1 finding of your checks" in page


def test_one_definition_of_an_effect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A record row of another kind (a claim, a note) is no effect, for the check or effects_in.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.py").write_text(
        "from sims import JobPassResult, World, scenario, DriveSpec, effects_in\n"
        "async def note(ctx):\n"
        "    door = await ctx.scope()\n"
        "    await door.invoke('record', {'kind': 'note', 'key': ctx.run.id + '/x'})\n"
        "    await door.invoke('record', {'kind': 'note', 'key': ctx.run.id + '/x'})\n"
        "    return JobPassResult(done=True)\n"
        "def counted(trace):\n"
        "    return [f'{key} {n}' for key, n in effects_in(trace).items()]\n"
        "@scenario('notes', checks=[counted])\n"
        "async def notes(world: World) -> None:\n"
        "    world.add_drive(DriveSpec(name='cron'))\n"
        "    world.add_job('m', 'j', note)\n"
        "    await world.start('cron', 'scope-1', 'm', 'j')\n"
        "    await world.tick('cron', 'scope-1')\n"
        "    await world.settle(('scope-1',), horizon_ms=1_000, poll_ms=100)\n"
    )
    simulation = simulate("notes.py:notes", 1)
    assert simulation.report.findings == ()
    # The same rows of kind effect are effects to both.
    source = (tmp_path / "notes.py").read_text().replace("'kind': 'note'", "'kind': 'effect'")
    (tmp_path / "effects.py").write_text(source)
    effects = simulate("effects.py:notes", 1).report
    assert {f.check for f in effects.findings} == {"effects", "counted"}
    [counted] = [f for f in effects.findings if f.check == "counted"]
    assert counted.text.endswith("/x 2")


def test_a_bad_plan_in_a_users_file_reads_as_a_built_in_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    source = (
        Path(WORLD)
        .read_text()
        .replace('drive="cron", operation="record_step"', 'drive="crom", operation="record_step"')
    )
    (tmp_path / "typo.py").write_text(source)
    assert main(["run", "typo.py:email-twice", "--seed", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: fault DropLeg(drive='crom', ")
    assert "cannot strike: the world has no drive 'crom'" in err
    assert "raised" not in err


def test_the_story_says_a_retrying_pass_failed_and_why_a_charged_attempt_is_cleared() -> None:
    from sims.timeline._story import story_lines

    failed = "\n".join(story_lines(simulate(FAILS, 1).outcome.trace.events))
    assert "ends retrying — the pass FAILED; the run is tried again when due" in failed
    takeover = [
        line
        # The first seeds of the swarm whose worlds take a run over (their features move it).
        for seed in range(5)
        for line in story_lines(simulate("random", seed).outcome.trace.events, limit=10**6)
        if "takes over run" in line
    ]
    assert takeover
    assert all("a commit resets attempts to 0" in line for line in takeover)
