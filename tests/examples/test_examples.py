"""The examples run as a user runs them: only public names, from their own files."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import pytest

import sims
from sims import (
    DelayLeg,
    DropLeg,
    FaultPlan,
    WorldFailed,
    check_worlds,
    explore_plans,
    find_scenario,
    load_file,
    simulate,
)
from sims.cli._main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if p.name != "__init__.py")


@pytest.fixture(autouse=True)
def _at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_imports_only_public_names_of_sims(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sims"):
            assert node.module == "sims", f"{path.name} imports from {node.module}"
            assert {alias.name for alias in node.names} <= set(sims.__all__)
        if isinstance(node, ast.Import):
            assert all(not a.name.startswith(("sims.", "driver", "scopehost")) for a in node.names)
    assert load_file(path), f"{path.name} defines no scenario"


def test_the_nightly_invoice_holds_over_seeds() -> None:
    assert check_worlds("examples/nightly_invoice.py:nightly-invoice", range(6)) == 6
    simulation = simulate("examples/nightly_invoice.py:nightly-invoice", 1)
    assert simulation.ok
    assert simulation.facts.count("rpc.drop") == 1  # the planned dropped reply did fire
    assert {e["drive"] for e in simulation.facts.of("drive.tick")} == {"cron", "alarm"}


def test_the_users_check_can_fail() -> None:
    # Two runs' worth of invoices from one run: the check must say so.
    scenario = find_scenario("examples/nightly_invoice.py:nightly-invoice")
    (check,) = scenario.checks
    trace = simulate(scenario.ref, 1).outcome.trace
    doubled = sims.Trace(events=[*trace.events, *trace.of("rpc.send", "rpc.exec")])
    assert list(check(trace)) == []
    assert "invoice was posted 2 times, not once" in next(iter(check(doubled)))


def test_the_simulator_finds_and_shrinks_the_double_charge_and_the_fix_holds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reference = "examples/double_charge.py:double-charge"
    assert simulate(reference, 1).ok, "with no faults the bug does not show"
    assert main(["explore", reference]) == 1
    out = capsys.readouterr().out
    assert "the smallest failing plan has 1 fault" in out
    assert "[violation] charged-once" in out
    command = out.split("as a command:\n")[1].splitlines()[0].strip()
    words = shlex.split(command)
    assert words[:5] == ["python", "-m", "sims", "run", reference]
    assert main(words[3:]) == 1
    replayed = capsys.readouterr().out
    assert "charged the card 2 times" in replayed
    # The code it prints fails the same way.
    code = out.split("as code:\n")[1]
    with pytest.raises(AssertionError, match="charged-once"):
        exec("\n".join(line.removeprefix("  ") for line in code.splitlines()), {})
    # The idempotent body survives the very plan that broke the buggy one.
    plan = sims.plan_from_text(words[words.index("--plan") + 1])
    assert simulate("examples/double_charge.py:charge-once", 1, plan=plan).ok


def test_check_worlds_fails_with_the_story_and_the_replay_command() -> None:
    found = explore_plans("examples/double_charge.py:double-charge")
    assert found is not None
    with pytest.raises(WorldFailed) as failed:
        check_worlds("examples/double_charge.py:double-charge", [1], plan=found.plan)
    message = str(failed.value)
    assert "[violation] charged-once" in message
    assert "story:\n" in message
    assert message.splitlines()[-1] == f"replay with: {found.command()}"


#: The plans that break the look-then-act "fixes" (each file's docstring gives them).
CHARGE_RACE = FaultPlan(
    (DelayLeg(drive="cron", operation="invoke", nth=1, leg="reply", ms=1500.0),)
)
INVOICE_RACE = FaultPlan(
    (
        DropLeg(drive="cron", operation="claim", nth=1, leg="reply"),
        DelayLeg(drive="alarm", operation="invoke", nth=1, leg="reply", ms=2100.0),
    )
)


@pytest.mark.parametrize(
    ("racy", "safe", "plan", "finding"),
    [
        (
            "examples/double_charge.py:charge-look-first",
            "examples/double_charge.py:charge-once",
            CHARGE_RACE,
            "charged the card 2 times",
        ),
        (
            "examples/nightly_invoice.py:nightly-invoice-look-first",
            "examples/nightly_invoice.py:nightly-invoice",
            INVOICE_RACE,
            "invoice was posted 2 times, not once",
        ),
    ],
)
def test_looking_before_acting_in_a_second_call_races_and_one_atomic_call_does_not(
    racy: str, safe: str, plan: FaultPlan, finding: str
) -> None:
    # Without the plan, the racy "fix" looks fine: that is the trap.
    assert simulate(racy, 1).ok
    for seed in (1, 2, 3):
        broken = simulate(racy, seed, plan=plan)
        assert any(finding in f.text for f in broken.report.violations), seed
        held = simulate(safe, seed, plan=plan)
        assert held.ok, held.report.violations
        assert not held.outcome.unfired, "the plan struck the safe world too"
    # The safe body heard that its key was already there: the race happened, and was absorbed.
    sent = {
        (e["link"], e["seq"]): e["args"][0]
        for e in held.facts.of("rpc.send")
        if e["op"] == "invoke"
    }
    answers = [
        e.get("result")
        for e in held.facts.of("rpc.exec")
        if e["op"] == "invoke" and sent[(e["link"], e["seq"])] == "record_once"
    ]
    assert answers.count(True) == 1
    assert False in answers


NEVER = FaultPlan((DelayLeg(drive="cron", operation="begin", nth=99, leg="reply", ms=5000.0),))


def test_a_given_plan_whose_fault_never_fires_fails_the_test() -> None:
    # The test says it tests a held BEGIN reply; a world that never sends a 99th BEGIN did not.
    with pytest.raises(WorldFailed) as failed:
        check_worlds("examples/double_charge.py:double-charge", range(2), plan=NEVER)
    lines = str(failed.value).splitlines()
    assert lines[0].startswith("examples/double_charge.py:double-charge, seed 0: 0 violations")
    assert lines[1] == (
        "  NOT AS DOCUMENTED: 1 fault of the given plan never fired, so the world did not test "
        f"it: {NEVER.faults[0]!r} (cron made 1 begin call)"
    )
    # A world that declares its faults may miss (its plans are drawn) lets the test pass.
    assert check_worlds("random", [1], plan=NEVER) == 1


pytest_plugins = ["pytester"]


def test_the_pytest_fixture_fails_a_test_whose_given_fault_never_fires(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_world=f"""
        def test_charge(sims_worlds):
            from sims import FaultPlan, DelayLeg
            plan = FaultPlan((DelayLeg(drive="cron", operation="begin", nth=99, leg="reply",
                                       ms=5000.0),))
            sims_worlds({str(ROOT / "examples/double_charge.py")!r} + ":double-charge",
                        seeds=range(2), plan=plan)
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*WorldFailed: *double-charge, seed 0: 0 violations, 1 mismatch*",
            "*1 fault of the given plan never fired, so the world did not test it: "
            "DelayLeg(drive='cron', operation='begin', nth=99, leg='reply', ms=5000.0) "
            "(cron made 1 begin call)",
        ]
    )


