"""A scope file written behind SQLite's back is noticed before the scope serves again.

``cp backup.sqlite3 s1.sqlite3`` over an open scope writes into the very file SQLite has open (the
same inode, so the check for a deleted or replaced file cannot see it). SQLite reads what it has
cached and the pages of its own log, and the rest from the new content: the scope went on showing
runs the copy did not hold, and when its connection closed, SQLite folded its log into the copy,
which left a malformed file or a silent mix of the two.

What is a change is decided from what the files hold, never from their times: SQLite, operators
and backup tools move those all the time (a root reader ``fchown``s the log, ``chmod``, ``touch``,
a hard link, a checkpoint from a shell). The times only say when to look. As a turn of the actor
ends (it served every message that had queued up), the watch notes the files' ``stat`` and, when
they moved, what SQLite's own records say (``_sqlite_files``): the database header and the log's
index. As the next turn begins, and as the scope closes, it ``stat``s them again; when anything
moved, it judges:

- the log must be the one SQLite's index describes: the same file (device and inode), with the
  index's salts in its header and, at the index's last valid frame, that frame's checksum. A log
  deleted, replaced, copied over or cut fails this;
- the database file's content (its size and its 100-byte header) may change only by a
  checkpoint, which moves the index's checkpoint record (``IndexHeader.checkpoint``). A file whose
  content moved while no checkpoint ran was written behind SQLite.

Everything SQLite does passes: readers, the backup API, checkpoints, another connection's writes
(another host on the directory serving the same scope). So does a change of metadata alone.

A change found is a refusal, never a guess, and never a loss. The scope closes at once without
folding its log into the file (``OpenedFiles.close_unfolded``), so the file stays exactly what was
put there; its own log, which holds every write it acknowledged since its last checkpoint, is
moved aside, not deleted (``kept_log_path``), for the operator to put back should the file turn
out to be the right one after all. A note beside the file, ``NAME.sqlite3-changed``, says what
was found and where the log went; every host on the directory honours it: every call fails with
``ScopeFileChanged`` until somebody says the file there is the one to open, by evicting the scope
(``ScopeHost.evict``). The next open then checks the file (``PRAGMA integrity_check``) before it
serves, and refuses one that fails.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

import attrs

from ._descriptors import HeldFile
from ._errors import ScopeFileChanged
from ._files import Stamp, stamp
from ._sqlite_files import (
    DATABASE_HEADER,
    FRAME_HEADER,
    INDEX_HEADER,
    LOG_HEADER,
    IndexHeader,
    frame_checksum,
    log_salts,
)

#: What the note beside a changed file says first: refused, or told to open it (and check it).
CHANGED: Final = "changed"
ACCEPTED: Final = "accepted"
#: What a scope closing on a changed file tells its host: what was found, and whether the log is
#: the scope's own (to keep aside) rather than written behind it (to leave where it is).
Changed = tuple[str, bool]
#: How often a judgement that finds a change reads the files again before it stands: another
#: connection may be writing the log and its index as they are read.
_READINGS = 3


@attrs.frozen
class _Sight:
    """The files as the scope last saw them: their ``stat``, and what SQLite's records said."""

    file: Stamp | None
    log: Stamp | None
    header: bytes | None
    index: IndexHeader | None


