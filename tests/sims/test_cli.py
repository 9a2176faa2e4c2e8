"""``python -m sims``: list, run, sweep and replay, as a person at a terminal uses them."""

from __future__ import annotations

from pathlib import Path

import pytest

from sims import SCENARIOS, Trace
from sims._cli import main


def test_list_names_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == list(SCENARIOS)


def test_run_late_begin_tells_the_double_run_and_writes_trace_and_timeline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace, timeline = tmp_path / "t.jsonl", tmp_path / "t.html"
    assert main(["run", "late-begin", "--trace", str(trace), "--timeline", str(timeline)]) == 0
    out = capsys.readouterr().out
    assert "fault: the reply of begin #4 is held 1250 ms" in out
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
    assert "replay with: python -m sims run random --seed 1" in out


def test_replay_reruns_the_recorded_world_byte_for_byte(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / "t.jsonl"
    assert main(["run", "crash-after-begin", "--seed", "4", "--trace", str(trace)]) == 0
    capsys.readouterr()
    assert main(["replay", str(trace)]) == 0
    out = capsys.readouterr().out
    assert f"replay: the new trace is byte-identical to {trace}" in out


def test_sweep_summarises_and_fails_on_a_violation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "late-claim", "--seeds", "1..4"]) == 0
    assert "sweep late-claim: 4 seeds in" in capsys.readouterr().out
    assert main(["sweep", "random", "--seeds", "0..40", "--mutant", "takeover-charge"]) == 1
    out = capsys.readouterr().out
    assert "--mutant takeover-charge" in out
    assert "[violation] attempts-charged" in out


def test_bad_arguments_are_refused_with_the_remedy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "nope"]) == 2
    assert "error: no scenario 'nope'; the scenarios are: late-begin" in capsys.readouterr().err
    assert main(["sweep", "random", "--seeds", "9..1"]) == 2
    assert "run backwards" in capsys.readouterr().err
    assert main(["run", "random", "--plan", "open('x')"]) == 2
    assert "calls something other than" in capsys.readouterr().err
