"""Writing an output file the user named (``run --trace``, ``--timeline``): whole, or an error.

A write that fails part way (a full disk, a file system gone read-only, a quota) leaves a file cut
short that reads as whole up to its last line: a trace that replay would call "not a trace" only
at the end, a page that stops mid-table. So a failed write is told in one line that names the
file and why, and what it left is removed when it is a file of its own (a regular file); anything
else (a device such as ``/dev/full``, a pipe) is left alone, and the line says the output is cut.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ._arguments import UsageError


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """Turn an ``OSError`` of the block, which writes ``path`` (named by ``option``), into a
    :class:`UsageError` that says so, with the cut file removed."""
    try:
        yield
    except OSError as error:
        why = error.strerror or str(error)
        raise UsageError(f"{option} {path}: the write failed ({why}); {_left(path)}") from None


def _left(path: Path) -> str:
    """What is left of a failed write, and what to do."""
    remedy = "free some space or name another file, and run it again"
    try:
        if path.is_file():
            path.unlink()
            return f"the cut file was removed; {remedy}"
    except OSError as error:
        return f"it is cut short and could not be removed ({error.strerror}); {remedy}"
    return f"what reached it is cut short; {remedy}"
