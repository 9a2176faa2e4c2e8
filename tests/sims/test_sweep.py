"""Sweeps: many seeds, no unexplained violation; every guard of the spec, broken, is noticed."""

from __future__ import annotations

import itertools
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sims import (
    MUTANTS,
    DelayLeg,
    DriveSpec,
    FaultPlan,
    JobPassResult,
    PauseDrive,
    ScenarioRef,
    UpstreamFailure,
    World,
    WorldError,
    WorldSetup,
    check_worlds,
    find_scenario,
    parse_seeds,
    run_world,
    scenario,
    simulate,
    sweep,
)
from sims.runners._sweep import WorldRaised


def test_two_hundred_random_worlds_violate_nothing() -> None:
    report = sweep("random", range(200), jobs=2)
    assert len(report.seeds) == 200
    assert not report.failing, "\n".join(report.lines())
    explained = {check for summary in report.seeds for check in summary.explained}
    # The worlds do reach the spec's windows: the checks had something to explain.
    assert {"double-run", "effects"} <= explained


# Each mutant removes one guard the spec puts in its SQL; a sweep must notice, and say which check.
GUARDS = {
    "patch-owner": "no-write-after-lease-lost",
    "commit-owner": "no-write-after-lease-lost",
    "record-step-owner": "no-write-after-lease-lost",
    "begin-margin": "begin-margin",
    "takeover-charge": "attempts-charged",
}


@pytest.mark.parametrize("mutant", sorted(GUARDS))
def test_breaking_a_guard_makes_a_check_fail_in_a_sweep(mutant: str) -> None:
    report = sweep("random", range(200), jobs=2, mutant=mutant)
    caught = [s for s in report.seeds if any(f"] {GUARDS[mutant]} " in v for v in s.violations)]
    assert caught, f"no seed of 0..199 noticed the {mutant} mutant"
    line = next(report.lines())
    assert line.startswith(f"sweep random with mutant {mutant}: 200 seeds in ")
    assert f"python -m sims run random --seed {caught[0].seed} --mutant {mutant}" in "\n".join(
        report.lines()
    )


def test_every_guard_mutant_exists() -> None:
    # The other mutants are proved by the oracle's own test (tests/sims/test_oracle.py).
    assert set(GUARDS) <= set(MUTANTS)


def test_seed_ranges_are_parsed_and_bad_ones_refused() -> None:
    assert parse_seeds("3..5") == range(3, 6)
    assert parse_seeds("9") == range(9, 10)
    with pytest.raises(
        ValueError, match=r"^seeds '5..3' run backwards; write the smaller number first$"
    ):
        parse_seeds("5..3")
    with pytest.raises(
        ValueError,
        match=r"^seeds 'a-b' must be N \(that one seed\) or A\.\.B \(A to B, both included\), "
        r"in whole numbers >= 0$",
    ):
        parse_seeds("a-b")
    with pytest.raises(
        ValueError,
        match=r"^seeds '-5\.\.2' include a negative number; seeds are whole numbers >= 0$",
    ):
        parse_seeds("-5..2")
    with pytest.raises(ValueError, match=r"^jobs=0; pass a whole number of processes >= 1$"):
        sweep("random", range(1), jobs=0)
    with pytest.raises(ValueError, match=r"^no mutant 'x'; the mutants are: patch-owner, "):
        sweep("random", range(1), mutant="x")


@pytest.mark.parametrize("entry", ["simulate", "sweep", "check_worlds", "run_world"])
def test_a_negative_seed_is_refused_at_every_entry_not_run_as_its_absolute_value(
    entry: str,
) -> None:
    # random.Random(-5) is random.Random(5): a world run under -5 would be world 5 mislabelled.
    setup = find_scenario(ScenarioRef.parse("late-begin"))
    calls: dict[str, Callable[[], object]] = {
        "simulate": lambda: simulate("late-begin", -5),
        "sweep": lambda: sweep("late-begin", [0, -5]),
        "check_worlds": lambda: check_worlds("late-begin", [-5]),
        "run_world": lambda: run_world(-5, setup.setup(5), setup.drive),
    }
    with pytest.raises(
        ValueError,
        match=r"^seed=-5 is negative; seeds are whole numbers >= 0 \(Python's random would "
        r"build world 5 under its name\)$",
    ):
        calls[entry]()


@pytest.mark.parametrize("seed", [True, 1.0, "3", None])
def test_a_seed_that_is_not_a_whole_number_is_refused(seed: object) -> None:
    with pytest.raises(ValueError, match=r"is not a whole number; seeds are whole numbers >= 0$"):
        simulate("late-begin", seed)  # type: ignore[arg-type]


def test_a_sweep_past_its_limit_is_refused_at_once_without_spelling_the_range_out() -> None:
    # 10**20 seeds: a list of them would exhaust memory before a single world ran.
    with pytest.raises(
        ValueError,
        match=r"^seeds 0\.\.99999999999999999999: more than 1,000,000 seeds; a sweep keeps every "
        r"seed's summary for its report \(about 2 KB each\), so it takes at most 1,000,000 — "
        r"sweep the range in parts \(--seeds 0\.\.999999, then 1000000\.\.1999999, and so on\)$",
    ):
        sweep("late-begin", range(10**20))
    with pytest.raises(ValueError, match=r"^seeds 0\.\.1000000: more than 1,000,000 seeds"):
        sweep("late-begin", range(1_000_001))
    with pytest.raises(ValueError, match=r"^the seeds given: more than 1,000,000 seeds"):
        sweep("late-begin", itertools.count())  # read one past the limit, no further
    assert [s.seed for s in sweep("late-begin", range(3, -1, -1)).seeds] == [0, 1, 2, 3]


