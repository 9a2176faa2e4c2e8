"""``replay`` runs only the Python the user named: a trace is data, and the world file it names runs
only when ``--world`` names that file or a file with the content hash the trace recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sims.scenarios._registry
from sims import Trace, simulate
from sims.cli._main import main
from sims.scenarios._registry import file_sha256

#: A world file that leaves a mark when it is imported: what a hostile trace would make replay run.
MARKING_WORLD = """
from pathlib import Path

import sims

Path(__file__).with_name("imported.mark").write_text("ran")


@sims.scenario("quiet")
async def quiet(world: sims.World) -> None:
    pass
"""


def _written(folder: Path) -> tuple[Path, Path]:
    """A user's world file and a trace of it, written from ``folder``."""
    world = folder / "marking.py"
    world.write_text(MARKING_WORLD)
    trace = folder / "t.jsonl"
    simulate(f"{world}:quiet", 1).outcome.trace.write(trace)
    (folder / "imported.mark").unlink()
    return world, trace


def test_a_users_trace_records_its_world_files_hash_and_says_format_5(tmp_path: Path) -> None:
    world, trace = _written(tmp_path)
    begin = Trace.read(trace).events[0]
    assert begin["world_sha256"] == file_sha256(world)
    assert begin["format"] == 5


def test_a_built_in_worlds_trace_says_format_5_without_a_hash() -> None:
    begin = simulate("late-begin", 1).outcome.trace.events[0]
    assert begin["format"] == 5
    assert "world_sha256" not in begin


def test_replay_of_a_trace_naming_a_file_refuses_without_running_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world, trace = _written(tmp_path)
    assert main(["replay", str(trace)]) == 2
    assert capsys.readouterr().err == (
        f"error: {trace} names a world file of its own, {world}, and replay runs no Python a "
        f"trace names unless you name it: read that file, then replay {trace} --world {world}\n"
    )
    assert not (tmp_path / "imported.mark").exists()


def test_a_one_line_trace_naming_a_file_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The probe the issue names: a hand-written trace of one line that names a file.
    world, _ = _written(tmp_path)
    trace = tmp_path / "evil.jsonl"
    line = {"ev": "world.begin", "t": 0, "seed": 1, "plan": "FaultPlan(())"}
    trace.write_text(json.dumps({**line, "scenario": f"{world}:quiet"}) + "\n")
    assert main(["replay", str(trace)]) == 2
    assert "replay runs no Python a trace names unless you name it" in capsys.readouterr().err
    assert not (tmp_path / "imported.mark").exists()


def test_replay_runs_the_named_file_and_a_copy_with_the_recorded_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world, trace = _written(tmp_path)
    assert main(["replay", str(trace), "--world", str(world)]) == 0
    assert f"replay: the new trace is byte-identical to {trace}" in capsys.readouterr().out
    copy = tmp_path / "elsewhere" / "copied.py"
    copy.parent.mkdir()
    copy.write_bytes(world.read_bytes())
    assert main(["replay", str(trace), "--world", str(copy)]) == 0
    assert f"replay: the new trace is byte-identical to {trace}" in capsys.readouterr().out


def test_replay_refuses_another_file_whose_hash_differs_without_running_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world, trace = _written(tmp_path)
    other = tmp_path / "other.py"
    other.write_text(MARKING_WORLD + "# changed\n")
    assert main(["replay", str(trace), "--world", str(other)]) == 2
    assert capsys.readouterr().err == (
        f"error: --world {other} is not the world file {trace} was written from: its content's "
        f"sha256 is {file_sha256(other)}, the trace records {file_sha256(world)}; name the file "
        f"the trace names, {world}, or a copy of it as it was\n"
    )
    assert not (tmp_path / "imported.mark").exists()


def test_the_named_file_changed_since_is_replayed_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    world, trace = _written(tmp_path)
    recorded = file_sha256(world)
    world.write_text(MARKING_WORLD + "# changed\n")
    # A replay is a new process, which loads the file as it is now.
    monkeypatch.setattr(sims.scenarios._registry, "_FILES", {})
    monkeypatch.setattr(sims.scenarios._registry, "_SHA256", {})
    assert main(["replay", str(trace), "--world", str(world)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"replay: warning: {world} has changed since the trace was written (its sha256 is "
        f"{file_sha256(world)}, the trace records {recorded}); replaying it as it is now\n"
    )
    # The world itself is the same; only the hash it records differs.
    assert f"replay: the new trace is DIFFERENT from {trace}" in captured.out
    assert "first difference at line 1" in captured.out


def test_a_trace_without_a_hash_replays_only_the_file_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world, trace = _written(tmp_path)
    events = Trace.read(trace).events
    del events[0]["world_sha256"]
    events[0]["format"] = 2
    Trace(events=events).write(trace)
    copy = tmp_path / "copied.py"
    copy.write_bytes(world.read_bytes())
    assert main(["replay", str(trace), "--world", str(copy)]) == 2
    assert capsys.readouterr().err == (
        f"error: {trace} records no hash of its world file (a trace of format 2), so only the "
        f"file it names can be replayed: --world {world}\n"
    )
    assert not (tmp_path / "imported.mark").exists()
    assert main(["replay", str(trace), "--world", str(world)]) == 1  # it now records the hash
    assert f"replay: the new trace is DIFFERENT from {trace}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("world", "told"),
    [
        ("missing.py", "no file {world} (--world); name the world file the trace was written from"),
        (".", "--world {world} is a folder; name the world file, a .py file"),
    ],
)
def test_a_world_that_is_no_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], world: str, told: str
) -> None:
    _, trace = _written(tmp_path)
    assert main(["replay", str(trace), "--world", world]) == 2
    assert capsys.readouterr().err == f"error: {told.format(world=world)}\n"


def test_a_built_in_worlds_trace_needs_no_world_and_refuses_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    simulate("late-claim", 1).outcome.trace.write(trace)
    assert main(["replay", str(trace), "--world", str(trace)]) == 2
    assert capsys.readouterr().err == (
        f"error: {trace} is a world of the built-in scenario late-claim, which runs no file of "
        "yours; drop --world (it names the world file of a trace of your own world)\n"
    )
    assert main(["replay", str(trace)]) == 0
