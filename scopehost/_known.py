"""Which scopes a directory has held: so that a scope whose file is gone is an error, not a reset.

SQLite creates a database file that is missing. For a scope nobody has opened before, that is
how it comes to exist; for a scope whose file was deleted while its scope was closed (retired,
evicted, or the host down), it would silently turn a scope full of runs into an empty one. The
difference cannot be read from the directory as it is now, so the directory keeps a record: the
file ``.known-scopes`` (no scope id starts with ``.``, so it cannot be a scope's own file), one
line per change, ``+ID`` when a scope's file is first opened and ``-ID`` when the host is told to
forget a scope whose file is gone. The last line about an id wins.

The record is appended to and never rewritten, so several hosts (processes) on one directory can
share it: each line is one ``write`` on a descriptor opened with ``O_APPEND``, and before a host
creates a file it reads what other hosts appended since it last looked. It is not synced on its
own: a line lost in a power cut is written again the next time the scope's file opens, since every
open of a file the record lacks adds it.

A record deleted (or its directory deleted and made again) under a running host is noticed at the
next open of any scope's file: the path no longer names the file this host appends to. The host
then writes a new record holding every scope it knows and every scope file still in the directory,
so the scopes it held are not forgotten and the ones it opens next are recorded where the next host
will look. A record missing when a host first writes to it is rebuilt the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The record's file name inside the host's directory.
KNOWN_SCOPES_FILE = ".known-scopes"

#: What a scope's file name adds to its id.
SCOPE_FILE_SUFFIX = ".sqlite3"


class KnownScopes:
    """The directory's record of its scopes, as far as this host has read it (nothing until its
    first ``refresh``: a host reads the record only when it is about to create a file, or to say
    that one is gone)."""

    __slots__ = ("_fd", "_ids", "_path", "_read_to")

    def __init__(self, directory: Path) -> None:
        self._path = directory / KNOWN_SCOPES_FILE
        self._ids: set[str] = set()
        #: How many bytes of the record this host has read.
        self._read_to = 0
        #: The record's descriptor, once this host has anything to write (one handle per host,
        #: held: a host near its file-handle limit must not fail a scope's open for want of one).
        self._fd: int | None = None

    def refresh(self) -> None:
        """Read what was appended since this host last looked (by itself or another host)."""
        try:
            with self._path.open("rb") as record:
                record.seek(self._read_to)
                appended = record.read()
        except FileNotFoundError:
            return
        # A line another host is writing right now may be cut short: read only whole lines.
        whole = appended.rfind(b"\n") + 1
        self._read_to += whole
        for line in appended[:whole].decode("utf-8", errors="replace").splitlines():
            if line.startswith("+"):
                self._ids.add(line[1:])
            elif line.startswith("-"):
                self._ids.discard(line[1:])

    def __contains__(self, scope_id: str) -> bool:
        return scope_id in self._ids

    def holds(self, scope_id: str) -> bool:
        """Whether the directory has held ``scope_id``, reading the record again first when this
        host has not seen it there (another host on the directory may have opened it since)."""
        if scope_id not in self._ids:
            self.refresh()
        return scope_id in self._ids

    def add(self, scope_id: str) -> None:
        """``scope_id``'s file is open: from now on, its absence is a loss."""
        if self._fd is None or not self._still_ours(self._fd):
            self._reopen()
        if scope_id not in self._ids:
            self._append(f"+{scope_id}\n")
            self._ids.add(scope_id)

    def discard(self, scope_id: str) -> None:
        """``scope_id``'s loss is accepted: its next open creates a fresh file."""
        self.refresh()
        if scope_id in self._ids:
            self._append(f"-{scope_id}\n")
            self._ids.discard(scope_id)

    def _append(self, line: str) -> None:
        if self._fd is None:
            self._reopen()
        assert self._fd is not None
        os.write(self._fd, line.encode())

    def _still_ours(self, fd: int) -> bool:
        """Whether the record's path still names the file ``fd`` appends to."""
        try:
            found = os.stat(self._path)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino)

    def _reopen(self) -> None:
        """Open the record for appending; one that is missing is written anew from what this host
        knows and the scope files in the directory, so that no held scope drops out of it."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
            self._read_to = 0  # perhaps a record another host wrote anew: read it all again
            return
        self._fd = fd
        present = {
            path.name[: -len(SCOPE_FILE_SUFFIX)]
            for path in self._path.parent.glob(f"*{SCOPE_FILE_SUFFIX}")
            if not path.name.startswith(".")
        }
        self._ids |= present
        text = "".join(f"+{scope_id}\n" for scope_id in sorted(self._ids)).encode()
        os.write(fd, text)
        self._read_to = len(text)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
