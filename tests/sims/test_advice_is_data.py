"""Text from a trace, or from a target's reply, is data everywhere the tool prints it back.

A trace is a file anyone can edit (a bug report's attachment, a CI artifact). Every field of it
that ``replay`` prints, and every piece of a target's reply that the conformance kit prints, is
shown quoted or escaped, or refused when it is not a plain name; none is composed into advice (a
command to paste, a call to type) as code. Each test here hands the tool hostile text where a
field is read: a scenario name, a mutant name, a plan, a world path with shell metacharacters or
newlines, a hash, a format, and a target's reply.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sims
from scopehost import ScopeDatabase
from sims import Trace, simulate
from sims.cli._main import main
from sims.conformance import LocalTarget, ReferenceStore, run_conformance
from sims.runners._outcome import python_replay_call, replay_command
from sims.runners._words import python_name, shell_word
from sims.scenarios._registry import file_sha256

#: What a hostile trace would have the tool hand the user to run.
PAYLOAD = "__import__('os').system('touch owned')"


def _trace(tmp_path: Path, **begin: Any) -> Path:
    """A trace of late-begin, seed 2, with its world.begin's fields replaced by ``begin``."""
    events = simulate("late-begin", 2).outcome.trace.events
    events[0] = {**events[0], **begin}
    path = tmp_path / "t.jsonl"
    Trace(events=events).write(path)
    return path


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one-line error ``argv`` ends in (exit 2, nothing on stdout)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ")
    assert captured.err.count("\n") == 1
    assert captured.err.isascii() or captured.err[:-1].isprintable()
    return captured.err


# -- the mutant a trace names ---------------------------------------------------------------------


def test_the_issues_probe_a_mutant_that_is_code_is_not_written_as_a_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(tmp_path, mutant=PAYLOAD)
    err = _error(["replay", str(trace)], capsys)
    assert err == (
        f"error: {trace} is a world that ran on a store of its caller's own, which it names "
        f'"{PAYLOAD}", not a plain Python name, so no command or call here names it; replay it '
        "in Python, sims.simulate('late-begin', 2, database=STORE) with STORE the store it ran "
        "on, and compare its trace's bytes with the file's\n"
    )
    assert f"database={PAYLOAD}" not in err


@pytest.mark.parametrize(
    "mutant",
    [
        PAYLOAD,
        "os.system",  # a dotted name reaches into a module: not a plain name
        "eval",  # Python's own functions: not a store of the caller's
        "__import__",
        "import",
        "MyStore; rm -rf ~",
        "MyStore\nprint('x')",
        "\x1b[2J",
        "",
        5,
        ["MyStore"],
        {"name": "MyStore"},
    ],
)
def test_a_mutant_that_is_not_a_plain_name_is_named_only_as_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutant: Any
) -> None:
    trace = _trace(tmp_path, mutant=mutant)
    err = _error(["replay", str(trace)], capsys)
    assert f", which it names {mutant!r}, not a plain Python name, " in err
    assert "sims.simulate('late-begin', 2, database=STORE) with STORE the store it ran on" in err


def test_a_mutant_that_is_a_plain_name_is_written_in_the_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(tmp_path, mutant="MyStore")
    err = _error(["replay", str(trace)], capsys)
    assert "replay it in Python, sims.simulate('late-begin', 2, database=MyStore), " in err


# -- the plan a trace records ---------------------------------------------------------------------


def test_a_plan_is_written_as_the_plan_it_was_read_as_never_as_the_trace_spells_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Python reads a comment and a newline inside a plan's parentheses: the plan is the same,
    # and the advice writes the plan, not the text.
    spelled = "FaultPlan(\n())  # $(touch owned)"
    trace = _trace(tmp_path, mutant="MyStore", plan=spelled, plan_overridden=True)
    err = _error(["replay", str(trace)], capsys)
    assert "sims.simulate('late-begin', 2, plan=FaultPlan(faults=()), database=MyStore)" in err
    assert "owned" not in err
    # Replayed on the real store, the printed command carries the plan as read, too.
    trace = _trace(tmp_path, plan=spelled, plan_overridden=True)
    assert main(["replay", str(trace)]) == 1  # the plan is recorded as read: other bytes
    out = capsys.readouterr().out
    replay = next(line for line in out.splitlines() if line.startswith("  replay with: "))
    assert (
        replay
        == '  replay with: python -m sims run late-begin --seed 2 --plan "FaultPlan(faults=())"'
    )


@pytest.mark.parametrize(
    ("plan", "told"),
    [
        (PAYLOAD, f"error: plan {PAYLOAD!r} calls something other than "),
        (5, "error: {trace} records its plan as 5, which is not a plan's text; write traces "),
        (None, "error: {trace} records its plan as None, which is not a plan's text; "),
    ],
)
def test_a_plan_that_is_not_one_is_refused_as_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], plan: Any, told: str
) -> None:
    trace = _trace(tmp_path, plan=plan, plan_overridden=True)
    assert _error(["replay", str(trace)], capsys).startswith(told.format(trace=trace))


