"""The files a directory scope's connection was opened on, so that closing it never leaves its
write-ahead log for a file that replaced it.

SQLite finds a database's log by name (``NAME-wal``, with its index ``NAME-shm``). When the file
under an open connection is deleted or replaced (a restore put a backup in its place), SQLite sees
that the file moved and closes the connection without checkpointing or removing the log: it stays
beside the new file, and the next connection to open that path applies the old file's frames to
it, which silently undoes the restore or leaves a malformed database. So closing such a connection
removes the log and its index, but only the very files it used (same device and inode): a log put
back with the restored file is the restore's own and stays.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import attrs

Identity = tuple[int, int]
#: A file as ``stat`` finds it: device, inode, size, and the times of its last write and change.
Stamp = tuple[int, int, int, int, int]


def identity(path: Path) -> Identity | None:
    """The (device, inode) ``path`` names, or None when nothing is there."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


@attrs.frozen
class OpenedFiles:
    """A scope file, its log and the log's index, as a connection opened them."""

    path: Path
    database: Identity | None
    log: Identity | None
    index: Identity | None

    @classmethod
    def of(cls, path: Path) -> OpenedFiles:
        return cls(
            path, identity(path), identity(_beside(path, "-wal")), identity(_beside(path, "-shm"))
        )

    def clear_stale_log(self) -> None:
        """Once the connection is closed: if the path no longer names the file it had open,
        remove the log and index it left behind (never a log that is not the one it used)."""
        if self.database is not None and identity(self.path) == self.database:
            return
        for suffix, opened in (("-wal", self.log), ("-shm", self.index)):
            leftover = _beside(self.path, suffix)
            if opened is not None and identity(leftover) == opened:
                leftover.unlink(missing_ok=True)

    def close_unfolded(self, connection: sqlite3.Connection, kept_log: Path | None) -> None:
        """Close ``connection`` without letting SQLite fold its log into the file, which was
        written behind it (see ``_watch``): folding would lay the old file's pages over the new
        content. SQLite folds on close only while the path still names its file, so the file is
        moved aside for the moment of the close. Then the scope's own log is moved to
        ``kept_log``: never deleted (it holds writes the scope acknowledged), and never left where
        the next connection would apply it to a file it does not belong to. A log written behind
        the scope (``kept_log`` None) belongs to whoever wrote it and stays. The index (``-shm``)
        stays too: another connection may be using it, and the next connection to open the file
        alone rebuilds it from the log it finds."""
        # A name of this process's own: another host on the directory may be closing the same
        # file the same way at the same moment.
        aside = _beside(self.path, f"-closing-{os.getpid()}")
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            # Another host has it aside already: the path names no file, so SQLite does not
            # fold into it on this close either.
            connection.close()
        else:
            try:
                connection.close()
            finally:
                os.replace(aside, self.path)
        log = _beside(self.path, "-wal")
        if kept_log is not None and self.log is not None and identity(log) == self.log:
            os.replace(log, kept_log)


def stamp(path: Path | str) -> Stamp | None:
    """``path`` as ``stat`` finds it now, or None when nothing is there."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def _beside(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)
