"""Less noise, fewer traps: a sweep of a user's world lists the user's marks, not the spec's
dozens of probes it never meant to reach; one fault alone (or a list of faults) is a plan; and a
name that does not exist is answered with the closest one that does."""

from __future__ import annotations

from pathlib import Path

import pytest

from sims import DelayLeg, DropLeg, Evict, FaultPlan, find_scenario, plan_from_text, sweep
from sims.cli._main import main
from sims.faults._check import PlanError, check_plan
from sims.runners._sweep import SeedSummary, marks_lines

RACY = str(Path(__file__).parent / "worlds" / "racy_jobs.py")
#: Its handler marks "a pass found the lock taken", which no world of it reaches.
MARKED = f"{RACY}:lock-then-send"
#: Its handlers set no mark.
UNMARKED = f"{RACY}:at-least-once"
HINT = "the spec's probes are hidden (--spec-probes shows them)"

MARKS_FILE = '''
from sims import DriveSpec, JobPassResult, World, WorldSetup, scenario, sometimes


async def handler(ctx):
    sometimes(True, "a pass ran")
    sometimes(False, "a pass saw the impossible")
    return JobPassResult(done=True)


@scenario("marked", setup=WorldSetup(scopes=("s",)))
async def marked(world: World) -> None:
    """One run, one pass, two marks: one that holds, one that never does."""
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "j", handler)
    await world.start("cron", "s", "m", "j")
    world.every("cron", "s", every_ms=100, first_ms=0, until_ms=1_000)
    await world.settle(("s",), horizon_ms=1_000, poll_ms=100)
'''


# -- the probes line of a sweep ---------------------------------------------------------------


def test_a_sweep_of_a_users_world_lists_its_marks_and_hides_the_spec_probes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sweep", MARKED, "--seeds", "0..3"]) == 0
    out = capsys.readouterr().out
    assert f"  your marks (sims.sometimes): 0 of 1 held in some world; {HINT}\n" in out
    assert "    a pass found the lock taken: seen in 4 worlds, held in none (no world" in out
    assert "probes hit:" not in out
    assert "probes never hit" not in out


def test_spec_probes_shows_the_spec_probes_of_a_users_world_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sweep", MARKED, "--seeds", "0..3", "--spec-probes"]) == 0
    out = capsys.readouterr().out
    assert "  your marks (sims.sometimes): 0 of 1 held in some world\n" in out
    assert "  probes hit: " in out
    assert "  probes never hit: " in out
    assert HINT not in out


def test_a_users_world_with_no_marks_says_how_to_set_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sweep", UNMARKED, "--seeds", "0..1"]) == 0
    out = capsys.readouterr().out
    assert "  your marks (sims.sometimes): none seen; sims.sometimes(condition, name)" in out
    assert out.count(HINT) == 1
    assert "probes never hit" not in out


def test_a_built_in_world_still_lists_the_spec_probes_and_no_marks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sweep", "late-begin", "--seeds", "0..1"]) == 0
    out = capsys.readouterr().out
    assert "  probes hit: 5 of " in out
    assert "  probes never hit: " in out
    assert "your marks" not in out
    assert HINT not in out


def test_the_report_counts_the_marks_that_held_and_those_that_never_did(tmp_path: Path) -> None:
    path = tmp_path / "marked_world.py"
    path.write_text(MARKS_FILE)
    report = sweep(f"{path}:marked", range(3))
    assert not report.failing, "\n".join(report.lines())
    assert report.user_world
    lines = list(report.lines())
    start = lines.index(f"  your marks (sims.sometimes): 1 of 2 held in some world; {HINT}")
    assert lines[start + 1 : start + 3] == [
        "    a pass ran: seen in 3 worlds, held in 3",
        "    a pass saw the impossible: seen in 3 worlds, held in none (no world reached it, so "
        "nothing was tested there)",
    ]
    # From Python as from the command line: asked for, the spec's probes are listed too.
    assert any(line.startswith("  probes hit: ") for line in report.lines(spec_probes=True))


def test_marks_a_world_could_not_give_are_unknown_not_unseen() -> None:
    seeds = [
        SeedSummary(0, (), (), (), 0, marks=(("charged twice", True),)),
        SeedSummary(1, (), (), (), 0, marks=(("charged twice", False),)),
        SeedSummary(2, (), (), (), 0, marks_read=False),
    ]
    assert list(marks_lines(seeds)) == [
        "  your marks (sims.sometimes): 1 of 1 held in some world (read in 2 of 3 worlds: the "
        "others kept no trace or raised)",
        "    charged twice: seen in 2 worlds, held in 1",
    ]


