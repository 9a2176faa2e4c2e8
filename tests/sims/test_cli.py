"""``python -m sims``: list, run, sweep and replay, as a person at a terminal uses them."""

from __future__ import annotations

import importlib.metadata
import io
import multiprocessing
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sims import MUTANTS, SCENARIOS, Trace, find_scenario, plan_from_text, simulate
from sims.cli._main import _RunProgress, _tell, main
from sims.faults._plan import FAULT_KINDS
from sims.runners._sweep import SweepJob, summarise


def test_list_names_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == list(SCENARIOS)
    assert "The late-BEGIN world with `max_attempts=1`: " in out  # no reST ``literals``


def test_run_late_begin_tells_the_double_run_and_writes_trace_and_timeline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace, timeline = tmp_path / "t.jsonl", tmp_path / "t.html"
    assert main(["run", "late-begin", "--trace", str(trace), "--timeline", str(timeline)]) == 0
    out = capsys.readouterr().out
    assert "fault: the reply of begin call 1 is held 1250 ms" in out
    assert "takes over run" in out
    assert "the lease is gone" in out
    assert "[explained] double-run" in out
    assert "Late BEGIN reply" in out
    assert "as documented; no invariant violated" in out
    assert "double run" in out.split("timeline:")[1]
    assert Trace.read(trace).events
    assert "<svg" in timeline.read_text()


def test_run_on_a_broken_store_fails_and_says_how_to_replay(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The cron stops past its lease just after an effect landed: its late step record must be
    # refused, and a store that ignores the owner accepts it.
    plan = "FaultPlan((PauseDrive(drive='cron', nth=2, ms=2500.0, where='after-effect'),))"
    code = main(["run", "random", "--seed", "1", "--mutant", "record-step-owner", "--plan", plan])
    out = capsys.readouterr().out
    assert code == 1
    assert "[violation]" in out
    assert (
        "replay with: python -m sims run random --seed 1 --mutant record-step-owner --plan "
        f'"{plan_from_text(plan)!r}"' in out
    )


def test_replay_reruns_the_recorded_world_byte_for_byte(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / "t.jsonl"
    assert main(["run", "crash-after-begin", "--seed", "4", "--trace", str(trace)]) == 0
    capsys.readouterr()
    assert main(["replay", str(trace)]) == 0
    out = capsys.readouterr().out
    assert f"replay: the new trace is byte-identical to {trace}" in out


def test_a_trace_cut_off_or_damaged_names_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / "t.jsonl"
    assert main(["run", "crash-after-begin", "--seed", "4", "--trace", str(trace)]) == 0
    lines = trace.read_text(encoding="utf-8").splitlines(keepends=True)
    capsys.readouterr()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:9]) + lines[9][:20], encoding="utf-8")  # a writer killed
    assert main(["replay", str(cut)]) == 2
    assert capsys.readouterr().err == (
        f"error: {cut} is not a trace (JSON lines): its last line, line 10, is cut off; write "
        "traces with run --trace\n"
    )
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("".join(lines[:4]) + "{oops\n" + "".join(lines[4:]), encoding="utf-8")
    assert main(["replay", str(damaged)]) == 2
    assert capsys.readouterr().err == (
        f"error: {damaged} is not a trace (JSON lines): line 5 is not JSON; write traces with "
        "run --trace\n"
    )


def test_sweep_summarises_and_fails_on_a_violation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "late-claim", "--seeds", "1..4"]) == 0
    assert "sweep late-claim: 4 seeds in" in capsys.readouterr().out
    assert main(["sweep", "random", "--seeds", "0..40", "--mutant", "takeover-charge"]) == 1
    out = capsys.readouterr().out
    assert "--mutant takeover-charge" in out
    assert "[violation] attempts-charged" in out
    # The replay line it prints for a failing seed reproduces that seed's violation.
    lines = out.splitlines()
    where = next(i for i, line in enumerate(lines) if "python -m sims run" in line)
    violation = lines[where + 1].strip()
    assert main(shlex.split(lines[where].split(": ", 1)[1])[3:]) == 1
    assert f"  {violation}\n" in capsys.readouterr().out


