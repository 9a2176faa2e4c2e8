"""Providers as they behave: a service's clock and its own work, reads that lag, rate limits,
partial batches and callbacks, the faults that strike each, and the search that aims them.

The world is ``worlds/providers.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sims import (
    DelayCallback,
    DropCallback,
    FaultPlan,
    Operation,
    PartialBatch,
    RateLimited,
    RepeatCallback,
    Service,
    ServiceOutage,
    StaleRead,
    call_back,
    later,
    now_ms,
    simulate,
)
from sims.faults._check import PlanError
from sims.faults._plan import NO_FAULTS
from sims.search._shape import world_shape

WORLD = f"{Path(__file__).parent / 'worlds' / 'providers.py'}:provider"


def _events(plan: FaultPlan = NO_FAULTS, world: str = WORLD, seed: int = 1) -> list[Any]:
    simulation = simulate(world, seed, plan=plan, keep_trace=True)
    assert simulation.report.ok, simulation.report.violations
    return list(simulation.outcome.trace.events)


def _of(events: list[Any], *kinds: str) -> list[Any]:
    return [event for event in events if event["ev"] in kinds]


def _final(events: list[Any]) -> dict[str, Any]:
    (end,) = _of(events, "world.end")
    services: dict[str, Any] = end["services"]
    return services


# -- time at a service ----------------------------------------------------------------------------


def test_an_operation_reads_the_clock_and_its_own_work_runs_later() -> None:
    events = _events()
    (charged,) = [e for e in _of(events, "svc.exec") if e["op"] == "card.charge"]
    scheduled = _of(events, "svc.later")[0]
    ran = _of(events, "svc.own")[0]
    assert _final(events)["card"]["charges"][0]["at"] == charged["t"]
    assert scheduled["due_ms"] == charged["t"] + 3_500
    assert ran["t"] == scheduled["due_ms"]
    assert ran["effect"] is True
    assert _final(events)["card"]["charges"][0]["captured"] is True


def test_an_outage_holds_the_services_own_work_until_it_ends() -> None:
    events = _events(FaultPlan((ServiceOutage(service="card", from_ms=3_000.0, to_ms=9_000.0),)))
    (held,) = _of(events, "svc.own.held")
    ran = _of(events, "svc.own")[0]
    assert held["until_ms"] == 9_000.0
    assert ran["t"] == 9_000.0


def test_settle_waits_for_work_due_before_its_horizon_and_the_end_runs_the_rest() -> None:
    events = _events()
    (closing,) = _of(events, "world.closing")
    capture, forget = _of(events, "svc.own")
    # The capture (3.5 s) calls back and starts a run: settle waited for it, and the drives
    # drove that run. The key forgotten a day later ran after the scenario returned.
    assert capture["work"] == "capture"
    assert capture["t"] < closing["t"]
    assert forget["work"] == "forget key"
    assert forget["t"] > closing["t"]
    assert forget["t"] < _of(events, "world.end")[0]["t"] + 1


def test_a_declined_operation_schedules_nothing_and_calls_nobody() -> None:
    events = _events(world=WORLD.replace(":provider", ":declined"))
    assert _of(events, "svc.later", "svc.own", "svc.callback") == []


def test_service_code_outside_an_operation_is_refused_with_the_remedy() -> None:
    with pytest.raises(RuntimeError, match=r"later\(\) is for a service's own code"):
        later(1.0, lambda state: None, name="x")
    with pytest.raises(RuntimeError, match=r"call_back\(\) is for a service's own code"):
        call_back("hooks", {})
    with pytest.raises(RuntimeError, match=r"now_ms\(\) reads a simulated world's clock"):
        now_ms()


# -- reads that lag --------------------------------------------------------------------------------


def test_a_lagging_read_that_missed_a_write_says_so() -> None:
    stale = FaultPlan((StaleRead(operation="card.search", nth=1),))
    events = _events(stale)
    (read,) = [e for e in _of(events, "svc.exec") if e["op"] == "card.search"]
    assert read["lag_ms"] == 2_000.0
    assert read["result"] == []
    assert read["stale"] == {"missed": 1, "fresh": ["o-1"]}


def test_a_read_within_its_lag_that_saw_every_write_is_not_stale() -> None:
    events = _events(FaultPlan((StaleRead(operation="card.search", nth=1, lag_ms=0.0),)))
    (read,) = [e for e in _of(events, "svc.exec") if e["op"] == "card.search"]
    assert read["result"] == ["o-1"]
    assert "stale" not in read


def test_a_stale_read_on_a_call_that_does_not_lag_is_refused() -> None:
    with pytest.raises(PlanError, match=r"card.charge is no lagging read; declare it"):
        simulate(WORLD, 1, plan=FaultPlan((StaleRead(operation="card.charge", nth=1),)))
    with pytest.raises(PlanError, match=r"lag_ms=5000.0; a StaleRead stretches the read's lag"):
        simulate(
            WORLD, 1, plan=FaultPlan((StaleRead(operation="card.search", nth=1, lag_ms=5000.0),))
        )


def test_a_lagging_read_that_writes_is_refused() -> None:
    def bad(state: dict[str, Any], args: dict[str, Any]) -> None:
        state["x"] = 1

    service = Service("s", operations={"find": Operation(bad, lag_ms=10.0)})
    from sims.world._lag import History

    history = History(keep_ms=10.0)
    history.wrote(0.0, {"a": 1})
    history.wrote(5.0, {"a": 2})
    assert history.seen_at(4.0) == {"a": 1}
    assert history.writes_since(4.0) == 1
    assert service.operation("find").longest_lag_ms() == 10.0


# -- rate limits and batches -----------------------------------------------------------------------


def test_a_rate_limit_refuses_with_the_time_left_and_a_batch_takes_part() -> None:
    events = _events()
    mails = [e for e in _of(events, "svc.exec") if e["op"] == "mail.send"]
    assert mails[0]["batch"] == {"taken": 2, "of": 5}
    refused = [e for e in mails if "refused" in e]
    assert refused
    assert all(e["retry_after_ms"] > 0 for e in refused)
    assert "rate limited (2 requests in 1000 ms)" in refused[0]["refused"]
    assert sorted(_final(events)["mail"]["sent"]) == ["a", "b", "c", "d", "e"]


def test_a_rate_limited_fault_refuses_until_its_retry_after_has_passed() -> None:
    plan = FaultPlan((RateLimited(service="mail", nth=1, retry_after_ms=5_000.0),))
    events = _events(plan)
    mails = [e for e in _of(events, "svc.exec") if e["op"] == "mail.send"]
    assert mails[0]["retry_after_ms"] == 5_000.0
    assert "refused" not in mails[1]
    assert mails[1]["t"] >= mails[0]["t"] + 5_000.0


def test_a_partial_batch_takes_only_the_items_it_says() -> None:
    events = _events(FaultPlan((PartialBatch(operation="mail.send", nth=1, taken=0),)))
    first = next(e for e in _of(events, "svc.exec") if e["op"] == "mail.send")
    assert first["batch"] == {"taken": 0, "of": 5}
    assert first["result"] == {"sent": []}
    assert sorted(_final(events)["mail"]["sent"]) == ["a", "b", "c", "d", "e"]


# -- callbacks -------------------------------------------------------------------------------------


def _credits(events: list[Any]) -> int:
    return len([e for e in _of(events, "svc.exec") if e["op"] == "wallet.credit"])


def test_a_callback_reaches_its_endpoint_which_starts_a_run() -> None:
    events = _events()
    (sent,) = _of(events, "svc.callback")
    assert sent["by"] == "card:capture"
    assert sent["payload"]["order"] == "o-1"
    assert [e["ev"] for e in _of(events, "svc.callback.ran", "svc.callback.answered")] == [
        "svc.callback.ran",
        "svc.callback.answered",
    ]
    assert _credits(events) == 1


def test_a_callback_whose_request_is_lost_is_sent_again() -> None:
    events = _events(FaultPlan((DropCallback(service="card", nth=1, leg="request"),)))
    assert [e["try"] for e in _of(events, "svc.callback.ran")] == [2]


def test_a_callback_whose_reply_is_lost_runs_its_endpoint_twice() -> None:
    events = _events(FaultPlan((DropCallback(service="card", nth=1, leg="reply"),)))
    assert [e["try"] for e in _of(events, "svc.callback.ran")] == [1, 2]


def test_a_callback_late_or_sent_twice() -> None:
    late = _events(FaultPlan((DelayCallback(service="card", nth=1, ms=7_000.0),)))
    (sent,) = _of(late, "svc.callback")
    assert _of(late, "svc.callback.arrive")[0]["t"] >= sent["t"] + 7_000.0
    twice = _events(FaultPlan((RepeatCallback(service="card", nth=1, after_ms=0.0),)))
    assert len(_of(twice, "svc.callback.ran")) == 2
    assert _of(twice, "svc.callback.repeat")


def test_a_callback_fault_names_a_service_the_world_has() -> None:
    with pytest.raises(PlanError, match=r"the world has no service 'bank'"):
        simulate(WORLD, 1, plan=FaultPlan((DropCallback(service="bank", nth=1, leg="reply"),)))


# -- traps -----------------------------------------------------------------------------------------


def test_an_operation_whose_only_change_is_an_empty_container_is_warned_about() -> None:
    events = _events(world=WORLD.replace(":provider", ":empty-container"))
    (warned,) = _of(events, "svc.warn")
    assert "only by adding the empty state['seen']" in warned["text"]
    assert warned["where"].endswith("providers.py:" + str(_line_of("def touch(")))


def _line_of(text: str) -> int:
    lines = (Path(__file__).parent / "worlds" / "providers.py").read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if line.startswith(text))


# -- the search ------------------------------------------------------------------------------------


def test_the_search_aims_each_providers_fault_where_the_clean_world_met_it() -> None:
    faults = world_shape(WORLD).provider_faults()
    kinds = {type(fault).__name__ for fault in faults}
    assert kinds == {
        "StaleRead",
        "PartialBatch",
        "RateLimited",
        "DropCallback",
        "DelayCallback",
        "RepeatCallback",
    }
    assert StaleRead(operation="card.search", nth=1) in faults
    assert PartialBatch(operation="mail.send", nth=1, taken=0) in faults


def test_the_same_seed_gives_the_same_trace() -> None:
    plan = FaultPlan((DropCallback(service="card", nth=1, leg="reply"),))
    assert _events(plan, seed=3) == _events(plan, seed=3)


def test_a_run_a_late_callback_started_after_the_drives_stopped_names_the_callback() -> None:
    simulation = simulate(WORLD.replace(":provider", ":late-webhook"), 1, keep_trace=True)
    (found,) = simulation.report.violations
    assert found.check == "run-never-driven"
    assert found.text.startswith("card's callback 2 to card-events (its endpoint) started run")
    assert "settle with a horizon past what the service does on its own" in found.text
    starts = [e for e in simulation.outcome.trace.of("world.start") if "callback" in e]
    assert [e["drive"] for e in starts] == ["web", "web"]  # the capture's, the settlement's


def test_a_stale_read_and_a_partial_batch_are_in_the_joined_records() -> None:
    from sims import Trace, service_calls

    plan = FaultPlan(
        (
            StaleRead(operation="card.search", nth=1),
            PartialBatch(operation="mail.send", nth=1, taken=1),
        )
    )
    calls = service_calls(Trace(events=_events(plan)))
    (search,) = [call for call in calls if call.op == "card.search"]
    assert search.lag_ms == 2_000.0
    assert search.stale == {"missed": 1, "fresh": ["o-1"]}
    sends = [call for call in calls if call.op == "mail.send"]
    assert sends[0].batch == {"taken": 1, "of": 5}
    assert any(call.retry_after_ms for call in sends)
