"""A heavy operation of one scope does not keep the other scopes waiting: under the wall clock it
runs in a worker thread while the event loop serves everyone else (its own scope still serves one
message at a time); under a virtual clock it runs inline, as every operation does."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from driver import JobRunFilter
from scopehost import StoreClock, open_scope_host
from scopehost._heavy import HEAVY_ARGUMENT_UNITS, is_heavy

from .async_support import new_row


def gated_operations(gate: threading.Event, threads: list[str]) -> dict[str, Any]:
    def slow(conn: sqlite3.Connection, args: dict[str, Any], now: str) -> int:
        threads.append(threading.current_thread().name)
        # Set by the test once another scope has answered; if this blocked the event loop, no
        # other scope could answer, and the timeout ends the test as a failure instead of a hang.
        if not gate.wait(timeout=10):
            raise RuntimeError("no other scope was served while this operation ran")
        return len(args["blob"])

    return {"slow": slow}


@pytest.mark.parametrize("directory", [False, True], ids=["memory", "directory"])
async def test_other_scopes_are_served_while_one_runs_a_heavy_operation(
    tmp_path: Path, directory: bool
) -> None:
    # No virtual clock: a heavy operation goes to a worker thread only under the wall clock.
    gate = threading.Event()
    threads: list[str] = []
    async with open_scope_host(
        tmp_path if directory else None,
        clock=StoreClock(),
        operations=gated_operations(gate, threads),
    ) as host:
        answers: list[object] = []
        blob = "x" * HEAVY_ARGUMENT_UNITS

        async def heavy() -> None:
            answers.append(await host.stub("big").invoke("slow", {"blob": blob}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(heavy)
            await trio.testing.wait_all_tasks_blocked()
            row = new_row("01RUNA")
            await host.stub("small").start_or_join(row.key, row)
            assert [run.id for run in await host.stub("small").list(JobRunFilter())] == ["01RUNA"]
            assert answers == []  # the heavy one is still running
            gate.set()
        assert answers == [HEAVY_ARGUMENT_UNITS]
        assert threads != [threading.current_thread().name]


async def test_under_a_virtual_clock_a_heavy_operation_runs_inline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = threading.Event()
    gate.set()
    threads: list[str] = []
    async with open_scope_host(
        clock=StoreClock(), operations=gated_operations(gate, threads)
    ) as host:
        blob = "x" * HEAVY_ARGUMENT_UNITS
        assert await host.stub("big").invoke("slow", {"blob": blob}) == HEAVY_ARGUMENT_UNITS
    assert threads == [threading.current_thread().name]


async def test_a_heavy_scope_still_serves_its_own_messages_one_at_a_time_in_order(
    tmp_path: Path,
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        stub = host.stub("s1")

        async def call(name: str, data: str) -> None:
            await stub.invoke("record", {"kind": name, "data": data})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "heavy", "x" * HEAVY_ARGUMENT_UNITS)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(call, "light", "y")
        # The light call arrived while the heavy one ran in its thread, and ran after it.
        items = await stub.invoke("items", {})
        assert [item["kind"] for item in items] == ["heavy", "light"]


def test_what_is_heavy() -> None:
    assert is_heavy("export_dump", ())
    assert is_heavy("import_dump", ())
    assert not is_heavy("list", (JobRunFilter(),))
    assert not is_heavy("start_or_join", (new_row("01RUNA").key, new_row("01RUNA")))
    assert is_heavy("invoke", ("record", {"data": list(range(HEAVY_ARGUMENT_UNITS))}))
    assert is_heavy("invoke", ("record", {"data": "x" * HEAVY_ARGUMENT_UNITS}))
    assert not is_heavy("invoke", ("record", {"data": "x" * (HEAVY_ARGUMENT_UNITS - 100)}))


async def test_a_scope_busy_with_a_heavy_operation_is_not_retired_under_it(tmp_path: Path) -> None:
    gate = threading.Event()
    threads: list[str] = []
    async with open_scope_host(
        tmp_path,
        clock=StoreClock(),
        operations=gated_operations(gate, threads),
        max_open_scopes=1,
    ) as host:
        answers: list[object] = []
        blob = "x" * HEAVY_ARGUMENT_UNITS

        async def heavy() -> None:
            answers.append(await host.stub("big").invoke("slow", {"blob": blob}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(heavy)
            await trio.testing.wait_all_tasks_blocked()
            # Room for another scope past the cap: the busy one must not be closed for it.
            await host.stub("small").list(JobRunFilter())
            gate.set()
        assert answers == [HEAVY_ARGUMENT_UNITS]
