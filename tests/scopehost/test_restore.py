"""Following ``ScopeFileGone``'s advice restores: a backup put back under an open scope, then an
``evict``, opens as exactly the backup, never with the lost file's write-ahead log applied."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing

from driver import JobRunFilter
from scopehost import ScopeFileGone, StoreClock, open_scope_host

from .async_support import new_row


async def run_ids(stub: object) -> list[str]:
    return sorted(run.id for run in await stub.list(JobRunFilter()))  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["deleted-then-copied", "replaced-by-rename"])
async def test_a_backup_put_back_under_an_open_scope_and_evicted_is_the_backup_exactly(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, how: str
) -> None:
    path = tmp_path / "s1.sqlite3"
    backup = tmp_path / "backup.sqlite3"
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        first = new_row("01RUNA")
        await host.stub("s1").start_or_join(first.key, first)
    shutil.copy(path, backup)  # the host closed: the file holds every commit
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        stub = host.stub("s1")
        for index in range(30):  # later commits, in the open scope's write-ahead log
            row = new_row(f"01RUNB{index:02}", instance=f"b{index}")
            await stub.start_or_join(row.key, row)
        assert (tmp_path / "s1.sqlite3-wal").stat().st_size > 0
        if how == "deleted-then-copied":
            path.unlink()
            with pytest.raises(ScopeFileGone, match="restore the file and evict the scope"):
                await stub.list(JobRunFilter())
            shutil.copy(backup, path)
        else:
            shutil.copy(backup, tmp_path / "restoring")
            os.replace(tmp_path / "restoring", path)
            gone = r"was (deleted or replaced|replaced by another)"
            with pytest.raises(ScopeFileGone, match=gone):
                await stub.list(JobRunFilter())
        assert host.evict("s1")
        assert await run_ids(stub) == ["01RUNA"]  # the backup, none of the lost file's runs
        later = new_row("01RUNC", instance="c")
        await stub.start_or_join(later.key, later)
        assert await run_ids(stub) == ["01RUNA", "01RUNC"]
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        assert await run_ids(host.stub("s1")) == ["01RUNA", "01RUNC"]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


async def test_a_log_put_back_with_its_backup_is_kept(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "s1.sqlite3"
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        stub = host.stub("s1")
        first = new_row("01RUNA")
        await stub.start_or_join(first.key, first)
        # A backup taken as file and log together, while the scope runs.
        saved = tmp_path / "saved"
        saved.mkdir()
        for name in ("s1.sqlite3", "s1.sqlite3-wal"):
            shutil.copy(tmp_path / name, saved / name)
        second = new_row("01RUNB", instance="b")
        await stub.start_or_join(second.key, second)
        path.unlink()
        (tmp_path / "s1.sqlite3-wal").unlink()
        (tmp_path / "s1.sqlite3-shm").unlink()
        for name in ("s1.sqlite3", "s1.sqlite3-wal"):
            shutil.copy(saved / name, tmp_path / name)
        with pytest.raises(ScopeFileGone):
            await stub.list(JobRunFilter())
        host.evict("s1")
        assert await run_ids(stub) == ["01RUNA"]