# -- the scenario and the world file a trace names ------------------------------------------------

WORLD = """
import sims


@sims.scenario("quiet")
async def quiet(world: sims.World) -> None:
    pass
"""


@pytest.mark.parametrize(
    ("scenario", "told"),
    [
        ("late-begin; rm -rf ~", "error: no scenario 'late-begin; rm -rf ~'; the scenarios are: "),
        ("\x1b[2J", "error: no scenario '\\x1b[2J'; the scenarios are: "),
        (
            "$(touch owned).py",
            "error: {trace} names its scenario '$(touch owned).py', which is neither NAME nor "
            "FILE.py:NAME; write traces with run --trace\n",
        ),
        (
            5,
            "error: {trace} names its scenario 5, which is neither NAME nor FILE.py:NAME; write "
            "traces with run --trace\n",
        ),
    ],
)
def test_a_scenario_the_simulator_does_not_have_is_named_only_as_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: Any, told: str
) -> None:
    trace = _trace(tmp_path, scenario=scenario)
    for world in ([], ["--world", str(trace)]):
        assert _error(["replay", str(trace), *world], capsys).startswith(told.format(trace=trace))


@pytest.mark.parametrize(
    "name", ["it's $(touch owned) `x` & y.py", "a;b|c>d.py", "back\\slash!.py", "-rf.py"]
)
def test_a_world_path_with_shell_metacharacters_is_advised_as_one_quoted_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    world = tmp_path / name
    world.write_text(WORLD)
    trace = _trace(tmp_path, scenario=f"{world}:quiet", world_sha256=file_sha256(world))
    err = _error(["replay", str(trace)], capsys)
    command = err.split("read that file, then ")[1].rstrip("\n")
    assert shlex.split(command) == ["replay", str(trace), "--world", str(world)]
    assert f"names a world file of its own, {shlex.quote(str(world))}, " in err or (
        f'names a world file of its own, "{world}", ' in err
    )
    # The other messages that name it quote it as well.
    other = tmp_path / "other.py"
    other.write_text(WORLD + "# another\n")
    err = _error(["replay", str(trace), "--world", str(other)], capsys)
    shown = err.split("name the file the trace names, ")[1].split(", or a copy of it")[0]
    assert shlex.split(shown) == [str(world)]
    unhashed = _trace(tmp_path, scenario=f"{world}:quiet", world_sha256=None, format=2)
    err = _error(["replay", str(unhashed), "--world", str(other)], capsys)
    assert shlex.split(err.split("can be replayed: --world ")[1]) == [str(world)]


def test_a_world_path_with_a_newline_is_shown_as_a_literal_and_never_as_a_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = f"{tmp_path}/a\nrm -rf ~\n.py"
    trace = _trace(tmp_path, scenario=f"{world}:quiet")
    err = _error(["replay", str(trace)], capsys)
    assert err == (
        f"error: {trace} names a world file of its own, {world!r}, and replay runs no Python a "
        "trace names unless you name it: read that file, then replay the trace with --world "
        "naming that file\n"
    )


@pytest.mark.parametrize("recorded", ["\x1b[2J", "0" * 63, "G" * 64, 5])
def test_a_hash_that_is_not_a_sha256_is_refused_as_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorded: Any
) -> None:
    world = tmp_path / "w.py"
    world.write_text(WORLD)
    trace = _trace(tmp_path, scenario=f"{world}:quiet", world_sha256=recorded)
    assert _error(["replay", str(trace), "--world", str(world)], capsys) == (
        f"error: {trace} records its world file's sha256 as {recorded!r}, which is not one (64 "
        "hex digits); write traces with run --trace\n"
    )


def test_a_format_that_is_not_a_number_is_shown_as_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world, other = tmp_path / "w.py", tmp_path / "other.py"
    world.write_text(WORLD)
    other.write_text(WORLD)
    trace = _trace(tmp_path, scenario=f"{world}:quiet", format="2\x1b[2J")
    err = _error(["replay", str(trace), "--world", str(other)], capsys)
    assert "(a trace of format '2\\x1b[2J'), so only the file it names can be replayed" in err


def test_a_recorded_line_that_does_not_print_is_shown_as_a_literal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # JSON carries a direction override in a string as it is: the difference shows it escaped.
    trace = tmp_path / "t.jsonl"
    simulate("late-begin", 2).outcome.trace.write(trace)
    lines = trace.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3][:-1] + ',"note":"\u202e"}'
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["replay", str(trace)]) == 1
    out = capsys.readouterr().out
    assert "\u202e" not in out
    assert ',"note":"\\u202e"}\'\n' in out


# -- the advice's own functions -------------------------------------------------------------------


