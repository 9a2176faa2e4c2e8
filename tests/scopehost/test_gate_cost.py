"""What the output gate and the file watch cost the event loop, counted rather than timed: one
hand-off to a worker thread per batch of syncs, however many files it holds, and four ``stat``
calls per turn of a scope's actor, however many calls the turn serves (``bench/README.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import scopehost._files
import scopehost._watch
from scopehost import StoreClock, open_scope_host


async def test_a_batch_of_many_files_is_one_hand_off_from_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hand_offs = 0
    real = trio.to_thread.run_sync

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal hand_offs
        hand_offs += 1
        return await real(*args, **kwargs)

    monkeypatch.setattr(trio.to_thread, "run_sync", counted)
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        gate = host.gate
        assert gate is not None
        assert gate.threaded

        async def caller(scope: str) -> None:
            for n in range(3):
                await host.stub(scope).invoke("record", {"kind": "k", "key": str(n)})

        async with trio.open_nursery() as nursery:
            for index in range(8):
                nursery.start_soon(caller, f"s{index}")
    assert gate.file_syncs > gate.batches  # some batch synced several files
    assert hand_offs == gate.batches


async def test_a_turn_looks_at_the_files_once_however_many_calls_it_serves(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looks = 0
    real = scopehost._files.stamp

    def counted(path: Path | str) -> Any:
        nonlocal looks
        looks += 1
        return real(path)

    monkeypatch.setattr(scopehost._watch, "stamp", counted)
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        stub = host.stub("s1")
        await stub.invoke("record", {"kind": "warm"})  # opened: its actor is parked
        looks = 0
        async with trio.open_nursery() as nursery:
            for n in range(20):  # all queue up while the actor is parked: one turn serves them
                nursery.start_soon(stub.invoke, "record", {"kind": "k", "key": str(n)})
        assert len(await stub.invoke("items", {})) == 21
    # Two as the turn of twenty began and two as it ended; the same for the turn of the read;
    # two as the scope closed with the host.
    assert looks == 10
