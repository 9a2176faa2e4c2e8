"""A world's scope files, touched as operators and the power touch them (a world on files only).

The file layer has rules of its own (docs/protocol.md, "The scope's file"):

- anything SQLite does to a scope's file from outside (a reader, a writer of a table of its own,
  a checkpoint from a shell), and a change of its metadata alone (``chmod``, ``touch``), leaves
  the scope serving, with every row it had;
- another scope's file put at a scope's path is refused (``ScopeFileForeign``), never served;
- a file written behind the open scope (copied over it in place) is refused
  (``ScopeFileChanged``), and the scope's own log, with what it acknowledged, is kept aside;
- a power loss keeps every write whose reply left the scope (the output gate's promise).

``world.files`` does each of these to a scope and traces what the scope answered next
(``file.outside``, ``file.copied``, ``file.written``, ``file.power``), then checkpoints its rows
(``world.sync``), so the oracle judges the rule and the rows. A call of the world's own that the
file layer refuses besides these is traced too (``file.refused``, by ``World.ask``). In memory
``world.files`` is None: there is no file.

The power is the disk's to cut: :class:`SimulatedDisk` takes the place of the output gate's sync
(``OutputGate.sync``). It syncs for real and notes, at each sync of a scope's write-ahead log, how
long the log was and which generation of it that was (its salts). A power loss then leaves the
log as far as its last sync reached, and the database file as it is: in WAL mode SQLite writes
that file only in a checkpoint, which syncs it. Every scope it strikes is closed first and then
given back exactly that, so the next call reopens it from what a disk would have kept.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Final

from scopehost import ScopeHost, ScopeHostError
from scopehost._gate import sync_path
from scopehost._sqlite_files import LOG_HEADER, log_salts
from scopehost._watch import kept_logs

from .._trace import Trace

if TYPE_CHECKING:
    from ._world import World

#: What an operator may do to a scope's file that the scope must live with: read it through
#: SQLite, write a table of their own through SQLite, checkpoint it from a shell, change its mode
#: or its times.
OUTSIDE_ACTS: Final = ("read", "write", "checkpoint", "chmod", "touch")
#: The operator's own table, in the scope's file, beside the spec's (no dump reads it).
OPERATOR_TABLE: Final = "operator_notes"


class SimulatedDisk:
    """The disk under a world's files: each sync is real, and each sync of a log is noted, so a
    power loss can take back what no sync covered."""

    def __init__(self) -> None:
        #: Each log's length and salts as its last sync found them, by path.
        self._synced: dict[str, tuple[int, bytes | None]] = {}

    def __call__(self, path: str, *, missing_ok: bool = False) -> None:
        sync_path(path, missing_ok=missing_ok)
        if path.endswith("-wal"):
            self.noted(path)

    def noted(self, log: str) -> None:
        """``log`` was just synced (by the gate, or by an outside writer's own commit)."""
        try:
            with open(log, "rb") as opened:
                header = opened.read(LOG_HEADER)
                size = os.fstat(opened.fileno()).st_size
        except FileNotFoundError:
            self._synced.pop(log, None)
            return
        self._synced[log] = (size, log_salts(header))

    def kept_log(self, log: str) -> bytes | None:
        """What a power loss now leaves of ``log``: up to its last sync, or nothing when no sync
        covered the generation it holds (SQLite started it over since: a checkpoint synced what
        the earlier one held into the file)."""
        try:
            with open(log, "rb") as opened:
                data = opened.read()
        except FileNotFoundError:
            return None
        synced = self._synced.get(log)
        if synced is None or synced[1] != log_salts(data[:LOG_HEADER]):
            return None
        return data[: synced[0]]


class WorldFiles:
    """What operators and the power do to the scope files of one world on files."""

    def __init__(self, world: World, host: ScopeHost, disk: SimulatedDisk) -> None:
        assert host.directory is not None
        self._world = world
        self._host = host
        self._trace: Trace = world.trace
        self._directory = host.directory
        self.disk = disk

    def path(self, scope_id: str) -> Path:
        return self._directory / f"{scope_id}.sqlite3"

    def has_file(self, scope_id: str) -> bool:
        return self.path(scope_id).exists()

    async def outside(self, scope_id: str, act: str) -> None:
        """Do ``act`` (one of :data:`OUTSIDE_ACTS`) to the scope's file from outside the host,
        then ask the scope for its rows: it must serve them."""
        if act not in OUTSIDE_ACTS:
            raise ValueError(
                f"world.files.outside({scope_id!r}, {act!r}): act is one of {OUTSIDE_ACTS}"
            )
        self._world.scope(scope_id)
        self._do(self.path(scope_id), act)
        refused = await self._refusal(scope_id)
        self._trace.record("file.outside", {"scope": scope_id, "act": act, "refused": refused})
        if refused is not None:
            self._put_back_log(scope_id)
        await self._world.sync(scope_id)

    def _do(self, path: Path, act: str) -> None:
        if act == "read":
            with closing(_connect(path, "ro")) as reader:
                reader.execute("SELECT count(*) FROM _substrat_job_runs").fetchone()
        elif act == "write":
            with closing(_connect(path, "rw")) as writer:
                writer.execute(f"CREATE TABLE IF NOT EXISTS {OPERATOR_TABLE} (note TEXT)")
                writer.execute(f"INSERT INTO {OPERATOR_TABLE} VALUES ('checked')")
            # Its commit synced the log (SQLite's default, synchronous=FULL): durable.
            self.disk.noted(f"{path}-wal")
        elif act == "checkpoint":
            with closing(_connect(path, "rw")) as shell:
                shell.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        elif act == "chmod":
            os.chmod(path, os.stat(path).st_mode ^ 0o004)
        else:
            os.utime(path)

    async def copy_in(self, scope_id: str, source: str) -> None:
        """Put a copy of ``source``'s file (made through SQLite's backup) at ``scope_id``'s path
        while the scope is closed, and call the scope: it must refuse the file. Then the scope's
        own file goes back, and the scope serves it again."""
        self._world.scope(scope_id)
        path, aside = self.path(scope_id), self._directory / f"{scope_id}.aside"
        self._host.evict(scope_id)  # closed: its log is folded into its file
        os.replace(path, aside)
        path.write_bytes(self._backup(source))
        refused = await self._refusal(scope_id)
        self._host.evict(scope_id)
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.replace(aside, path)
        self._trace.record("file.copied", {"scope": scope_id, "from": source, "refused": refused})
        await self._world.sync(scope_id)

    async def copy_over(self, scope_id: str, source: str) -> None:
        """Write a whole copy of ``source``'s rows over the open scope's file, in place (as
        ``cp`` does: the same inode), behind SQLite: the scope must refuse it before it serves
        again, keeping its own log aside. Then the operator undoes it as the refusal says: the
        scope's own file and log go back, an eviction reopens them, and every row it had is
        there."""
        self._world.scope(scope_id)
        path = self.path(scope_id)
        await self._refusal(scope_id)  # the scope is open, its file and log as it left them
        own, copy = path.read_bytes(), self._backup(source)
        with open(path, "r+b") as written:
            written.write(copy)
            written.truncate()
        refused = await self._refusal(scope_id)
        # A copy of the size and 100-byte header of the file it overwrote is what the watch
        # cannot tell from SQLite's own writes (docs/decisions.md): said, so the rule is fair.
        alike = len(copy) == len(own) and copy[:100] == own[:100]
        self._trace.record(
            "file.written", {"scope": scope_id, "from": source, "refused": refused, "alike": alike}
        )
        with open(path, "r+b") as written:
            written.write(own)
            written.truncate()
        self._put_back_log(scope_id)
        await self._world.sync(scope_id)

    def _backup(self, source: str) -> bytes:
        """A whole copy of ``source``'s rows, its log's included, as SQLite's backup makes it."""
        made = self._directory / f"{source}.backup"
        with (
            closing(_connect(self.path(source), "ro")) as original,
            closing(sqlite3.connect(made)) as copy,
        ):
            original.backup(copy)
        data = made.read_bytes()
        made.unlink()
        return data

    def refused(self, scope_id: str, refusal: ScopeHostError) -> None:
        """One of the world's own calls was refused by the scope's file layer though the world
        wrote nothing behind it: traced for the oracle, then undone as the refusal says an
        operator should (the scope's own log back, an eviction)."""
        self._trace.record("file.refused", {"scope": scope_id, "refused": type(refusal).__name__})
        self._put_back_log(scope_id)

    async def lose_power(self, scopes: tuple[str, ...]) -> None:
        """Cut the power under ``scopes``: each is closed and left with what the disk kept (its
        file, and its log up to the last sync), then its rows are read back."""
        kept = {
            scope_id: self._what_the_disk_keeps(self.path(scope_id))
            for scope_id in scopes
            if self.has_file(scope_id)
        }
        for scope_id in kept:
            self._host.evict(scope_id)  # SQLite folds its log as it closes: undone just below
        for scope_id, (file_kept, log_kept, _) in kept.items():
            path = self.path(scope_id)
            path.write_bytes(file_kept)
            Path(f"{path}-shm").unlink(missing_ok=True)  # memory, never on disk
            log = Path(f"{path}-wal")
            if log_kept is None:
                log.unlink(missing_ok=True)
            else:
                log.write_bytes(log_kept)
        cut = {scope_id: kept[scope_id][2] for scope_id in sorted(kept)}
        self._trace.record("file.power", {"scopes": sorted(kept), "cut": cut})
        for scope_id in sorted(kept):
            await self._world.sync(scope_id)

    def _what_the_disk_keeps(self, path: Path) -> tuple[bytes, bytes | None, int]:
        """The file, its log as far as the last sync reached (or None), and how many bytes of
        the log the power takes."""
        log = f"{path}-wal"
        log_kept = self.disk.kept_log(log)
        size = os.stat(log).st_size if os.path.exists(log) else 0
        return path.read_bytes(), log_kept, size - len(log_kept or b"")

    def _put_back_log(self, scope_id: str) -> None:
        """What a ``ScopeFileChanged`` tells the operator to do when the file at the scope's
        path is its own after all: put the log it kept aside back (the last one: they are
        numbered as they are kept), and evict the scope, which reopens the file, checked."""
        path = self.path(scope_id)
        kept = kept_logs(path)
        if kept:
            os.replace(kept[-1], f"{path}-wal")
        self._host.evict(scope_id)

    async def _refusal(self, scope_id: str) -> str | None:
        """The name of the error the scope answers a read with, or None when it serves."""
        try:
            await self._host.stub(scope_id).export_dump()
        except ScopeHostError as error:
            return type(error).__name__
        return None


def _connect(path: Path, mode: str) -> sqlite3.Connection:
    """An outside connection to a scope's file: someone else's SQLite, not the host's."""
    return sqlite3.connect(f"file:{path}?mode={mode}", uri=True, isolation_level=None)
