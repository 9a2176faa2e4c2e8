"""The store's clocks: UTC wall time by default; virtual time plus an epoch, skewed and drifting
when a world asks."""

from __future__ import annotations

import time

import pytest
import trio
import trio.testing

from driver import iso_from_ms, parse_iso_ms
from scopehost import DEFAULT_EPOCH_MS, StoreClock, WallClock, open_scope_host


async def test_the_store_clock_follows_virtual_time_in_the_one_spelling(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = StoreClock()
    assert clock.now() == "2026-10-04T12:00:00.000Z"
    await trio.sleep(1.2345)
    assert clock.now() == "2026-10-04T12:00:01.234Z"
    assert clock.now_ms() == DEFAULT_EPOCH_MS + 1234


async def test_skew_shifts_and_drift_stretches_the_store_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ahead = StoreClock(skew_ms=100)
    fast = StoreClock(drift=0.01)
    await trio.sleep(10)
    assert ahead.now_ms() == DEFAULT_EPOCH_MS + 10_100
    assert fast.now_ms() == DEFAULT_EPOCH_MS + 10_100


async def test_operations_are_stamped_by_the_hosts_clock_never_the_callers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock(skew_ms=-5_000)) as host:
        outcome = await host.execute("s1", "due_keys", ("2030-01-01T00:00:00.000Z", 5))
        assert outcome.executed_at == "2026-10-04T11:59:55.000Z"
        assert outcome.value == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"skew_ms": float("nan")}, r"^skew_ms nan is not finite; pass milliseconds$"),
        ({"drift": -1.0}, r"^drift -1.0 must be a finite number above -1 \(0 runs at virtual"),
    ],
)
def test_a_clock_that_cannot_tell_time_is_refused(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StoreClock(skew_ms=options.get("skew_ms", 0.0), drift=options.get("drift", 0.0))


async def test_a_host_opened_without_a_clock_stamps_utc_wall_time() -> None:
    # No MockClock here: Trio's own clock has a random origin, so only the wall clock can be right.
    before = time.time_ns() // 1_000_000
    async with open_scope_host() as host:
        outcome = await host.execute("s1", "due_keys", ("2030-01-01T00:00:00.000Z", 5))
    after = time.time_ns() // 1_000_000
    assert isinstance(host.clock, WallClock)
    assert before <= parse_iso_ms(outcome.executed_at) <= after


def test_the_wall_clock_holds_rather_than_stepping_back() -> None:
    readings = iter([5_000_000_000_000, 4_000_000_000_000, 6_000_000_000_000, 6_000_000_000_000])
    clock = WallClock(read_ns=lambda: next(readings) * 1_000_000)
    assert [clock.now_ms(), clock.now_ms(), clock.now_ms()] == [
        5_000_000_000_000,
        5_000_000_000_000,
        6_000_000_000_000,
    ]
    assert clock.now() == iso_from_ms(6_000_000_000_000)