@given(st.text(), st.text())
def test_a_command_is_the_words_it_was_given_or_refused(scenario: str, plan: str) -> None:
    if not (scenario.isprintable() and plan.isprintable()):
        with pytest.raises(ValueError, match=r"which no one-line command can show as itself$"):
            replay_command(scenario, 3, plan=plan)
        return
    command = replay_command(scenario, 3, plan=plan)
    assert command.isprintable()
    words = ["python", "-m", "sims", "run", scenario, "--seed", "3", "--plan", plan]
    assert shlex.split(command) == words


@given(st.text())
def test_a_shell_word_is_read_back_by_a_shell_as_the_same_text(text: str) -> None:
    if not text.isprintable():
        with pytest.raises(ValueError, match=r"which no one-line command can show as itself$"):
            shell_word(text)
        return
    assert shlex.split(shell_word(text)) == [text]


def test_a_call_names_a_store_only_by_a_plain_name() -> None:
    with pytest.raises(
        ValueError,
        match=(
            r"^the store's name \"__import__\('os'\)\.system\('touch owned'\)\" is not a plain "
            r"Python name, so no call names it; write the call with STORE for the store it ran on$"
        ),
    ):
        python_replay_call("late-begin", 2, PAYLOAD)
    with pytest.raises(ValueError, match=r"calls something other than"):
        python_replay_call("late-begin", 2, "MyStore", plan=PAYLOAD)
    with pytest.raises(ValueError, match=r"^seed='2\)' is not a whole number; "):
        python_replay_call("late-begin", "2)", "MyStore")  # type: ignore[arg-type]
    assert python_replay_call("late-begin", 2, "MyStore") == (
        "sims.simulate('late-begin', 2, database=MyStore)"
    )
    assert [python_name(n) for n in ("MyStore", "_Mine", "a.b", "open", "__x__", "class")] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]


def test_a_store_of_ones_own_whose_name_is_not_plain_is_named_by_a_placeholder() -> None:
    class Local(ScopeDatabase):  # its name is test_....<locals>.Local
        pass

    simulation = simulate("late-claim", 1, database=Local)
    assert simulation.replay_command == (
        "sims.simulate('late-claim', 1, database=STORE) in Python, STORE being the store of "
        f"your own this world ran on, {Local.__qualname__!r}, which no command line can name"
    )


def test_a_world_whose_file_name_no_command_shows_is_replayed_by_a_call(tmp_path: Path) -> None:
    world = tmp_path / "a\nb.py"
    world.write_text(WORLD)
    simulation = simulate(f"{world}:quiet", 1)
    said = simulation.replay_command
    assert said == (
        f"sims.simulate({str(world) + ':quiet'!r}, 1) in Python: its scenario, "
        f"{str(world) + ':quiet'!r}, holds a character that does not print, which no one-line "
        "command can show as itself"
    )
    again = eval(said.split(" in Python")[0], {"sims": sims})
    assert again.outcome.trace.digest() == simulation.outcome.trace.digest()


# -- a target's reply -----------------------------------------------------------------------------

#: Text that would clear a terminal, retitle it, reverse a line, or not encode at all.
HOSTILE = "\x1b[2J\x1b]0;owned\x07 \u202eevil \x9b31m \ud800"


class _Hostile(LocalTarget):
    """The reference, but its every claim answered with hostile text in ``where``."""

    def __init__(self, where: str) -> None:
        super().__init__(ReferenceStore(), name="hostile")
        self.where = where

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        reply = super().call(request)
        if request.get("op") != "claim":
            return reply
        if self.where == "result":
            return {**reply, "result": HOSTILE}
        if self.where == "key":
            return {**reply, HOSTILE: 1}
        if self.where == "table":
            return {**reply, "tables": {"runs": [{HOSTILE: HOSTILE}], "steps": []}}
        return {"ok": False, "error": {"code": HOSTILE, "message": HOSTILE, "paths": [HOSTILE]}}


@pytest.mark.parametrize("where", ["result", "key", "table", "refusal"])
def test_a_targets_reply_is_printed_only_as_data(where: str) -> None:
    report = run_conformance(_Hostile(where), examples=30, seed=3)
    assert report.difference is not None
    printed = "\n".join(report.lines())
    printed.encode("utf-8")  # no lone surrogate: it prints
    assert all(line.isprintable() for line in printed.splitlines())
    assert "\x1b" not in printed
    assert "\u202e" not in printed


def test_a_difference_in_a_reply_is_still_shown_readably() -> None:
    # Text that prints stays as it is (not every reply escaped into ASCII).
    class Accented(LocalTarget):
        def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
            reply = super().call(request)
            return {**reply, "result": "déjà"} if request.get("op") == "claim" else reply

    report = run_conformance(Accented(ReferenceStore(), name="accented"), examples=30, seed=3)
    assert report.difference is not None
    assert json.dumps("déjà", ensure_ascii=False) in report.difference.target
