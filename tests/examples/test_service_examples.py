"""The examples that model providers as services: each buggy variant fails under the plan its
file's docstring gives, on several seeds, and each fix is clean under the plans given for it.

The commands are read from the docstrings themselves, so a command a user pastes is the command
these tests ran.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from sims import (
    FaultPlan,
    ServiceOutage,
    Simulation,
    Trace,
    find_scenario,
    plan_from_text,
    simulate,
)
from sims.cli._main import main

ROOT = Path(__file__).resolve().parents[2]
SEEDS = (1, 2, 3, 4, 5)

#: Each example's scenarios: what its check says of a buggy one under its documented plan, or
#: None for a fix, which must be clean under every plan documented for it.
EXPECTED: dict[str, dict[str, str | None]] = {
    "payment_provider.py": {
        "pay-fallback": "the order's run (shop/pay/default) ended done and it was paid 2 times",
        "pay-undo-and-retry": (
            "the order's run (shop/pay/default) ended done and it was paid 0 times"
        ),
        "pay-fresh-key": "the order's run (shop/pay/default) ended done and it was paid 2 times",
        "pay-once": None,
    },
    "mailer.py": {
        "receipt-no-key": "mailer.send with order='o-17' took effect 2 times",
        "receipt-once": None,
    },
    "crm.py": {
        "sync-find-then-create": "ada@example.com has 2 contacts",
        "sync-upsert": None,
    },
}

_COMMAND = re.compile(r'python -m sims run \S+ --plan\s+"[^"]+"')


def documented(name: str) -> list[tuple[list[str], str, FaultPlan]]:
    """Each ``python -m sims run FILE:NAME --plan "..."`` command of an example's docstring: its
    words, its scenario's name and its plan."""
    docstring = ast.get_docstring(ast.parse((ROOT / "examples" / name).read_text()))
    assert docstring is not None, f"{name} has no docstring"
    found = []
    for command in _COMMAND.findall(docstring):
        words = shlex.split(command)
        assert words[4].startswith(f"examples/{name}:"), command
        found.append((words, words[4].partition(":")[2], plan_from_text(words[6])))
    return found


CASES = [
    pytest.param(name, scenario, plan, id=f"{scenario}-{index}")
    for name in EXPECTED
    for index, (_, scenario, plan) in enumerate(documented(name))
]


@pytest.fixture(autouse=True)
def _at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("name", EXPECTED)
def test_every_scenario_of_an_example_has_a_command_to_paste(name: str) -> None:
    scenarios = {ref.name for ref in map(find_scenario, _refs(name))}
    assert scenarios == set(EXPECTED[name])
    assert {scenario for _, scenario, _ in documented(name)} == scenarios


def _refs(name: str) -> list[str]:
    return [f"examples/{name}:{scenario}" for scenario in EXPECTED[name]]


@pytest.mark.parametrize(("name", "scenario", "plan"), CASES)
def test_a_bug_fails_under_its_plan_on_every_seed_and_a_fix_holds(
    name: str, scenario: str, plan: FaultPlan
) -> None:
    finding = EXPECTED[name][scenario]
    for seed in SEEDS:
        simulation = simulate(f"examples/{name}:{scenario}", seed, plan=plan)
        assert not simulation.outcome.unfired, (seed, "the plan missed the world")
        if finding is None:
            assert simulation.ok, (seed, simulation.report.violations)
        else:
            violations = simulation.report.violations
            # The user's check says so: the bug is the handler's, not the store's.
            users = simulation.report.user_checks
            assert any(finding in f.text and f.check in users for f in violations), (
                seed,
                [f.text for f in violations],
            )


