"""A real host's history, written as it happens in the trace format, for ``python -m sims check``.

One file per process (``history-HOST-PID-STARTED.jsonl`` in the folder given), so two processes on
one scope folder never write one file, and a process started again begins a file of its own. Each
line is one event, as a world writes it, with ``t`` the wall clock in milliseconds since the Unix
epoch (never going back within one file: a clock stepped back repeats the last time). The file's
first line is ``record.begin``: the trace format, the process, the part.

A file past ``max_bytes`` is closed and the next part begun (``...-p2.jsonl``, ...); of the
parts, the newest ``keep`` are kept and older ones deleted, so a history takes at most about
``keep`` times ``max_bytes`` of disk. A history is judged from its first part: once that is
deleted, ``check`` says so rather than judging a history that starts part-way
(docs/recording.md).

Lines are gathered in memory and written, whole and in order, with one ``write`` to a file opened
for appending just before a call that can change the store is sent (and as a part ends, and at
``close``). So a process killed part-way (even by SIGKILL: the kernel has what was written) leaves
in its history every call that may have reached the store, each with everything before it; what
it can lose is only what followed its last such call (reads, and the kernel's events after them),
as if it had died there. A power loss can lose more: the recorder does not sync.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import orjson

#: The format a recorded history is written in: the trace format (5), where a reply's outcome
#: may be left out as its execution's (``"as_exec": true``, docs/trace-format.md).
RECORDED_FORMAT: Final = 6
#: A part's size past which the next part is begun, by default.
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
#: How many parts of a process's history are kept, by default.
DEFAULT_KEEP: Final = 8
#: The store operations that change nothing: sending one does not make the recorder write.
#: Any other operation (an embedder's own included) may change the store, and is written first.
READS: Final = frozenset({"due_keys", "list", "export_dump", "items"})


#: The encoder for a line orjson refuses (an int past 64 bits, a key that is not a str, a lone
#: surrogate): the standard library's, every character past ASCII escaped, so any str is written.
_encode_any: Final = json.JSONEncoder(separators=(",", ":")).encode


def _line(entry: dict[str, Any]) -> bytes:
    """``entry`` as one line of JSON. orjson writes the same JSON as the standard library's
    encoder (a float may be spelled differently, as ``1e16``, and reads back the same), about five
    times as fast: recording encodes every event of the host (docs/decisions.md)."""
    try:
        return orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return (_encode_any(entry) + "\n").encode("ascii")


_NOTHING: Final = object()
#: How many executed calls wait for their reply at most (one per call in flight, in practice).
_EXECUTED_KEPT: Final = 10_000


def _outcome(fields: dict[str, Any]) -> Any:
    """What a leg event says the call answered: its result, or its error."""
    return fields.get("result", fields.get("error", _NOTHING))


class HistoryRecorder:
    """An observer writing every event it is told to this process's history file in ``folder``.

    Give it to the host and to each drive, which is what ``open_scope_host(..., record=FOLDER)``
    and a ``RecordingJobDriver`` on that host do.
    """

    def __init__(
        self,
        folder: str | Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        keep: int = DEFAULT_KEEP,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if type(max_bytes) is not int or max_bytes < 4096:
            raise ValueError(f"max_bytes={max_bytes!r}: give a part's size in bytes, at least 4096")
        if type(keep) is not int or keep < 1:
            raise ValueError(f"keep={keep!r}: give how many parts to keep, at least 1")
        if not isinstance(folder, str | Path) or not str(folder):
            raise ValueError(
                f"the history's folder is {folder!r}; give the path of a folder (made if new)"
            )
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(
                f"the history's folder {str(folder)!r} cannot be made ({error.strerror}); give a "
                "folder this process can write"
            ) from None
        self._max_bytes = max_bytes
        self._keep = keep
        self._clock = clock
        self.process = f"{socket.gethostname()}:{os.getpid()}"
        started = int(clock() * 1000)
        self._stem = f"history-{socket.gethostname()}-{os.getpid()}-{started}"
        self._part = 0
        self._last_t = 0.0
        self._fd = -1
        self._written = 0
        #: Lines not yet written, in order.
        self._pending: list[bytes] = []
        self._executed: dict[tuple[str, int], Any] = {}
        self.closed = False
        try:
            self._begin_part()
        except OSError as error:
            raise ValueError(
                f"the history's folder {str(folder)!r} cannot be written ({error.strerror}); give "
                "a folder this process can write"
            ) from None

    @property
    def path(self) -> Path:
        """The part being written now."""
        return self._path_of(self._part)

    def _path_of(self, part: int) -> Path:
        return self.folder / (f"{self._stem}.jsonl" if part == 1 else f"{self._stem}-p{part}.jsonl")

    def __call__(self, event: str, fields: dict[str, Any]) -> None:
        if self.closed:
            return  # a reply still settling as the host closes: nothing left to write it to
        t = max(self._last_t, round(self._clock() * 1000.0, 3))
        self._last_t = t
        self._add({"t": t, "ev": event, **self._shortened(event, fields)})
        if event == "rpc.send" and fields.get("op") not in READS:
            self.flush()  # the call may change the store: its line is on file before it can
        if self._written >= self._max_bytes:
            self._begin_part()

    def _shortened(self, event: str, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields``, with a reply's outcome left out when it is the one its execution wrote
        (``"as_exec": true`` instead): a real host's wire delivers what the scope answered, and
        the answer of a due list or an export is most of a history's bytes. ``check`` puts it
        back as it reads (docs/trace-format.md)."""
        if event == "rpc.exec":
            if len(self._executed) >= _EXECUTED_KEPT:
                self._executed.clear()  # replies that never came: theirs are written whole
            self._executed[(fields["link"], fields["seq"])] = _outcome(fields)
        elif event in ("rpc.deliver", "rpc.drop"):
            ran = self._executed.pop((fields["link"], fields["seq"]), _NOTHING)
            if event == "rpc.deliver" and ran is _outcome(fields) and ran is not _NOTHING:
                fields = {k: v for k, v in fields.items() if k not in ("result", "error")}
                fields["as_exec"] = True
        return fields

    def _add(self, entry: dict[str, Any]) -> None:
        line = _line(entry)
        self._pending.append(line)
        self._written += len(line)

    def flush(self) -> None:
        """Write every line gathered, in order, with one write."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def _begin_part(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
        self._part += 1
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self._fd = os.open(self._path_of(self._part), flags, 0o644)
        self._written = 0
        self._add(
            {
                "t": self._last_t or round(self._clock() * 1000.0, 3),
                "ev": "record.begin",
                "format": RECORDED_FORMAT,
                "process": self.process,
                "part": self._part,
            }
        )
        self.flush()
        gone = self._part - self._keep
        if gone >= 1:
            self._path_of(gone).unlink(missing_ok=True)

    def close(self) -> None:
        """Write what is gathered and close the file (a host that made its recorder closes it
        with itself; one you made is yours to close)."""
        if not self.closed:
            self.flush()
            os.close(self._fd)
        self.closed = True
