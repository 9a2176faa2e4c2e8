"""A directory host's durability (WAL, synchronous=NORMAL) and a scope file deleted under it."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from driver import JobRunFilter
from scopehost import ScopeFileGone, StoreClock, open_scope_host

from .async_support import new_row


def pragmas(conn: sqlite3.Connection, args: dict[str, Any], now: str) -> list[Any]:
    return [
        conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("journal_mode", "synchronous")
    ]


async def test_a_directory_scope_runs_wal_with_synchronous_normal(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(
        tmp_path, clock=StoreClock(), operations={"pragmas": pragmas}
    ) as host:
        # synchronous 1 is NORMAL (2 would be FULL, the default).
        assert await host.stub("s1").invoke("pragmas", {}) == ["wal", 1]


async def test_a_scope_whose_file_was_deleted_fails_its_next_operation_clearly(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        stub = host.stub("s1")
        first = new_row("01RUNA")
        await stub.start_or_join(first.key, first)
        path = tmp_path / "s1.sqlite3"
        path.unlink()
        second = new_row("01RUNB", instance="other")
        message = (
            f"scope 's1': its database file {path} was deleted or replaced while the scope had "
            "it open; nothing was written — restore the file and evict the scope to reopen it, "
            "or call forget('s1') on the scope host to start the scope over empty"
        )
        with pytest.raises(ScopeFileGone, match=f"^{re.escape(message)}$"):
            await stub.start_or_join(second.key, second)
        with pytest.raises(ScopeFileGone):
            await stub.list(JobRunFilter())
        assert not path.exists()
        host.evict("s1")
        with pytest.raises(ScopeFileGone, match="is gone, and this directory held it before"):
            await stub.list(JobRunFilter())  # not silently a fresh, empty file
        assert not path.exists()
