"""The kit can fail: each planted bug is caught, shrunk to a few operations, and reproduced by the
history the kit prints."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sims.conformance import (
    DEFAULT_EXAMPLES,
    LocalTarget,
    ReferenceStore,
    replay_history,
    run_conformance,
)
from sims.conformance._boundaries import RULES

from .conformance_planted import PLANTED

PLANTED_SCRIPT = Path(__file__).with_name("conformance_planted.py")
SEEDS = range(1, 11)
#: Planted bugs that also go through a real subprocess target on every seed, as a user's
#: adapter does (the rest go through the same wire's JSON in process, which costs no launch).
THROUGH_A_PROCESS = ("claim-ignores-lease",)


def test_there_are_planted_bugs_to_catch() -> None:
    assert len(PLANTED) >= 12


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_every_planted_bug_is_caught_at_the_default_examples_on_every_seed(bug: str) -> None:
    missed = []
    for seed in SEEDS:
        target = LocalTarget(ReferenceStore(database=PLANTED[bug]), name=bug)
        report = run_conformance(target, examples=DEFAULT_EXAMPLES, seed=seed, shrink=False)
        assert report.failure is None, report.failure
        if report.difference is None:
            missed.append(seed)
    assert missed == []


@pytest.mark.parametrize("bug", THROUGH_A_PROCESS)
def test_a_planted_bug_behind_a_command_is_caught_on_every_seed(bug: str) -> None:
    command = f"{sys.executable} {PLANTED_SCRIPT} {bug}"
    missed = [
        seed
        for seed in SEEDS
        if run_conformance(command, examples=DEFAULT_EXAMPLES, seed=seed, shrink=False).ok
    ]
    assert missed == []


def test_each_boundary_rule_is_exercised_and_reported() -> None:
    report = run_conformance(LocalTarget(ReferenceStore()), examples=DEFAULT_EXAMPLES, seed=1)
    assert report.ok
    assert sorted(report.exercised) == sorted(RULES)
    printed = "\n".join(report.lines())
    assert "boundary rules exercised" in printed
    assert f"claim-inside-lease x{report.exercised['claim-inside-lease']}" in printed


# What some bugs must be caught on: the operation whose reply or tables first differ, and at most
# how many steps the shrunk history may keep (the bug's own setup and the operation itself).
EXPECTED = {
    "claim-ignores-lease": ("claim", 3),
    "claim-due-edge": ("claim", 3),
    "begin-margin-rounded": ("begin", 3),
    "miss-never-fails": ("miss", 21),
    "commit-keeps-ledger": ("commit_pass", 5),
}


@pytest.mark.parametrize("bug", sorted(EXPECTED))
def test_a_planted_bug_is_caught_and_shrunk(bug: str) -> None:
    target = LocalTarget(ReferenceStore(database=PLANTED[bug]), name=bug)
    report = run_conformance(target, examples=DEFAULT_EXAMPLES, seed=11)
    op, most_steps = EXPECTED[bug]
    assert report.difference is not None, f"{bug} was not caught in {report.histories} histories"
    assert report.difference.op == op, report.difference.line()
    assert report.history is not None
    assert len(report.history) <= most_steps, report.history
    # The printed history is the reproduction: it differs again, on the same step.
    again = replay_history(
        report.history, target=LocalTarget(ReferenceStore(database=PLANTED[bug]))
    )
    assert again.difference == report.difference


def test_a_command_target_is_caught_and_the_printed_command_reproduces_it(
    tmp_path: Path,
) -> None:
    command = f"{sys.executable} {PLANTED_SCRIPT} commit-keeps-ledger"
    report = run_conformance(command, examples=300, seed=11)
    assert report.difference is not None
    assert report.difference.op == "commit_pass"
    printed = "\n".join(report.lines())
    assert report.command() in printed
    assert "def test_conformance_history() -> None:" in printed
    # The command as printed, run in a shell: it replays the history and exits 1 on the difference.
    replayed = subprocess.run(
        report.command().replace("python", sys.executable, 1),
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    )
    assert replayed.returncode == 1, replayed.stderr
    assert report.difference.line() in replayed.stdout
    # The pasted test fails the same way.
    (tmp_path / "test_pasted.py").write_text(report.test_source())
    pasted = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert pasted.returncode == 1, pasted.stdout
    assert report.difference.line() in pasted.stdout


def test_the_reference_agrees_with_itself() -> None:
    report = run_conformance(f"{sys.executable} -m sims.conformance", examples=60, seed=3)
    assert report.ok, report.lines()
    assert report.histories >= 60
    assert report.operations > report.histories


def test_a_difference_names_its_rule_shows_its_rows_and_keeps_no_noise() -> None:
    bug = "claim-ignores-lease"
    target = LocalTarget(ReferenceStore(database=PLANTED[bug]), name=bug)
    report = run_conformance(target, examples=DEFAULT_EXAMPLES, seed=2)
    difference = report.difference
    assert difference is not None
    assert re.fullmatch(
        r"the run is leased to (o\d\d) until 12:00:\d\d\.\d{3}Z, so a claim by (?!\1)o\d\d at "
        r"12:00:\d\d\.\d{3}Z must return null",
        difference.rule,
    ), difference.rule
    (row,) = difference.rows
    assert json.loads(row)["lease_owner"] is not None
    assert difference.reference == '{"ok":true,"result":null}'
    assert difference.target.startswith('{"ok":true,"result":{"run":')
    printed = "\n".join(report.lines())
    assert f"  the rule: {difference.rule}\n  the rows it read" in printed
    # Shrunk to the start, the holder's claim and the rival's, with nothing else in them.
    assert report.history is not None
    assert [step["op"] for step in report.history] == ["start_or_join", "claim", "claim"]
    started = report.history[0]["args"]["row"]
    assert (started["payload"], started["subject_id"]) == ("{}", None)
