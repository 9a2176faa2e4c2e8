"""Reading a file that SQLite holds open, through SQLite's own descriptor, never a new one.

SQLite locks a database with POSIX advisory locks, and POSIX releases every lock a process holds
on a file the moment ANY descriptor of that file is closed in the process (SQLite's "How To
Corrupt An SQLite Database File", 2.2). A host that opened a scope's file or its ``-shm`` to read
or sync it, then closed it, silently dropped the locks of the scope's own connection. Another
connection (an operator's ``sqlite3`` shell, another host on the directory) then took itself for
the last one as it closed: it checkpointed and deleted the log and its index under the scope's
live connection, whose later commits went into a deleted file.

So the host never opens those two files while the scope's connection is open. Where the watch must
read them (the database header, the index), it finds a descriptor SQLite already holds, by the
file's device and inode, in the process's table of descriptors (``/proc/self/fd`` on Linux,
``/dev/fd`` elsewhere), and reads with ``pread``, which moves no offset and closes nothing. Before
each read it checks that the descriptor still names that file (a descriptor of another connection
may close and its number be reused), and looks again if it does not. The log (``-wal``) carries no
lock and may be opened freely.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._files import identity

#: Where the process's descriptors are listed, each a link to the file it has open.
_TABLES = ("/proc/self/fd", "/dev/fd")
#: How far above the lowest free descriptor (taken before SQLite opened its files) to look first.
_NEAR = 16


def lowest_free_descriptor() -> int | None:
    """The descriptor number the next ``open`` in this process would get: SQLite's files, opened
    right after, are found near it without listing every descriptor the process holds."""
    try:
        probe = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return None
    os.close(probe)
    return probe


class HeldFile:
    """A file SQLite holds open in this process, read through SQLite's descriptor."""

    __slots__ = ("_descriptor", "_identity", "path")

    def __init__(self, path: str, near: int | None) -> None:
        self.path = path
        self._identity = identity(Path(path))
        self._descriptor = self._find(near)

    def read(self, length: int, offset: int = 0) -> bytes | None:
        """``length`` bytes at ``offset``, or None when no descriptor of the file is open here."""
        descriptor = self._descriptor
        if descriptor is None or _identity_of(descriptor) != self._identity:
            descriptor = self._descriptor = self._find(None)
            if descriptor is None:
                return None
        try:
            return os.pread(descriptor, length, offset)
        except OSError:
            return None

    def _find(self, near: int | None) -> int | None:
        if self._identity is None:
            return None
        if near is not None:
            for descriptor in range(near, near + _NEAR):
                if _identity_of(descriptor) == self._identity:
                    return descriptor
        for table in _TABLES:
            try:
                names = os.listdir(table)
            except OSError:
                continue
            for name in names:
                if name.isdigit() and _identity_of(int(name)) == self._identity:
                    return int(name)
        return None


def _identity_of(descriptor: int) -> tuple[int, int] | None:
    try:
        found = os.fstat(descriptor)
    except OSError:
        return None
    return found.st_dev, found.st_ino
