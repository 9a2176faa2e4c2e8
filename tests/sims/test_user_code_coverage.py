"""The search measures which branches of the user's own code its worlds took: a world's features
hold the arcs it took (the world file's and its modules', never the project's, the standard
library's or an installed package's), a branch only a fault reaches is taken by that fault's world,
rare arcs make a world rare, a first fault that opened a new path is built on first, and a clean
result names the branches no world took. The measuring is probes compiled into the user's files
as they load: the way past an ``if`` with no ``else`` and an ``except`` are probed, tracebacks keep
the user's lines, and every process gives a world the same features. Same budget, same report."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

import attrs
import pytest

import sims
from sims import DelayLeg, FaultPlan, find_scenario, search
from sims.faults._plan import NO_FAULTS
from sims.scenarios._instrument import HITS, INSTRUMENTED, _UsersFinder, instrument, is_users
from sims.scenarios._registry import file_module
from sims.search._coverage import Coverage
from sims.search._jobs import WorldJob, WorldResult, run_world
from sims.search._user_code import (
    CODE,
    UNMEASURED,
    UntakenBranch,
    code_arcs,
    measuring,
    new_code_first,
    untaken_branches,
)

WORLD = Path(__file__).parent / "worlds" / "user_branches.py"
RESERVE = f"{WORLD}:reserve"
LINES = WORLD.read_text().splitlines()
#: A reply of the reservation later than the caller's timeout: the only way into ``if timed_out``.
LATE_REPLY = FaultPlan(
    (DelayLeg(drive="cron", operation="stock.reserve", nth=1, leg="reply", ms=10_000.0),)
)
_TIMING = re.compile(r" in [0-9.]+ s of \S+")


def _line(text: str) -> int:
    """The number of the world file's line that holds ``text``."""
    return next(number for number, line in enumerate(LINES, 1) if text in line)


def _world(plan: FaultPlan = NO_FAULTS, scenario: str = RESERVE) -> WorldResult:
    result = run_world(WorldJob(find_scenario(scenario).ref, 1, None, plan))
    assert not result.failed, result
    assert not result.refused, result
    return result


def _arcs(result: WorldResult) -> set[tuple[int, int]]:
    return code_arcs(result.features).get(str(WORLD.resolve()), set())


def test_a_worlds_features_hold_the_arcs_of_the_users_code_and_only_of_it() -> None:
    features = _world().features
    measured = set(code_arcs(features))
    # The world file only: not the simulator, the kernel, the store, Trio or the standard library.
    assert measured == {str(WORLD.resolve())}
    body = _line('args = {"key"')
    assert (-(body - 1), body) in _arcs(_world()), "the step body was entered"
    assert not any(UNMEASURED in f for f in features)


def test_a_branch_only_a_fault_reaches_is_taken_in_that_faults_world_alone() -> None:
    branch = _line("if timed_out:")
    into = (branch, branch + 1)
    assert into not in _arcs(_world())
    assert into in _arcs(_world(LATE_REPLY))
    # And the service operation it calls then ran too, in that world only.
    look = _line('return {"reserved": state.get("reserved", 0)}')
    assert any(look in arc for arc in _arcs(_world(LATE_REPLY)))
    assert not any(look in arc for arc in _arcs(_world()))


def test_a_tracer_already_installed_is_left_alone_and_the_world_is_measured_all_the_same() -> None:
    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        return None

    sys.settrace(tracer)
    try:
        features = _world().features
        still = sys.gettrace()
    finally:
        sys.settrace(None)
    assert still is tracer
    assert code_arcs(features) == code_arcs(_world().features)


def test_a_world_file_imported_before_it_was_loaded_is_said_to_be_unmeasured(
    tmp_path: Path,
) -> None:
    path = _file(tmp_path, "early_world.py", WORLD_TEXT.format(helper="json"))
    spec = importlib.util.spec_from_file_location("early_world_module", path)
    assert spec is not None
    assert spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))  # as a test importing it would
    with measuring(f"{path}:noop") as reached:
        pass
    coverage = Coverage()
    coverage.add(reached.features())
    assert (
        "  your code was not measured in 1 world: the world file was imported as a module before "
        "it was loaded as FILE.py:NAME, so it was compiled without probes"
    ) in list(coverage.lines())


#: A world file that imports ``helper`` and runs its ``walk`` in its drive.
WORLD_TEXT = """
import {helper} as helper
from sims import scenario


@scenario("noop")
async def noop(world):
    helper.walk([1, 0])
"""


