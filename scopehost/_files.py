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
from pathlib import Path

import attrs

Identity = tuple[int, int]


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


def _beside(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)