def test_bad_arguments_are_refused_with_the_remedy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "nope"]) == 2
    assert "error: no scenario 'nope'; the scenarios are: late-begin" in capsys.readouterr().err
    assert main(["sweep", "random", "--seeds", "9..1"]) == 2
    assert "run backwards" in capsys.readouterr().err
    assert main(["run", "random", "--plan", "open('x')"]) == 2
    assert "calls something other than" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["run", "late-begin", "--bogus"],
            "python -m sims run: error: unrecognized arguments: --bogus",
        ),
        (
            ["sweep", "late-begin", "--seeds", "0..1", "--jobs", "x"],
            "python -m sims sweep: error: argument --jobs: 'x' is not a whole number; write "
            "digits, e.g. 2",
        ),
        (
            ["explore", "late-begin", "--examples", "1e3"],
            "python -m sims explore: error: argument --examples: '1e3' is not a whole number; "
            "write digits, e.g. 2",
        ),
    ],
)
def test_a_word_a_command_does_not_take_is_told_with_that_commands_usage(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: python -m sims {argv[0]} ")
    assert err.endswith(f"{error}\n")


def test_version_is_the_installed_packages(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"python -m sims {importlib.metadata.version('jobrun-sim')}\n"


# -- a user's file -------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    # Commands name files as a user in a clone of the repository types them.
    monkeypatch.chdir(Path(__file__).resolve().parents[2])


EXAMPLE = "examples/nightly_invoice.py"
INVOICE = f"{EXAMPLE}:nightly-invoice"


def _printed(out: str, prefix: str) -> list[str]:
    """The argv of the command printed after ``prefix`` (what a user would paste)."""
    line = next(line for line in out.splitlines() if prefix in line)
    words = shlex.split(line.split(prefix, 1)[1])
    assert words[:3] == ["python", "-m", "sims"], line
    return words[3:]


def test_list_of_a_file_names_its_scenarios_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "examples/double_charge.py"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "double-charge",
        "charge-look-first",
        "charge-once",
    ]


def test_a_users_scenario_runs_writes_its_trace_and_replays_byte_for_byte(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace, timeline = tmp_path / "t.jsonl", tmp_path / "t.html"
    argv = ["run", INVOICE, "--seed", "3", "--trace", str(trace), "--timeline", str(timeline)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "fault: the reply of claim call 1 was dropped (it had run)" in out
    assert "step post runs (attempt 1)" in out
    assert "<svg" in timeline.read_text()
    assert main(_printed(out, "replay with: ")) == 0
    assert f"sha256 {Trace.read(trace).digest()}" in out
    capsys.readouterr()
    assert main(["replay", str(trace), "--world", EXAMPLE]) == 0
    assert f"replay: the new trace is byte-identical to {trace}" in capsys.readouterr().out
    # From another folder, the file named by any path that holds the same content replays it.
    world = Path(EXAMPLE).resolve()
    monkeypatch.chdir(tmp_path)
    assert main(["replay", str(trace), "--world", str(world)]) == 0
    assert f"replay: the new trace is byte-identical to {trace}" in capsys.readouterr().out


def test_a_users_trace_is_the_same_bytes_from_any_folder_and_replays_from_any_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The world file named by one absolute path: what the trace records must not depend on the
    # folder the run was made from, and a replay from elsewhere is the same world.
    world = f"{Path(EXAMPLE).resolve()}:nightly-invoice"
    here, there = tmp_path / "here.jsonl", tmp_path / "there.jsonl"
    assert main(["run", world, "--seed", "3", "--trace", str(here)]) == 0
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert main(["run", world, "--seed", "3", "--trace", str(there)]) == 0
    assert here.read_bytes() == there.read_bytes()
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    assert main(["replay", str(here), "--world", world.rpartition(":")[0]]) == 0
    assert f"replay: the new trace is byte-identical to {here}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("edit", "told"),
    [
        (
            lambda data: data.replace(b"\n", b"\r\n"),
            'replay: first difference at line 1\nreplay:   recorded: \'{"ev":"world.begin"',
        ),
        (
            lambda data: data[:-1],
            "replay: the recorded trace lacks the newline that ends its last line\n",
        ),
        (
            lambda data: data.replace(b'{"ev":"world.begin",', b'{"ev": "world.begin", ', 1),
            'replay: first difference at line 1\nreplay:   recorded: {"ev": "world.begin", ',
        ),
    ],
)
def test_a_trace_holding_the_same_events_in_other_bytes_is_not_called_byte_identical(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, edit: Any, told: str
) -> None:
    trace = tmp_path / "t.jsonl"
    assert main(["run", "late-begin", "--seed", "3", "--trace", str(trace)]) == 0
    trace.write_bytes(edit(trace.read_bytes()))
    capsys.readouterr()
    assert main(["replay", str(trace)]) == 1
    out = capsys.readouterr().out
    assert f"replay: the new trace is DIFFERENT from {trace}\n" in out
    assert told in out


def test_the_printed_replay_of_a_mutant_with_a_plan_reproduces_the_same_world(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plan = "FaultPlan((DropLeg(drive='cron', operation='record_step', nth=1, leg='request'),))"
    first, again = tmp_path / "first.jsonl", tmp_path / "again.jsonl"
    argv = ["run", "late-claim", "--mutant", "takeover-charge", "--plan", plan]
    main([*argv, "--trace", str(first)])
    out = capsys.readouterr().out
    replay = _printed(out, "replay with: ")
    assert replay[replay.index("--mutant") + 1] == "takeover-charge"
    assert plan_from_text(replay[replay.index("--plan") + 1]) == plan_from_text(plan)
    main([*replay, "--trace", str(again)])
    assert first.read_bytes() == again.read_bytes()
    capsys.readouterr()
    assert main(["replay", str(first)]) in (0, 1)
    assert "byte-identical" in capsys.readouterr().out


def test_a_plan_in_place_of_the_scenarios_own_is_said_in_header_and_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", INVOICE, "--plan", "FaultPlan(())"]) == 0
    out = capsys.readouterr().out
    assert "faults (--plan, replacing the scenario's own plan): none" in out
    assert "the scenario's own plan was replaced by --plan" in out.split("verdict:")[1]


def test_a_replay_that_differs_prints_the_first_differing_line_of_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / "t.jsonl"
    assert main(["run", "late-claim", "--trace", str(trace)]) == 0
    lines = trace.read_text().splitlines()
    tampered = lines[5].replace('"t":', '"t":1', 1)
    trace.write_text("\n".join([*lines[:5], tampered, *lines[6:]]) + "\n")
    capsys.readouterr()
    assert main(["replay", str(trace)]) == 1
    out = capsys.readouterr().out
    assert f"replay: the new trace is DIFFERENT from {trace}" in out
    assert f"replay: first difference at line 6\nreplay:   recorded: {tampered}\n" in out
    assert f"replay:   replayed: {lines[5]}\n" in out


def test_a_sweep_of_a_users_scenario_loads_it_in_each_worker(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sweep", INVOICE, "--seeds", "0..3", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sweep {INVOICE}: 4 seeds in ")
    assert main(["sweep", INVOICE, "--seeds", "5"]) == 0
    assert f"sweep {INVOICE}: 1 seed in " in capsys.readouterr().out


def test_a_scenario_reference_pickles_and_loads_in_a_fresh_process() -> None:
    # What a sweep hands a worker that did not fork from it (a spawned or remote one).
    ref = find_scenario(INVOICE).ref
    assert ref.path == str(Path(EXAMPLE).resolve())
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        (summary,) = pool.map(summarise, [SweepJob(ref, 2)])
    assert summary.ok
    assert summary.seed == 2


def test_help_explains_checks_mutants_and_plans_and_points_at_the_docs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for words in ("docs/checks.md", "docs/mutants.md", "docs/fault-plans.md", "DelayLeg"):
        assert words in out
    for mutant in MUTANTS:
        assert f"  {mutant} " in out
    for kind in FAULT_KINDS:
        assert f"  {kind.__name__} " in out


# -- ordinary mistakes: one line on stderr, exit 2, before anything runs --------------------------


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["replay", "missing.jsonl"], "no file missing.jsonl; name a trace file written by run"),
        (["replay", "examples"], "examples is a folder; name a trace file written by run --trace"),
        (["replay", "README.md"], "README.md is not a trace (JSON lines); write traces with run"),
        (["replay", "pyproject.toml"], "pyproject.toml is not a trace (JSON lines); write traces"),
        (
            ["run", "late-claim", "--trace", "no/such/t.jsonl"],
            "--trace no/such/t.jsonl: the folder",
        ),
        (
            ["run", "late-claim", "--timeline", "examples"],
            "--timeline examples is a folder; name a",
        ),
        (
            [
                "run",
                "late-claim",
                "--plan",
                "FaultPlan((DelayLeg(",
            ],
            "plan 'FaultPlan((DelayLeg(' is",
        ),
        (["run", "late-claim", "--plan", " "], "the plan is empty; write FaultPlan((...,)) with"),
        (
            ["run", "late-claim", "--plan", "DropLeg(drive='cron')"],
            "plan \"DropLeg(drive='cron')\" does",
        ),
        (["run", "late-claim", "--plan", "DelayLeg"], "plan 'DelayLeg' is a type, not a FaultPlan"),
        (["run", "late-claim", "--plan", "garbage"], "plan 'garbage' names 'garbage', which is no"),
        (["run", "late-claim", "--story-lines", "-1"], "--story-lines -1 must be 0 or more"),
        (
            ["run", "late-claim", "--trace", "/proc/no-such-trace.jsonl"],
            "--trace /proc/no-such-trace.jsonl: cannot write there (",
        ),
        (["run", "nope"], "no scenario 'nope'; the scenarios are: late-begin, "),
        (
            ["run", f"{EXAMPLE}:nope"],
            f"no scenario 'nope' in {EXAMPLE}; its scenarios are: nightly",
        ),
        (["run", EXAMPLE], f"scenario '{EXAMPLE}' names a file but no scenario; write "),
        (["run", "nowhere.py:x"], "no file nowhere.py"),
        (["list", "nowhere.py"], "no file nowhere.py"),
        (["run", "late-claim", "--mutant", "nope"], "no mutant 'nope'; the mutants are: patch-"),
        (["sweep", "late-claim", "--seeds", "9..1"], "seeds '9..1' run backwards; write the smal"),
        (
            ["sweep", "late-claim", "--seeds", "1-9"],
            "seeds '1-9' must be N (that one seed) or A..B (A to B, both included), in whole "
            "numbers >= 0\n",
        ),
        (
            ["sweep", "late-claim", "--seeds", "-5..2"],
            "seeds '-5..2' include a negative number; seeds are whole numbers >= 0\n",
        ),
        (
            ["sweep", "late-claim", "--seeds", "2..-5"],
            "seeds '2..-5' include a negative number; seeds are whole numbers >= 0\n",
        ),
        (
            ["sweep", "late-claim", "--seeds", "-3"],
            "seeds '-3' include a negative number; seeds are whole numbers >= 0\n",
        ),
        (
            ["run", "late-claim", "--seed", "-1"],
            "seed '-1' is negative; seeds are whole numbers >= 0\n",
        ),
        (
            ["run", "late-claim", "--seed=-1"],
            "seed '-1' is negative; seeds are whole numbers >= 0\n",
        ),
        (
            ["run", "late-claim", "--seed", "1.5"],
            "seed '1.5' is not a whole number; seeds are whole numbers >= 0\n",
        ),
        (
            ["explore", "late-claim", "--seed", "-2"],
            "seed '-2' is negative; seeds are whole numbers >= 0\n",
        ),
        (["sweep", "late-claim", "--seeds", "1", "--jobs", "0"], "--jobs 0 must be 1 or more"),
        (["explore", "late-claim", "--mutant", "x"], "no mutant 'x'; the mutants are: patch-own"),
    ],
)
def test_an_ordinary_mistake_is_one_line_and_exit_2(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {error}")
    assert captured.err.count("\n") == 1
    assert captured.out == ""


def test_a_file_that_fails_to_load_is_told_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    world = tmp_path / "broken.py"
    world.write_text("import sims\n\nraise RuntimeError('oops')\n")
    assert main(["list", str(world)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: {world} failed to load (line 3): RuntimeError: oops; fix the file and try "
        f"again (python {world} shows the whole traceback)\n"
    )


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_shown_on_a_terminal_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["sweep", "late-claim", "--seeds", "1..2"]) == 0
    assert main(["run", "late-claim"]) == 0
    assert capsys.readouterr().err == ""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(_RunProgress, "EVERY", 10)
    assert main(["sweep", "late-claim", "--seeds", "1..2"]) == 0
    assert "] 2/2 seeds, 0 not as documented\n" in terminal.getvalue()
    assert main(["run", "late-claim"]) == 0
    assert "\r  running: " in terminal.getvalue()
    assert " s of virtual time, 10 events" in terminal.getvalue()


def test_list_wraps_on_a_terminal_under_the_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setattr(
        shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((60, 24))
    )
    assert main(["list"]) == 0
    lines = terminal.getvalue().splitlines()
    width = max(len(name) for name in SCENARIOS)
    assert len(lines) > len(SCENARIOS)
    assert all(len(line) <= 59 for line in lines)
    names = [line.split()[0] for line in lines if not line.startswith(" ")]
    assert names == list(SCENARIOS)
    assert all(line[: width + 2].strip() == "" for line in lines if line.startswith(" "))


def test_a_world_that_raises_is_told_in_one_line_with_its_place(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    world = tmp_path / "world.py"
    world.write_text(
        "from sims import World, scenario\n\n\n"
        '@scenario("bad")\n'
        "async def bad(world: World) -> None:\n"
        '    await world.start("cron", "scope-1", "m", "j")\n'
    )
    assert main(["run", f"{world}:bad"]) == 2
    assert capsys.readouterr().err == (
        f"error: scenario {world}:bad raised at {world}:6 with seed 1: ValueError: no drive "
        "'cron' in this world; add it first with world.add_drive(DriveSpec(name='cron'))\n"
    )


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    # `python -m sims run ... | head -1`: the pipe closes before the story is written.
    with subprocess.Popen(
        [sys.executable, "-m", "sims", "run", "late-claim"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        error = process.stderr.read()
        assert process.wait(timeout=120) == 141
    assert error == b""


def test_a_world_that_keeps_no_trace_says_why_it_has_no_story(
    capsys: pytest.CaptureFixture[str],
) -> None:
    simulation = simulate("late-claim", 1, keep_trace=False)
    _tell(simulation, find_scenario("late-claim"), story_limit=20)
    out = capsys.readouterr().out
    assert "story:\n  this world keeps no trace (it is too big to hold), so it has no story" in out
    assert "\ntimeline:" not in out


def test_a_cut_story_names_the_flag_that_shows_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "late-begin", "--story-lines", "3"]) == 0
    story = capsys.readouterr().out.partition("story:\n")[2].splitlines()
    assert story[3].startswith("               … ")
    hint = story[3].strip()
    left = int(hint.split()[1])
    assert hint == (
        f"… {left} more lines (run with --story-lines {left + 3} to see the whole story; "
        "--trace FILE writes its events as JSON lines)"
    )
    # The number it names is enough: with it, nothing is left out.
    assert main(["run", "late-begin", "--story-lines", str(left + 3)]) == 0
    assert "more line" not in capsys.readouterr().out
    assert main(["run", "late-begin", "--story-lines", str(left + 2)]) == 0
    assert "… 1 more line (run with --story-lines" in capsys.readouterr().out


ALWAYS_OBJECTS = '''
from sims import DriveSpec, JobPassResult, World, scenario


def objects_once(trace):
    return ["this check objects to every world"]


async def done(ctx):
    return JobPassResult(done=True)


@scenario("objected", checks=[objects_once])
async def objected(world: World) -> None:
    """One run, and a check of the user's own that always objects."""
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "once", done)
    await world.start("cron", "scope-1", "m", "once")
    world.every("cron", "scope-1", every_ms=100, first_ms=0, until_ms=1_000)
    await world.settle(("scope-1",), horizon_ms=1_000, poll_ms=100)
'''


def test_replay_checks_the_recorded_trace_with_the_scenarios_own_checks_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    world, trace = tmp_path / "objected.py", tmp_path / "t.jsonl"
    world.write_text(ALWAYS_OBJECTS)
    assert main(["run", f"{world}:objected", "--trace", str(trace)]) == 1
    assert "[violation] objects-once" in capsys.readouterr().out
    assert main(["replay", str(trace), "--world", str(world)]) == 1
    out = capsys.readouterr().out
    assert "[violation] objects-once" in out
    assert "replay: the recorded trace, checked again: 1 violation\n" in out


@pytest.mark.parametrize(
    ("option", "name", "what"),
    [
        ("--trace", "wk.jsonl", "an empty file that replay cannot use"),
        ("--timeline", "wk.html", "an empty page"),
    ],
)
def test_a_world_that_keeps_no_trace_refuses_an_output_drawn_from_it(
    option: str, name: str, what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused before the world runs, and nothing is written: an empty trace would fail replay.
    path = tmp_path / name
    assert main(["run", "walk-100k", "--seed", "2", option, str(path)]) == 2
    assert not path.exists()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "error: walk-100k keeps no trace (its setup says WorldSetup(trace=False); its checks run "
        f"live as it goes), so {option} {path} would be {what}; leave out {option}: run prints "
        "the verdict and the command that runs this world again\n"
    )
