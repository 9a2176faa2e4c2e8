"""A sweep never blames the user for its own process state: every failing seed is run again alone,
in a fresh process, before what it found is laid on the spec or the user's checks.

The worlds are ``worlds/process_state.py``: ``remembers`` keeps what it charged in a module-level
set (it fails only where another world ran before it), ``twice-on-thirds`` fails in every third
seed wherever it runs, ``raises-on-thirds`` raises in every third seed.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sims import DropLeg, FaultPlan, sweep
from sims.faults._check import PlanError
from sims.runners import _fresh
from sims.runners._sweep import SweepReport

WORLD = Path(__file__).parent / "worlds" / "process_state.py"
REMEMBERS = f"{WORLD}:remembers"
THIRDS = f"{WORLD}:twice-on-thirds"
RAISES = f"{WORLD}:raises-on-thirds"

FRESH_DIFFERS = "not a function of its seed: run alone in a fresh process, it gave another world"


def _commands(report: SweepReport) -> list[str]:
    return [line for line in report.lines(show=len(report.seeds)) if "python -m sims run" in line]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_world_that_keeps_state_in_a_module_global_is_laid_on_nobody(jobs: int) -> None:
    report = sweep(REMEMBERS, range(12), jobs=jobs)
    lines = list(report.lines(show=12))
    failing = len(report.failing)
    assert failing >= 10  # in each worker, every world after its first charges twice
    assert lines[0].endswith(
        f", {12 - failing} as documented, {failing} not ({failing} not a function of their seed)"
    )
    assert report.verdict() == (
        f"{failing} of 12 seeds were not a function of their seed (run again alone in a fresh "
        "process, or twice, each gave another world), so what was found in them is laid on "
        "neither the spec nor your checks; every check held in the other "
        f"{12 - failing} seed{'s' * (12 - failing != 1)}"
        if failing < 12
        else f"{failing} of 12 seeds were not a function of their seed (run again alone in a "
        "fresh process, or twice, each gave another world), so what was found in them is laid "
        "on neither the spec nor your checks"
    )
    assert not any(line.startswith("  violations: ") for line in lines)
    assert f"  not a function of its seed: {failing} seeds, counted under no check: run again " in (
        "\n".join(lines)
    )
    # No command is printed for a seed no command reproduces, nor a plan to shrink.
    assert _commands(report) == []
    fresh = [s for s in report.failing if s.confirmed is False]
    assert len(fresh) >= failing - jobs  # a worker's first world differs only when run twice
    for summary in fresh:
        said = f"  seed {summary.seed}: {FRESH_DIFFERS} (as documented): event "
        assert any(line.startswith(said) for line in lines), said


def test_a_failure_that_is_a_function_of_its_seed_is_the_users_and_its_command_reproduces_it(
    tmp_path: Path,
) -> None:
    report = sweep(THIRDS, range(7), jobs=2)
    assert [s.seed for s in report.failing] == [0, 3, 6]
    assert all(s.confirmed is True for s in report.failing)
    assert report.verdict().startswith("your check `one-receipt-each` failed in 3 of 7 seeds; ")
    commands = _commands(report)
    assert len(commands) == 3
    for line, summary in zip(commands, report.failing, strict=True):
        command = line.split(": ", 1)[1]
        assert command == report.replay_command(summary.seed)
        # The printed command reproduces the seed's failure, every time: in a process of its own.
        words = shlex.split(command)
        done = subprocess.run(
            [sys.executable, *words[1:]],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        for finding in summary.violations:
            assert f"  {finding}" in done.stdout.splitlines()


def test_a_sweep_starts_one_fresh_interpreter_for_all_its_failing_seeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[object] = []
    real = _fresh.FreshWorlds.__init__

    def counted(self: _fresh.FreshWorlds, *args: object) -> None:
        started.append(args)
        real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_fresh.FreshWorlds, "__init__", counted)
    report = sweep(REMEMBERS, range(30))
    # Every failing seed has its own answer from a fresh process (but seed 0, when this process
    # ran no world of this file before: it is then clean, and differs only when run twice), and
    # one interpreter gave them all.
    assert len(report.failing) == 30
    assert all(s.confirmed is False for s in report.failing if s.seed > 0)
    assert len(started) == 1
    assert _fresh._STARTED == {}  # stopped at the sweep's end
    assert sweep(THIRDS, [4, 5]).failing == ()
    assert len(started) == 1  # a sweep with no failing seed starts none


def test_a_seed_given_twice_is_run_and_confirmed_once() -> None:
    report = sweep(THIRDS, [3, 3, 0, 3])
    assert [s.seed for s in report.seeds] == [0, 3]
    assert all(s.confirmed for s in report.seeds)


def _seeds_in(line: str) -> int:
    match = re.search(r" in (\d+) seeds?$", line)
    assert match is not None, line
    return int(match[1])


def test_per_check_counts_add_up_to_the_failing_total() -> None:
    report = sweep(RAISES, range(9))
    lines = list(report.lines())
    counted = [line for line in lines if line.startswith("  violations: ")]
    assert counted == [
        "  violations: 3 × one-receipt-each (your check) in 3 seeds",
        "  violations: 3 × world-raised (the world raised) in 3 seeds",
    ]
    seeds = sum(_seeds_in(line) for line in counted)
    assert seeds == len(report.failing) == 6
    assert all(s.confirmed is True for s in report.failing)
    assert [s.seed for s in report.failing if s.raised] == [0, 3, 6]


WORLD_NEEDING_THIS_PROCESS = """
import only_in_the_sweeps_process