def _file(folder: Path, name: str, text: str) -> Path:
    (folder / name).write_text(text)
    return folder / name


def _probed(tmp_path: Path, text: str) -> tuple[dict[str, Any], Path]:
    """``text`` compiled with its probes, run as a module: its namespace and its path."""
    path = _file(tmp_path, "probed.py", text)
    code, hits = instrument(path.read_bytes(), str(path))
    namespace: dict[str, Any] = {HITS: hits, "__name__": "probed"}
    exec(code, namespace)
    INSTRUMENTED[str(path.resolve())].reset()
    return namespace, path


def test_the_way_past_an_if_without_an_else_is_probed(tmp_path: Path) -> None:
    namespace, path = _probed(tmp_path, "def f(x):\n    if x:\n        x += 1\n    return x\n")
    namespace["f"](0)
    taken = INSTRUMENTED[str(path.resolve())].taken()
    assert taken == {(-1, 2), (2, 4)}, "entered, and went past the if"
    namespace["f"](1)
    assert INSTRUMENTED[str(path.resolve())].taken() == {(-1, 2), (2, 4), (2, 3)}
    # Only the way into the if was taken: the way past it is what the report names.
    assert untaken_branches({str(path.resolve()): {(-1, 2), (2, 3)}}) == [
        UntakenBranch(str(path.resolve()), 2, 4, "if x:", "return x")
    ]


def test_an_except_handler_is_probed_and_one_never_run_is_named(tmp_path: Path) -> None:
    text = (
        "def f(x):\n    try:\n        return 1 / x\n    except ZeroDivisionError:\n"
        "        return None\n"
    )
    namespace, path = _probed(tmp_path, text)
    key = str(path.resolve())
    namespace["f"](2)
    assert INSTRUMENTED[key].taken() == {(-1, 2), (2, 3)}
    assert untaken_branches({key: INSTRUMENTED[key].taken()}) == [
        UntakenBranch(key, 2, 4, "try:", "except ZeroDivisionError:")
    ]
    assert namespace["f"](0) is None
    assert (2, 4) in INSTRUMENTED[key].taken()


def test_an_instrumented_users_module_keeps_its_lines_in_a_traceback(tmp_path: Path) -> None:
    helper = _file(
        tmp_path,
        "lines_helper_mod.py",
        '"""A helper."""\n\n\ndef walk(xs):\n    """Walk."""\n    for x in xs:\n'
        "        if x:\n            continue\n        raise ValueError(x)\n",
    )
    world = _file(tmp_path, "lines_world.py", WORLD_TEXT.format(helper="lines_helper_mod"))
    file_module(world)
    module = sys.modules["lines_helper_mod"]
    assert HITS in vars(module), "imported by the world file as it loaded: instrumented"
    with pytest.raises(ValueError, match=r"^0$") as raised:
        module.walk([1, 0])
    last = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert (last.filename, last.lineno, last.name) == (str(helper), 9, "walk")
    assert last.line == "raise ValueError(x)"
    assert module.walk.__doc__ == "Walk."


def test_a_module_the_world_file_imports_is_measured_in_its_worlds(tmp_path: Path) -> None:
    helper = _file(
        tmp_path,
        "measured_helper_mod.py",
        "def walk(xs):\n    for x in xs:\n        if x:\n            continue\n",
    )
    world = _file(tmp_path, "measured_world.py", WORLD_TEXT.format(helper="measured_helper_mod"))
    with measuring(f"{world}:noop") as reached:
        sims.simulate(f"{world}:noop", 1)
    assert reached.arcs[str(helper.resolve())] == {(-1, 2), (2, 3), (3, 4), (3, 2), (2, -1)}
    assert reached.arcs[str(world.resolve())] == {(-7, 8)}


def test_the_projects_modules_the_standard_library_and_packages_are_never_instrumented(
    tmp_path: Path,
) -> None:
    search_package = sys.modules["sims.search"]
    for module in (sims, sys.modules["sims.search._coverage"], json, attrs, pytest):
        assert not is_users(module.__file__ or ""), module
    assert is_users(WORLD)
    # The finder the world file's loading puts in gives them their own loaders.
    assert _UsersFinder.find_spec("json") is None
    assert _UsersFinder.find_spec("sims.search._explore", search_package.__path__) is None
    assert _UsersFinder.find_spec("colorsys") is None
    assert _UsersFinder.find_spec("worlds.user_branches") is not None
    # And none that ran is: the simulator's modules hold no probes.
    run_world(WorldJob(find_scenario(RESERVE).ref, 1, None, NO_FAULTS))
    assert not [
        name
        for name, module in list(sys.modules.items())
        if HITS in vars(module) and not is_users(getattr(module, "__file__", None) or "")
    ]


