"""Worlds on files: a world runs on a file-backed host, with its output gate on, in a folder of its
own that is gone afterwards, and tells the same story, byte for byte, as in memory."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest

from scopehost import ScopeDatabase
from scopehost._identity import recorded_scope
from sims import SCENARIOS, FaultPlan, WorldSetup, run_world, simulate
from sims.faults._plan import Evict
from sims.runners._run import ON_FILES_ENV

ROOT = Path(__file__).resolve().parents[2]

#: Worlds of several kinds: a late BEGIN, a lease that expires between steps, a swarm world that
#: draws files itself (with evictions). A swarm world put on files by the flag does more than in
#: memory: its operators and the power touch its files (see the test after this one).
WORLDS = [("late-begin", 1), ("lease-expiry-between-steps", 5), ("random", 17)]


class _Opened:
    """A database factory that notes each file a scope is opened on, and whose scope it says it
    is at that moment (None: a file the host has not yet marked as the scope's)."""

    def __init__(self) -> None:
        self.files: list[tuple[str, Path, str | None]] = []

    def __call__(self, connection: sqlite3.Connection, scope_id: str, **kw: Any) -> ScopeDatabase:
        (path,) = [row[2] for row in connection.execute("PRAGMA database_list") if row[1] == "main"]
        self.files.append((scope_id, Path(path), recorded_scope(connection)))
        return ScopeDatabase(connection, scope_id, **kw)


@pytest.fixture
def own_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder where a world's own temporary folder is made, so a test sees it come and go."""
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.parametrize(("name", "seed"), WORLDS)
def test_a_world_on_files_gives_the_verdict_and_trace_it_gives_in_memory(
    own_temp: Path, monkeypatch: pytest.MonkeyPatch, name: str, seed: int
) -> None:
    in_memory = simulate(name, seed)
    seen: list[list[str]] = []

    def look(event: dict[str, Any]) -> None:
        if not seen:
            seen.append(sorted(os.listdir(own_temp)))

    monkeypatch.setenv(ON_FILES_ENV, "1")
    on_files = simulate(name, seed, observe=look)
    # It ran in a folder of its own, and the folder is gone.
    (folder,) = seen[0]
    assert folder.startswith("sims-world-")
    assert os.listdir(own_temp) == []
    assert on_files.ok == in_memory.ok
    assert on_files.report == in_memory.report
    assert on_files.outcome.trace.to_bytes() == in_memory.outcome.trace.to_bytes()
    assert on_files.outcome.runs == in_memory.outcome.runs
    assert on_files.outcome.effects == in_memory.outcome.effects


def test_a_swarm_world_on_files_also_touches_its_files_and_holds(
    own_temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_memory = simulate("random", 31)
    monkeypatch.setenv(ON_FILES_ENV, "1")
    on_files = simulate("random", 31)
    assert in_memory.ok, in_memory.report
    assert on_files.ok, on_files.report
    touched = {event["ev"] for event in on_files.outcome.trace.events if event["ev"][:5] == "file."}
    assert touched == {"file.power", "file.outside", "file.copied", "file.written"}
    assert not any(event["ev"][:5] == "file." for event in in_memory.outcome.trace.events)
    assert os.listdir(own_temp) == []


def test_an_evicted_scope_on_files_reopens_from_its_file(own_temp: Path) -> None:
    scenario = SCENARIOS["late-begin"]
    opened = _Opened()
    setup = scenario.setup(1)
    evictions = tuple(
        Evict(scope=scope, at_ms=at) for scope in setup.scopes for at in (50.0, 900.0)
    )
    plan = FaultPlan((*setup.plan.faults, *evictions))
    in_memory = run_world(1, attrs.evolve(setup, plan=plan), scenario.drive)
    outcome = run_world(
        1, attrs.evolve(setup, plan=plan, on_files=True, database=opened), scenario.drive
    )
    assert outcome.trace.to_bytes() == in_memory.trace.to_bytes()
    evicted = list(outcome.trace.of("fault.evict"))
    assert len(evicted) == len(evictions)
    assert any(event["live"] for event in evicted)
    assert outcome.report.ok
    for scope in setup.scopes:
        files = [(path, owner) for scope_id, path, owner in opened.files if scope_id == scope]
        # Opened once new (its identity not yet written), then again after each eviction, from
        # the same file, which now says whose it is.
        assert len(files) >= 2
        assert {path for path, _ in files} == {files[0][0]}
        assert files[0][0].name == f"{scope}.sqlite3"
        assert files[0][1] is None
        assert all(owner == scope for _, owner in files[1:])
    folder = opened.files[0][1].parent
    assert folder.parent == own_temp
    assert not folder.exists()


def test_the_folder_goes_when_the_world_fails(own_temp: Path) -> None:
    scenario = SCENARIOS["late-begin"]

    async def broken(world: Any) -> None:
        await scenario.drive(world)
        raise RuntimeError("the scenario broke")

    with pytest.raises(BaseExceptionGroup) as caught:
        run_world(1, attrs.evolve(scenario.setup(1), on_files=True), broken)
    assert caught.group_contains(RuntimeError, match="the scenario broke", depth=None)
    assert os.listdir(own_temp) == []


def test_on_files_and_a_directory_are_refused_together(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pass one"):
        WorldSetup(on_files=True, directory=tmp_path)
    with pytest.raises(ValueError, match="on_files"):
        WorldSetup(on_files="yes")  # type: ignore[arg-type]


def test_the_swarm_draws_worlds_on_files_in_some_seeds() -> None:
    setup = SCENARIOS["random"].setup
    drawn = [seed for seed in range(50) if setup(seed).on_files]
    assert 1 <= len(drawn) <= 10
    assert drawn == [17, 18, 25]  # from a stream of their own: a change here changes no other draw


def _cli_trace(tmp_path: Path, seed: int, hash_seed: str, *flags: str) -> bytes:
    out = tmp_path / f"{seed}-{hash_seed}-{len(flags)}.jsonl"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    env.pop(ON_FILES_ENV, None)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sims",
            "run",
            "random",
            "--seed",
            str(seed),
            "--trace",
            str(out),
            *flags,
        ],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


@pytest.mark.parametrize("seed", [18, 7])
def test_a_world_on_files_writes_the_same_bytes_in_two_processes(tmp_path: Path, seed: int) -> None:
    first = _cli_trace(tmp_path, seed, "1", "--on-files")
    second = _cli_trace(tmp_path, seed, "4242", "--on-files")
    assert first == second
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ON_FILES_ENV, "1")
        assert first == simulate("random", seed).outcome.trace.to_bytes()
    assert b"sims-world-" not in first
    assert tempfile.gettempdir().encode() not in first


def test_sweep_on_files_is_refused_on_a_dask_cluster() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sims",
            "sweep",
            "random",
            "--seeds",
            "0..1",
            "--on-files",
            "--scheduler",
            "tcp://127.0.0.1:1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "--on-files" in done.stderr