from sims import DriveSpec, World, scenario


def always(trace):
    return ["this check always fails"]


@scenario("needs-this-process", checks=[always])
async def needs_this_process(world: World) -> None:
    world.add_drive(DriveSpec(name="cron"))
"""


def test_a_seed_no_fresh_process_can_run_is_laid_on_nobody_and_given_no_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The world imports a module only this process has: a fresh process cannot load it.
    monkeypatch.setitem(sys.modules, "only_in_the_sweeps_process", type(sys)("here"))
    path = tmp_path / "needs.py"
    path.write_text(WORLD_NEEDING_THIS_PROCESS)
    report = sweep(f"{path}:needs-this-process", range(2))
    lines = list(report.lines())
    assert lines[0].endswith(", 0 as documented, 2 not (2 not confirmed in a fresh process)")
    assert _commands(report) == []
    [summary, _] = report.failing
    assert summary.confirmed is None
    assert summary.unconfirmed.startswith("a fresh process cannot load the scenario: ")
    assert "ModuleNotFoundError: No module named 'only_in_the_sweeps_process'" in (
        summary.unconfirmed
    )
    assert f"  seed 0: not confirmed in a fresh process: {summary.unconfirmed}" in lines
    assert report.verdict().startswith("2 of 2 seeds could not be run again in a fresh process (")
    assert "your check `" not in report.verdict()


# -- a sweep under a given plan -------------------------------------------------------------------

DOUBLE_CHARGE = f"{Path(__file__).parents[2] / 'examples' / 'double_charge.py'}:double-charge"
LOST_RECORD = FaultPlan((DropLeg(drive="cron", operation="record_step", nth=1, leg="request"),))


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_sweep_under_a_given_plan_runs_every_seed_under_it_and_its_commands_say_so(
    jobs: int,
) -> None:
    # Its own plan charges once; under this one (a step record lost) every seed charges twice,
    # each confirmed in a fresh process that ran the same plan.
    assert not sweep(DOUBLE_CHARGE, range(3), jobs=jobs).failing
    report = sweep(DOUBLE_CHARGE, range(3), jobs=jobs, plan=LOST_RECORD)
    assert report.plan == repr(LOST_RECORD)
    assert [s.seed for s in report.failing] == [0, 1, 2]
    assert all(s.confirmed is True for s in report.failing)
    assert all(s.plan == repr(LOST_RECORD) for s in report.seeds)
    assert next(report.lines()).startswith(
        f"sweep {report.scenario} under the given plan {LOST_RECORD!r}: 3 seeds in "
    )
    for line, summary in zip(_commands(report), report.failing, strict=True):
        command = line.split(": ", 1)[1]
        assert command == report.replay_command(summary.seed)
        assert f'--plan "{LOST_RECORD!r}"' in command
        words = shlex.split(command)
        done = subprocess.run(
            [sys.executable, *words[1:]], capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 1, done.stderr
        for finding in summary.violations:
            assert f"  {finding}" in done.stdout.splitlines()


def test_a_given_plan_the_world_cannot_fire_is_refused_before_any_seed_runs() -> None:
    nobody = FaultPlan((DropLeg(drive="nobody", operation="record_step", nth=1, leg="request"),))
    with pytest.raises(
        PlanError,
        match=r"^"
        + re.escape(
            f"fault {nobody.faults[0]!r} cannot strike: the world has no drive 'nobody'; its "
            "drives are cron, alarm (a world declares its drives in WorldSetup(drives=...))"
        )
        + r"$",
    ):
        sweep(DOUBLE_CHARGE, range(100), plan=nobody)
    done = subprocess.run(
        [sys.executable, "-m", "sims", "sweep", DOUBLE_CHARGE, "--seeds", "0..9", "--plan",
         repr(nobody)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "cannot strike: the world has no drive 'nobody'" in done.stderr
    assert "Traceback" not in done.stderr
