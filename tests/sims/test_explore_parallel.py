"""Explore on many cores: the stages yield plans, one executor runs them in this process or in
worker processes, and the answer for a world budget (the finding and its shrunk plan, or the clean
summary) is the same whatever the number of workers."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sims import (
    CrashAfter,
    CrashDrive,
    DelayLeg,
    FaultPlan,
    HoldLeg,
    PctSchedule,
    SearchReport,
    search,
    shrink_plan,
    world_shape,
)
from sims.cli._main import main
from sims.search._drawn import Drawn, Tried
from sims.search._executor import InProcess, Processes, WorldJob, WorldResult, run_world
from sims.search._explore import _Search
from sims.search._shrink import _simpler, shrink_in_batches

WORLDS = Path(__file__).parent / "worlds"
RACY = WORLDS / "racy_jobs.py"
EXAMPLES = Path(__file__).parents[2] / "examples"
_TIMING = re.compile(r" in [0-9.]+ s of (?:CPU|wall-clock time on \d+ processes)")


def _answer(report: SearchReport) -> list[str]:
    return [_TIMING.sub(" in T", line) for line in report.lines()]


def _same_answer(one: SearchReport, two: SearchReport) -> None:
    assert _answer(one) == _answer(two)
    assert one.worlds == two.worlds
    assert one.coverage == two.coverage
    assert (one.found and one.found.plan) == (two.found and two.found.plan)
    assert one.stopped == two.stopped


# -- the same answer, whatever the number of workers ----------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "mutant", "worlds"),
    [
        (f"{RACY}:check-then-send", None, 300),  # a finding of stage 1, shrunk
        (f"{RACY}:at-least-once", None, 120),  # clean: the summary of every world
        (f"{RACY}:check-breaks", None, 300),  # a world that raised under a plan
        (f"{WORLDS / 'bank_fallback.py'}:fallback-asks-the-bank", None, 200),  # services, clean
        ("random", "record-step-owner", 150),  # a broken store
    ],
)
def test_two_worker_processes_give_the_answer_one_process_gives(
    scenario: str, mutant: str | None, worlds: int
) -> None:
    one = search(scenario, mutant=mutant, max_worlds=worlds, max_seconds=None, fresh_process=False)
    two = search(
        scenario, mutant=mutant, max_worlds=worlds, max_seconds=None, fresh_process=False, jobs=2
    )
    _same_answer(one, two)
    assert one.where == "CPU"
    assert two.where == "wall-clock time on 2 processes"
    assert "s of wall-clock time on 2 processes" in next(two.lines())


def test_a_given_plan_is_shrunk_alike_on_two_processes() -> None:
    noisy = FaultPlan(
        (
            CrashAfter(drive="alarm", operation="claim", nth=3, down_ms=1000.0),
            HoldLeg(drive="cron", operation="invoke", nth=1, leg="reply", until="effect"),
            DelayLeg(drive="alarm", operation="invoke", nth=2, leg="reply", ms=1234.5),
        )
    )
    reports = [
        search(f"{RACY}:check-then-send", start=noisy, fresh_process=False, jobs=jobs)
        for jobs in (1, 2)
    ]
    _same_answer(*reports)
    assert reports[1].found is not None
    assert len(reports[1].found.plan) == 1


ROOT = Path(__file__).parents[2]


def _searching(scenario: str, jobs: int) -> _Search:
    return _Search(
        scenario=scenario,
        shown=scenario,
        seed=1,
        mutant=None,
        max_worlds=400,
        max_seconds=None,
        fresh_process=False,
        clock=lambda: 0.0,
        executor=InProcess() if jobs == 1 else Processes(jobs),
    )


def _hypothesis_stage(jobs: int) -> tuple[object, ...]:
    scenario = f"{RACY}:check-then-send"
    searching = _searching(scenario, jobs)
    try:
        outcome = searching.hypothesis(world_shape(scenario), 4)
    finally:
        searching.executor.close()
    assert isinstance(outcome, FaultPlan)
    return outcome, searching.worlds, searching.coverage


def test_hypothesis_stage_on_two_processes_finds_and_shrinks_what_one_process_does() -> None:
    # In a fresh interpreter: in a test process that had run many other tests first, the workers
    # forked from it gave another answer (128 worlds, not 183) that no run alone gives. What state
    # of that process does it is not pinned down yet; here the property itself is held.
    probe = (
        "from tests.sims.test_explore_parallel import _hypothesis_stage as stage\n"
        "one = stage(1)\n"
        "print(one == stage(2), one[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    same, worlds = done.stdout.split()
    assert same == "True"
    assert int(worlds) > 1


# -- Hypothesis's rounds --------------------------------------------------------------------------


def _drawn(most: int = 2_000) -> Drawn:
    def go_on() -> None:
        pass

    return Drawn(
        shape=world_shape(f"{RACY}:check-then-send"),
        max_faults=4,
        most=most,
        tried=Tried(),
        check=go_on,
    )


def test_hypothesis_draws_its_rounds_in_one_order_and_never_a_plan_twice() -> None:
    first, again = list(_drawn(600).plans()), list(_drawn(600).plans())
    assert first == again
    assert len(first) == 600
    assert len(set(first)) == 600
    assert all(plan.faults for plan in first)  # the clean world ran before any of them
    assert all(len(plan) == 1 for plan in first[:150])  # one fault first


def test_a_plan_hypothesis_drew_is_shrunk_from_its_own_round() -> None:
    def fails(plan: FaultPlan) -> bool:
        return len(plan) >= 2 and any(isinstance(f, CrashAfter) for f in plan.faults)

    drawn = _drawn()
    plans = drawn.plans()
    failing = next(plan for plan in plans if fails(plan) and len(plan) >= 3)
    asked: list[FaultPlan] = []

    def counted(plan: FaultPlan) -> bool:
        asked.append(plan)
        return fails(plan)

    smallest = drawn.shrink(failing, counted)
    # Hypothesis replayed the round up to the failing plan without running any of it, then
    # shrank: every candidate it ran came after, and the plan it found is its smallest.
    assert asked
    assert failing not in asked
    assert fails(smallest)
    assert len(smallest) == 2
    assert len(smallest) < len(failing)


def test_a_plan_from_no_round_is_left_to_the_searchs_shrinker() -> None:
    plan = FaultPlan((PctSchedule(seed=3, depth=2),))
    assert _drawn().shrink(plan, lambda _: True) == plan


def test_remembered_plans_are_bounded() -> None:
    tried = Tried(most=3)
    plans = [FaultPlan((CrashDrive(drive="cron", at_ms=float(t)),)) for t in range(5)]
    assert [tried.add(plan) for plan in plans] == [True] * 5
    assert len(tried) == 3
    assert not tried.add(plans[4])
    assert tried.add(plans[0])  # forgotten: the oldest go first


# -- the shrinker in batches ----------------------------------------------------------------------


def _one_at_a_time(
    plan: FaultPlan, fails: Callable[[FaultPlan], bool], max_worlds: int
) -> tuple[FaultPlan, int]:
    """The shrinker as it was before it handed out batches: the reference."""
    tried = 0

    def still_fails(candidate: FaultPlan) -> bool:
        nonlocal tried
        if tried >= max_worlds:
            return False
        tried += 1
        return fails(candidate)

    best, changed = plan, True
    while changed and tried < max_worlds:
        changed = False
        for i in reversed(range(len(best.faults))):
            candidate = FaultPlan(best.faults[:i] + best.faults[i + 1 :])
            if still_fails(candidate):
                best, changed = candidate, True
        for i, fault in enumerate(best.faults):
            for simpler in _simpler(fault):
                candidate = FaultPlan((*best.faults[:i], simpler, *best.faults[i + 1 :]))
                if still_fails(candidate):
                    best, changed = candidate, True
                    break
    return best, tried


_FAULTS = st.one_of(
    st.builds(
        CrashAfter,
        drive=st.sampled_from(("cron", "alarm")),
        operation=st.just("invoke"),
        nth=st.integers(1, 9),
        down_ms=st.sampled_from((0.0, 1000.0, 1234.5)),
    ),
    st.builds(CrashDrive, drive=st.just("cron"), at_ms=st.floats(0, 5000).map(round)),
)


@settings(max_examples=150, deadline=None)
@given(
    faults=st.lists(_FAULTS, min_size=1, max_size=5),
    keep=st.sets(st.integers(0, 4), max_size=2),
    floor=st.integers(1, 5),
    max_worlds=st.integers(1, 60),
)
def test_the_batched_shrinker_finds_and_counts_what_trying_one_at_a_time_does(
    faults: list[CrashAfter | CrashDrive], keep: set[int], floor: int, max_worlds: int
) -> None:
    plan = FaultPlan(tuple(faults))
    needed = {plan.faults[i] for i in keep if i < len(plan.faults)}

    def fails(candidate: FaultPlan) -> bool:
        # Fails while it keeps the needed faults' kinds and drives, with a crash at nth >= floor.
        kinds = {(type(f), getattr(f, "drive", "")) for f in candidate.faults}
        crash = [f for f in candidate.faults if isinstance(f, CrashAfter)]
        return {(type(f), getattr(f, "drive", "")) for f in needed} <= kinds and (
            not crash or max(f.nth for f in crash) >= min(floor, max(f.nth for f in crash))
        )

    def whole_batch(batch: list[FaultPlan]) -> int | None:
        # As many workers would: every candidate of the batch runs, the first failing counts.
        results = [fails(candidate) for candidate in batch]
        return results.index(True) if True in results else None

    assert shrink_in_batches(plan, whole_batch, max_worlds=max_worlds) == _one_at_a_time(
        plan, fails, max_worlds
    )
    assert shrink_plan(plan, fails, max_worlds=max_worlds) == _one_at_a_time(
        plan, fails, max_worlds
    )


# -- the executors --------------------------------------------------------------------------------


def _jobs(scenario: str, count: int) -> Iterator[WorldJob]:
    ref = _searching(scenario, 1).ref
    for nth in range(1, count + 1):
        yield WorldJob(
            ref, 1, None, FaultPlan((CrashAfter(drive="cron", operation="claim", nth=nth),))
        )


def test_worker_processes_hand_results_back_in_the_jobs_order() -> None:
    scenario = f"{RACY}:at-least-once"
    here = list(InProcess().results(_jobs(scenario, 150)))
    processes = Processes(2)
    try:
        there = list(processes.results(_jobs(scenario, 150)))
    finally:
        processes.close()
    assert [job for job, _ in there] == [job for job, _ in here]
    assert [result for _, result in there] == [result for _, result in here]
    assert all(isinstance(result, WorldResult) for _, result in there)


def test_a_batch_the_search_stopped_reading_is_skipped_by_the_workers() -> None:
    processes = Processes(2)
    try:
        results = processes.results(_jobs(f"{RACY}:at-least-once", 200))
        next(results)
        results.close()  # the search found what it wanted: the rest of the batch is not run
        assert processes._reading.value == 1
        # A second batch runs in full, behind what was skipped of the first.
        assert len(list(processes.results(_jobs(f"{RACY}:at-least-once", 3)))) == 3
    finally:
        processes.close()


def test_a_plan_the_world_refuses_is_a_world_that_did_not_run() -> None:
    ref = _searching(f"{RACY}:at-least-once", 1).ref
    refused = run_world(WorldJob(ref, 1, None, FaultPlan((CrashDrive(drive="nobody", at_ms=1.0),))))
    assert refused == WorldResult(refused=True)
    assert not refused.failed


# -- the command line -----------------------------------------------------------------------------


def test_explore_on_two_jobs_prints_what_one_job_prints(capsys: pytest.CaptureFixture[str]) -> None:
    world = f"{EXAMPLES / 'double_charge.py'}:charge-look-first"
    outputs = []
    for jobs in ("1", "2"):
        # Not remembered: the second search would begin with the first one's finding.
        assert main(["explore", world, "--budget", "200", "--jobs", jobs, "--no-remember"]) == 1
        outputs.append(_TIMING.sub(" in T", capsys.readouterr().out))
    assert outputs[0] == outputs[1]
    assert "a fresh process reproduced it byte for byte" in outputs[1]


def test_jobs_must_be_one_or_more(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "late-claim", "--jobs", "0"]) == 2
    assert capsys.readouterr().err == "error: --jobs 0 must be 1 or more\n"


def test_jobs_and_a_scheduler_are_one_or_the_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["explore", "late-claim", "--jobs", "2", "--scheduler", "tcp://127.0.0.1:1"])
    assert exit.value.code == 2
    assert "argument --scheduler: not allowed with argument --jobs" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^jobs=2 with scheduler='tcp://h:1'; a cluster sets"):
        search("late-claim", jobs=2, scheduler="tcp://h:1")
    with pytest.raises(ValueError, match=r"^jobs=0; pass a whole number of processes >= 1$"):
        search("late-claim", jobs=0)


def test_a_scheduler_nobody_listens_on_is_told_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explore", "late-claim", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the Dask scheduler at tcp://127.0.0.1:1: ")
    assert err.count("\n") == 1