def test_the_pytest_fixture_runs_worlds_and_takes_seeds_from_the_command_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_world=f"""
        def test_invoice(sims_worlds):
            assert sims_worlds({str(ROOT / "examples/nightly_invoice.py")!r} + ":nightly-invoice",
                               seeds=range(2)) == 2

        def test_charge(sims_worlds):
            from sims import FaultPlan, DropLeg
            plan = FaultPlan((DropLeg(drive="cron", operation="record_step", nth=1,
                                      leg="request"),))
            sims_worlds({str(ROOT / "examples/double_charge.py")!r} + ":double-charge",
                        seeds=[1], plan=plan)
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*WorldFailed: *double-charge, seed 1: 1 violation, 0 mismatches*",
            "*violation] charged-once at *",
            "*story:*",
            "*replay with: python -m sims run *double_charge.py:double-charge --seed 1 --plan *",
        ]
    )
    again = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--sims-seeds", "4..6", "-k", "invoice"
    )
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["*assert 3 == 2*"])
    backwards = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--sims-seeds", "6..4")
    assert backwards.ret == pytest.ExitCode.USAGE_ERROR
    backwards.stderr.fnmatch_lines(
        ["ERROR: --sims-seeds: seeds '6..4' run backwards; write the smaller number first"]
    )


def test_explore_says_so_when_no_plan_breaks_the_fixed_handler(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explore", "examples/double_charge.py:charge-once", "--budget", "40"]) == 0
    out = capsys.readouterr().out
    # A clean result says how much was searched and which windows it entered.
    assert out.startswith(
        "explore examples/double_charge.py:charge-once, seed 1: no check failed in 40 worlds in "
    )
    assert "(the world budget ran out). What was searched:\n" in out
    assert "  windows entered: " in out
    assert "× a takeover" in out
    assert "× HoldLeg" in out
