"""A user's world file, held to what it may say: what a check and an ``expect`` return, one
definition per scenario name, names the command line can address, and a replay line that replays."""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path

import pytest

import sims
from scopehost import ScopeDatabase
from sims import (
    DropLeg,
    FaultPlan,
    WorldError,
    check_worlds,
    describe_failure,
    load_file,
    replay_command,
    scenario,
    simulate,
)
from sims.cli._main import main
from sims.scenarios._registry import WorldFileError

# Line 4 is `def returned`, line 12 `def expected` and line 20 the decorator.
WORLD = """\
from sims import DriveSpec, JobPassResult, World, scenario


def returned(trace):
    return {returns}


async def done(ctx):
    return JobPassResult(done=True)


def expected(simulation):
    return {expects}


@scenario("world", checks=[returned], expect=expected)
async def world(world: World) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "once", done)
    await world.start("cron", "scope-1", "m", "once")
    world.every("cron", "scope-1", every_ms=100, first_ms=0, until_ms=1_000)
    await world.settle(("scope-1",), horizon_ms=1_000, poll_ms=100)
"""

CHECK_MUST = (
    "a check must return its violations as a list (or any iterable) of strings or "
    "sims.UserFinding values, one per violation, and an empty list when it held"
)
EXPECT_MUST = (
    "an expect must return the ways the world differs from what the scenario documents as a "
    "list (or any iterable) of strings, and an empty list when it is as documented"
)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Files are named as a user names them, from the folder they run in.
    monkeypatch.chdir(tmp_path)


def _world(name: str, *, returns: str = "[]", expects: str = "[]") -> str:
    Path(name).write_text(WORLD.format(returns=returns, expects=expects))
    return f"{name}:world"


# -- what a check and an expect return ------------------------------------------------------------


@pytest.mark.parametrize(
    ("returns", "expects", "said"),
    [
        ("None", "[]", f"check returned (c.py:4) returned None; {CHECK_MUST}"),
        (
            "'bad'",
            "[]",
            "check returned (c.py:4) returned the string 'bad', which would be read one "
            f"character at a time, one line each (put it in a list: ['bad']); {CHECK_MUST}",
        ),
        ("True", "[]", f"check returned (c.py:4) returned True (of type bool); {CHECK_MUST}"),
        (
            "['fine', 3]",
            "[]",
            "check returned (c.py:4) returned ['fine', 3], whose item 1 is 3 (of type int), not "
            f"a string or a sims.UserFinding; {CHECK_MUST}",
        ),
        ("[]", "None", f"expect expected (c.py:12) returned None; {EXPECT_MUST}"),
        (
            "[]",
            "'not done'",
            "expect expected (c.py:12) returned the string 'not done', which would be read one "
            f"character at a time, one line each (put it in a list: ['not done']); {EXPECT_MUST}",
        ),
    ],
)
def test_a_check_or_expect_that_returns_no_list_of_strings_is_refused_by_name(
    returns: str, expects: str, said: str
) -> None:
    # None was a traceback ("'NoneType' object is not iterable", naming no check), and a string
    # was one violation per character: "bad" gave three, `b`, `a` and `d`.
    world = _world("c.py", returns=returns, expects=expects)
    with pytest.raises(WorldError) as caught:
        simulate(world, 1)
    assert str(caught.value) == f"scenario {world} raised with seed 1: TypeError: {said}"


def test_a_refused_return_is_one_line_and_exit_2_on_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    world = _world("c.py", expects="None")
    assert main(["run", world]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"error: scenario {world} raised with seed 1: TypeError: expect expected (c.py:12) "
        f"returned None; {EXPECT_MUST}\n"
    )
    assert captured.out == ""
    # A sweep goes on past a world that raised: the seed's finding says the same, and the report
    # is printed.
    assert main(["sweep", world, "--seeds", "1"]) == 1
    captured = capsys.readouterr()
    assert (
        f"      [violation] world-raised: TypeError: expect expected (c.py:12) returned None; "
        f"{EXPECT_MUST} (raised at "
    ) in captured.out


def test_a_refused_return_fails_a_test_that_uses_the_fixture(
    sims_worlds: Callable[..., int],
) -> None:
    world = _world("c.py", returns="'bad'")
    with pytest.raises(WorldError, match=r"check returned \(c.py:4\) returned the string 'bad'"):
        sims_worlds(world, seeds=[0])
    with pytest.raises(WorldError, match=r"check returned \(c.py:4\) returned the string 'bad'"):
        check_worlds(world, [0])


def test_an_expect_that_raises_is_told_as_the_worlds_error_with_its_place() -> None:
    # Like a check that raises: one line with the place in the file, not a traceback.
    world = _world("c.py", expects="simulation.facts.only_run('nowhere')")
    with pytest.raises(WorldError) as caught:
        simulate(world, 2)
    assert str(caught.value) == (
        f"scenario {world} raised at c.py:13 with seed 2: KeyError: 'nowhere'"
    )


def test_any_iterable_of_strings_is_what_a_check_returns() -> None:
    world = _world("c.py", returns="(line for line in ('one', 'two'))", expects="('differs',)")
    simulation = simulate(world, 1)
    assert [(f.check, f.text) for f in simulation.report.violations] == [
        ("returned", "one"),
        ("returned", "two"),
    ]
    assert simulation.mismatches == ("differs",)


