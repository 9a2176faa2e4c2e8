"""The oracle: it finds what breaks the spec, names the rule, and stays quiet on the real code."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from sims import MUTANTS, Trace, check_trace, simulate, sweep
from sims._mutants import MUTANT_RULES
from sims._probes import PROBES, probe_totals

from .oracle_edges import EDGES

#: For each mutant, a world in which the oracle must name the rule it broke.
MUTANT_WORLDS: dict[str, tuple[str, int]] = {
    "admission-backoff-flat": (EDGES, 1),
    "backoff-jitter-wide": (EDGES, 1),
    "begin-keeps-misses": (EDGES, 1),
    "begin-margin": (EDGES, 1),
    "begin-unmeasured": (EDGES, 1),
    "claim-not-due": (EDGES, 1),
    "commit-keeps-ledger": (EDGES, 1),
    "commit-owner": ("random", 50),
    "counters-not-merged": (EDGES, 1),
    "deferral-charges": (EDGES, 1),
    "due-by-id": (EDGES, 2),
    "exhaustion-late": (EDGES, 1),
    "join-other-subject": (EDGES, 1),
    "join-widened": (EDGES, 1),
    "memo-ignored": (EDGES, 1),
    "miss-max-eleven": (EDGES, 1),
    "miss-not-added": (EDGES, 1),
    "omitted-cursor-cleared": (EDGES, 1),
    "owner-reused": (EDGES, 1),
    "patch-owner": ("random", 31),
    "payload-unchecked": (EDGES, 1),
    "record-step-owner": ("random", 3),
    "renew-unguarded": ("random", 3),
    "retry-limit-late": (EDGES, 1),
    "spent-step-runs": (EDGES, 1),
    "step-policy-widened": (EDGES, 1),
    "step-reuse-allowed": (EDGES, 1),
    "takeover-charge": (EDGES, 1),
    "takeover-note": ("random", 20),
}

#: Probes the random swarm does not reach yet: each is a gap in the worlds (the swarm is being
#: grown to reach them). A probe missing from this list that a sweep does not hit fails the test.
NOT_YET_REACHED: frozenset[str] = frozenset({"payload.cursor-refused", "drive.second-pass"})


def test_there_are_at_least_twenty_mutants_each_with_a_rule_and_a_world() -> None:
    assert len(MUTANTS) >= 20
    assert set(MUTANT_RULES) == set(MUTANTS) == set(MUTANT_WORLDS)


@pytest.mark.parametrize("name", sorted(MUTANT_WORLDS))
def test_the_oracle_names_the_rule_each_mutant_breaks(name: str) -> None:
    scenario, seed = MUTANT_WORLDS[name]
    simulation = simulate(scenario, seed, database=MUTANTS[name])
    rule = MUTANT_RULES[name]
    named = [f for f in simulation.report.violations if f.check.startswith(rule)]
    assert named, (
        f"mutant {name}: no {rule}* violation in {scenario} seed {seed}; found "
        + "; ".join(f.line() for f in simulation.report.violations[:5])
    )


def test_the_edges_world_is_clean_on_the_real_code_and_reaches_its_edges() -> None:
    simulation = simulate(EDGES, 1)
    assert simulation.report.ok, "\n".join(f.line() for f in simulation.report.violations)
    hit = dict(simulation.report.probes)
    for probe in ("takeover.exhausted", "admission.tenth-miss", "step.spent-narrower", "deferral"):
        assert hit.get(probe), probe


def test_the_random_sweep_hits_every_probe() -> None:
    report = sweep("random", range(200), jobs=2)
    totals = probe_totals(report.seeds)
    missed = {name for name in PROBES if not totals[name]}
    assert missed <= NOT_YET_REACHED, f"never hit: {sorted(missed - NOT_YET_REACHED)}"
    lines = "\n".join(report.lines())
    assert f"probes hit: {len(PROBES) - len(missed)} of {len(PROBES)}" in lines


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
