"""A budget that holds: every stage stops within its seconds (Hypothesis's drawing and shrinking
included), a stop event (Ctrl-C) ends the search at once with the summary of what it searched,
and a long search keeps only what its feedback needs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest

from sims import CrashAfter, FaultPlan, HoldLeg, SearchReport, search, world_shape
from sims.cli._arguments import budget_words, checked_budget
from sims.cli._interrupt import stop_on_ctrl_c
from sims.cli._main import main
from sims.search import _executor, _explore
from sims.search._drawn import Drawn, Stopped, Tried
from sims.search._executor import InProcess, WorldJob, WorldResult
from sims.search._explore import _Search
from sims.search._stages import single_plans, start_plans

RACY = Path(__file__).parent / "worlds" / "racy_jobs.py"
CLEAN = f"{RACY}:at-least-once"
RACE = f"{RACY}:check-then-send"
EXAMPLES = Path(__file__).parents[2] / "examples"
#: What each world costs on the clock of these tests.
WORLD_S = 0.01


@pytest.fixture
def worlds_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[], float]:
    """A clock that moves only as worlds of the search's stages run, WORLD_S each: a time budget
    of N × WORLD_S is N worlds, on any machine. The searches run their worlds in this process,
    where they can be counted."""
    ran = [0]
    real = _executor.run_world

    def counted(job: WorldJob) -> WorldResult:
        ran[0] += 1
        # The budget is counted in worlds here, not in CPU: what it has left caps no world's CPU
        # (it would stop one at random, as the watchdog looks at it or not).
        return real(attrs.evolve(job, cpu_left_s=None))

    monkeypatch.setattr(_executor, "run_world", counted)
    monkeypatch.setattr(_explore, "_executor", lambda jobs, scheduler: InProcess())
    return lambda: ran[0] * WORLD_S


def _stages(lines: list[str]) -> Callable[[str], None]:
    return lines.append


def _singles(scenario: str) -> int:
    return len(single_plans(world_shape(scenario), 10**9))


def _starts(scenario: str) -> int:
    return len(start_plans(world_shape(scenario), 10**9))


# -- every stage stops within its seconds --------------------------------------------------------


#: The world budget of the searches that cut a stage short: enough for every stage to begin (the
#: chains of stage 4 take half of what is left at each depth).
STAGES_WORLDS = 1_000
_STARTS: dict[str, int] = {}


def _stage_starts(worlds_clock: Callable[[], float]) -> dict[str, int]:
    """How many worlds a search of CLEAN within STAGES_WORLDS had run when each of its stages
    began, by the line the stage begins with (computed once: it is the same every time)."""
    if _STARTS:
        return _STARTS
    begun = round(worlds_clock() / WORLD_S)

    def tell(line: str) -> None:
        _STARTS.setdefault(line, round(worlds_clock() / WORLD_S) - begun)

    report = search(
        CLEAN, max_worlds=STAGES_WORLDS, max_seconds=10**6, clock=worlds_clock, progress=tell
    )
    assert report.stopped == "worlds"
    return _STARTS


CHAINS = "faults added one by one"


def _cut_search(
    worlds_clock: Callable[[], float], worlds: int
) -> tuple[SearchReport, list[tuple[str, int]]]:
    """A search of CLEAN whose time runs out after ``worlds`` worlds (the clean world's two
    aside), with each stage's line and the worlds run when it began."""
    begun = round(worlds_clock() / WORLD_S)
    said: list[tuple[str, int]] = []
    report = search(
        CLEAN,
        max_worlds=STAGES_WORLDS,
        max_seconds=worlds * WORLD_S,
        clock=lambda: (round(worlds_clock() / WORLD_S) - begun) * WORLD_S,
        progress=lambda line: said.append((line, round(worlds_clock() / WORLD_S) - begun)),
    )
    assert report.stopped == "seconds"
    assert report.worlds == 2 + worlds  # the clean world twice, then exactly the budget's
    line = next(report.lines())
    assert line.startswith(f"explore {report.scenario}, seed 1: no check failed in {2 + worlds} ")
    assert line.endswith(" s of CPU (the time budget ran out). What was searched:")
    return report, said


