"""The same seed and code give a byte-identical trace, in any process, under any hash seed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from sims import SCENARIOS, Trace, run_world, simulate

ROOT = Path(__file__).resolve().parents[2]


def _trace_in_subprocess(tmp_path: Path, name: str, seed: int, hash_seed: str) -> bytes:
    out = tmp_path / f"{name}-{seed}-{hash_seed}.jsonl"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    subprocess.run(
        [sys.executable, "-m", "sims", "run", name, "--seed", str(seed), "--trace", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


@pytest.mark.parametrize(("name", "seed"), [("late-begin", 1), ("random", 7), ("random", 31)])
def test_two_processes_with_different_hash_seeds_write_the_same_bytes(
    tmp_path: Path, name: str, seed: int
) -> None:
    first = _trace_in_subprocess(tmp_path, name, seed, "1")
    second = _trace_in_subprocess(tmp_path, name, seed, "4242")
    assert first == second
    assert first == simulate(name, seed).outcome.trace.to_bytes()


def test_a_different_seed_gives_a_different_world() -> None:
    assert (
        simulate("random", 7).outcome.trace.digest() != simulate("random", 8).outcome.trace.digest()
    )


def test_a_written_trace_reads_back_event_for_event(tmp_path: Path) -> None:
    trace = simulate("late-claim", 2).outcome.trace
    trace.write(tmp_path / "t.jsonl")
    again = Trace.read(tmp_path / "t.jsonl")
    assert again.events == trace.events
    assert again.digest() == trace.digest()


def test_a_world_on_sqlite_files_writes_the_same_trace_as_one_in_memory(tmp_path: Path) -> None:
    scenario = SCENARIOS["lease-expiry-between-steps"]
    in_memory = run_world(5, scenario.setup(5), scenario.drive)
    on_disk = run_world(5, attrs.evolve(scenario.setup(5), directory=tmp_path), scenario.drive)
    assert on_disk.trace.to_bytes() == in_memory.trace.to_bytes()
    assert (tmp_path / "scope-1.sqlite3").exists()