class FileWatch:
    """How the scope's file and log looked when the scope last touched them."""

    __slots__ = ("_file", "_index", "_sight", "database", "log", "log_is_ours")

    def __init__(self, database: str, near: int | None) -> None:
        self.database = database
        self.log = database + "-wal"
        #: False once a judgement found the log itself written behind SQLite (it then belongs
        #: to whoever wrote it, and stays where it is).
        self.log_is_ours = True
        self._file = HeldFile(database, near)
        self._index = HeldFile(database + "-shm", near)
        self._sight = self._see(stamp(database), stamp(self.log), None)

    def changed(self) -> str | None:
        """What shows that something other than SQLite wrote the file or the log since the
        scope last looked, or None. A file deleted or replaced by another (another inode) is not
        counted here: the store's own check refuses it as gone (``ScopeFileGone``), and the
        restore procedure relies on it."""
        file, log = stamp(self.database), stamp(self.log)
        sight = self._sight
        if file == sight.file and log == sight.log:
            return None
        if file is None or sight.file is None or file[:2] != sight.file[:2]:
            return None  # moved, not changed
        found = self._judge(file, log)
        for _ in range(_READINGS - 1):
            if found is None:
                break
            found = self._judge(file, log)
        if found is None:
            self._sight = self._see(file, log, sight)
            return None
        reason, self.log_is_ours = found
        return reason

    def noted(self) -> None:
        """The scope's turn ended: note the files as its writes (and SQLite's checkpoints among
        them) left them.

        A turn that only appended to the log leaves the index's checkpoint record as it was, so
        the record is read again only when the turn may have moved it: the file moved (a
        checkpoint ran in the turn), or the log had been copied whole into the file (a write
        then starts the log over, with new salts)."""
        sight = self._sight
        file, log = stamp(self.database), stamp(self.log)
        if file == sight.file and log == sight.log:
            return
        index = sight.index
        if file != sight.file or index is None or index.backfilled >= index.max_frame:
            self._sight = self._see(file, log, sight)
        else:
            self._sight = attrs.evolve(sight, log=log)

    def _see(self, file: Stamp | None, log: Stamp | None, before: _Sight | None) -> _Sight:
        if before is not None and file == before.file:
            header = before.header
        else:
            header = self._file.read(DATABASE_HEADER)
        return _Sight(file, log, header, self._read_index())

    def _read_index(self) -> IndexHeader | None:
        for _ in range(_READINGS):
            data = self._index.read(INDEX_HEADER)
            if data is None:
                return None
            index = IndexHeader.parse(data)
            if index is not None:
                return index
        return None

    def _judge(self, file: Stamp, log: Stamp | None) -> Changed | None:
        index = self._read_index()
        written = self._judge_log(log, index)
        if written is not None:
            return written, False  # the log is whoever wrote it's now
        written = self._judge_file(file, index)
        return None if written is None else (written, True)

    def _judge_log(self, log: Stamp | None, index: IndexHeader | None) -> str | None:
        before = self._sight.log
        if before is not None and log is None:
            return "the log was deleted"
        if before is not None and log is not None and log[:2] != before[:2]:
            return "the log was replaced by another file"
        if index is None or index.max_frame == 0:
            return None  # no frame of the log counts: SQLite reads none of it
        try:
            with open(self.log, "rb") as opened:  # the log carries no lock (``_descriptors``)
                salts = log_salts(opened.read(LOG_HEADER))
                opened.seek(index.frame_offset(index.max_frame))
                checksum = frame_checksum(opened.read(FRAME_HEADER))
        except FileNotFoundError:
            return "the log was deleted"
        if salts != index.salts:
            return "the log's header is not the one SQLite's index describes: copied over"
        if checksum != index.frame_checksum:
            return "the log lacks the last frame SQLite's index describes: copied over or cut"
        return None

    def _judge_file(self, file: Stamp, index: IndexHeader | None) -> str | None:
        sight = self._sight
        assert sight.file is not None
        header = self._file.read(DATABASE_HEADER)
        if header is None or sight.header is None or index is None or sight.index is None:
            return None  # SQLite's records cannot be read here: see docs/decisions.md
        if file[2] == sight.file[2] and header == sight.header:
            return None  # the same size and header: metadata, or a write no record shows
        if index.checkpoint != sight.index.checkpoint:
            return None  # a checkpoint copied the log into the file
        return "its content changed while no checkpoint ran"


def note_path(database: Path) -> Path:
    return database.with_name(database.name + "-changed")


def kept_log_path(database: Path) -> Path:
    """Where a scope's own log goes when its file was written behind it: beside the file, under
    a name SQLite never reads, and never over an earlier one."""
    number = 1
    while (kept := _kept_log(database, number)).exists():
        number += 1
    return kept