@pytest.mark.parametrize(
    ("stage", "into"),
    [
        # The stages before the chains are shared out in worlds: cut 20 worlds into the first.
        ("single faults", lambda began: began["single faults"] + 20),
        # The chains take half of the time left when they begin, so a budget 20 worlds past
        # their beginning gives them 10, and the pairs (45 plans) are cut after 10 of theirs.
        ("the rarest single faults, in pairs", lambda began: began[CHAINS] + 20),
        # 120 past: the chains take 60, the pairs 45, and Hypothesis is cut after 15.
        ("plans Hypothesis draws", lambda began: began[CHAINS] + 120),
    ],
)
def test_each_stage_stops_when_the_time_runs_out(
    worlds_clock: Callable[[], float], stage: str, into: Callable[[dict[str, int]], int]
) -> None:
    began = {line.split(" (")[0]: at for line, at in _stage_starts(worlds_clock).items()}
    began[CHAINS] = next(at for line, at in began.items() if line.startswith(CHAINS))
    _, said = _cut_search(worlds_clock, into(began))
    assert said[-1][0].startswith(stage)


def test_the_chains_leave_the_stages_after_them_half_of_the_time(
    worlds_clock: Callable[[], float],
) -> None:
    starts = _stage_starts(worlds_clock)
    chains = next(at for line, at in starts.items() if line.startswith(CHAINS))
    _, said = _cut_search(worlds_clock, chains + 40)
    pairs = next(at for line, at in said if line.startswith("the rarest single faults"))
    assert pairs == chains + 20


def test_hypothesis_stops_drawing_when_the_time_runs_out(
    worlds_clock: Callable[[], float],
) -> None:
    # The clock jumps past the budget as Hypothesis's stage begins: it draws nothing more (its
    # find is stopped from inside its test function), and the search ends with what it has.
    began = next(
        at for line, at in _stage_starts(worlds_clock).items() if line.startswith("plans Hyp")
    )
    now = [0.0]
    said: list[str] = []

    def tell(line: str) -> None:
        said.append(line)
        if line.startswith("plans Hypothesis draws"):
            now[0] = 100.0

    report = search(
        CLEAN, max_worlds=STAGES_WORLDS, max_seconds=10.0, clock=lambda: now[0], progress=tell
    )
    assert report.stopped == "seconds"
    assert report.worlds == 2 + began
    assert said[-1] == "plans Hypothesis draws"


def test_a_round_of_hypothesis_is_stopped_from_inside_its_test_function() -> None:
    # The search's time runs out while Hypothesis draws a round: its find is stopped from inside
    # the function it calls, keeping what it drew, and no round after it draws anything.
    asked = [0]

    def check() -> None:
        asked[0] += 1
        if asked[0] > 30:
            raise Stopped

    drawn = Drawn(shape=world_shape(CLEAN), max_faults=4, most=2_000, tried=Tried(), check=check)
    plans = list(drawn.plans())
    assert 0 < len(plans) <= 30
    assert asked[0] <= 33  # the stopped round, then one call for each later round


def _searching(scenario: str, clock: Callable[[], float], **fields: Any) -> _Search:
    return _Search(
        **{
            "scenario": scenario,
            "shown": scenario,
            "seed": 1,
            "mutant": None,
            "max_worlds": 10**9,
            "max_seconds": None,
            "fresh_process": False,
            "clock": clock,
            "executor": InProcess(),
            **fields,
        }
    )


