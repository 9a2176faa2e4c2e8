"""Every scenario comes out as its documentation says, and holds every invariant."""

from __future__ import annotations

import pytest

from driver import JOB_LEASE_EXPIRED_NOTE
from sims import SCENARIOS, Simulation, simulate

QUICK = [name for name in SCENARIOS if name != "walk-100k"]


def _explain(simulation: Simulation) -> str:
    lines = [*simulation.mismatches, *(f.line() for f in simulation.report.violations)]
    return f"{simulation.replay_command}\n" + "\n".join(lines)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", QUICK)
def test_scenario_comes_out_as_documented(name: str, seed: int) -> None:
    simulation = simulate(name, seed)
    assert simulation.ok, _explain(simulation)


def test_late_begin_is_the_one_documented_double_run() -> None:
    simulation = simulate("late-begin", 1)
    double_runs = [f for f in simulation.report.findings if f.check == "double-run"]
    assert [f.verdict for f in double_runs] == ["explained"]
    assert "Late BEGIN reply" in double_runs[0].text
    invocations = list(simulation.facts.of("handler.invoke"))
    assert [e["drive"] for e in invocations] == ["alarm", "cron"]
    # Both handlers ran at once: the late one started before the rival's pass ended.
    late_start = invocations[1]["t"]
    rival_end = next(e["t"] for e in simulation.facts.of("handler.end") if e["drive"] == "alarm")
    assert late_start < rival_end


def test_late_begin_with_one_attempt_fails_the_run_without_a_second_invocation() -> None:
    simulation = simulate("late-begin-once", 1)
    run = simulation.facts.only_run()
    assert (run.status, run.last_error, run.attempts) == ("failed", JOB_LEASE_EXPIRED_NOTE, 1)
    assert [e["drive"] for e in simulation.facts.of("handler.invoke")] == ["cron"]


def test_nothing_else_double_runs() -> None:
    for name in QUICK:
        if name in ("late-begin", "lease-expiry-between-steps", "random"):
            continue
        simulation = simulate(name, 1)
        assert simulation.report.explained_of("double-run") == 0, name


def test_walk_100k_continues_where_it_stopped() -> None:
    simulation = simulate("walk-100k", 1)
    assert simulation.ok, _explain(simulation)
    run = simulation.facts.only_run()
    assert run.counters == {"walked": 100_000}
    assert simulation.facts.count("handler.invoke") >= 1_000


def test_an_unknown_scenario_is_refused_with_the_list() -> None:
    with pytest.raises(ValueError, match=r"^no scenario 'nope'; the scenarios are: late-begin, "):
        simulate("nope", 1)
