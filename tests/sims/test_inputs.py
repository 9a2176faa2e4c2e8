"""Inputs that vary: a scenario's ``inputs`` strategy, drawn by explore with its plans and shrunk
with them; ``--inputs`` gives them back to ``run``; remembered findings keep them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sims import simulate
from sims.search._explore import SearchReport, search
from sims.search._findings import findings, recall

WORLDS = Path(__file__).parent / "worlds"
FILE = str(WORLDS / "varied_inputs.py")


def _explore(name: str, **options: Any) -> SearchReport:
    # A world budget alone, so the answer is the same on any machine; the default's 300 worlds.
    return search(f"{FILE}:{name}", max_seconds=None, **options)


def test_a_bug_of_inputs_alone_is_found_shrunk_and_reproduced_by_its_command() -> None:
    report = _explore("shared-address")
    found = report.found
    assert found is not None
    assert report.reproduced
    assert not found.plan.faults
    assert found.inputs is not None
    assert json.loads(found.inputs) == ["1 Elm St", "1 Elm St"]
    assert """--inputs '["1 Elm St", "1 Elm St"]'""" in found.command()
    assert any("on the inputs" in line for line in report.lines())
    # The printed command, in a fresh process, fails as the finding did.
    words = ["-m", "sims", "run", f"{FILE}:shared-address", "--inputs", found.inputs]
    done = subprocess.run([sys.executable, *words], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "2 orders ['1 Elm St', '1 Elm St'] got 1 parcels in run" in done.stdout


def test_a_bug_that_needs_an_input_and_a_fault_is_found_with_both_shrunk() -> None:
    report = _explore("large-order-approval", fresh_process=False)
    found = report.found
    assert found is not None
    assert len(found.plan.faults) == 1
    assert found.inputs == "100"  # the smallest order that sends an approval
    assert found.simulation.report.violations
    assert report.worlds <= 300


@pytest.mark.parametrize("name", ["one-per-order", "large-order-approval-once"])
def test_the_fixed_jobs_are_clean_under_the_default_budget(name: str) -> None:
    report = _explore(name, fresh_process=False)
    assert report.found is None
    assert not report.failed


def test_a_remembered_finding_keeps_its_inputs_and_is_recalled(tmp_path: Path) -> None:
    first = _explore("shared-address", fresh_process=False, findings=tmp_path)
    assert first.found is not None
    (kept,), _ = findings(tmp_path)
    assert kept.inputs == first.found.inputs
    again = _explore("shared-address", fresh_process=False, findings=tmp_path)
    assert again.recalled
    assert again.found is not None
    assert again.found.inputs == kept.inputs
    assert again.worlds < first.worlds


def test_a_finding_written_before_inputs_varied_still_reads(tmp_path: Path) -> None:
    (tmp_path / "x.plan").write_text(
        "scenario: s\nseed: 1\nmutant: -\nplan: FaultPlan(faults=())\n"
    )
    (found,), unreadable = findings(tmp_path)
    assert found.inputs is None
    assert not unreadable
    assert recall(tmp_path, "s", 1, None) is None  # by its key's file name, which this is not


def test_a_world_given_no_inputs_runs_on_the_simplest_and_records_them() -> None:
    simulation = simulate(f"{FILE}:shared-address", 1)
    assert simulation.inputs == '["1 Elm St"]'
    begin = next(simulation.outcome.trace.of("world.begin"))
    assert begin["inputs"] == ["1 Elm St"]
    assert simulation.ok
    given = simulate(f"{FILE}:shared-address", 1, inputs=("1 Elm St",))  # a tuple reads as JSON
    assert given.outcome.trace.to_bytes() == simulation.outcome.trace.to_bytes()


def test_a_scenario_without_inputs_records_none() -> None:
    simulation = simulate(str(WORLDS / "email_twice.py") + ":email-once", 1)
    assert "inputs" not in next(simulation.outcome.trace.of("world.begin"))
    assert "--inputs" not in simulation.replay_command
    with pytest.raises(ValueError, match="takes no inputs, and was given 3"):
        simulate(str(WORLDS / "email_twice.py") + ":email-once", 1, inputs=3)


def test_inputs_that_are_not_json_are_refused_with_the_remedy() -> None:
    with pytest.raises(ValueError, match=r"are not JSON .*draw them from strategies of those"):
        simulate(f"{FILE}:shared-address", 1, inputs=[float("nan")])
    with pytest.raises(ValueError, match=r"inputs of scenario .*not-json, \{"):
        simulate(f"{FILE}:not-json", 1)
    words = ["-m", "sims", "run", f"{FILE}:shared-address", "--inputs", "{orders: 2}"]
    done = subprocess.run([sys.executable, *words], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "--inputs '{orders: 2}' is not JSON" in done.stderr
