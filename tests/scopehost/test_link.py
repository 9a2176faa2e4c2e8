"""The wire: latency on each leg, hooks in the calling task, and what each fault means."""

from __future__ import annotations

import inspect
import random
import re
from typing import Any

import pytest
import trio
import trio.testing

from driver import JobRunFilter, parse_iso_ms
from scopehost import (
    DEFAULT_EPOCH_MS,
    DeliverLate,
    Link,
    LinkCall,
    LinkOutcome,
    ReplyDropped,
    RequestAbandoned,
    RequestDropped,
    RequestVerdict,
    StoreClock,
    Verdict,
    VirtualClock,
    open_scope_host,
)
from scopehost._link import LINK_OPERATIONS
from scopehost._stub import ScopeStub

from .async_support import new_row


async def test_each_leg_waits_its_delay_and_the_write_is_stamped_on_arrival(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        link = Link(request_ms=30, reply_ms={"claim": 70, "*": 5})
        stub = host.stub("s1", link=link)
        row = new_row("01RUNA")
        await stub.start_or_join(row.key, row)
        assert trio.current_time() == pytest.approx(0.035)
        claim = await stub.claim("01RUNA", "owner-1", 1000)
        assert trio.current_time() == pytest.approx(0.135)
        assert claim is not None
        # The store stamped the claim when it ran: 30 ms into the call, not when the reply came.
        assert parse_iso_ms(claim.run.updated_at) == DEFAULT_EPOCH_MS + 65


async def test_a_dropped_request_never_runs(autojump_clock: trio.testing.MockClock) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        link = Link(request_ms=10)
        link.drop_requests(lambda call: call.operation == "start_or_join")
        stub = host.stub("s1", link=link)
        row = new_row("01RUNA")
        with pytest.raises(
            RequestDropped,
            match=r"^request start_or_join #1 on link 'link' to scope 's1' was dropped: "
            r"the operation did not run$",
        ):
            await stub.start_or_join(row.key, row)
        assert await stub.list(JobRunFilter()) == []


async def test_a_dropped_reply_leaves_the_write_done(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        link = Link(request_ms=10, reply_ms=10)
        link.drop_replies(times=1)
        stub = host.stub("s1", link=link)
        row = new_row("01RUNA")
        with pytest.raises(
            ReplyDropped,
            match=r"^reply to start_or_join #1 on link 'link' from scope 's1' was dropped: "
            r"the operation ran at 2026-10-04T12:00:00.010Z$",
        ):
            await stub.start_or_join(row.key, row)
        assert [r.id for r in await stub.list(JobRunFilter())] == ["01RUNA"]


async def test_an_abandoned_request_is_delivered_late_and_its_write_lands(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, float, str]] = []

    def observer(event: str, fields: dict[str, object]) -> None:
        seen.append((event, trio.current_time(), str(fields.get("leg", ""))))

    async with open_scope_host(clock=StoreClock(), observer=observer) as host:

        async def abandon_starts(call: LinkCall) -> RequestVerdict:
            return DeliverLate(500) if call.operation == "start_or_join" else None

        link = Link(request_ms=10)
        link.add_request_hook(abandon_starts)
        stub = host.stub("s1", link=link)
        row = new_row("01RUNA")
        with pytest.raises(
            RequestAbandoned,
            match=r"^request start_or_join #1 on link 'link' to scope 's1' was abandoned by its "
            r"caller: the wire may still deliver it and the operation run$",
        ):
            await stub.start_or_join(row.key, row)
        assert trio.current_time() == pytest.approx(0.01)
        assert await host.stub("s1").list(JobRunFilter()) == []
        await host.sleep_ms(600)
        assert [r.id for r in await host.stub("s1").list(JobRunFilter())] == ["01RUNA"]
    late = [(event, round(t, 3), leg) for event, t, leg in seen if event != "rpc.send"]
    assert late[:6] == [
        ("rpc.abandon", 0.01, ""),
        ("rpc.exec", 0.01, ""),  # the direct link's list, empty
        ("rpc.deliver", 0.01, ""),
        ("rpc.late", 0.51, ""),
        ("rpc.exec", 0.51, ""),
        ("rpc.drop", 0.51, "reply"),
    ]


async def test_a_held_reply_is_late_and_rivals_are_not_held_with_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        release = trio.Event()

        async def hold_claims(call: LinkCall, outcome: LinkOutcome) -> Verdict:
            if call.operation == "claim":
                await release.wait()
            return None

        slow = Link(name="slow", request_ms=1, reply_ms=1)
        slow.add_reply_hook(hold_claims)
        rival = Link(name="rival", request_ms=1, reply_ms=1)
        row = new_row("01RUNA")
        await host.stub("s1", link=rival).start_or_join(row.key, row)

        claimed_at: list[float] = []

        async def claim_slowly() -> None:
            claim = await host.stub("s1", link=slow).claim("01RUNA", "slow-owner", 100)
            assert claim is not None
            claimed_at.append(trio.current_time())
            # Written 1 ms after the call began, though delivered seconds later.
            assert parse_iso_ms(claim.run.updated_at) == DEFAULT_EPOCH_MS + 3

        async with trio.open_nursery() as nursery:
            nursery.start_soon(claim_slowly)
            await host.sleep_ms(5_000)
            # The rival's traffic flows while the slow reply is held.
            seen = await host.stub("s1", link=rival).list(JobRunFilter())
            assert seen[0].lease_owner == "slow-owner"
            release.set()
        assert claimed_at == [pytest.approx(5.005)]


async def test_delays_drawn_from_the_links_random_source_replay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def jitter(call: LinkCall, rng: random.Random) -> float:
        return rng.uniform(0, 50)

    async def elapsed(seed: int) -> float:
        async with open_scope_host(clock=StoreClock()) as host:
            stub = host.stub(
                "s1", link=Link(request_ms=jitter, reply_ms=jitter, rng=random.Random(seed))
            )
            begun = trio.current_time()
            await stub.list(JobRunFilter())
            await stub.list(JobRunFilter())
            return trio.current_time() - begun

    assert await elapsed(7) == pytest.approx(await elapsed(7), abs=1e-9)
    assert await elapsed(7) != await elapsed(8)


@pytest.mark.parametrize("drawn", [-1.0, float("inf"), float("nan"), "3", True])
async def test_a_drawn_delay_that_is_not_a_finite_number_at_least_0_is_refused(
    autojump_clock: trio.testing.MockClock, drawn: object
) -> None:
    # An infinite draw used to be waited for: the call, and the drive making it, hung forever.
    async with open_scope_host(clock=StoreClock()) as host:

        def draw(call: LinkCall, rng: random.Random) -> Any:
            return drawn

        stub = host.stub("s1", link=Link(name="bad", request_ms=draw))
        message = (
            f"link 'bad' drew a delay of {drawn!r} ms for 'list'; "
            "a leg's delay must be a finite number >= 0"
        )
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            await stub.list(JobRunFilter())


@pytest.mark.parametrize(
    ("leg", "message"),
    [
        (
            "3",
            "request_ms='3'; pass a leg's delay as a finite number of ms >= 0, a mapping of "
            "operation names to such numbers ('*' for the rest), or a function of (call, rng) "
            "that draws one",
        ),
        (
            float("inf"),
            "request_ms=inf; pass a leg's delay as a finite number of ms >= 0, a mapping of "
            "operation names to such numbers ('*' for the rest), or a function of (call, rng) "
            "that draws one",
        ),
        (
            -1,
            "request_ms=-1; pass a leg's delay as a finite number of ms >= 0, a mapping of "
            "operation names to such numbers ('*' for the rest), or a function of (call, rng) "
            "that draws one",
        ),
        (
            True,
            "request_ms=True; pass a leg's delay as a finite number of ms >= 0, a mapping of "
            "operation names to such numbers ('*' for the rest), or a function of (call, rng) "
            "that draws one",
        ),
        (
            {"claim": 5, "*": float("nan")},
            "request_ms['*']=nan; a mapping's keys are operation names ('*' for the rest) and "
            "its values finite numbers of ms >= 0",
        ),
        (
            {"claim": "5"},
            "request_ms['claim']='5'; a mapping's keys are operation names ('*' for the rest) "
            "and its values finite numbers of ms >= 0",
        ),
        (
            {1: 5},
            "request_ms[1]=5; a mapping's keys are operation names ('*' for the rest) and its "
            "values finite numbers of ms >= 0",
        ),
    ],
)
def test_a_bad_constant_or_mapping_delay_is_refused_when_the_link_is_built(
    leg: object, message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Link(request_ms=leg)  # type: ignore[arg-type]


def test_a_delay_set_later_is_checked_too() -> None:
    link = Link(request_ms={"claim": 800, "*": 0})
    with pytest.raises(ValueError, match=r"^reply_ms=inf; pass a leg's delay"):
        link.reply_ms = float("inf")
    assert link.reply_ms == 0.0  # the refused value was not kept
    link.reply_ms = 5
    assert (link.request_ms, link.reply_ms) == ({"claim": 800, "*": 0}, 5)


KEYS_ARE = (
    "no operation crosses a link by that name; a mapping's keys are among begin, begin_step, "
    "claim, commit_pass, due_keys, export_dump, import_dump, invoke, list, miss, patch, "
    "record_step, shred_subject, start_or_join, and '*' for the rest"
)


def test_a_delay_mapping_keyed_by_no_operation_is_refused_when_set() -> None:
    # "clam" was never looked up: claims took the '*' delay, and the world ran without the slow
    # claim reply it was built to test.
    message = f"reply_ms['clam']: {KEYS_ARE}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Link(reply_ms={"clam": 800, "*": 1})
    link = Link()
    with pytest.raises(ValueError, match=r"^request_ms\['Claim'\]: no operation crosses"):
        link.request_ms = {"Claim": 800}
    assert link.request_ms == 0.0


async def test_a_delay_mapping_changed_later_to_a_key_of_no_operation_is_refused_at_the_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        delays = {"claim": 800.0}
        stub = host.stub("s1", link=Link(name="slow", reply_ms=delays))
        delays["lsit"] = 5.0
        message = f"link 'slow': reply_ms['lsit']: {KEYS_ARE}"
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            await stub.list(JobRunFilter())


def test_the_operations_a_delay_may_name_are_those_a_stub_sends() -> None:
    sent = {
        name
        for name, member in vars(ScopeStub).items()
        if name[0] != "_" and inspect.iscoroutinefunction(member)
    }
    assert sent == LINK_OPERATIONS


async def test_a_late_delivery_that_never_arrives_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:

        async def never(call: LinkCall) -> RequestVerdict:
            return DeliverLate(float("inf"))

        link = Link(name="bad")
        link.add_request_hook(never)
        with pytest.raises(
            ValueError,
            match=r"^link 'bad' was told to deliver 'list' #1 inf ms late; a late delivery's "
            r"delay must be a finite number >= 0$",
        ):
            await host.stub("s1", link=link).list(JobRunFilter())


async def test_equal_deadlines_wake_in_the_order_they_were_set(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        order: list[int] = []

        async def sleeper(index: int) -> None:
            await host.sleep_ms(100)
            order.append(index)

        async with trio.open_nursery() as nursery:
            for index in range(5):
                nursery.start_soon(sleeper, index)
                await trio.testing.wait_all_tasks_blocked()
        # One network task wakes them in (due, seq) order; which task Trio then runs first is
        # Trio's scheduler's choice, so only membership and the time are fixed here.
        assert sorted(order) == [0, 1, 2, 3, 4]
        assert trio.current_time() == pytest.approx(0.1)


async def test_the_network_moves_a_mock_clock_itself_only_when_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(jump_clock=True) as host:
        link = Link(request_ms=30, reply_ms=5)
        row = new_row("01RUNA")
        await host.stub("s1", link=link).start_or_join(row.key, row)
        assert trio.current_time() == pytest.approx(0.035)
        # A Trio deadline earlier than the network's next entry is honoured on the way.
        with trio.move_on_after(0.010):
            await host.sleep_ms(50)
        assert trio.current_time() == pytest.approx(0.045)
    autojump_clock.autojump_threshold = 1.0
    with pytest.raises(ValueError, match=r"^jump_clock=True moves a VirtualClock, or a MockClock"):
        async with open_scope_host(jump_clock=True):
            pass


async def test_the_network_reads_trios_deadline_heap_where_it_expects_it() -> None:
    # A Trio release that moved its run's deadline heap would make the network silently fall
    # back to the slower public statistics: this says so instead.
    runner = trio._core._run.GLOBAL_RUN_CONTEXT.runner
    assert callable(getattr(getattr(runner, "deadlines", None), "next_deadline", None)), (
        "trio moved its run's deadline heap (runner.deadlines.next_deadline); update "
        "scopehost._network._trio_next_deadline"
    )
    with trio.CancelScope(deadline=trio.current_time() + 7):
        assert runner.deadlines.next_deadline() == pytest.approx(trio.current_time() + 7)
    assert hasattr(runner, "runq"), (
        "trio moved its run queue (runner.runq); update scopehost._network._Jumper"
    )


async def test_a_timed_entry_that_raises_takes_the_host_down_with_its_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    async def world() -> None:
        async with open_scope_host(jump_clock=True) as host:
            host.network.at(trio.current_time() + 0.001, boom)
            await host.sleep_ms(10)

    with pytest.raises(BaseExceptionGroup) as caught:
        await world()
    assert caught.group_contains(RuntimeError, match="^boom$")


def test_a_virtual_clock_moves_only_when_the_network_jumps_it() -> None:
    async def main() -> tuple[float, float]:
        async with open_scope_host(jump_clock=True) as host:
            link = Link(request_ms=30, reply_ms=5)
            row = new_row("01RUNA")
            await host.stub("s1", link=link).start_or_join(row.key, row)
            after_call = trio.current_time()
            # Trio's own deadlines are jumped to as well.
            with trio.move_on_after(0.25):
                await trio.sleep_forever()
            return after_call, trio.current_time()

    clock = VirtualClock()
    after_call, after_wait = trio.run(main, clock=clock)
    assert after_call == pytest.approx(0.035)
    assert after_wait == pytest.approx(0.285)
    with pytest.raises(ValueError, match=r"^a clock jumps forward, not by -1 s$"):
        clock.jump(-1)
