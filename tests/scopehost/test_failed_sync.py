"""A failed sync taints its scope: it acknowledges nothing more until it is reopened and checked.

On Linux a sync that fails drops the pages it could not write and the next one succeeds, so a
scope that went on acknowledging writes would acknowledge log frames that follow a hole, and a
power cut would take them back (see ``linux_disk``). The scope instead refuses every call until it
is reopened, and the reopening checks its file and makes what it holds durable again.
"""

from __future__ import annotations

import errno
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing

import scopehost._gate
from scopehost import (
    ScopeHostError,
    ScopeSyncFailed,
    ScopeUnavailable,
    StoreClock,
    UnsyncedWrite,
    open_scope_host,
)

from .linux_disk import DiskLog, copying_database, failing_syncs, writes_lost


async def callers_through_a_failed_sync(directory: Path, log: DiskLog) -> list[str]:
    """Ten callers on scope ``a`` and ten on ``b``, each writing three times and going on past
    any refusal (as a retrying caller would); then ``a`` is evicted, as the remedy says, and
    written to again. Returns the type of each refusal ``a``'s callers got."""
    refused: list[str] = []
    async with open_scope_host(
        directory, clock=StoreClock(), database=copying_database(log)
    ) as host:
        stubs = {name: host.stub(name) for name in ("a", "b")}

        async def caller(name: str, n: int) -> None:
            for round in range(3):
                key = f"{n}.{round}"
                try:
                    await stubs[name].invoke("record", {"kind": name, "key": key})
                except ScopeHostError as error:
                    refused.append(f"{name}:{type(error).__name__}")
                    continue
                log.note("ack", name, key)

        async with trio.open_nursery() as nursery:
            for n in range(10):
                for name in stubs:
                    nursery.start_soon(caller, name, n)
        host.evict("a")
        for n in range(5):
            await stubs["a"].invoke("record", {"kind": "a", "key": f"after.{n}"})
            log.note("ack", "a", f"after.{n}")
    return refused


async def the_cut_after_a_failed_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = DiskLog()
    # Scope a's third sync of its log fails; every other sync succeeds, the later ones of a too.
    failing_syncs(log, monkeypatch, lambda scope, n: (scope, n) == ("a", 3))
    (tmp_path / "host").mkdir()
    (tmp_path / "cut").mkdir()
    refused = await callers_through_a_failed_sync(tmp_path / "host", log)
    assert "a:UnsyncedWrite" in refused  # the batch whose sync failed
    assert all(refusal.startswith("a:") for refusal in refused)  # b went on
    assert len(log.acked("b")) == 30
    assert sum(key.startswith("after.") for key in log.acked("a")) == 5  # reopened and checked
    assert writes_lost(log, tmp_path / "cut") == 0


