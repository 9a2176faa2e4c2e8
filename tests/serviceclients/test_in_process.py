"""The in-process adapter: plain functions as services, with the port's outcomes."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from driver import ServiceDeclined, ServiceTimedOut, ServiceUnavailable, service_call
from serviceclients import InProcessServices


def cards() -> tuple[InProcessServices, list[dict[str, Any]]]:
    charges: list[dict[str, Any]] = []

    def charge(args: dict[str, Any]) -> dict[str, Any]:
        if args["cents"] > 10_000:
            raise ServiceDeclined("over the limit", code="limit")
        charges.append(args)
        return {"id": f"ch-{len(charges)}"}

    async def slow(args: dict[str, Any]) -> None:
        await trio.sleep(60)

    def down(args: dict[str, Any]) -> None:
        raise ServiceUnavailable("maintenance", retry_after_ms=1_000)

    return InProcessServices({"card": {"charge": charge, "slow": slow, "down": down}}), charges


async def test_a_result_and_a_key_answered_again_without_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    card, charges = cards()
    first = service_call("r", "card", "charge", {"cents": 5}, None, "o-1/charge")
    assert await card.call(first) == {"id": "ch-1"}
    assert await card.call(first) == {"id": "ch-1"}
    assert len(charges) == 1
    assert await card.call(service_call("r", "card", "charge", {"cents": 5}, None, None)) == {
        "id": "ch-2"
    }


async def test_an_operation_declines_or_refuses_named_after_the_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    card, _ = cards()
    with pytest.raises(ServiceDeclined) as declined:
        await card.call(service_call("r", "card", "charge", {"cents": 50_000}, None, None))
    assert (declined.value.code, declined.value.service, declined.value.operation) == (
        "limit",
        "card",
        "charge",
    )
    with pytest.raises(ServiceUnavailable) as refused:
        await card.call(service_call("r", "card", "down", {}, None, None))
    assert refused.value.retry_after_ms == 1_000


async def test_a_slow_operation_times_out(autojump_clock: trio.testing.MockClock) -> None:
    card, _ = cards()
    with pytest.raises(ServiceTimedOut, match="no answer within 1000 ms"):
        await card.call(service_call("r", "card", "slow", {}, 1_000, None))


async def test_an_unknown_operation_is_declined_and_an_unknown_service_unavailable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    card, _ = cards()
    with pytest.raises(ServiceDeclined, match="has no operation 'refund'"):
        await card.call(service_call("r", "card", "refund", {}, None, None))
    with pytest.raises(ServiceUnavailable, match="no service 'mail' here"):
        await card.call(service_call("r", "mail", "send", {}, None, None))
    assert card.provides("card")
    assert not card.provides("mail")


async def test_a_call_that_timed_out_still_runs_and_its_key_answers_the_repeat(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[int] = []

    async def slow_charge(args: dict[str, Any]) -> dict[str, Any]:
        await trio.sleep(5)  # longer than the caller waits
        ran.append(args["cents"])
        return {"id": f"ch-{len(ran)}"}

    card = InProcessServices({"card": {"charge": slow_charge}})
    charge = service_call("r", "card", "charge", {"cents": 5}, 1_000, "o-1/charge")
    with pytest.raises(ServiceTimedOut, match="may have run, or may still run"):
        await card.call(charge)
    with pytest.raises(ServiceUnavailable, match="still running"):
        await card.call(charge)  # a repeat while the first is still at work
    await trio.sleep(10)
    assert ran == [5]  # it ran to its end, as a provider goes on with a request
    assert await card.call(charge) == {"id": "ch-1"}
    assert ran == [5]  # the repeat was answered from the key, not run again


def test_an_operation_in_the_worlds_form_is_refused_where_it_is_given() -> None:
    def transfer(state: dict[str, Any], args: dict[str, Any]) -> None:
        pass

    with pytest.raises(ValueError, match=r"functools\.partial\(fn, state\)"):
        InProcessServices({"bank": {"transfer": transfer}})  # type: ignore[dict-item]
