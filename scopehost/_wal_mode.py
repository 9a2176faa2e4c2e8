"""A scope's file is put in WAL mode even while another host creates the same file."""

from __future__ import annotations

import sqlite3
import time
from typing import Final

#: How long to keep trying: SQLite's own busy timeout, which Python's ``sqlite3.connect`` sets.
_WAL_SWITCH_PATIENCE_S: Final = 5.0


def switch_to_wal(connection: sqlite3.Connection) -> None:
    """Put a scope's file in WAL mode. SQLite does not wait on its busy handler for the lock this
    takes: another host creating the same new file at the same moment holds it for a few
    milliseconds, and the switch fails at once with "database is locked". So it is tried again,
    for as long as SQLite's own busy timeout waits elsewhere; the file is in WAL mode once
    either host has switched it, and the switch is then a read."""
    deadline = time.monotonic() + _WAL_SWITCH_PATIENCE_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
        time.sleep(0.005)
