"""The simulator's doors refuse numbers and text no world can use, in one line and before a world
runs: a plan of huge literals or of thousands of signs, a PCT window or a clock skew past its
bound, a seed a trace was tampered to, seeds that are no collection. Each used to end in a raw
``OverflowError``, ``MemoryError``, ``RecursionError`` or ``TypeError`` traceback."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from sims import FaultPlan, plan_from_text, simulate
from sims.cli._main import main
from sims.faults._check import PlanError, check_plan
from sims.faults._plan import DelayLeg, PctSchedule, StoreClockFault
from sims.runners._sweep import sweep

DRIVES = ("cron", "alarm")
SCOPES = ("scope-1",)
THOUSAND_DIGITS = "9" * 1_000
BOMB = "-" * 100_000 + "1"
YEAR_MS = 31_536_000_000


def delay(ms: str) -> str:
    return f"FaultPlan((DelayLeg(drive='cron', operation='begin', nth=1, leg='reply', ms={ms}),))"


SIGNS = delay("-" * 1_000 + "5")
DIGITS = delay("9" * 5_000)


def cut(text: str) -> str:
    """A long plan as a refusal quotes it."""
    return f"{text[:60]!r}… ({len(text):,} characters)"


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err
    return captured.err


# -- numbers a plan's faults take -------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        (
            PctSchedule(seed=1, within=10**400),
            "within=an int of 401 digits; give a whole number of task steps from 1 to "
            "1,000,000,000 (more than a world takes)",
        ),
        (
            PctSchedule(seed=1, within=1_000_000_001),
            "within=1000000001; give a whole number of task steps from 1 to 1,000,000,000 (more "
            "than a world takes)",
        ),
        (
            PctSchedule(seed=1, depth=1_001),
            "depth=1001; give a whole number from 1 (no change point) to 1,000",
        ),
        (
            PctSchedule(seed=1, depth=10**400),
            "depth=an int of 401 digits; give a whole number from 1 (no change point) to 1,000",
        ),
        (
            DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=int(THOUSAND_DIGITS)),
            "ms=an int of 1000 digits, more than a float holds; give a finite number of ms >= 0",
        ),
        (
            DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=-(10**400)),
            "ms=a negative int of 401 digits; give a finite number of ms >= 0",
        ),
        (
            StoreClockFault(skew_ms=10**400),
            "skew_ms=an int of 401 digits; give a skew of at most 31536000000 ms (a year) either "
            "way",
        ),
        (
            StoreClockFault(skew_ms=-1e300),
            "skew_ms=-1e+300; give a skew of at most 31536000000 ms (a year) either way",
        ),
    ],
)
def test_a_number_past_its_bound_is_refused_by_the_plan_check(fault: object, problem: str) -> None:
    plan = FaultPlan((fault,))  # type: ignore[arg-type]
    with pytest.raises(PlanError) as caught:
        check_plan(plan, drives=DRIVES, scopes=SCOPES)
    assert str(caught.value) == f"fault {fault!r} cannot strike: {problem}"


@pytest.mark.parametrize(
    "fault",
    [
        PctSchedule(seed=10**400, depth=1_000, within=1_000_000_000),
        StoreClockFault(skew_ms=YEAR_MS),
        StoreClockFault(skew_ms=-YEAR_MS, drift=0.5),
        DelayLeg(drive="cron", operation="begin", nth=10**400, leg="reply", ms=10**300),
    ],
)
def test_a_number_at_its_bound_is_taken(fault: object) -> None:
    check_plan(FaultPlan((fault,)), drives=DRIVES, scopes=SCOPES)  # type: ignore[arg-type]


def test_a_world_runs_at_the_bounds() -> None:
    plan = FaultPlan((StoreClockFault(skew_ms=-YEAR_MS), PctSchedule(seed=7, within=10**9)))
    assert simulate("late-begin", 1, plan=plan).outcome.trace.events


# -- a plan's text ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            BOMB,
            "plan '" + "-" * 60 + "'… (100,001 characters) nests too deeply to be read; a plan is "
            "FaultPlan((FAULT(...), ...)), each number with at most one minus sign",
        ),
        (
            "~" * 100_000 + "1",
            "plan '" + "~" * 60 + "'… (100,001 characters) nests too deeply to be read; a plan is "
            "FaultPlan((FAULT(...), ...)), each number with at most one minus sign",
        ),
        (
            "1" + "+1" * 50_000,
            "plan '" + "1" + "+1" * 29 + "+'… (100,001 characters) nests too deeply to be read; "
            "a plan is FaultPlan((FAULT(...), ...)), each number with at most one minus sign",
        ),
        (
            SIGNS,
            f"plan {cut(SIGNS)} puts a sign before "
            "something other than a number; write a negative number with one minus sign, as -5",
        ),
        (
            delay("--5"),
            f"plan {delay('--5')!r} puts a sign before something other than a number; write a "
            "negative number with one minus sign, as -5",
        ),
        (
            DIGITS,
            f"plan {cut(DIGITS)} holds an int of thousands of "
            "digits, which Python does not read; a fault's numbers are counts and milliseconds",
        ),
    ],
)
def test_a_plan_bomb_is_one_value_error(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=exactly(message)):
        plan_from_text(text)


def test_a_plan_with_one_sign_before_each_number_still_reads() -> None:
    plan = plan_from_text("FaultPlan((StoreClockFault(skew_ms=-5, drift=-0.5),))")
    assert plan == FaultPlan((StoreClockFault(skew_ms=-5, drift=-0.5),))


@pytest.mark.parametrize(
    "command",
    [
        ["run", "late-begin", "--seed", "0"],
        ["explore", "late-begin", "--examples", "3"],
    ],
)
def test_a_plan_bomb_on_the_command_line_is_exit_2(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, f"--plan={BOMB}"]) == 2
    assert one_line_error(capsys).startswith("error: plan '---")


@pytest.mark.parametrize(
    ("ms", "problem"),
    [
        (THOUSAND_DIGITS, "ms=an int of 1000 digits, more than a float holds"),
        ("1e999", "ms=inf"),
    ],
)
def test_a_huge_number_in_a_plan_on_the_command_line_is_exit_2(
    ms: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "late-begin", "--seed", "0", f"--plan={delay(ms)}"]) == 2
    error = one_line_error(capsys)
    assert error.startswith("error: fault DelayLeg(")
    assert error.endswith(f"cannot strike: {problem}; give a finite number of ms >= 0\n")


def test_a_pct_window_past_its_bound_on_the_command_line_is_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = f"FaultPlan((PctSchedule(seed=1, within=1{'0' * 400}),))"
    assert main(["run", "late-begin", "--seed", "0", f"--plan={plan}"]) == 2
    assert one_line_error(capsys).endswith(
        "cannot strike: within=an int of 401 digits; give a whole number of task steps from 1 to "
        "1,000,000,000 (more than a world takes)\n"
    )


# -- a tampered trace ---------------------------------------------------------------------------


def _tampered(folder: Path, **changes: object) -> Path:
    """A trace of a world run under a plan of its own, its world.begin changed."""
    plan = FaultPlan((DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=5.0),))
    trace = folder / "t.jsonl"
    simulate("late-begin", 1, plan=plan).outcome.trace.write(trace)
    lines = trace.read_text(encoding="utf-8").splitlines(keepends=True)
    begin = json.loads(lines[0])
    assert begin["ev"] == "world.begin"
    assert begin["plan_overridden"] is True
    begin.update(changes)
    lines[0] = json.dumps(begin) + "\n"
    trace.write_text("".join(lines), encoding="utf-8")
    return trace


@pytest.mark.parametrize(
    ("seed", "shown"), [(None, "None"), ("1", "'1'"), (1.5, "1.5"), (-1, "-1"), (True, "True")]
)
def test_replay_of_a_trace_with_a_tampered_seed_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: object, shown: str
) -> None:
    trace = _tampered(tmp_path, seed=seed)
    assert main(["replay", str(trace)]) == 2
    assert one_line_error(capsys) == (
        f"error: {trace} records its seed as {shown}, which is not a seed (a whole number >= 0); "
        "write traces with run --trace\n"
    )


def test_replay_of_a_trace_whose_plan_is_a_bomb_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _tampered(tmp_path, plan=BOMB)
    assert main(["replay", str(trace)]) == 2
    assert one_line_error(capsys).startswith("error: plan '---")


# -- seeds ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("seeds", "shown"), [(None, "None"), (5, "5"), ("0..9", "'0..9'")])
def test_seeds_that_are_no_collection_are_one_value_error(
    sims_worlds: Callable[..., int], seeds: object, shown: str
) -> None:
    message = (
        f"seeds={shown} is not a collection of seeds; pass a range (e.g. range(10)) or a list of "
        "whole numbers >= 0"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        sims_worlds("late-begin", seeds=seeds)
    with pytest.raises(ValueError, match=exactly(message)):
        sweep("late-begin", seeds)  # type: ignore[arg-type]


def test_the_fixture_still_takes_a_range_and_a_list(sims_worlds: Callable[..., int]) -> None:
    assert sims_worlds("late-begin", seeds=range(1)) == 1
    assert sims_worlds("late-begin", seeds=[0, 1]) == 2
