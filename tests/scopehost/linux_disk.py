"""A disk that fails a sync the way Linux does, and what a power cut leaves on it.

When ``fsync`` fails with EIO, Linux marks the pages it could not write clean and reports the error
once: the next ``fsync`` of the file succeeds, though those pages never reached the disk. So a
failed sync leaves a hole in the write-ahead log (the bytes written since the last good sync), and
every later sync makes durable only what follows the hole. SQLite's recovery reads the log frame
by frame and stops at the first one that does not check out, so a cut drops every frame after the
hole, however well synced.

The recorder notes each commit (a copy of the scope's file and log), each sync of a file (its bytes
as the sync begins) and each failed one, and each reply a caller received. ``writes_lost`` then
cuts the power after every commit, with the log torn at several places past its durable part,
rebuilds every scope's file from what the disk would hold, opens it with SQLite (which must find it
whole), and counts the acknowledged writes that are missing.

SQLite's own syncs of the database file are not seen here: the file counts as durable as each
connection to it found it as it opened (SQLite synced it as it created it, and syncs it after every
checkpoint, the fold as the last connection closes among them), or as a sync of the host's own
found it, which is what a scope reopened after a failed sync makes before it serves again.
"""

from __future__ import annotations

import errno
import random
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

import scopehost._gate
from scopehost import ScopeDatabase

#: How SQLite marks a log's header: a log whose first 32 bytes differ was started anew.
WAL_HEADER = 32


@attrs.define
class DiskLog:
    """What happened, in order: commits, syncs (done and failed) and acknowledgements."""

    events: list[tuple[Any, ...]] = attrs.Factory(list)
    lock: threading.Lock = attrs.Factory(threading.Lock)

    def note(self, *event: Any) -> None:
        with self.lock:  # a sync notes itself from a worker thread
            self.events.append(event)

    def acked(self, scope: str) -> list[str]:
        return [event[2] for event in self.events if event[:2] == ("ack", scope)]


def copying_database(log: DiskLog) -> type[ScopeDatabase]:
    class Copying(ScopeDatabase):
        """Copies the scope's file and its log at every commit of a module operation; the file
        counts as synced as its connection found it (SQLite syncs it as it creates it, before the
        host lowers ``synchronous``, and after every checkpoint)."""

        def __init__(self, conn: sqlite3.Connection, scope_id: str, **options: Any) -> None:
            super().__init__(conn, scope_id, **options)
            path = Path(conn.execute("PRAGMA database_list").fetchone()[2])
            log.note("synced", scope_id, "file", path.read_bytes())

        def invoke(self, operation: str, args: Any, *, now: str) -> Any:
            result = super().invoke(operation, args, now=now)
            path = Path(self.connection.execute("PRAGMA database_list").fetchone()[2])
            log.note("commit", self.scope_id, path.read_bytes(), _read(_wal(path)))
            return result

    return Copying


def failing_syncs(
    log: DiskLog, monkeypatch: pytest.MonkeyPatch, fails: Callable[[str, int], bool]
) -> None:
    """Note every sync of a scope file; the n-th sync of a scope's log fails with EIO (the pages
    are dropped, as Linux drops them) when ``fails(scope, n)`` says so."""
    real = scopehost._gate.sync_path
    counts: dict[str, int] = {}

    def sync_path(path: str, *, missing_ok: bool = False) -> None:
        file = Path(path)
        if file.is_dir():
            real(path, missing_ok=missing_ok)
            return
        is_log = file.name.endswith("-wal")
        scope = file.name.removesuffix("-wal").removesuffix(".sqlite3")
        content = _read(file)  # what the sync covers at most: the file as it begins
        if is_log:
            counts[scope] = counts.get(scope, 0) + 1
            if fails(scope, counts[scope]):
                log.note("failed", scope, content)
                raise OSError(errno.EIO, "Input/output error")
        real(path, missing_ok=missing_ok)
        log.note("synced", scope, "log" if is_log else "file", content)

    monkeypatch.setattr(scopehost._gate, "sync_path", sync_path)


@attrs.define
class _Scope:
    """One scope's files as the disk holds them."""

    file: bytes | None = None  # None: never synced, so a cut may leave no file at all
    log: bytearray = attrs.Factory(bytearray)  # the log's synced part, holes zeroed
    holes: list[tuple[int, int]] = attrs.Factory(list)
    written: bytes = b""  # the log as the scope last wrote it

    def follow(self, content: bytes) -> None:
        """The log is now ``content``: started anew (its header changed), or grown."""
        if content[:WAL_HEADER] != self.written[:WAL_HEADER] or len(content) < WAL_HEADER:
            self.log, self.holes, self.written = bytearray(), [], content
        elif self.written:
            assert content.startswith(self.written[: len(content)]), "the log was rewritten"
        if len(content) >= len(self.written):  # a sync may have read it before the last commit
            self.written = content

    def image(self, torn_at: int) -> bytes:
        """The log after a cut that kept ``torn_at`` bytes of what was written, holes and all."""
        kept = bytearray(self.written[:torn_at])
        kept[: len(self.log)] = self.log[:torn_at]
        for start, end in self.holes:
            kept[start:end] = bytes(len(kept[start:end]))
        return bytes(kept)


def writes_lost(log: DiskLog, scratch: Path) -> int:
    """Acknowledged writes missing from what the disk holds, over a cut after every commit."""
    draw = random.Random(0)
    scopes: dict[str, _Scope] = {}
    acked: dict[str, set[str]] = {}
    lost = 0
    for event in log.events:
        kind, name = event[0], event[1]
        scope = scopes.setdefault(name, _Scope())
        if kind == "ack":
            acked.setdefault(name, set()).add(event[2])
        elif kind == "synced" and event[2] == "file":
            scope.file = event[3]
        elif kind == "synced":
            scope.follow(event[3])
            scope.log = bytearray(event[3])
            for start, end in scope.holes:
                scope.log[start:end] = bytes(len(scope.log[start:end]))
        elif kind == "failed":
            scope.follow(event[2])
            scope.holes.append((len(scope.log), len(event[2])))
        else:
            scope.follow(event[3])
            for cut, state in scopes.items():
                durable = min(len(state.log), len(state.written))
                tails = {durable, len(state.written)} | {
                    draw.randint(durable, len(state.written)) for _ in range(2)
                }
                for torn_at in tails:
                    found = _keys(scratch, cut, state.file, state.image(torn_at))
                    lost += len(acked.get(cut, set()) - found)
    return lost


def _keys(scratch: Path, scope: str, file: bytes | None, wal: bytes) -> set[str]:
    if file is None:
        return set()
    for leftover in scratch.glob("*"):
        leftover.unlink()
    path = scratch / f"{scope}.sqlite3"
    path.write_bytes(file)
    _wal(path).write_bytes(wal)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        try:
            return {key for (key,) in conn.execute("SELECT key FROM items")}
        except sqlite3.OperationalError:
            return set()  # the table itself was lost
    finally:
        conn.close()


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
