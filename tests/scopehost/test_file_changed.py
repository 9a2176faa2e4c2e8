"""A scope file changed behind its open scope (``cp`` onto it, a rollback to an older copy, another
scope's file) is noticed before the scope serves again and refused, and an eviction then opens
exactly the file that is there: never the copy with the old file's log folded into it, never a
malformed file, never the newer runs the copy did not hold."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing

from driver import JobRunFilter
from scopehost import (
    ScopeFileChanged,
    ScopeFileForeign,
    ScopeUnavailable,
    StoreClock,
    open_scope_host,
)
from scopehost._files import OpenedFiles
from scopehost._host import ScopeHost

from .async_support import new_row


async def run_ids(host: ScopeHost, scope: str = "s1") -> list[str]:
    return sorted(run.id for run in await host.stub(scope).list(JobRunFilter(limit=100)))


async def start_runs(host: ScopeHost, prefix: str, count: int, scope: str = "s1") -> None:
    for index in range(count):
        row = new_row(f"{prefix}{index:02}", instance=f"{prefix}{index}")
        await host.stub(scope).start_or_join(row.key, row)


def changed_message(operation: str, path: Path, found: str, kept: Path | None) -> str:
    log = (
        f"its own log, with every write it acknowledged since its last checkpoint, was moved "
        f"aside to {kept}; "
        if kept
        else "its log was left as found; "
    )
    undo = (
        f"; if nothing was put there after all, move {kept} back to {path}-wal first, then "
        "evict('s1')"
        if kept
        else ""
    )
    return (
        f"{operation} did not run: scope 's1': its database file {path} was written by "
        f"something other than SQLite while the scope had it open ({found}); nothing was read or "
        f"written by this call; {log}the scope serves no call until told to open the file now "
        "there — if that file is the one to keep (a backup put back), call evict('s1') on the "
        f"scope host and the next call opens exactly it, checked{undo}"
    )


#: What the watch says of a database file written in place while no checkpoint ran.
REWRITTEN = "its content changed while no checkpoint ran"


def fold(path: Path) -> None:
    """Checkpoint the scope's log into its file from another connection (as a shell would): the
    file then holds every run, and a backup taken earlier is older than it."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint")
    finally:
        conn.close()


def integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
async def backup_of_thirty(tmp_path: Path) -> Path:
    """A backup of scope s1 holding 30 runs, taken while its host was closed."""
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        await start_runs(host, "01RUNA", 30)
    backup = tmp_path / "backup.sqlite3"
    shutil.copy(tmp_path / "s1.sqlite3", backup)
    return backup


async def test_a_backup_copied_over_the_open_file_is_refused_then_opened_exactly_once_evicted(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, backup_of_thirty: Path
) -> None:
    path = tmp_path / "s1.sqlite3"
    kept = tmp_path / "s1.sqlite3-wal.kept"
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        await start_runs(host, "01RUNB", 30)
        fold(path)  # 60 runs in the file now: the backup is older than it
        assert len(await run_ids(host)) == 60
        shutil.copyfile(backup_of_thirty, path)  # cp onto the open file: the same inode
        refused = re.escape(changed_message("list", path, REWRITTEN, kept))
        with pytest.raises(ScopeFileChanged, match=f"^{refused}$"):
            await host.stub("s1").list(JobRunFilter())
        assert kept.exists()  # the scope's own log, moved aside, never deleted
        row = new_row("01RUNC", instance="c")
        refused = re.escape(changed_message("start_or_join", path, REWRITTEN, kept))
        with pytest.raises(ScopeFileChanged, match=f"^{refused}$"):
            await host.stub("s1").start_or_join(row.key, row)  # refused by the next actor too
        assert issubclass(ScopeFileChanged, ScopeUnavailable)
        assert host.evict("s1")
        assert len(await run_ids(host)) == 30  # the backup exactly: none of the newer runs
        await start_runs(host, "01RUNC", 1)
        assert len(await run_ids(host)) == 31
    assert integrity(path) == "ok"
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        assert len(await run_ids(host)) == 31


async def test_an_older_copy_put_in_place_and_evicted_at_once_is_that_copy_never_a_mix(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, backup_of_thirty: Path
) -> None:
    path = tmp_path / "s1.sqlite3"
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        await start_runs(host, "01RUNB", 30)
        fold(path)
        await run_ids(host)
        shutil.copyfile(backup_of_thirty, path)
        # No call in between: the eviction itself must not fold the open log into the copy.
        assert host.evict("s1")
        assert integrity(path) == "ok"
        assert len(await run_ids(host)) == 30
        await start_runs(host, "01RUNC", 1)
    assert integrity(path) == "ok"


