"""The output gate: no reply of a directory scope leaves before the write it answers is durable.

The power-loss test models what a disk holds after a cut. A write-ahead log is appended to, and
only what a sync covered is sure to be on the disk: a cut leaves the synced part and any prefix of
what was written after it, cut anywhere (a torn tail). So at every commit the log is copied, every
sync notes how long the log was when it began, and every reply a caller received is noted; then for
a cut after each commit, and each of several torn tails, the scope files are rebuilt from those
copies and opened, and every write a caller had been told about must be there. Without the gate the
same test finds writes lost, which shows that it can tell.
"""

from __future__ import annotations

import random
import re
import sqlite3
import threading
from pathlib import Path

import pytest
import trio
import trio.testing

import scopehost._gate
from driver import JobRunFilter
from scopehost import StoreClock, UnsyncedWrite, open_scope_host

from .linux_disk import DiskLog, copying_database


def noting_syncs(log: DiskLog, monkeypatch: pytest.MonkeyPatch) -> None:
    real = scopehost._gate.sync_path

    def sync_path(path: str, *, missing_ok: bool = False) -> None:
        size = Path(path).stat().st_size if path.endswith("-wal") else 0
        real(path, missing_ok=missing_ok)
        if path.endswith("-wal"):
            # Durable now: the log as long as it was when the sync began.
            log.note("sync", Path(path[: -len(".sqlite3-wal")]).name, size)

    monkeypatch.setattr(scopehost._gate, "sync_path", sync_path)


async def parents_and_children(directory: Path, log: DiskLog, *, durable: bool) -> None:
    """Twenty callers, each recording a child in one scope and then, once told it is there, its
    parent in another: the parent must never survive a cut that loses its child."""
    async with open_scope_host(
        directory, clock=StoreClock(), database=copying_database(log), durable=durable
    ) as host:
        child, parent = host.stub("child"), host.stub("parent")

        async def caller(n: int) -> None:
            for round in range(2):
                key = f"{n}.{round}"
                await child.invoke("record", {"kind": "child", "key": key})
                log.note("ack", "child", key)
                await parent.invoke("record", {"kind": "parent", "key": key})
                log.note("ack", "parent", key)

        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(caller, n)


def keys_after_a_cut(directory: Path, scope: str, database: bytes, wal: bytes) -> set[str]:
    for leftover in directory.glob("*"):
        leftover.unlink()
    (directory / f"{scope}.sqlite3").write_bytes(database)
    (directory / f"{scope}.sqlite3-wal").write_bytes(wal)
    conn = sqlite3.connect(directory / f"{scope}.sqlite3")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        try:
            return {key for (key,) in conn.execute("SELECT key FROM items")}
        except sqlite3.OperationalError:
            return set()  # the table itself was lost
    finally:
        conn.close()


def writes_lost_in_cuts(log: DiskLog, scratch: Path) -> tuple[int, int]:
    """(acknowledged writes missing, parents found without their child) over every cut."""
    draw = random.Random(0)
    files: dict[str, tuple[bytes, bytes]] = {}
    synced: dict[str, int] = {}
    acked: dict[str, set[str]] = {"child": set(), "parent": set()}
    lost = orphans = 0
    for event in log.events:
        if event[0] == "ack":
            acked[event[1]].add(event[2])
            continue
        if event[0] == "sync":
            synced[event[1]] = max(synced.get(event[1], 0), event[2])
            continue
        if event[0] != "commit":
            continue  # the file as its connection found it: each commit carries its own copy
        _, scope, database, wal = event
        before = files.get(scope)
        # The model holds while the log only grows: no checkpoint rewrote it under the copies.
        assert before is None or wal.startswith(before[1][: len(wal)])
        files[scope] = (database, wal)
        # A cut right after this commit, with the log torn at several places past its synced part.
        found: dict[str, list[set[str]]] = {}
        for name, (db, log_bytes) in files.items():
            durable = min(synced.get(name, 0), len(log_bytes))
            tails = {durable, len(log_bytes)} | {
                draw.randint(durable, len(log_bytes)) for _ in range(3)
            }
            found[name] = [keys_after_a_cut(scratch, name, db, log_bytes[:t]) for t in tails]
        for name, images in found.items():
            lost += sum(len(acked[name] - keys) for keys in images)
        if "child" in found and "parent" in found:
            orphans += sum(
                len(parents - children)
                for parents in found["parent"]
                for children in found["child"]
            )
    return lost, orphans


