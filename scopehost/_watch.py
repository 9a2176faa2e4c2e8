"""A scope file written behind its open scope is noticed before the scope serves again.

``cp backup.sqlite3 s1.sqlite3`` over an open scope writes into the very file SQLite has open (the
same inode, so the check for a deleted or replaced file cannot see it). SQLite reads what it has
cached and the pages of its own log, and the rest from the new content: the scope went on showing
runs the copy did not hold, and when its connection closed, SQLite folded its log into the copy,
which left a malformed file or a silent mix of the two.

So the scope watches its file and its log with ``stat`` (size, modification and change times;
no program can set a change time back, and every write moves it). As a turn of its actor ends
(it served every message that had queued up), it notes how it leaves them, its own writes and
SQLite's checkpoints in them included; as the next turn begins, and as it closes, it compares.
Anything else that wrote either in between (a copy in place, a rollback to an older copy, another
scope's file, a log copied over the open one or deleted) shows. Another host on the directory
serving the same scope writes them too, through SQLite; its commits move SQLite's
``data_version``, which a copy does not, so such a change is taken as that host's.

A change found is a refusal, never a guess. The scope closes at once without folding its log into
the file (``OpenedFiles.close_unfolded``), so the file stays exactly what was put there, and it
leaves a note beside it, ``NAME.sqlite3-changed``, which every host on the directory honours:
every call fails with ``ScopeFileChanged`` (naming the file and the remedy) until somebody says
the file there is the one to open, by evicting the scope (``ScopeHost.evict``). The next open then
checks the file (``PRAGMA integrity_check``) before it serves, and refuses one that fails.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from ._errors import ScopeFileChanged
from ._files import Stamp, stamp

#: What the note beside a changed file says first: refused, or told to open it (and check it).
CHANGED: Final = "changed"
ACCEPTED: Final = "accepted"


class FileWatch:
    """How the scope's file and log looked when the scope last touched them."""

    __slots__ = ("_file", "_log", "_version", "database", "log")

    def __init__(self, database: str, connection: sqlite3.Connection) -> None:
        self.database = database
        self.log = database + "-wal"
        self._file = stamp(database)
        self._log = stamp(self.log)
        self._version = _data_version(connection)

    @property
    def our_log(self) -> Stamp | None:
        """The log as the scope last wrote it."""
        return self._log

    def changed(self, connection: sqlite3.Connection) -> bool:
        """Whether something else wrote the file in place, or the log, since the scope did. A
        file deleted or replaced by another (another inode) is not counted here: the store's own
        check refuses it as gone (``ScopeFileGone``), and the restore procedure relies on it.

        Another connection to the file (another host on the directory serving the same scope)
        writes them too, through SQLite: its commits move SQLite's ``data_version``, a copy does
        not. Such a change is taken as the other host's, and noted as the new normal."""
        found = stamp(self.database)
        if found != self._file:
            if found is None or self._file is None or found[:2] != self._file[:2]:
                return False  # moved, not changed
        elif stamp(self.log) == self._log:
            return False
        version = _data_version(connection)
        if version == self._version:
            return True
        self._version = version
        self._file, self._log = found, stamp(self.log)
        return False

    def noted(self) -> None:
        """The scope's turn ended: note the file and the log as its writes left them."""
        self._file = stamp(self.database)
        self._log = stamp(self.log)


def _data_version(connection: sqlite3.Connection) -> int:
    """SQLite's count of commits by other connections to the file (cheap: no page is read)."""
    return int(connection.execute("PRAGMA data_version").fetchone()[0])


def note_path(database: Path) -> Path:
    return database.with_name(database.name + "-changed")


def note_changed(database: Path) -> None:
    """Leave the note that refuses the file until somebody evicts the scope."""
    note_path(database).write_text(
        f"{CHANGED}\n{database} was written by something other than its scope's host while the "
        "scope had it open; every call to the scope is refused until the scope is evicted, which "
        "opens the file found here then (checked first)\n"
    )


def accept_changed(database: Path) -> None:
    """The scope was evicted: the file there is the one to open, once checked."""
    if note_path(database).exists():
        note_path(database).write_text(f"{ACCEPTED}\n")


def changed_file_message(scope_id: str, path: Path) -> str:
    return (
        f"scope {scope_id!r}: its database file {path} was written by something other than this "
        "host while the scope had it open (copied over in place, or rolled back); nothing was "
        "read or written, and the scope serves no call until told to open the file now there — "
        "if that file is the one to keep (a backup put back), call "
        f"evict({scope_id!r}) on the scope host and the next call opens exactly it, checked, its "
        f"own log discarded; otherwise put the right file there first, then evict({scope_id!r})"
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
            f"open, fails its check ({found}); nothing was read or written — put a whole file "
            f"there (a backup taken while its scope was closed, or with its -wal), then "
            f"evict({scope_id!r}) on the scope host"
        )
    note.unlink(missing_ok=True)
