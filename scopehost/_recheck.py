"""A scope whose sync failed is checked as it reopens, and made durable again before it serves.

After a failed sync the scope acknowledged nothing more (see ``_gate``), and its actor closed (an
eviction, or an idle retirement). Closing the last connection to a file makes SQLite fold the log
into the file and sync it; the next connection, if it finds a log still there, rebuilds its view
of it from the file, frame by frame, keeping the frames up to the first one that does not check
out. So by the time the scope reopens, what it holds is what could be read back, and this module
makes sure that is sound and durable before any call runs:

1. ``PRAGMA integrity_check``: a file that fails it is refused (``ScopeSyncFailed``, with what the
   check found), and checked again at each reopening, until a backup is put back or the scope is
   forgotten.
2. ``PRAGMA wal_checkpoint(TRUNCATE)``: the log is folded into the file and emptied, so no frame
   written from now on follows one a failed sync dropped. SQLite syncs the log before the fold
   and the file after it.
3. A sync of the file and of its directory of our own, as the gate's first sync does.

Each step that fails leaves the scope tainted, and the call that reopened it is refused.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from . import _gate
from ._errors import ScopeSyncFailed


def check_reopened(
    connection: sqlite3.Connection, path: Path, scope_id: str, failure: OSError
) -> None:
    """Check and fold the file of a scope whose sync failed, on the connection just opened; raise
    ``ScopeSyncFailed`` unless it is whole and durable."""
    what = (
        f"scope {scope_id!r}: a sync of its file {path} failed "
        f"({type(failure).__name__}: {failure})"
    )
    try:
        rows = [str(row[0]) for row in connection.execute("PRAGMA integrity_check(3)")]
    except sqlite3.DatabaseError as error:
        rows = [str(error)]
    if rows != ["ok"]:
        # One line: the check's first row heads the rest with "*** in database main ***".
        found = "; ".join(
            line.strip() for row in rows for line in row.splitlines() if not line.startswith("***")
        )
        raise ScopeSyncFailed(
            f"{what}, and the file failed its check on reopening ({found}); nothing "
            "was read or written — put a backup back as a new file at that path and evict the "
            "scope, or delete the file (with its -wal and -shm) and call "
            f"forget({scope_id!r}) on the scope host to start the scope over empty"
        )
    try:
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise ScopeSyncFailed(
                f"{what}, and on reopening its log could not be folded into the file: another "
                "connection has the file open (another host on this directory?); nothing was "
                "read or written — close it, and the next call checks the scope again"
            )
        _gate.sync_path(str(path))
        _gate.sync_path(os.path.dirname(path))
    except (sqlite3.Error, OSError) as error:
        raise ScopeSyncFailed(
            f"{what}, and on reopening its file could not be made durable either "
            f"({type(error).__name__}: {error}); nothing was read or written — once the disk is "
            "sound, the next call checks the scope again"
        ) from error