@pytest.mark.parametrize("durable", [True, False], ids=["gate", "no-gate"])
async def test_no_acknowledged_write_is_lost_in_a_power_cut_under_virtual_time(
    autojump_clock: trio.testing.MockClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    durable: bool,
) -> None:
    log = DiskLog()
    noting_syncs(log, monkeypatch)
    (tmp_path / "host").mkdir()
    (tmp_path / "cut").mkdir()
    await parents_and_children(tmp_path / "host", log, durable=durable)
    assert sum(1 for event in log.events if event[0] == "ack") == 80
    lost, orphans = writes_lost_in_cuts(log, tmp_path / "cut")
    if durable:
        assert (lost, orphans) == (0, 0)
    else:
        assert lost > 0  # without the gate, callers were told of writes a cut takes back


@pytest.mark.parametrize("durable", [True, False], ids=["gate", "no-gate"])
async def test_no_acknowledged_write_is_lost_in_a_power_cut_with_group_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durable: bool
) -> None:
    # No virtual clock: under the wall clock the gate syncs in a worker thread, in batches.
    log = DiskLog()
    noting_syncs(log, monkeypatch)
    (tmp_path / "host").mkdir()
    (tmp_path / "cut").mkdir()
    await parents_and_children(tmp_path / "host", log, durable=durable)
    lost, orphans = writes_lost_in_cuts(log, tmp_path / "cut")
    if durable:
        assert (lost, orphans) == (0, 0)
    else:
        assert lost > 0


async def test_one_sync_covers_every_commit_that_finished_while_the_last_one_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = scopehost._gate.sync_path
    first_sync_held = threading.Event()
    release = threading.Event()

    def held_sync(path: str, *, missing_ok: bool = False) -> None:
        if not first_sync_held.is_set():
            first_sync_held.set()
            release.wait(timeout=30)  # set by the test at once; the timeout only ends a failure
        real(path, missing_ok=missing_ok)

    monkeypatch.setattr(scopehost._gate, "sync_path", held_sync)
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        gate = host.gate
        assert gate is not None
        assert gate.threaded
        stub = host.stub("s1")
        replies: list[int] = []

        async def record(key: str) -> None:
            replies.append(await stub.invoke("record", {"kind": "k", "key": key}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(record, "first")
            await trio.to_thread.run_sync(first_sync_held.wait)
            for n in range(10):
                nursery.start_soon(record, str(n))
            await trio.testing.wait_all_tasks_blocked()
            # Eleven commits are done, and not one reply left while the first sync runs.
            assert replies == []
            rows = await trio.to_thread.run_sync(
                lambda: (
                    sqlite3.connect(tmp_path / "s1.sqlite3")
                    .execute("SELECT count(*) FROM items")
                    .fetchone()[0]
                )
            )
            assert rows == 11
            release.set()
        assert sorted(replies) == list(range(1, 12))
        # One batch for the first commit, one for the ten that finished while it synced.
        assert (gate.batches, gate.file_syncs) == (2, 2)


async def test_a_read_of_a_synced_scope_answers_without_a_sync_of_its_own(
    tmp_path: Path,
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        gate = host.gate
        assert gate is not None
        stub = host.stub("s1")
        await stub.invoke("record", {"kind": "k", "key": "a"})
        syncs = gate.file_syncs
        assert await stub.list(JobRunFilter()) == []
        assert await stub.due_keys("2026-10-04T12:00:00.000Z", 5) == []
        assert gate.file_syncs == syncs
        # A module operation may write what no row count shows: it is synced like a write.
        await stub.invoke("items", {})
        assert gate.file_syncs == syncs + 1


async def test_a_failed_sync_is_an_error_and_never_a_durable_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_sync(path: str, *, missing_ok: bool = False) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(scopehost._gate, "sync_path", failing_sync)
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        with pytest.raises(
            UnsyncedWrite,
            match=r"^invoke committed, but the scope file could not be synced \(OSError: "
            r"\[Errno 5\] Input/output error\); it may be lost in a power cut "
            + re.escape(
                f"(file {tmp_path / 's1.sqlite3'}): the scope serves nothing more until the disk "
                "is sound and evict() reopens and checks it; then read the write back"
            )
            + "$",
        ):
            await host.stub("s1").invoke("record", {"kind": "k"})


async def test_an_in_memory_host_and_an_opted_out_one_have_no_gate(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        assert host.gate is None
    async with open_scope_host(tmp_path, clock=StoreClock(), durable=False) as host:
        assert host.gate is None
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        gate = host.gate
        assert gate is not None
        assert not gate.threaded


async def test_durable_must_be_a_bool(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    with pytest.raises(
        ValueError,
        match=r"^durable is 'no'; pass True \(replies wait until their writes are on disk\) or "
        r"False \(replies at commit, faster, and the last commits may be lost in a power cut\)$",
    ):
        async with open_scope_host(tmp_path, durable="no"):  # type: ignore[arg-type]
            pass
