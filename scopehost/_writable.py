"""A scope's file in a folder this process may not write, told as such, with the remedy.

SQLite says only "attempt to write a readonly database" (a file it could open only to read) or
"unable to open database file" (one it could not create), naming neither the folder nor the
permission that is missing. The host's directory must be writable: each scope's file, its
write-ahead log and the host's list of its scopes are written there.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from ._errors import ScopeUnavailable


def unwritable_file(scope_id: str, path: Path) -> ScopeUnavailable | None:
    """The error to raise when ``scope_id``'s file at ``path`` failed to open for want of the
    right to write it or its folder, or None when this process may write both."""
    if not os.access(path.parent, os.W_OK):
        what = f"the host's folder {path.parent}"
    elif path.exists() and not os.access(path, os.W_OK):
        what = f"its file {path}"
    else:
        return None
    return ScopeUnavailable(
        f"scope {scope_id!r} cannot write its database: {what} is not writable by this process "
        f"(user {_user()}), and the host writes each scope's file, its write-ahead log and its "
        "list of scopes in its folder; give that user the right to write there (chmod, chown), "
        "or open the host on a folder it may write"
    )


def _user() -> str:
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"id {uid}"