def kept_logs(database: Path) -> list[Path]:
    """The logs kept aside beside ``database``, oldest first (numbered as they were kept)."""
    found: list[Path] = []
    while (kept := _kept_log(database, len(found) + 1)).exists():
        found.append(kept)
    return found


def _kept_log(database: Path, number: int) -> Path:
    suffix = "-wal.kept" if number == 1 else f"-wal.kept.{number}"
    return database.with_name(database.name + suffix)


def note_changed(database: Path, found: str, kept: Path | None) -> None:
    """Leave the note that refuses the file until somebody evicts the scope. A note another host
    left first keeps what that host found, and the logs kept aside add up: each host on the
    directory that closes on the change may keep one."""
    note = note_path(database)
    lines = _note_lines(database)
    if lines and lines[0] == CHANGED:
        found, logs = lines[1], lines[2:]
    else:
        logs = []
    if kept is not None:
        logs.append(str(kept))
    note.write_text("\n".join([CHANGED, found, *logs]) + "\n")


def _note_lines(database: Path) -> list[str]:
    """The note's lines: its state, what was found, then each log kept aside (none, or more)."""
    try:
        text = note_path(database).read_text()
    except FileNotFoundError:
        return []
    state, _, rest = text.partition("\n")
    found, _, logs = rest.partition("\n")
    return [state, found, *(log for log in logs.split("\n") if log)]


def accept_changed(database: Path) -> None:
    """The scope was evicted: the file there is the one to open, once checked."""
    if note_path(database).exists():
        note_path(database).write_text(f"{ACCEPTED}\n")


def changed_file_message(scope_id: str, path: Path) -> str:
    """Why a scope whose file was written behind it refuses a call: what was found, where its own
    log is, and what to do."""
    lines = _note_lines(path)
    found = lines[1] if len(lines) > 1 and lines[1] else "written behind SQLite"
    kept = " and ".join(lines[2:])
    log = (
        f"its own log, with every write it acknowledged since its last checkpoint, was moved "
        f"aside to {kept}; "
        if kept
        else "its log was left as found; "
    )
    undo = (
        f"; if nothing was put there after all, move {lines[-1]} back to {path}-wal first, then "
        f"evict({scope_id!r})"
        if kept
        else ""
    )
    return (
        f"scope {scope_id!r}: its database file {path} was written by something other than "
        f"SQLite while the scope had it open ({found}); nothing was read or written by this "
        f"call; {log}the scope serves no call until told to open the file now there — if that "
        f"file is the one to keep (a backup put back), call evict({scope_id!r}) on the scope "
        f"host and the next call opens exactly it, checked{undo}"
    )


def check_noted(connection: sqlite3.Connection | None, path: Path, scope_id: str) -> None:
    """Before a scope's file is opened (``connection`` None) and once it is: refuse a file noted
    as changed, and check one that was accepted, dropping the note once it passes."""
    note = note_path(path)
    try:
        state = note.read_text().split("\n", 1)[0]
    except FileNotFoundError:
        return
    if state != ACCEPTED:
        raise ScopeFileChanged(changed_file_message(scope_id, path))
    if connection is None:
        return
    try:
        rows = [str(row[0]) for row in connection.execute("PRAGMA integrity_check(3)")]
    except sqlite3.DatabaseError as error:
        rows = [str(error)]
    if rows != ["ok"]:
        found = "; ".join(
            line.strip() for row in rows for line in row.splitlines() if not line.startswith("***")
        )
        raise ScopeFileChanged(
            f"scope {scope_id!r}: its database file {path}, put there while the scope had it "
            f"open, fails its check ({found}); nothing was read or written — a copy written in "
            "place is damaged when another host on the directory went on writing the scope "
            "meanwhile (its checkpoints land in the copy), or when the copy was taken from a "
            "file in use without its -wal; put a whole file there as a new file (a backup taken "
            f"while its scope was closed, or with its -wal), then evict({scope_id!r}) on the "
            "scope host, on every host serving the directory"
        )
    note.unlink(missing_ok=True)