def test_hypothesis_stops_shrinking_when_the_time_runs_out(
    worlds_clock: Callable[[], float],
) -> None:
    shape = world_shape(RACE)
    found_at: list[int] = []
    unbounded = _searching(RACE, worlds_clock)
    unbounded.progress = lambda line: (
        found_at.append(unbounded.worlds) if "shrinks" in line else None
    )
    smallest = unbounded.hypothesis(shape, 4)
    assert isinstance(smallest, FaultPlan)
    [first] = found_at
    assert unbounded.worlds > first + 3  # shrinking it, unbounded, takes more than three worlds
    start = worlds_clock()
    bounded = _searching(RACE, worlds_clock, max_seconds=(first + 3) * WORLD_S)
    bounded.started = start
    cut = bounded.hypothesis(shape, 4)
    assert isinstance(cut, FaultPlan)
    assert bounded.worlds == first + 3
    bounded.max_seconds = None  # the budget is spent: a world run now would be stopped at once
    assert bounded.violates(cut)  # the smallest failing plan so far: it fails


def test_the_shrinker_stops_when_the_time_runs_out_and_says_so() -> None:
    noisy = FaultPlan(
        (
            CrashAfter(drive="alarm", operation="claim", nth=3, down_ms=1000.0),
            HoldLeg(drive="cron", operation="invoke", nth=1, leg="reply", until="effect"),
        )
    )
    now = [0.0]

    def tell(line: str) -> None:
        if line.startswith("shrinking"):
            now[0] = 100.0

    report = search(
        RACE,
        start=noisy,
        max_seconds=10.0,
        clock=lambda: now[0],
        progress=tell,
        fresh_process=False,
    )
    assert report.found is not None
    assert report.found.plan == noisy  # not one world of shrinking
    assert report.shrinking_cut == "seconds"
    assert report.stopped == "found"
    lines = list(report.lines())
    assert lines[0].startswith(
        f"explore {report.scenario}, seed 1: the smallest failing plan found has 2 faults"
    )
    assert (
        "shrinking it was cut short (the time budget ran out): a smaller plan may fail too."
        in lines
    )


# -- a stop event: Ctrl-C ------------------------------------------------------------------------


def _stopped_at(stage: str, scenario: str, **options: Any) -> SearchReport:
    stop = threading.Event()

    def tell(line: str) -> None:
        if line.startswith(stage):
            stop.set()

    return search(scenario, stop=stop, progress=tell, **options)


def test_a_stop_ends_the_search_with_what_it_searched() -> None:
    report = _stopped_at("faults added one by one", CLEAN, max_seconds=None)
    assert report.stopped == "interrupted"
    assert report.worlds == 2 + _singles(CLEAN) + _starts(CLEAN)
    assert not report.failed
    lines = list(report.lines())
    assert lines[0].endswith(" s of CPU (interrupted: Ctrl-C). What was searched:")
    assert lines[1].startswith("  windows entered: ")


def test_a_stop_while_shrinking_reports_the_failing_plan_found_so_far() -> None:
    report = _stopped_at("shrinking", RACE, max_seconds=None)
    assert report.stopped == "interrupted"
    assert report.found is not None
    assert report.shrinking_cut == "interrupted"
    assert report.reproduced is None  # no fresh process after a Ctrl-C: it asked for the answer
    assert report.found.simulation.report.violations
    lines = list(report.lines())
    assert "shrinking it was cut short (interrupted: Ctrl-C): a smaller plan may fail too." in lines
    assert "it failed again in this process; it was not run in a fresh process." in lines


def test_a_stop_on_worker_processes_ends_the_search_as_in_one() -> None:
    report = _stopped_at("faults added one by one", CLEAN, max_seconds=None, jobs=2)
    assert report.stopped == "interrupted"
    assert report.worlds == 2 + _singles(CLEAN) + _starts(CLEAN)