async def test_no_acknowledged_write_is_lost_in_a_cut_after_a_sync_failed_once_inline(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under a virtual clock the gate syncs inline, one commit at a time.
    await the_cut_after_a_failed_sync(tmp_path, monkeypatch)


async def test_no_acknowledged_write_is_lost_in_a_cut_after_a_sync_failed_once_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under the wall clock the gate syncs in worker threads, in batches (group commit).
    await the_cut_after_a_failed_sync(tmp_path, monkeypatch)


def fail_once(monkeypatch: pytest.MonkeyPatch, scope: str, nth: int) -> None:
    """The ``nth`` sync of ``scope``'s log fails with EIO; every other sync runs."""
    real = scopehost._gate.sync_path
    counts = {"log": 0}

    def sync_path(path: str, *, missing_ok: bool = False) -> None:
        if path.endswith(f"{scope}.sqlite3-wal"):
            counts["log"] += 1
            if counts["log"] == nth:
                raise OSError(errno.EIO, "Input/output error")
        real(path, missing_ok=missing_ok)

    monkeypatch.setattr(scopehost._gate, "sync_path", sync_path)


def refusal(operation: str, scope: str, path: Path) -> str:
    return re.escape(
        f"{operation} on scope {scope!r} did not run: a sync of its file {path} failed "
        "(OSError: [Errno 5] Input/output error), so what it wrote since may not be on the disk "
        "whatever later syncs say; it serves no call until it is reopened and its file checked — "
        f"once the disk is sound, call evict({scope!r}) on the scope host (the next call reopens "
        "the scope, checks its file and keeps what it holds)"
    )


async def test_a_scope_whose_sync_failed_refuses_every_call_until_it_is_reopened(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_once(monkeypatch, "s1", 2)
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        s1, s2 = host.stub("s1"), host.stub("s2")
        await s1.invoke("record", {"kind": "k", "key": "durable"})
        with pytest.raises(UnsyncedWrite, match=r"^invoke committed, but the scope file could"):
            await s1.invoke("record", {"kind": "k", "key": "unsynced"})
        path = tmp_path / "s1.sqlite3"
        with pytest.raises(ScopeSyncFailed, match=f"^{refusal('invoke', 's1', path)}$"):
            await s1.invoke("record", {"kind": "k", "key": "refused"})
        with pytest.raises(ScopeSyncFailed, match=f"^{refusal('invoke', 's1', path)}$"):
            await s1.invoke("items", {})  # a read too: it could show the unsynced write
        assert issubclass(ScopeSyncFailed, ScopeUnavailable)
        await s2.invoke("record", {"kind": "k", "key": "other"})  # the other scopes go on
        assert host.evict("s1")
        keys = [item["key"] for item in await s1.invoke("items", {})]
        # What the file held is kept (the unsynced write too, now synced); the refused one never
        # ran.
        assert keys == ["durable", "unsynced"]
        await s1.invoke("record", {"kind": "k", "key": "later"})
    conn = sqlite3.connect(tmp_path / "s1.sqlite3")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert [key for (key,) in conn.execute("SELECT key FROM items")] == [
        "durable",
        "unsynced",
        "later",
    ]
    conn.close()


async def test_a_reopened_scope_whose_file_fails_its_check_is_refused_until_restored(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s1.sqlite3"
    backup = tmp_path / "backup.sqlite3"
    fail_once(monkeypatch, "s1", 52)
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        s1 = host.stub("s1")
        for n in range(50):  # enough rows for the items table to span several pages
            await s1.invoke("record", {"kind": "k", "key": str(n), "data": "x" * 400})
        host.evict("s1")
        shutil.copy(path, backup)  # closed: the file holds every commit
        await s1.invoke("record", {"kind": "k", "key": "50"})
        with pytest.raises(UnsyncedWrite):
            await s1.invoke("record", {"kind": "k", "key": "51"})
        assert host.evict("s1")  # folds the log into the file, which is then damaged
        with path.open("r+b") as file:
            file.seek(path.stat().st_size - 2048)
            file.write(b"\xff" * 1024)
        with pytest.raises(ScopeSyncFailed) as refused:
            await s1.invoke("items", {})
        assert re.fullmatch(
            re.escape(
                f"invoke did not run: scope 's1': a sync of its file {path} failed (OSError: "
                "[Errno 5] Input/output error), and the file failed its check on reopening ("
            )
            + r".+"
            + re.escape(
                "); nothing was read or written — put a backup back as a new file at that path "
                "and evict the scope, or delete the file (with its -wal and -shm) and call "
                "forget('s1') on the scope host to start the scope over empty"
            ),
            str(refused.value),
        ), str(refused.value)
        with pytest.raises(ScopeSyncFailed, match="failed its check on reopening"):
            await s1.invoke("items", {})  # checked again at each reopening, refused again
        path.unlink()
        for leftover in ("-wal", "-shm"):
            path.with_name(path.name + leftover).unlink(missing_ok=True)
        shutil.copy(backup, path)
        assert len(await s1.invoke("items", {})) == 50  # the backup, checked and served
