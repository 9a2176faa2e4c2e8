"""The oracle: it finds what breaks the spec, names the rule, and stays quiet on the real code."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from sims import MUTANTS, Trace, check_trace, simulate, sweep
from sims.mutants._catalog import MUTANT_RULES
from sims.oracle._probes import PROBES, probe_lines, probe_totals, probe_worlds
from sims.runners._sweep import SeedSummary

from .oracle_edges import EDGES

#: For each mutant, the world in which the oracle must name the rule it broke: ``oracle-edges``
#: reaches every edge on purpose; the rest need the swarm's faults (``random``). The first seeds of
#: the world are tried in turn, so a change of scheduling that moves an edge to another seed does
#: not turn the test red by itself.
EDGE_MUTANTS = {
    "admission-backoff-flat",
    "backoff-jitter-wide",
    "begin-keeps-misses",
    "begin-margin",
    "begin-unmeasured",
    "claim-not-due",
    "commit-keeps-ledger",
    "counters-not-merged",
    "deferral-charges",
    "exhaustion-late",
    "join-other-subject",
    "join-widened",
    "memo-ignored",
    "miss-max-eleven",
    "miss-not-added",
    "omitted-cursor-cleared",
    "owner-reused",
    "payload-unchecked",
    "retry-limit-late",
    "spent-step-runs",
    "step-policy-widened",
    "step-reuse-allowed",
    "takeover-charge",
}
RANDOM_MUTANTS = {
    "commit-owner",
    "deferral-reported-as-error",
    "drive-budget-ignored",
    "due-by-id",
    "due-strict",
    "erasure-keeps-step-results",
    "lease-min-fifty",
    "memo-raw-text",
    "patch-owner",
    "record-step-owner",
    "renew-unguarded",
    "takeover-note",
}
MUTANT_WORLDS: dict[str, tuple[str, range]] = {
    **{name: (EDGES, range(1, 5)) for name in EDGE_MUTANTS},
    # 120 seeds: a stale pass's failed outcome (patch-owner's edge) is rare, about one seed in 40.
    **{name: ("random", range(0, 120)) for name in RANDOM_MUTANTS},
}


def test_there_are_at_least_twenty_mutants_each_with_a_rule_and_a_world() -> None:
    assert len(MUTANTS) >= 20
    assert set(MUTANT_RULES) == set(MUTANTS) == set(MUTANT_WORLDS)


@pytest.mark.parametrize("name", sorted(MUTANT_WORLDS))
def test_the_oracle_names_the_rule_each_mutant_breaks(name: str) -> None:
    scenario, seeds = MUTANT_WORLDS[name]
    rule = MUTANT_RULES[name]
    seen: list[str] = []
    for seed in seeds:
        violations = simulate(scenario, seed, database=MUTANTS[name]).report.violations
        if any(f.check.startswith(rule) for f in violations):
            return
        seen += [f.line() for f in violations[:2]]
    pytest.fail(f"mutant {name}: no {rule}* violation in {scenario} seeds {seeds}; saw {seen[:5]}")


def test_the_edges_world_is_clean_on_the_real_code_and_reaches_its_edges() -> None:
    simulation = simulate(EDGES, 1)
    assert simulation.report.ok, "\n".join(f.line() for f in simulation.report.violations)
    hit = dict(simulation.report.probes)
    for probe in ("takeover.exhausted", "admission.tenth-miss", "step.spent-narrower", "deferral"):
        assert hit.get(probe), probe


def test_the_random_sweep_hits_every_probe_in_at_least_5_percent_of_its_worlds() -> None:
    # A rule reached by one world in 200 is caught by one seed when it breaks: every edge the
    # oracle has a rule for must be met often enough that a single-rule bug on it is seen.
    report = sweep("random", range(200), jobs=2)
    totals = probe_totals(report.seeds)
    missed = sorted(name for name in PROBES if not totals[name])
    assert not missed, f"the random swarm over seeds 0..199 never hit: {missed}"
    worlds = probe_worlds(report.seeds)
    rare = {name: worlds[name] for name in PROBES if worlds[name] < 10}
    assert not rare, f"probes hit in fewer than 10 of 200 worlds: {rare}"
    lines = "\n".join(report.lines())
    assert f"probes hit: {len(PROBES)} of {len(PROBES)}" in lines
    assert "fewer than 5%" not in lines


def test_a_sweep_names_the_probes_its_worlds_reach_rarely() -> None:
    seeds = [SeedSummary(seed, (), (), (), 0, probes=(("deferral", 1),)) for seed in range(2)]
    seeds += [SeedSummary(seed, (), (), (), 0) for seed in range(2, 40)]
    lines = list(probe_lines(seeds))
    assert "  probes hit in fewer than 5% of 40 worlds: deferral in 2" not in lines
    seeds[2] = SeedSummary(2, (), (), (), 0, probes=(("step.memo", 3),))
    assert "  probes hit in fewer than 5% of 40 worlds: step.memo in 1" in list(probe_lines(seeds))


def _tampered(mutate: Any) -> list[str]:
    trace = simulate("late-begin", 1).outcome.trace
    events = copy.deepcopy(trace.events)
    mutate(events)
    again = Trace.from_lines(json.dumps(e) for e in events)
    return [f.check for f in check_trace(again).violations]


def test_a_store_reply_other_than_the_spec_s_is_a_violation() -> None:
    def charge_the_first_claim(events: list[dict[str, Any]]) -> None:
        claim = next(e for e in events if e["ev"] == "rpc.exec" and e["op"] == "claim")
        claim["result"]["run"]["attempts"] += 1

    assert "store-claim" in _tampered(charge_the_first_claim)


def test_a_kernel_write_other_than_the_spec_s_is_a_violation() -> None:
    def keep_a_count(events: list[dict[str, Any]]) -> None:
        commit = next(e for e in events if e["ev"] == "rpc.send" and e["op"] == "commit_pass")
        commit["args"][1]["counters"] = "{}"

    assert "pass-outcome" in _tampered(keep_a_count)


def test_a_reused_owner_is_a_violation_even_where_nothing_else_shows_it() -> None:
    def reuse(events: list[dict[str, Any]]) -> None:
        claims = [e for e in events if e["ev"] == "rpc.send" and e["op"] == "claim"]
        claims[1]["args"][1] = claims[0]["args"][1]

    assert "fresh-owner" in _tampered(reuse)


def _registration_findings(lease_ms: object, refused: str | None) -> list[str]:
    from sims.oracle._oracle import Oracle

    found: list[str] = []
    oracle = Oracle(lambda check, run, t, text: found.append(check))
    oracle.observe({"ev": "world.begin", "t": 0.0, "format": 4})
    event = {"drive": "cron", "module_id": "m", "job": "j", "retry": None, "lease_ms": lease_ms}
    if refused is not None:
        event["refused"] = refused
    oracle.observe({"ev": "job.register", "t": 1.0, **event})
    return found


def test_a_registration_is_held_to_the_lease_rule_both_ways() -> None:
    refusal = "lease_ms: is 99; a job's lease must be an integer from 100"
    assert _registration_findings(99, refusal) == []
    assert _registration_findings(100, None) == []
    assert _registration_findings(None, None) == []
    assert _registration_findings(99, None) == ["register-lease"]
    assert _registration_findings(100, refusal) == ["register-lease"]
    # A refusal for something else than the lease says nothing about the lease rule.
    assert _registration_findings(100, "name: is ''") == []
