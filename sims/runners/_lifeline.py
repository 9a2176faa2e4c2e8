"""Worker processes end with the process that started them.

A sweep's worker processes (``sweep --jobs N``) and a search's (``explore --jobs N``) run worlds
for as long as their work lasts, and a sweep hands each a chunk of seeds that can take minutes.
A worker notices that its parent is gone only when it next reads a task or sends a result, so a
parent killed (SIGKILL: a CI job's timeout, the OOM killer) or told to end (SIGTERM) left its
workers holding the machine's cores until their chunks were done. So:

- While :func:`workers_end_with_this_process` runs (a sweep's pool, the command line's sweep and
  explore), every process ``multiprocessing`` forks from this one, whatever forks it (a pool, a
  search's own workers), asks the kernel as it starts to kill it when its parent ends: Linux's
  ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, through ``ctypes``. Then it checks that its parent is
  still the process that started it, since the parent may have ended before the request. Where
  there is no ``prctl`` (or it is refused), a daemon thread polls ``os.getppid()`` every
  :data:`_POLL_S` seconds instead, and ends the worker when it changes. The request is made from
  ``multiprocessing``'s after-fork hooks, which every forked ``Process`` runs before its target,
  so the code that starts workers need not know of it.
- While :func:`workers_end_on_sigterm` runs (the command line), SIGTERM kills this process's
  worker processes first, then ends this process as SIGTERM does (same exit status), on any
  platform.

The kernel's signal is sent when the *thread* that started a worker ends, not its process. A pool
here is created, used and closed in one call (a sweep, a search), so in one thread: a caller that
runs a sweep in a thread of its own keeps the pool's workers for as long as that call runs.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.util
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: How often a worker without ``prctl`` looks for its parent.
_POLL_S = 0.5

#: ``PR_SET_PDEATHSIG`` of ``<linux/prctl.h>``.
_PR_SET_PDEATHSIG = 1


class _Enrolled:
    """What :func:`workers_end_with_this_process` registers after fork: ``multiprocessing`` holds
    it weakly, so the hook runs for as long as the block holds it."""


@contextmanager
def workers_end_with_this_process() -> Iterator[None]:
    """While the block runs, each process ``multiprocessing`` forks from this one ends when this
    one does (see the module's docstring)."""
    enrolled = _Enrolled()
    multiprocessing.util.register_after_fork(enrolled, _end_with_the_parent_process)
    try:
        yield
    finally:
        del enrolled  # the hook goes with it


def _end_with_the_parent_process(enrolled: _Enrolled) -> None:
    parent = multiprocessing.parent_process()  # the forked Process's, set before this runs
    if parent is not None and parent.pid is not None:
        end_with_parent(parent.pid)


#: The parent this process already ends with (a forked child inherits its parent's: another pid).
_ending_with: int | None = None


def end_with_parent(parent: int, *, kernel: bool = True) -> None:
    """End this process when process ``parent`` ends: by the kernel's signal where there is one
    (``kernel``), else by a thread that polls for it."""
    global _ending_with
    if _ending_with == parent:  # asked twice (two blocks of workers_end_with_this_process)
        return
    _ending_with = parent
    # A handler the parent set (workers_end_on_sigterm) came with the fork: a worker that is
    # terminated ends as a worker does.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if not (kernel and _kernel_kills_orphan()):
        threading.Thread(target=_watch, args=(parent,), name="end-with-parent", daemon=True).start()
    if os.getppid() != parent:  # it ended before the kernel was asked
        os._exit(1)


def _kernel_kills_orphan() -> bool:
    """Ask the kernel to kill this process when its parent ends; whether it agreed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    prctl.restype = ctypes.c_int
    return bool(prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0)


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_POLL_S)
    os._exit(1)


@contextmanager
def workers_end_on_sigterm() -> Iterator[None]:
    """While the block runs (in the main thread: elsewhere no signal reaches Python), SIGTERM
    kills this process's worker processes, then ends this process as SIGTERM would have."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def end(signum: int, frame: FrameType | None) -> None:
        try:
            workers = multiprocessing.active_children()
        except RuntimeError:  # a pool's thread changed the set of children as it was read
            workers = []  # they end with this process all the same (see end_with_parent)
        for worker in workers:
            worker.kill()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, end)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