RAISING_WORLD = """
from sims import DriveSpec, scenario


class Refusal(Exception):
    # An exception of the user's own whose __init__ takes other arguments than its args: it
    # cannot be rebuilt from what pickle keeps of it.
    def __init__(self, code, why):
        super().__init__(f"{code}: {why}")


def broken_check(trace):
    raise Refusal(7, "the check itself broke")


@scenario("raises", checks=(broken_check,))
async def raises(world):
    world.add_drive(DriveSpec(name="cron"))
"""


def test_a_world_that_raises_in_a_worker_process_stops_the_sweep_with_its_line(
    tmp_path: Path,
) -> None:
    # A worker's error the sweep could not unpickle was never delivered: the pool waited forever.
    path = tmp_path / "raising.py"
    path.write_text(RAISING_WORLD)
    done = subprocess.run(
        [sys.executable, "-m", "sims", "sweep", f"{path}:raises", "--seeds", "0..3", "--jobs", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    expected = (
        f"check broken-check of scenario {path}:raises raised at {path}:13 with seed 0: Refusal: "
        "7: the check itself "
        "broke"
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"error: {expected}"
    with pytest.raises(WorldError) as caught:
        sweep(f"{path}:raises", range(4), jobs=2)
    assert str(caught.value) == expected


def test_a_world_that_raised_in_a_worker_is_raised_again_as_what_it_was() -> None:
    # The driver's own errors take (reason, message): pickle cannot rebuild them from their args,
    # so no exception crosses from a worker; its kind and line do.
    raised = WorldRaised(3, "Conflict", "run 'r1' is already in the scope")
    assert pickle.loads(pickle.dumps(raised)) == raised
    assert type(raised.error()) is RuntimeError
    assert str(raised.error()) == "Conflict: run 'r1' is already in the scope"
    plain = WorldRaised(3, "ValueError", "seed -1 is negative").error()
    assert (type(plain), str(plain)) == (ValueError, "seed -1 is negative")
    world = WorldRaised(3, "WorldError", "scenario x.py:y raised with seed 3: KeyError: 1").error()
    assert isinstance(world, WorldError)
    assert (str(world), world.error) == ("scenario x.py:y raised with seed 3: KeyError: 1", None)


TEACH_PICKLE_CAUSES = """
import sys
from tblib import pickling_support

from sims import WorldError, sweep

# What importing dask.distributed does to a process: exceptions pickle with their causes, so a
# WorldError would carry the user's own exception (which cannot be rebuilt) along with it.
pickling_support.install()
try:
    sweep(sys.argv[1], range(4), jobs=2)
except WorldError as error:
    print(error)
"""


def test_a_world_that_raises_stops_the_sweep_where_pickle_carries_causes(tmp_path: Path) -> None:
    path = tmp_path / "raising.py"
    path.write_text(RAISING_WORLD)
    done = subprocess.run(
        [sys.executable, "-c", TEACH_PICKLE_CAUSES, f"{path}:raises"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.stdout == (
        f"check broken-check of scenario {path}:raises raised at {path}:13 with seed 0: Refusal: "
        "7: the check itself "
        "broke\n"
    ), done.stderr


def _unfired_setup(seed: int) -> WorldSetup:
    # The held claim fires in every seed; this world runs no walk, so its pause never fires, nor
    # its upstream failure, which only the even seeds draw.
    faults = (
        DelayLeg(drive="cron", operation="claim", nth=1, leg="request", ms=5.0),
        PauseDrive(drive="cron", nth=1, ms=5.0),
        *((UpstreamFailure(first=1),) if seed % 2 == 0 else ()),
    )
    return WorldSetup(plan=FaultPlan(faults))


async def _one_pass(world: World) -> None:
    async def handler(ctx: object) -> JobPassResult:
        return JobPassResult(done=True)

    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "j", handler)
    await world.start("cron", "scope-1", "m", "j")
    world.every("cron", "scope-1", every_ms=100, first_ms=0, until_ms=1_000)
    await world.settle(("scope-1",), horizon_ms=1_000, poll_ms=100)


scenario("drawn-misses", setup=_unfired_setup, faults_must_fire=False)(_one_pass)
scenario("documented-misses", setup=_unfired_setup)(_one_pass)


def test_a_sweep_counts_the_faults_that_never_fired_by_kind_and_seeds() -> None:
    report = sweep(f"{__file__}:drawn-misses", range(4))
    lines = list(report.lines())
    start = lines.index(
        "  faults that never fired: 6 in 4 of 4 seeds (the scenario declares "
        "faults_must_fire=False, so they fail no seed)"
    )
    assert lines[start + 1 :] == [
        "    4 × PauseDrive in 4 seeds",
        "    2 × UpstreamFailure in 2 seeds",
    ]
    assert not report.failing
    # One report however the seeds ran: the lines are made from the seeds' summaries alone.
    parallel = sweep(f"{__file__}:drawn-misses", range(4), jobs=2)
    assert list(parallel.lines())[1:] == lines[1:]


def test_a_sweep_fails_the_seeds_whose_documented_faults_never_fired() -> None:
    report = sweep(f"{__file__}:documented-misses", range(4))
    lines = list(report.lines())
    assert (
        "  faults that never fired: 6 in 4 of 4 seeds (each of those seeds is not as "
        "documented, as a single run of it is)"
    ) in lines
    assert [s.seed for s in report.failing] == [0, 1, 2, 3]
    single = simulate(f"{__file__}:documented-misses", 1)
    assert report.seeds[1].mismatches == single.mismatches
    assert single.mismatches == (
        f"1 fault never fired: {PauseDrive(drive='cron', nth=1, ms=5.0)!r}",
    )
