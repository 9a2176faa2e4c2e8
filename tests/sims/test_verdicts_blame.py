"""Verdicts that blame the right party (issue 35, item 5).

A run a late start made after the scenario returned is the world's, named with what started it;
a time budget names the user's frame where it stopped the world; Ctrl-C during a sweep reports the
seeds swept so far and exits 130.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from sims import FaultPlan, LateRequest, search, simulate, sweep
from sims.runners._watchdog import NONE_OF_YOURS, _ours, _overran, _Watch, place_of

ROOT = Path(__file__).parents[2]
PAY_ONCE = f"{ROOT / 'examples' / 'payment_provider.py'}:pay-once"
SPINNING = Path(__file__).parent / "worlds" / "spinning.py"


# -- (a) a run started after the scenario returned ----------------------------------------------


def test_a_start_the_wire_delivers_after_the_scenario_returned_is_the_worlds() -> None:
    plan = FaultPlan((LateRequest(drive="cron", operation="start_or_join", nth=1, ms=5000.0),))
    report = simulate(PAY_ONCE, 1, plan=plan).report
    assert report.spec_violations == ()
    assert "the spec was violated" not in report.verdict()
    (found,) = report.violations
    assert found.check == "run-never-driven"
    assert found.text.startswith(
        "cron's start_or_join call 1, which its caller gave up on at 2 ms and the wire "
        "delivered 5000 ms late anyway (a LateRequest: the at-least-once wire), started run "
    )
    assert " at 5002 ms, after the scenario returned at 1506 ms, and no drive was called " in (
        found.text
    )
    assert "the world's, not the spec's" in found.text
    assert "world.every with until_ms past 5002 ms" in found.text


REPEATED = """\
from sims import DriveSpec, FaultPlan, JobPassContext, JobPassResult, RepeatStart, World
from sims import WorldSetup, scenario

# The scenario's own plan (a plan given in its place would stretch its ticks past the repeat).
PLAN = FaultPlan((RepeatStart(drive="cron", nth=1, after_ms=3000.0),))


async def done(ctx: JobPassContext) -> JobPassResult:
    return JobPassResult(done=True)


@scenario("repeated", setup=WorldSetup(plan=PLAN))
async def repeated(world: World) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "j", done)
    await world.start("cron", "scope-1", "m", "j")
    world.every("cron", "scope-1", every_ms=100, first_ms=0, until_ms=1_000)
    await world.settle(("scope-1",), horizon_ms=1_000, poll_ms=100)
    await world.sleep_until_ms(5_000)  # the drives stopped; the client clicks again meanwhile
"""


def test_a_start_sent_again_after_the_drives_stopped_is_the_worlds(tmp_path: Path) -> None:
    (tmp_path / "repeated.py").write_text(REPEATED)
    report = simulate(f"{tmp_path / 'repeated.py'}:repeated", 1).report
    assert report.spec_violations == ()
    assert "the spec was violated" not in report.verdict()
    (found,) = report.violations
    assert found.check == "run-never-driven"
    assert found.text.startswith(
        "cron's start 1, sent again by its caller (a RepeatStart: a second click, or a client "
        "that never saw the first answer), started run "
    ), found.text
    assert " at 3003 ms, after the drives stopped driving, and no drive was called " in found.text
    assert "the world's, not the spec's" in found.text


# -- (b) a stop names the user's frame, or says none of the user's code ran ------------------------


def test_a_world_stopped_with_no_frame_of_the_users_says_so_and_names_no_frame() -> None:
    # The watchdog found no frame of the user's when it struck (only the simulator's, Trio's, or
    # the `<frozen runpy>` of `python -m`): the words say so, for the world's own allowance as
    # for a search's budget, and name no frame that is nobody's line.
    for budget in (False, True):
        watch = _Watch(threading.get_ident(), 0.2, budget=budget)
        watch.where = ""
        words = str(_overran(watch))
        assert NONE_OF_YOURS in words, words
        assert "frozen" not in words
    assert _ours("<frozen runpy>")
    assert place_of([("<frozen runpy>", 88, "_run_code")]) == ""


def test_a_budget_names_the_line_of_the_users_world_where_it_stopped(tmp_path: Path) -> None:
    # Real CPU time, as the budget tests take it: the world spins until the budget stops it.
    report = search(f"{SPINNING}:spins-on-timeout", max_seconds=1.0, jobs=1)
    assert report.cut_world is not None
    assert "in the handler spins_on_timeout() of job 'charge', at " in report.cut_world
    assert "spinning.py:29 in spin()" in report.cut_world
    assert "frozen" not in report.cut_world


# -- (c) Ctrl-C during a sweep ---------------------------------------------------------------------

SEEDED = """\
import sys

from sims import DriveSpec, JobPassContext, JobPassResult, World, scenario


async def done(ctx: JobPassContext) -> JobPassResult:
    return JobPassResult(done=True)


@scenario("said")
async def said(world: World) -> None:
    print(f"seed {world.seed}", file=sys.stderr, flush=True)
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "j", done)
    await world.start("cron", "scope-1", "m", "j")
    world.every("cron", "scope-1", every_ms=100, first_ms=0, until_ms=1_000)
    await world.settle(("scope-1",), horizon_ms=1_000, poll_ms=100)
"""


def test_a_stopped_sweep_reports_the_seeds_it_swept_and_says_it_was_interrupted() -> None:
    stop = threading.Event()
    stop.set()  # as the first Ctrl-C does, before the first seed ends
    report = sweep(PAY_ONCE, range(5), stop=stop)
    assert [s.seed for s in report.seeds] == [0]
    assert report.interrupted_of == 5
    first = next(iter(report.lines()))
    assert f"sweep {report.scenario}: interrupted by Ctrl-C after 1 of 5 seeds; 1 seed in " in first
    assert sweep(PAY_ONCE, range(2), stop=threading.Event()).interrupted_of is None


def test_ctrl_c_stops_a_sweep_with_the_report_of_the_seeds_done_and_exit_130(
    tmp_path: Path,
) -> None:
    # Real processes and a real signal, as explore's Ctrl-C is tested: Ctrl-C to the whole
    # process group once the first world has begun.
    (tmp_path / "said.py").write_text(SEEDED)
    process = subprocess.Popen(
        [sys.executable, "-m", "sims", "sweep", "said.py:said", "--seeds", "0..99999"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        assert process.stderr.readline() == "seed 0\n"
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    assert process.returncode == 130, err
    head = re.match(
        r"sweep said\.py:said: interrupted by Ctrl-C after (\d+) of 100000 seeds; ", out
    )
    assert head is not None, out
    assert 1 <= int(head[1]) < 100_000
    assert "  verdict: every check held" in out
    assert "Traceback" not in err
    assert "KeyboardInterrupt" not in err