@contextmanager
def _explore_until(line: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``python -m sims explore ARGS`` in its own process group (as a terminal runs it), handed
    over once it printed ``line`` on stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "sims", "explore", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        for said in process.stderr:
            if said == f"explore: {line}\n":
                break
        else:
            raise AssertionError(f"explore ended (exit {process.wait()}) before it said {line!r}")
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_stops_explore_at_once_with_its_summary_and_exit_130(jobs: str) -> None:
    # Real processes and a real signal: the one test here that takes real time. It waits for the
    # line explore prints as Hypothesis's stage begins, with a minute of budget left, and sends
    # Ctrl-C to the whole process group, as a terminal does (worker processes included).
    world = f"{EXAMPLES / 'payment_provider.py'}:pay-once"
    args = (world, "--budget", "60s", "--jobs", jobs)
    with _explore_until("plans Hypothesis draws", *args) as process:
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert re.match(r"explore \S*payment_provider.py:pay-once, seed 1: no check failed in ", out)
    assert "(interrupted: Ctrl-C). What was searched:\n  windows entered: " in out
    assert "Traceback" not in err
    assert "Exception ignored" not in err


# -- the command line tells its budget and each stage --------------------------------------------


def test_explore_says_its_budget_and_each_stage_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explore", CLEAN, "--budget", "80"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "explore: searching up to 80 worlds; Ctrl-C stops it and says what it searched",
        "explore: the clean world, twice",
        f"explore: single faults ({min(_singles(CLEAN), (80 - 2) // 2)} plans)",
        f"explore: starts lost, late and repeated ({_starts(CLEAN)} plans)",
        "explore: faults added one by one, each aimed at the world the faults before it made",
        "explore: a second fault, aimed at the worlds of 1 fault (15 plans)",
        "explore: a third fault, aimed at the worlds of 2 faults (7 plans)",
        "explore: a fourth fault, aimed at the worlds of 3 faults (4 plans)",
        "explore: the rarest single faults, in pairs",
    ]


@pytest.mark.parametrize(
    ("budget", "cpu", "words"),
    [
        (None, True, "up to 300 worlds or 30 s of CPU, whichever ends first"),
        ("60s", True, "for up to 60 s of CPU"),
        ("60s", False, "for up to 60 s of wall-clock time"),
        ("500", True, "up to 500 worlds"),
    ],
)
def test_a_budget_in_words(budget: str | None, cpu: bool, words: str) -> None:
    assert budget_words(*checked_budget(budget, None), cpu=cpu) == words


# -- memory: only what the feedback needs --------------------------------------------------------


def test_a_search_keeps_what_each_single_fault_reached_and_nothing_of_later_worlds() -> None:
    searching = _searching(CLEAN, lambda: 0.0)
    searching.max_worlds = 400
    shape = world_shape(CLEAN)
    singles = single_plans(shape, 10**9)
    assert searching.first_failing(singles, remember=True) is None
    assert searching.hypothesis(shape, 4) is not None  # the world budget ran out
    assert searching.worlds == 400
    assert set(searching.reached) == set(singles)  # Hypothesis's worlds left nothing behind


def test_outside_the_main_thread_ctrl_c_is_left_alone() -> None:
    # No signal reaches a thread other than the main one, where Python refuses a handler: the
    # event is still there, for its caller to set.
    seen: list[bool] = []

    def run() -> None:
        with stop_on_ctrl_c() as stop:
            seen.append(stop.is_set())

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [False]
    assert signal.getsignal(signal.SIGINT) is before
    with stop_on_ctrl_c():
        assert signal.getsignal(signal.SIGINT) is not before
    assert signal.getsignal(signal.SIGINT) is before


SPINNING = Path(__file__).parent / "worlds" / "spinning.py"


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_budget_stops_a_world_that_is_running_when_it_runs_out(jobs: int) -> None:
    # The world has no allowance of its own: a fault (a ping that times out) makes it spin for
    # ever, and only the search's budget can stop it (that this returns at all is the proof). It
    # is stopped, named, not counted, and the search ends as any search whose time ran out:
    # clean, saying what it searched.
    report = search(f"{SPINNING}:spins-on-timeout", max_seconds=1.0, jobs=jobs)
    assert report.stopped == "seconds"
    assert not report.failed
    assert report.worlds >= 2  # the clean world, twice, ended
    assert report.cut_world is not None
    assert report.cut_world.startswith(
        "the search's time budget ran out while a world ran: it was stopped after "
    )
    assert "in the handler spins_on_timeout() of job 'charge'" in report.cut_world
    text = "\n".join(report.lines())
    assert "(the time budget ran out). What was searched:" in text
    assert f"  {report.cut_world}; it is not counted" in text


