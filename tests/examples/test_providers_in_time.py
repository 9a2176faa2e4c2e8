"""The examples of providers as they behave: a lookup that lags its writes (the payment provider),
a rate limit and batches taken in part (the newsletter), work a provider does later and the
webhooks it sends (the card that captures and calls back).

Each buggy variant fails under the plan its docstring gives, on every seed, and its fix holds
under the same plan; the trace shows the mechanism the docstring tells; and ``explore`` finds each
bug on its own, while each fix stays clean over a few hundred worlds (the docstrings' 3000 are
measured by hand).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sims import (
    DelayCallback,
    DropCallback,
    FaultPlan,
    PartialBatch,
    RateLimited,
    RepeatCallback,
    Simulation,
    StaleRead,
    plan_from_text,
    search,
    service_states,
    simulate,
)
from sims.cli._main import main

from .test_service_examples import documented
from .test_services_docs import FAULT_PLANS, SIMULATING, commands, section

_PROVIDERS = "Faults of a provider's own behaviour"
PROVIDER_FAULTS = (
    StaleRead,
    RateLimited,
    PartialBatch,
    DropCallback,
    DelayCallback,
    RepeatCallback,
)

ROOT = Path(__file__).resolve().parents[2]
SEEDS = (1, 2, 3, 4, 5)

PAYMENT = "examples/payment_provider.py"
NEWSLETTER = "examples/newsletter.py"
WEBHOOKS = "examples/webhooks.py"

#: The charge's answer held past the client's 5 s timeout, and the lookup after it lagging 30 s.
HELD_AND_STALE = (
    "FaultPlan((DelayLeg(drive='cron', operation='card.charge', nth=1, leg='reply', ms=6000.0), "
    "StaleRead(operation='card.find', nth=1)))"
)
#: The provider takes two of the first batch's four recipients.
PARTIAL = "FaultPlan((PartialBatch(operation='mail.send_batch', nth=1, taken=2),))"
#: The provider turns the first request away, and every other for a second.
LIMITED = "FaultPlan((RateLimited(service='mail', nth=1, retry_after_ms=1000.0),))"
#: The first webhook sent again 10 s later; its answer lost (the provider sends it again).
REPEATED = "FaultPlan((RepeatCallback(service='card', nth=1, after_ms=10000.0),))"
ANSWER_LOST = "FaultPlan((DropCallback(service='card', nth=1, leg='reply'),))"

#: (buggy, fix, plan, what the buggy variant's check says): each bug under its plan.
CASES = [
    (
        f"{PAYMENT}:pay-fresh-key",
        f"{PAYMENT}:pay-once",
        HELD_AND_STALE,
        "the order's run (shop/pay/default) ended done and it was paid 2 times",
    ),
    (
        f"{NEWSLETTER}:newsletter-assume-whole",
        f"{NEWSLETTER}:newsletter",
        PARTIAL,
        "reader-03@example.com got the 2024-06 newsletter 0 times, not once (its run ended done)",
    ),
    (
        f"{NEWSLETTER}:newsletter-no-wait",
        f"{NEWSLETTER}:newsletter",
        LIMITED,
        "reader-01@example.com got the 2024-06 newsletter 0 times, not once (its run ended done)",
    ),
    (
        f"{WEBHOOKS}:credit-by-run",
        f"{WEBHOOKS}:credit-keyed",
        REPEATED,
        "order o-17 was paid and credited 2 times (its credit run done)",
    ),
    (
        f"{WEBHOOKS}:credit-by-run",
        f"{WEBHOOKS}:credit-keyed",
        ANSWER_LOST,
        "order o-17 was paid and credited 2 times (its credit run done)",
    ),
]


@pytest.fixture(autouse=True)
def _at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _docstring(reference: str) -> str:
    return " ".join((ROOT / reference.partition(":")[0]).read_text().split())


def _documented_plans(reference: str) -> list[FaultPlan]:
    """The plans of the ``python -m sims run`` commands the file's docstring gives for the
    scenario ``reference`` names."""
    path, _, scenario = reference.partition(":")
    return [plan for _, named, plan in documented(Path(path).name) if named == scenario]


@pytest.mark.parametrize(
    ("buggy", "fix", "plan", "finding"),
    CASES,
    ids=[f"{case[0].partition(':')[2]}-{index}" for index, case in enumerate(CASES)],
)
def test_the_bug_fails_under_its_plan_on_every_seed_and_the_fix_holds(
    buggy: str, fix: str, plan: str, finding: str
) -> None:
    # The plan is the one the docstring gives for each, as a user pastes it.
    for reference in (buggy, fix):
        assert plan_from_text(plan) in _documented_plans(reference), reference
    for seed in SEEDS:
        broken = simulate(buggy, seed, plan=plan_from_text(plan))
        assert not broken.outcome.unfired, (seed, "the plan missed the world")
        texts = [f.text for f in broken.report.violations]
        assert any(finding in text for text in texts), (seed, texts)
        # The user's check says so: the bug is the job's, not the store's.
        assert {f.check for f in broken.report.violations} <= set(broken.report.user_checks)
        held = simulate(fix, seed, plan=plan_from_text(plan))
        assert not held.outcome.unfired, (seed, "the plan missed the fix's world")
        assert held.ok, (seed, held.report.violations)


@pytest.mark.parametrize(
    "reference",
    [
        f"{PAYMENT}:pay-fresh-key",
        f"{NEWSLETTER}:newsletter-assume-whole",
        f"{NEWSLETTER}:newsletter-no-wait",
        f"{NEWSLETTER}:newsletter",
        f"{WEBHOOKS}:credit-by-run",
        f"{WEBHOOKS}:credit-keyed",
    ],
)
def test_without_faults_every_variant_looks_fine_and_is_a_function_of_its_seed(
    reference: str,
) -> None:
    # That is the trap: the bug shows only when the provider behaves as providers do.
    first = simulate(reference, 1)
    assert first.ok, first.report.violations
    again = simulate(reference, 1)
    assert again.outcome.trace.events == first.outcome.trace.events


def test_a_plan_of_provider_faults_gives_the_same_world_twice() -> None:
    for reference, plan in [
        (f"{PAYMENT}:pay-fresh-key", HELD_AND_STALE),
        (f"{NEWSLETTER}:newsletter", PARTIAL),
        (f"{NEWSLETTER}:newsletter", LIMITED),
        (f"{WEBHOOKS}:credit-by-run", ANSWER_LOST),
    ]:
        first = simulate(reference, 2, plan=plan_from_text(plan))
        again = simulate(reference, 2, plan=plan_from_text(plan))
        assert again.outcome.trace.events == first.outcome.trace.events, reference


# -- what happened inside: the mechanism each docstring tells ----------------------------------


def _events(simulation: Simulation, kind: str, op: str | None = None) -> list[dict[str, Any]]:
    return [e for e in simulation.outcome.trace.of(kind) if op is None or e.get("op") == op]


def test_the_lookup_lags_the_charge_and_a_fresh_key_charges_again() -> None:
    broken = simulate(f"{PAYMENT}:pay-fresh-key", 1, plan=plan_from_text(HELD_AND_STALE))
    (looked,) = _events(broken, "svc.exec", "card.find")
    # The lookup saw the provider as it stood 30 s before: before the charge it looked for.
    assert looked["lag_ms"] == 30_000.0
    assert looked["result"] is None
    assert looked["stale"]["missed"] == 1
    assert looked["stale"]["fresh"]["key"] == "o-17/pay/1"
    charges = _events(broken, "svc.exec", "card.charge")
    assert [e["effect"] for e in charges] == [True, True]
    assert [e["result"]["key"] for e in charges] == ["o-17/pay/1", "o-17/pay/2"]
    # The same world with the fix: the same key again, answered from it.
    held = simulate(f"{PAYMENT}:pay-once", 1, plan=plan_from_text(HELD_AND_STALE))
    assert [
        (e["effect"], e.get("repeat", False)) for e in _events(held, "svc.exec", "card.charge")
    ] == [
        (True, False),
        (False, True),
    ]


def test_a_partial_batch_is_said_and_the_fix_sends_the_rest_under_a_key_of_its_own() -> None:
    broken = simulate(f"{NEWSLETTER}:newsletter-assume-whole", 1, plan=plan_from_text(PARTIAL))
    first = _events(broken, "svc.exec", "mail.send_batch")[0]
    assert first["batch"] == {"taken": 2, "of": 4}
    assert len(_events(broken, "svc.send", "mail.send_batch")) == 3  # one call a batch: no rest
    outbox = service_states(broken.outcome.trace)["mail"]["outbox"]
    assert len(outbox) == 8
    held = simulate(f"{NEWSLETTER}:newsletter", 1, plan=plan_from_text(PARTIAL))
    sent = _events(held, "svc.send", "mail.send_batch")
    assert [(e["key"], len(e["args"]["to"])) for e in sent] == [
        ("2024-06/batch-1/1", 4),
        ("2024-06/batch-1/2", 2),  # the two the provider did not take
        ("2024-06/batch-2/1", 4),
        ("2024-06/batch-3/1", 2),
    ]
    outbox = service_states(held.outcome.trace)["mail"]["outbox"]
    assert sorted(mail["to"] for mail in outbox) == [
        f"reader-{n:02}@example.com" for n in range(1, 11)
    ]


def test_a_rate_limit_is_waited_out_by_the_fix_and_tried_at_once_by_the_bug() -> None:
    held = simulate(f"{NEWSLETTER}:newsletter", 1, plan=plan_from_text(LIMITED))
    calls = _events(held, "svc.exec", "mail.send_batch")
    refused, answered = calls[0], calls[1]
    assert refused["retry_after_ms"] == 1_000.0
    assert "refused" not in answered
    # It slept the retry-after on the world's clock, then was let in.
    assert answered["t"] >= refused["t"] + 1_000.0
    assert len(calls) == 4
    broken = simulate(f"{NEWSLETTER}:newsletter-no-wait", 1, plan=plan_from_text(LIMITED))
    calls = _events(broken, "svc.exec", "mail.send_batch")
    # Four tries a batch, all within the second the provider turned requests away, then skipped.
    assert all("refused" in e for e in calls)
    assert len(calls) == 12
    assert calls[-1]["t"] < calls[0]["t"] + 1_000.0
    assert service_states(broken.outcome.trace)["mail"]["outbox"] == []


def test_the_provider_captures_later_and_calls_back_and_a_second_delivery_credits_again() -> None:
    clean = simulate(f"{WEBHOOKS}:credit-by-run", 1)
    (later_of_o17, _) = _events(clean, "svc.later")
    (charged, _) = _events(clean, "svc.exec", "card.charge")
    assert later_of_o17["work"] == "capture"
    assert later_of_o17["due_ms"] == pytest.approx(charged["t"] + 3_500.0)
    owns = _events(clean, "svc.own")
    assert [e["work"] for e in owns] == ["capture", "capture"]
    assert [e["payload"]["order"] for e in _events(clean, "svc.callback")] == ["o-17", "o-18"]
    assert len(_events(clean, "svc.callback.ran")) == 2
    # Without faults the webhook's start and the poll's join one credit run per order.
    credits = service_states(clean.outcome.trace)["wallet"]["credits"]
    assert sorted(c["order"] for c in credits) == ["o-17", "o-18"]

    broken = simulate(f"{WEBHOOKS}:credit-by-run", 1, plan=plan_from_text(REPEATED))
    assert len(_events(broken, "svc.callback.repeat")) == 1
    credits = service_states(broken.outcome.trace)["wallet"]["credits"]
    assert sorted(c["order"] for c in credits) == ["o-17", "o-17", "o-18"]
    runs = broken.outcome.runs["shop"]
    assert [r.instance for r in runs if r.job == "credit"].count("o-17") == 2  # two runs, one key
    # The fix makes the same two runs; the wallet answers the second credit from its key.
    held = simulate(f"{WEBHOOKS}:credit-keyed", 1, plan=plan_from_text(REPEATED))
    credited = _events(held, "svc.exec", "wallet.credit")
    assert [e.get("repeat", False) for e in credited].count(True) == 1
    credits = service_states(held.outcome.trace)["wallet"]["credits"]
    assert sorted(c["order"] for c in credits) == ["o-17", "o-18"]


def test_a_lost_answer_to_a_webhook_is_delivered_again_on_the_providers_schedule() -> None:
    broken = simulate(f"{WEBHOOKS}:credit-by-run", 1, plan=plan_from_text(ANSWER_LOST))
    (dropped,) = _events(broken, "svc.callback.drop")
    assert dropped["leg"] == "reply"
    ran = [e for e in _events(broken, "svc.callback.ran") if e["cb"] == 1]
    assert [e["try"] for e in ran] == [1, 2]  # it ran, its answer was lost, it ran again
    assert ran[1]["t"] - ran[0]["t"] >= 1_000.0  # the provider's first retry, 1 s later


# -- explore finds each bug, and nothing in the fixes ------------------------------------------


@pytest.mark.parametrize(
    ("buggy", "finding"),
    [
        (f"{PAYMENT}:pay-fresh-key", "paid 2 times"),
        (f"{NEWSLETTER}:newsletter-assume-whole", "newsletter 0 times"),
        (f"{NEWSLETTER}:newsletter-no-wait", "newsletter 0 times"),
        (f"{WEBHOOKS}:credit-by-run", "credited 2 times"),
    ],
)
def test_explore_finds_each_bug_by_default(buggy: str, finding: str) -> None:
    report = search(buggy)
    assert report.found is not None, "\n".join(report.lines())
    assert report.reproduced is True
    assert len(report.found.plan.faults) == 1
    texts = [f.text for f in report.found.simulation.report.violations]
    assert any(finding in text for text in texts), texts


@pytest.mark.parametrize(
    ("fix", "worlds"),
    [
        (f"{PAYMENT}:pay-once", 300),
        (f"{NEWSLETTER}:newsletter", 300),
        (f"{WEBHOOKS}:credit-keyed", 200),
    ],
)
def test_explore_finds_nothing_in_each_fix(fix: str, worlds: int) -> None:
    # The docstrings' 3000 worlds are measured by hand; a test spends fewer.
    report = search(fix, max_worlds=worlds, max_seconds=None)
    assert not report.failed, "\n".join(report.lines())
    assert report.worlds == worlds


def test_each_explore_command_of_the_docstrings_names_a_scenario_of_its_file() -> None:
    for reference, scenarios in [
        (PAYMENT, ["pay-fresh-key", "pay-once"]),
        (NEWSLETTER, ["newsletter-assume-whole", "newsletter-no-wait", "newsletter"]),
        (WEBHOOKS, ["credit-by-run", "credit-keyed"]),
    ]:
        text = _docstring(reference)
        for name in scenarios:
            assert f"python -m sims explore {reference}:{name}" in text, (reference, name)


# -- the pages' words --------------------------------------------------------------------------

#: Each buggy scenario the fault-plans page shows, and its fix.
FIXES = {
    "pay-fresh-key": "pay-once",
    "newsletter-assume-whole": "newsletter",
    "newsletter-no-wait": "newsletter",
    "credit-by-run": "credit-keyed",
}


@pytest.mark.parametrize(
    "words",
    commands(section(FAULT_PLANS, "Faults of a provider's own behaviour")),
    ids=lambda words: words[4],
)
def test_every_command_of_the_provider_faults_section_fails_and_its_fix_holds(
    words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(words[3:]) == 1
    assert "the spec held" in capsys.readouterr().out  # the example's own check failed
    path, _, scenario = words[4].partition(":")
    plan = plan_from_text(words[words.index("--plan") + 1])
    assert simulate(f"{path}:{FIXES[scenario]}", 1, plan=plan).ok


def test_the_provider_faults_section_shows_every_buggy_variant() -> None:
    shown = {words[4].partition(":")[2] for words in commands(section(FAULT_PLANS, _PROVIDERS))}
    assert shown == set(FIXES)


def test_the_simulating_page_names_the_new_api_and_the_faults() -> None:
    page = section(SIMULATING, "Providers as they behave")
    for name in (
        "now_ms",
        "later",
        "call_back",
        "add_endpoint",
        "lag_ms",
        "batch_max",
        "rate_limit",
        "retry_after_ms",
        "callback_retries_ms",
        *(fault.__name__ for fault in PROVIDER_FAULTS),
    ):
        assert name in page, name
    for fault in PROVIDER_FAULTS:
        assert f"| `{fault.__name__}` |" in section(FAULT_PLANS, _PROVIDERS), fault.__name__