@pytest.mark.parametrize("name", EXPECTED)
def test_the_commands_run_as_pasted(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    for words, scenario, _ in documented(name):
        code = main(words[3:])
        out = capsys.readouterr().out
        finding = EXPECTED[name][scenario]
        assert code == (0 if finding is None else 1), out
        if finding is not None:
            assert finding in out
            assert "the spec held" in out  # the user's check failed; the spec's did not


@pytest.mark.parametrize("name", EXPECTED)
def test_without_faults_every_variant_looks_fine(name: str) -> None:
    # That is the trap: the bug shows only when the outside world misbehaves.
    for reference in _refs(name):
        simulation = simulate(reference, 1)
        assert simulation.ok, (reference, simulation.report.violations)


# -- what happened inside: the mechanism each docstring tells ----------------------------------


def _plan(name: str, scenario: str) -> FaultPlan:
    return next(plan for _, named, plan in documented(name) if named == scenario)


def _exec(simulation: Simulation, op: str) -> list[dict[str, Any]]:
    return [e for e in simulation.facts.of("svc.exec") if e["op"] == op]


def test_a_timeout_is_no_refusal_the_charge_ran_and_its_answer_came_late() -> None:
    plan = _plan("payment_provider.py", "pay-fallback")
    broken = simulate("examples/payment_provider.py:pay-fallback", 1, plan=plan)
    (charged,) = _exec(broken, "card.charge")
    (transferred,) = _exec(broken, "bank.transfer")
    assert charged["effect"]
    assert transferred["effect"]
    assert charged["t"] < transferred["t"]  # the card had charged before the bank was asked
    assert broken.facts.count("svc.timeout") == 1
    assert broken.facts.count("svc.late") == 1  # the card's answer came, to nobody


def test_the_refund_undoes_the_charge_and_the_key_answers_with_the_refunded_one() -> None:
    plan = _plan("payment_provider.py", "pay-undo-and-retry")
    broken = simulate("examples/payment_provider.py:pay-undo-and-retry", 1, plan=plan)
    assert [(e["effect"], e.get("repeat", False)) for e in _exec(broken, "card.charge")] == [
        (True, False),
        (False, True),
    ]
    (refunded,) = _exec(broken, "card.refund")
    assert refunded["result"] == {"refunded": True}
    assert broken.facts.only_run("shop").status == "done"  # and the job thinks it paid


def test_the_fix_asks_after_a_timeout_and_charges_no_more() -> None:
    plan = _plan("payment_provider.py", "pay-fallback")
    # The lookup lags the charge by a lag each seed draws: seed 5's is short enough to see it.
    held = simulate("examples/payment_provider.py:pay-once", 5, plan=plan)
    assert held.ok
    assert [e["effect"] for e in _exec(held, "card.charge")] == [True]
    (asked,) = _exec(held, "card.find")
    assert asked["result"]["order"] == "o-17"  # the charge was there: nothing more to do
    assert not _exec(held, "card.refund")


def test_the_fix_charges_again_with_the_same_key_when_the_lookup_lags() -> None:
    # Seed 1's lookup lags past the charge (13.7 s): it answers None, the fresh read would have
    # found the charge, and the second charge, with the same key, is answered from it.
    plan = _plan("payment_provider.py", "pay-fallback")
    held = simulate("examples/payment_provider.py:pay-once", 1, plan=plan)
    assert held.ok
    (asked,) = _exec(held, "card.find")
    assert asked["result"] is None
    assert asked["stale"]["fresh"]["order"] == "o-17"
    assert asked["lag_ms"] > 5_000.0
    assert [(e["effect"], e.get("repeat", False)) for e in _exec(held, "card.charge")] == [
        (True, False),
        (False, True),
    ]
    # The bug with a fresh key for each try pays twice on the very same world.
    broken = simulate("examples/payment_provider.py:pay-fresh-key", 1, plan=plan)
    assert [e["effect"] for e in _exec(broken, "card.charge")] == [True, True]
    assert [e["args"]["key"] for e in broken.facts.of("svc.send") if e["op"] == "card.charge"] == [
        "o-17/pay/1",
        "o-17/pay/2",
    ]


def test_the_fix_waits_out_an_outage_and_pays_once() -> None:
    outage = next(
        plan
        for _, scenario, plan in documented("payment_provider.py")
        if scenario == "pay-once" and "ServiceOutage" in repr(plan)
    )
    held = simulate("examples/payment_provider.py:pay-once", 1, plan=outage)
    assert held.ok
    refused = [e for e in _exec(held, "card.charge") if "refused" in e]
    assert refused, "the outage refused no charge"
    assert [e["effect"] for e in _exec(held, "card.charge") if "refused" not in e] == [True]


def test_the_mailers_key_answers_the_second_body() -> None:
    held = simulate("examples/mailer.py:receipt-once", 1, plan=_plan("mailer.py", "receipt-no-key"))
    sends = _exec(held, "mailer.send")
    assert [(e["effect"], e.get("repeat", False)) for e in sends] == [(True, False), (False, True)]


def test_the_stale_pass_creates_after_the_takeover_and_the_upsert_absorbs_it() -> None:
    broken = simulate(
        "examples/crm.py:sync-find-then-create",
        1,
        plan=_plan("crm.py", "sync-find-then-create"),
    )
    creates = _exec(broken, "crm.create")
    assert [e["drive"] for e in creates] == ["alarm", "cron"]
    (released,) = broken.facts.of("fault.release")
    assert (released["by"], released["by_op"]) == ("alarm", "crm.create")
    held = simulate("examples/crm.py:sync-upsert", 1, plan=_plan("crm.py", "sync-upsert"))
    upserts = _exec(held, "crm.upsert")
    assert [(e["drive"], e["result"]["created"]) for e in upserts] == [
        ("alarm", True),
        ("cron", False),
    ]


def test_the_crm_check_sees_a_duplicate_an_upsert_made() -> None:
    # The ready-made at_most_once("crm.create", ...) would not: no create was called.
    scenario = find_scenario("examples/crm.py:sync-upsert")
    (check,) = scenario.checks
    trace = simulate(scenario.ref, 1).outcome.trace
    (made,) = trace.of("svc.exec")
    doubled = Trace(events=[*trace.events, {**made, "drive": "alarm", "t": made["t"] + 1.0}])
    assert list(check(trace)) == []
    (finding,) = check(doubled)
    assert str(finding.text).startswith("ada@example.com has 2 contacts, made by crm.upsert of")


def test_a_provider_down_past_the_runs_attempts_fails_it_unpaid_which_is_no_finding() -> None:
    # What explore first found on pay-once, before the check allowed it: the run gives up.
    outage = FaultPlan((ServiceOutage(service="card", from_ms=0.0, to_ms=30_000.0),))
    simulation = simulate("examples/payment_provider.py:pay-once", 1, plan=outage)
    assert simulation.facts.only_run("shop").status == "failed"
    assert not [e for e in _exec(simulation, "card.charge") if e["effect"]]
    assert simulation.ok, simulation.report.violations


_EXPLORE = re.compile(r"python -m sims explore (\S+)((?: --examples \d+)?)")


def explored(name: str) -> list[tuple[str, str]]:
    """Each ``python -m sims explore`` command of an example's docstring: its scenario reference
    and its options."""
    docstring = ast.get_docstring(ast.parse((ROOT / "examples" / name).read_text()))
    return _EXPLORE.findall(docstring or "")


@pytest.mark.parametrize("name", EXPECTED)
def test_explore_finds_each_bug_in_one_fault_and_nothing_in_the_fix(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = explored(name)
    assert {reference.partition(":")[2] for reference, _ in commands} >= {
        scenario for scenario, finding in EXPECTED[name].items() if finding is None
    }
    for reference, _ in commands:
        finding = EXPECTED[name][reference.partition(":")[2]]
        if finding is None:
            # The docstring's budget is 3000 worlds; a test spends fewer.
            assert main(["explore", reference, "--budget", "100"]) == 0
            assert "no check failed in 100 worlds" in capsys.readouterr().out
        else:
            assert main(["explore", reference]) == 1
            out = capsys.readouterr().out
            assert "the smallest failing plan has 1 fault" in out
            assert finding in out
