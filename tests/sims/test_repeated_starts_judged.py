"""The runs a start made again are judged together, by their run key.

A start whose reply is lost is started again 500 ms later; when the first run has already ended
by then, the second start makes a second run of the same key (module, job, instance). A job that
keys its effect by the order makes it once over both runs and is right; one that keys it by the
run's id makes it twice, and the checks must say so over the key, not pass each run alone.
"""

from __future__ import annotations

from pathlib import Path

from sims import DropLeg, FaultPlan, once_per_done_run, simulate

ROOT = Path(__file__).resolve().parents[2]
WORLDS = Path(__file__).parent / "worlds" / "starts_late.py"
#: The cron's first start runs, its reply is lost, and the start again after that run ended
#: makes a second run of the same key.
START_AGAIN = FaultPlan((DropLeg(drive="cron", operation="start_or_join", nth=1, leg="reply"),))


def test_pay_once_pays_its_order_once_over_the_two_runs_of_its_key() -> None:
    simulation = simulate(
        f"{ROOT / 'examples' / 'payment_provider.py'}:pay-once", 1, plan=START_AGAIN
    )
    # Two runs of one key, both done: the second's charge was answered from the order's key.
    runs = simulation.outcome.runs["shop"]
    assert [(run.module_id, run.job, run.instance, run.status) for run in runs] == [
        ("shop", "pay", "default", "done")
    ] * 2
    assert simulation.report.ok, simulation.report.violations


def test_a_charge_keyed_by_the_run_is_caught_over_its_key_and_one_by_the_order_is_not() -> None:
    check = once_per_done_run("card.charge")
    by_run = simulate(f"{WORLDS}:charge-by-run", 1, plan=START_AGAIN, keep_trace=True)
    first, second = (run.id for run in by_run.outcome.runs["shop"])
    (finding,) = check(by_run.outcome.trace)
    assert finding.text.startswith(
        f"key shop/pay/default (run {first[-6:]} done, run {second[-6:]} done) took card.charge "
        "2 times: "
    )
    assert finding.run == second
    by_order = simulate(f"{WORLDS}:charge-by-order", 1, plan=START_AGAIN, keep_trace=True)
    assert len(by_order.outcome.runs["shop"]) == 2
    assert check(by_order.outcome.trace) == []
