"""Ctrl-C during a long command: the first asks it to stop and say what it did so far; a second
stops it at once.

Python's own handler raises ``KeyboardInterrupt`` wherever the program happens to be: inside
Hypothesis, inside a garbage-collection callback (where it is printed as "Exception ignored" and
lost), between two worlds. A search cannot say what it searched from there. So while a search
runs, the first Ctrl-C only sets an event that the search reads before each world; Python's
handler is put back at once, so a second Ctrl-C interrupts whatever runs.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def stop_on_ctrl_c() -> Iterator[threading.Event]:
    """An event the first Ctrl-C sets, while the block runs (in the main thread: elsewhere no
    signal reaches Python, and the event is only the caller's to set)."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def first(signum: int, frame: FrameType | None) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)
