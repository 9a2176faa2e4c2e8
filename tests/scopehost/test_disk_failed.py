"""A scope whose file fails under an operation (SQLite's I/O error, a full disk, a corrupt page)
says so, with its file and the remedy, and serves nothing more until it is evicted: never a bare
``sqlite3.OperationalError`` out of the host, and never a scope that goes on as if its disk were
sound. With ``durable=False`` there is no output gate to notice a failed sync: SQLite's own error
is the only word of it."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from scopehost import ScopeDatabase, ScopeDiskFailed, ScopeHostError, StoreClock, open_scope_host

#: Scopes whose next module operation fails as SQLite fails on a disk that returned EIO.
FAILING: set[str] = set()


#: Scopes whose next module operation finds a damaged page, as SQLite does on a malformed file.
DAMAGED: set[str] = set()


class FailingDisk(ScopeDatabase):
    def invoke(self, operation: str, args: Any, *, now: str) -> Any:
        if self.scope_id in FAILING:
            FAILING.discard(self.scope_id)
            error = sqlite3.OperationalError("disk I/O error")
            error.sqlite_errorcode = 10  # SQLITE_IOERR, as SQLite sets it
            raise error
        if self.scope_id in DAMAGED:
            damaged = sqlite3.DatabaseError("database disk image is malformed")
            damaged.sqlite_errorcode = 11  # SQLITE_CORRUPT
            raise damaged
        if operation == "record" and args.get("key") == "taken":
            own = sqlite3.IntegrityError("UNIQUE constraint failed: items.key")
            own.sqlite_errorcode = 19  # SQLITE_CONSTRAINT: the operation's own, not the disk's
            raise own
        return super().invoke(operation, args, now=now)


@pytest.mark.parametrize("durable", [False, True])
async def test_a_failed_file_is_said_and_the_scope_waits_for_an_eviction(
    tmp_path: Path, durable: bool
) -> None:
    path = tmp_path / "a.sqlite3"
    async with open_scope_host(
        tmp_path, clock=StoreClock(), durable=durable, database=FailingDisk
    ) as host:
        a, b = host.stub("a"), host.stub("b")
        await a.invoke("record", {"kind": "k", "key": "1"})
        FAILING.add("a")
        with pytest.raises(ScopeDiskFailed) as failed:
            await a.invoke("record", {"kind": "k", "key": "2"})
        assert str(failed.value) == (
            f"invoke on scope 'a': SQLite reported that its file {path} failed "
            "(OperationalError: disk I/O error), so whether the operation was written is not "
            "known; the scope serves no further call: once the disk is sound, call evict('a') "
            "on the scope host (the next call reopens the file)"
        )
        assert isinstance(failed.value.__cause__, sqlite3.OperationalError)
        # Every later call is refused unrun, reads too; the other scope is untouched.
        with pytest.raises(
            ScopeDiskFailed,
            match=r"^"
            + re.escape(
                f"invoke on scope 'a' did not run: its file {path} failed under an earlier "
                "operation (OperationalError: disk I/O error); once the disk is sound, call "
                "evict('a') on the scope host (the next call reopens the file)"
            )
            + r"$",
        ):
            await a.invoke("items", {"kind": "k"})
        await b.invoke("record", {"kind": "k", "key": "1"})
        assert host.evict("a")
        rows = await a.invoke("items", {"kind": "k"})
        assert [row["key"] for row in rows] == ["1"]
        await a.invoke("record", {"kind": "k", "key": "3"})


async def test_an_error_of_the_operations_own_is_not_the_disks(tmp_path: Path) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock(), database=FailingDisk) as host:
        a = host.stub("a")
        with pytest.raises(sqlite3.IntegrityError):
            await a.invoke("record", {"kind": "k", "key": "taken"})
        await a.invoke("record", {"kind": "k", "key": "1"})  # it serves on
        assert not issubclass(sqlite3.IntegrityError, ScopeHostError)


async def test_a_damaged_file_says_to_restore_a_backup_not_to_evict_it_again(
    tmp_path: Path,
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock(), database=FailingDisk) as host:
        await host.stub("d").invoke("record", {"kind": "k", "key": "1"})
        DAMAGED.add("d")
        try:
            with pytest.raises(ScopeDiskFailed, match="the file itself is damaged") as failed:
                await host.stub("d").invoke("record", {"kind": "k", "key": "2"})
            assert "restore a backup (put it at the scope's path as a new file" in str(failed.value)
            with pytest.raises(ScopeDiskFailed, match="reopening it opens the same damage"):
                await host.stub("d").invoke("items", {})
        finally:
            DAMAGED.discard("d")