# -- a bare fault, or a list of faults, is a plan -----------------------------------------------


def test_one_fault_alone_or_a_list_of_faults_is_the_plan_of_them() -> None:
    drop = DropLeg(drive="cron", operation="card.charge", nth=1, leg="reply")
    delay = DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=1250)
    assert plan_from_text(repr(drop)) == FaultPlan((drop,))
    assert plan_from_text(f"[{drop!r}, {delay!r}]") == FaultPlan((drop, delay))
    assert plan_from_text("[]") == FaultPlan(())
    # A list is a plan only as the whole of it: inside a fault, or nested, it is still refused.
    with pytest.raises(ValueError, match="holds an expression of kind List"):
        plan_from_text(f"[[{drop!r}]]")
    with pytest.raises(ValueError, match="holds an expression of kind List"):
        plan_from_text("Deploy(version='v2', drives=['cron'])")
    with pytest.raises(ValueError, match=r"is a int, not a FaultPlan; write FaultPlan\(\(FAULT"):
        plan_from_text("3")


def test_run_takes_a_list_of_faults_as_its_plan(capsys: pytest.CaptureFixture[str]) -> None:
    plan = "[DelayLeg(drive='cron', operation='begin', nth=1, leg='reply', ms=1250)]"
    assert main(["run", "late-claim", "--plan", plan]) == 0
    out = capsys.readouterr().out
    assert "faults (--plan, replacing the scenario's own plan): FaultPlan(faults=(DelayLeg(" in out


# -- did you mean -------------------------------------------------------------------------------


def test_an_unknown_built_in_scenario_suggests_the_closest() -> None:
    with pytest.raises(ValueError, match=r"the scenarios are: .*; did you mean 'late-begin'\?$"):
        find_scenario("late-begn")
    # Nothing close: the list alone, as before.
    with pytest.raises(ValueError, match=r"the scenarios are: .*random$"):
        find_scenario("nope")


def test_an_unknown_scenario_of_a_users_file_suggests_the_closest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", f"{RACY}:lock-then-snd"]) == 2
    err = capsys.readouterr().err
    assert "; its scenarios are: check-then-send, " in err
    assert err.rstrip().endswith("; did you mean 'lock-then-send'?")
    assert main(["sweep", f"{RACY}:two-phase", "--seeds", "0"]) == 2
    assert capsys.readouterr().err.rstrip().endswith("; did you mean 'two-phases'?")


#: The world the faults below are checked against.
WORLD = {
    "drives": ("cron", "alarm"),
    "scopes": ("scope-1",),
    "services": {"card": ("charge", "refund"), "bank": ("pay", "refund")},
}


@pytest.mark.parametrize(
    ("fault", "suggested"),
    [
        (DelayLeg(drive="crom", operation="begin", nth=1, leg="reply", ms=5), "'cron'"),
        (DelayLeg(drive="cron", operation="begn", nth=1, leg="reply", ms=5), "'begin'"),
        (DropLeg(drive="cron", operation="card.chrage", nth=1, leg="reply"), "'card.charge'"),
        (DropLeg(drive="cron", operation="crad.charge", nth=1, leg="reply"), "'card.charge'"),
        (Evict(scope="scope1", at_ms=5), "'scope-1'"),
    ],
)
def test_a_fault_naming_what_the_world_lacks_suggests_the_closest(
    fault: DelayLeg | DropLeg | Evict, suggested: str
) -> None:
    with pytest.raises(PlanError, match=rf"; did you mean {suggested}\?$"):
        check_plan(FaultPlan((fault,)), **WORLD)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "fault",
    [
        DelayLeg(drive="zzz", operation="begin", nth=1, leg="reply", ms=5),
        # An operation a service the world has does not have is no typo of another of its
        # operations: the 'bank.' they share does not make 'bank.charge' close to 'bank.refund'.
        DropLeg(drive="cron", operation="bank.charge", nth=1, leg="reply"),
    ],
)
def test_a_fault_naming_nothing_close_gets_no_suggestion(fault: DelayLeg | DropLeg) -> None:
    with pytest.raises(PlanError) as raised:
        check_plan(FaultPlan((fault,)), **WORLD)  # type: ignore[arg-type]
    assert "did you mean" not in str(raised.value)