def test_a_set_of_strings_is_read_in_sorted_order_the_same_in_every_process() -> None:
    # Read as it iterates, a set lists its strings in the order of their hashes, which
    # PYTHONHASHSEED changes from one process to the next: the same world, another verdict text.
    names = [f"violation {index:02}" for index in range(40)]
    world = _world("c.py", returns=f"set({names!r})", expects=f"frozenset({names[:20]!r})")
    simulation = simulate(world, 1)
    assert [f.text for f in simulation.report.violations] == names
    assert simulation.mismatches == tuple(names[:20])


def test_a_sweep_lists_three_findings_of_a_failing_seed_and_counts_the_rest() -> None:
    # The rest were cut without a word: a seed with forty violations read as one with three.
    names = [f"violation {index:02}" for index in range(40)]
    world = _world("c.py", returns=repr(names))
    lines = list(sims.sweep(world, range(1), jobs=1).lines())
    listed = lines[lines.index(f"  seed 0: {replay_command(world, 0)}") + 1 :]
    assert listed == [
        "      [violation] returned at 102 ms (your check): violation 00",
        "      [violation] returned at 102 ms (your check): violation 01",
        "      [violation] returned at 102 ms (your check): violation 02",
        "      … and 37 more, not listed here: the command above shows them all",
    ]


# -- one definition per name ---------------------------------------------------------------------

TWICE = """\
from sims import World, scenario


def objects(trace):
    return ["the first one's check objects"]


@scenario("dup", checks=[objects])
async def first(world: World) -> None:
    pass


@scenario("dup")
async def second(world: World) -> None:
    pass
"""


def test_a_name_defined_twice_in_one_file_is_refused_with_both_places(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The second replaced the first, and the first one's failing check with it: a clean verdict.
    Path("twice.py").write_text(TWICE)
    said = (
        "scenario 'dup' is defined twice in one file, at twice.py:8 and at twice.py:13; give "
        "each scenario its own name"
    )
    with pytest.raises(WorldFileError) as caught:
        simulate("twice.py:dup", 1)
    assert str(caught.value) == (
        f"twice.py failed to load (line 13): ValueError: {said}; fix the file and try again "
        "(python twice.py shows the whole traceback)"
    )
    assert main(["list", "twice.py"]) == 2
    assert capsys.readouterr().err == f"error: {caught.value}\n"


def test_a_file_run_again_replaces_its_scenarios_without_calling_them_twice_defined() -> None:
    # A test that imports the world file's handlers runs the file a second time, in a namespace
    # of its own: the same definitions again, not two of one name.
    world = _world("again.py")
    first = load_file("again.py")["world"]
    runpy.run_path("again.py")
    assert load_file("again.py")["world"] is not first
    assert simulate(world, 1).ok


# -- names the command line can address -----------------------------------------------------------


@pytest.mark.parametrize("name", ["a b", "a\tb", "a\nb", " a", "", "x:y", "a\x1bb", "a\u00a0b"])
def test_a_name_that_is_not_one_word_is_refused(name: str) -> None:
    # `list` prints the name as its line's first word, for scripts; "a b" broke that, though
    # the refusal already said names have no spaces.
    with pytest.raises(ValueError, match="must be one word") as caught:
        scenario(name)
    assert str(caught.value) == (
        f"scenario name {name!r} must be one word: not empty, without spaces, ':' or characters "
        "that do not print (it is typed as FILE.py:NAME, and list prints it as the first word of "
        "its line)"
    )


def test_a_name_with_a_space_in_a_file_is_told_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    Path("spaced.py").write_text(WORLD.replace('@scenario("world"', '@scenario("a b"'))
    assert main(["list", "spaced.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: spaced.py failed to load (line 16): ValueError: scenario name ")
    assert err.count("\n") == 1


# -- a replay line that replays -------------------------------------------------------------------


class MyStore(ScopeDatabase):
    """A store of the caller's own: no mutant, so no --mutant can name it."""


def test_a_world_on_a_store_of_your_own_prints_no_command_that_cannot_replay_it() -> None:
    # It printed `--mutant MyStore`, which the command line refuses.
    plan = FaultPlan((DropLeg(drive="cron", operation="record_step", nth=1, leg="request"),))
    simulation = simulate("late-claim", 1, database=MyStore, plan=plan)
    assert simulation.mutant is None
    assert simulation.custom_store == "MyStore"
    said = (
        f"sims.simulate('late-claim', 1, plan={plan!r}, database=MyStore) in Python: this world "
        "ran on a store of your own, MyStore, which no command line can name"
    )
    assert simulation.replay_command == said
    assert describe_failure(simulation).endswith(f"replay with: {said}")
    # The Python it gives does replay it.
    again = eval(said.split(" in Python")[0], {**vars(sims), "sims": sims, "MyStore": MyStore})
    assert again.outcome.trace.digest() == simulation.outcome.trace.digest()
    # A mutant is still a command.
    mutant = simulate("late-claim", 1, database=sims.MUTANTS["takeover-charge"])
    assert (
        mutant.replay_command == "python -m sims run late-claim --seed 1 --mutant takeover-charge"
    )


def test_a_replay_command_for_a_store_no_command_line_names_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^no mutant 'MyStore'; the mutants are: "):
        replay_command("late-claim", 1, mutant="MyStore")


def test_replaying_the_trace_of_a_world_on_a_store_of_ones_own_says_how_to_in_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "mine.jsonl"
    simulate("late-claim", 1, database=MyStore).outcome.trace.write(trace)
    assert main(["replay", str(trace)]) == 2
    assert capsys.readouterr().err == (
        f"error: {trace} is a world that ran on a store of its caller's own, MyStore, which no "
        "command line can name; replay it in Python, sims.simulate('late-claim', 1, "
        "database=MyStore), and compare its trace's bytes with the file's\n"
    )
