"""The motivating walk, at test size: every object done through evictions, a restart and
transient upstream failures, with duplicates only where the spec allows them."""

from __future__ import annotations

import trio
import trio.testing

from bench.walk import check, run_walk


async def test_a_2000_object_walk_survives_evictions_a_restart_and_upstream_failures(
    autojump_clock: trio.testing.MockClock,
) -> None:
    result = await run_walk(2_000, seed=7)
    check(result, 2_000)
    assert result.restarts == 1
    names = [event for event, _ in result.events]
    assert names.count("pass.outcome") >= 20
    # Faults happened: upstream failures retried, evictions lost memos (and only those
    # objects may have run twice), and a takeover recovered the dead drive's pass.
    assert any(f["takeover"] for e, f in result.events if e == "claim.won")
    duplicated = sorted(k for k, n in result.effects.items() if n > 1)
    assert duplicated == [7, 457, 907, 1357, 1807]