async def test_another_scopes_file_copied_over_the_open_one_is_never_served(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "s1.sqlite3"
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        await start_runs(host, "01SECRET", 3, scope="other")
        await start_runs(host, "01RUNA", 2)
        host.evict("other")
        shutil.copyfile(tmp_path / "other.sqlite3", path)
        with pytest.raises(ScopeFileChanged):
            await host.stub("s1").list(JobRunFilter())
        host.evict("s1")
        with pytest.raises(ScopeFileForeign, match="belongs to scope 'other'"):
            await host.stub("s1").list(JobRunFilter())


async def test_a_change_found_as_the_scope_closes_is_refused_by_the_next_host_until_evicted(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, backup_of_thirty: Path
) -> None:
    path = tmp_path / "s1.sqlite3"
    kept = tmp_path / "s1.sqlite3-wal.kept"
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        await start_runs(host, "01RUNB", 30)
        fold(path)
        await run_ids(host)
        shutil.copyfile(backup_of_thirty, path)
        # The host closes before any call notices: closing must neither fold the log into the
        # copy nor let the next host serve the copy as if nothing happened.
    assert integrity(path) == "ok"
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        refused = re.escape(changed_message("list", path, REWRITTEN, kept))
        with pytest.raises(ScopeFileChanged, match=refused):
            await host.stub("s1").list(JobRunFilter())
        with pytest.raises(ScopeFileChanged):
            await host.stub("s1").list(JobRunFilter())
        host.evict("s1")  # the eviction says: open what is there now
        assert len(await run_ids(host)) == 30


async def test_a_log_copied_in_place_with_its_file_is_kept_with_it(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "s1.sqlite3"
    saved = tmp_path / "saved"
    saved.mkdir()
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        await start_runs(host, "01RUNA", 5)
        for name in ("s1.sqlite3", "s1.sqlite3-wal"):  # a backup of file and log together
            shutil.copy(tmp_path / name, saved / name)
        await start_runs(host, "01RUNB", 5)
        for name in ("s1.sqlite3", "s1.sqlite3-wal"):
            shutil.copyfile(saved / name, tmp_path / name)
        with pytest.raises(ScopeFileChanged):
            await host.stub("s1").list(JobRunFilter())
        host.evict("s1")
        assert len(await run_ids(host)) == 5  # the backup's own log was applied, not discarded
    assert integrity(path) == "ok"


async def test_only_a_log_copied_over_the_open_one_is_refused_too(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    saved = tmp_path / "saved-wal"
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        await start_runs(host, "01RUNA", 5)
        shutil.copy(tmp_path / "s1.sqlite3-wal", saved)
        await start_runs(host, "01RUNB", 5)
        shutil.copyfile(saved, tmp_path / "s1.sqlite3-wal")
        with pytest.raises(ScopeFileChanged):
            await host.stub("s1").list(JobRunFilter())


async def test_the_scope_own_writes_and_folds_are_never_taken_for_a_change(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    await writes_folded_many_times(tmp_path)


async def test_big_writes_folded_in_a_worker_thread_are_never_taken_for_a_change(
    tmp_path: Path,
) -> None:
    # Under the wall clock an operation this big runs in a worker thread, its fold with it.
    await writes_folded_many_times(tmp_path)


async def writes_folded_many_times(tmp_path: Path) -> None:
    # Enough writes for the log to be folded into the file several times over.
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        stub = host.stub("s1")
        for index in range(60):
            await stub.invoke("record", {"kind": "k", "key": str(index), "data": "x" * 200_000})
        assert len(await stub.invoke("items", {})) == 60
        assert (tmp_path / "s1.sqlite3").stat().st_size > 10_000_000


async def test_two_hosts_serving_one_scope_never_take_each_other_for_a_change(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with (
        open_scope_host(tmp_path, clock=StoreClock()) as first,
        open_scope_host(tmp_path, clock=StoreClock()) as second,
    ):
        for index in range(30):  # each host's log writes and folds in turn
            host = first if index % 2 else second
            await host.stub("s1").invoke(
                "record", {"kind": "k", "key": str(index), "data": "x" * 50_000}
            )
        assert len(await first.stub("s1").invoke("items", {})) == 30
        assert len(await second.stub("s1").invoke("items", {})) == 30
    assert integrity(tmp_path / "s1.sqlite3") == "ok"


async def test_two_hosts_on_a_copied_file_both_refuse_and_the_note_keeps_the_kept_log(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, backup_of_thirty: Path
) -> None:
    path = tmp_path / "s1.sqlite3"
    kept = tmp_path / "s1.sqlite3-wal.kept"
    async with (
        open_scope_host(tmp_path, clock=StoreClock()) as first,
        open_scope_host(tmp_path, clock=StoreClock()) as second,
    ):
        await start_runs(first, "01RUNB", 30)
        fold(path)
        assert len(await run_ids(first)) == 60  # each has looked since the fold
        assert len(await run_ids(second)) == 60
        shutil.copyfile(backup_of_thirty, path)
        first_refusal = re.escape(changed_message("list", path, REWRITTEN, kept))
        with pytest.raises(ScopeFileChanged, match=f"^{first_refusal}$"):
            await first.stub("s1").list(JobRunFilter())
        # The second host finds its log moved aside by the first: it refuses too, and the note
        # still says what the first found and where the log went.
        with pytest.raises(ScopeFileChanged, match=f"^{first_refusal}$"):
            await second.stub("s1").list(JobRunFilter())
        assert kept.exists()
        first.evict("s1")
        second.evict("s1")
        assert len(await run_ids(first)) == 30
        assert len(await run_ids(second)) == 30
    assert integrity(path) == "ok"


def test_a_close_without_folding_survives_another_host_having_the_file_aside(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s1.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x)")
    opened = OpenedFiles.of(path)
    path.rename(tmp_path / "s1.sqlite3-closing-elsewhere")  # another host's close, under way
    opened.close_unfolded(conn, None)  # no FileNotFoundError, and nothing folded anywhere
    assert not path.exists()