def test_a_clean_world_the_budget_stops_is_no_clean_result() -> None:
    report = search(f"{SPINNING}:spins-in-step", max_seconds=0.1, fresh_process=False)
    # Its own allowance (0.2 s) is more than the budget: the budget stops it first.
    assert report.failed
    assert report.searched_nothing
    assert report.worlds == 0
    lines = list(report.lines())
    assert lines[0].endswith("nothing was searched: the clean world did not end within the budget.")
    assert "in the handler spins_in_step() of job 'charge'" in lines[1]


BLOCKING = Path(__file__).parent / "worlds" / "blocking.py"
BLOCKED = re.compile(
    r"world (?P<n>\d+) was blocked in real time \(not on the world's clock\) for more than "
    r"[0-9.]+ s in the handler naps_on_timeout\(\) of job 'charge', at \S*blocking\.py:\d+ in "
    r"naps_on_timeout\(\): a handler, step body or service must not sleep or block on real "
    r"time; use trio\.sleep"
)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_world_blocked_in_real_time_is_ended_with_its_worker_and_named(jobs: int) -> None:
    # Once a fault times its ping out, the handler sleeps 30 s of real time: it uses no CPU, so
    # neither its allowance nor the budget (CPU, with one worker) would ever see it, and in this
    # process nothing could stop it before the sleep returned. Its worker is ended when it has
    # been blocked for what was left of the budget, and the search stops there, naming the
    # world, the handler, its line and the plan.
    began = time.monotonic()
    report = search(f"{BLOCKING}:naps-on-timeout", max_seconds=1.0, jobs=jobs)
    assert time.monotonic() - began < 10  # about 1 s; the world alone would take 30
    assert report.failed
    assert report.stopped == "blocked"
    assert report.blocked is not None
    plan, words = report.blocked
    blocked = BLOCKED.fullmatch(words)
    assert blocked is not None, words
    assert int(blocked["n"]) == report.worlds + 1 > 2  # the clean world twice, then the faults
    assert [getattr(fault, "operation", None) for fault in plan.faults] == ["pinger.ping"]
    lines = list(report.lines())
    assert lines[0].startswith(
        f"explore {report.scenario}, seed 1: a world blocked its process, so it was ended and the "
        f"search stopped there ({report.worlds} worlds in "
    )
    assert lines[1] == f"  {words}"
    assert lines[2] == (
        f'  run it again: python -m sims run {report.scenario} --seed 1 --plan "{plan!r}"'
    )
    assert len(lines) == 3


def test_a_world_stuck_in_one_c_call_is_ended_without_a_time_budget() -> None:
    # sum(range(...)) is one call into C that never comes back to Python, so even the watchdog's
    # thread cannot run. Its worker posted when the world began, with its allowance (0.5 s): once
    # the worker has used twice that and a second more of CPU, the search has its stacks written
    # and kills it.
    began = time.monotonic()
    report = search(f"{BLOCKING}:stuck", max_seconds=None, max_worlds=10, fresh_process=False)
    assert time.monotonic() - began < 10  # about 2 s; the call alone takes half a minute
    assert report.failed
    assert report.blocked is not None
    plan, words = report.blocked
    assert plan == FaultPlan(())
    assert re.fullmatch(
        r"world 1 was stuck in one call for more than 2\.0 s of CPU at "
        r"\S*blocking\.py:\d+ in stuck\(\), never coming back to Python \(a call into C that "
        r"holds the interpreter\): a handler, step body or service must not block on real time "
        r"or compute without end; use trio\.sleep, and await inside a long computation",
        words,
    ), words
