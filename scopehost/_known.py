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
own, like the scope files (``synchronous=NORMAL``): a line lost in a power cut is written again the
next time the scope's file opens, since every open of a file the record lacks adds it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The record's file name inside the host's directory.
KNOWN_SCOPES_FILE = ".known-scopes"


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
            self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._fd, line.encode())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