_FEATURES = """
import json, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "first":
    import sims.search._explore  # the project imported in another order
from sims import find_scenario
from sims.faults._plan import NO_FAULTS
from sims.search._jobs import WorldJob, run_world
ref = find_scenario(sys.argv[3]).ref
features = run_world(WorldJob(ref, 1, None, NO_FAULTS)).features
print(json.dumps(sorted(f for f in features if f.startswith("code:"))))
"""


def test_a_world_has_the_same_features_in_every_process() -> None:
    def features(order: str, hashing: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", _FEATURES, str(WORLD.parents[1]), order, RESERVE],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hashing},
        )
        found: list[str] = json.loads(done.stdout)
        return found

    first, second = features("first", "1"), features("last", "2")
    assert first == second
    assert first == sorted(f for f in _world().features if f.startswith(CODE))
    assert first


def test_rare_arcs_of_the_users_code_make_a_world_rare_and_common_ones_do_not() -> None:
    coverage = Coverage()
    common, rare = f"{CODE}/w.py:1->2", f"{CODE}/w.py:3->4"
    coverage.add(frozenset({common}))
    coverage.add(frozenset({common, rare}))
    assert coverage.rarity(frozenset({common})) == 0.0
    assert coverage.rarity(frozenset({common, rare})) == 0.5


def test_the_first_faults_that_opened_new_code_are_built_on_first() -> None:
    clean = frozenset({f"{CODE}/w.py:1->2"})
    reached = {
        "a": clean,
        "b": clean | {f"{CODE}/w.py:2->5"},
        "c": clean | {f"{CODE}/w.py:2->5"},  # opened nothing b had not
        "d": clean | {f"{CODE}/w.py:5->6", "window:a takeover"},
    }
    firsts = {plan: plan.upper() for plan in reached}
    ordered = new_code_first(firsts, reached, clean)
    assert list(ordered) == ["b", "d", "a", "c"]
    assert ordered["b"] == "B"


def test_a_clean_search_names_the_branch_no_world_took_and_not_the_one_a_fault_took() -> None:
    report = search(RESERVE, max_worlds=40, max_seconds=None, fresh_process=False)
    assert not report.failed, "\n".join(report.lines())
    lines = list(report.lines())
    never = _line('if args["count"] > 100')
    assert "  your code's branches no world took (1):" in lines
    assert (
        f"    tests/sims/worlds/user_branches.py:{never}: "
        '`if args["count"] > 100:  # never: the job reserves one`: '
        f'the way to line {never + 1} (`return {{"reserved": 0}}`) never taken'
    ) in lines
    # The search's faults took ``if timed_out`` both ways.
    assert not any(f":{_line('if timed_out:')}:" in line for line in lines)


def test_untaken_ways_out_of_a_function_and_long_lists_read_well(tmp_path: Path) -> None:
    path = tmp_path / "loops.py"
    path.write_text(
        "def f(xs):\n    for x in xs:\n        if x:\n            return x\n    return None\n"
    )
    # The loop always had an item and its first was true: the loop's end and the false way of
    # ``if x`` were never taken.
    taken = {str(path): {(-1, 2), (2, 3), (3, 4), (4, -1)}}
    assert untaken_branches(taken) == [
        UntakenBranch(str(path), 2, 5, "for x in xs:", "return None"),
        UntakenBranch(str(path), 3, 2, "if x:", "for x in xs:"),
    ]
    many = tmp_path / "many.py"
    many.write_text("".join(f"def f{i}(x):\n    if x:\n        return 1\n" for i in range(12)))
    wide = Coverage()
    wide.add(frozenset(f"{CODE}{many}:{3 * i + 2}->{3 * i + 3}" for i in range(12)))
    shown = [line for line in wide.lines() if line.startswith("    ")]
    assert len(shown) == 11, shown
    assert shown[-1] == "    and 2 more"


def test_the_same_budget_gives_the_same_report() -> None:
    def lines() -> list[str]:
        report = search(RESERVE, max_worlds=30, max_seconds=None, fresh_process=False)
        return [_TIMING.sub("", line) for line in report.lines()]

    first, second = lines(), lines()
    assert first == second
    assert any("your code's branches" in line for line in first)
