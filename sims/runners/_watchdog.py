"""A CPU allowance per world: a handler that loops without awaiting is stopped, and named.

Virtual time moves only when every task of the world waits, so a handler (a step's body, a
service operation, a check) that spins without awaiting holds the world, and ``run``, ``sweep``,
``explore`` and ``sims_worlds`` with it, for ever. One watchdog thread per process looks every
:data:`_LOOK_S` seconds at the CPU time each running world's thread has used since its world began;
a world past its allowance gets :class:`_Stopped` raised in its thread, at the next line of
Python it runs (``PyThreadState_SetAsyncExc``), and :func:`allowance` turns that into a
:class:`WorldOverran` that says where the user's code was when it was stopped.

A world that ends in time pays a read of its thread's CPU clock, two dictionary writes and the
setting of an event: the thread is started once per process (again in a forked worker), and
between worlds it waits on that event, using no CPU.
"""

from __future__ import annotations

import contextvars
import ctypes
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

#: How often the watchdog looks at the running worlds: a spinning world is stopped within its
#: allowance and this much (of wall-clock time) more.
_LOOK_S = 0.05
#: A world that caught what stopped it and spins on is struck again after this much more CPU.
_AGAIN_S = 0.5

#: The code that is not the user's, so not where a world is said to have been stopped.
_OURS = tuple(
    str(path) + os.sep
    for path in (
        Path(__file__).resolve().parents[1],  # sims
        *(
            Path(__import__(name).__file__ or "").resolve().parent
            for name in ("driver", "scopehost")
        ),
        Path(sysconfig.get_paths()["stdlib"]).resolve(),
        Path(sysconfig.get_paths()["purelib"]).resolve(),
    )
)


class WorldOverran(RuntimeError):
    """A world used more CPU than its allowance: a loop of the user's that never awaits."""


class BudgetSpent(WorldOverran):
    """A search's time budget ran out while a world ran, before the world's own allowance did:
    the search's limit, not the world's fault (see :func:`within_budget`)."""


#: The process CPU time (``time.process_time``) by which a search's time budget runs out, set by
#: :func:`within_budget` around each world a search runs; None: no search's budget applies.
_BUDGET_ENDS: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "sims_budget_ends", default=None
)


@contextmanager
def within_budget(cpu_s: float | None) -> Iterator[None]:
    """Cap each :func:`allowance` begun in the block by what is left of ``cpu_s`` seconds of
    this process's CPU (None: no cap). A world stopped by the cap raises :class:`BudgetSpent`.

    A search checks its budget between worlds; this is what stops the world that is running
    when the budget runs out, so that ``explore --budget 1s`` holds against a world of 8 s."""
    if cpu_s is None:
        yield
        return
    token = _BUDGET_ENDS.set(time.process_time() + max(0.0, cpu_s))
    try:
        yield
    finally:
        _BUDGET_ENDS.reset(token)


class _Stopped(BaseException):
    """Raised in a world's thread by the watchdog: a BaseException, so that a handler's
    ``except Exception`` does not swallow it."""


class _Watch:
    def __init__(self, ident: int, allowance_s: float, *, budget: bool = False) -> None:
        self.ident = ident
        self.allowance_s = allowance_s
        #: Whether the allowance is what a search's budget left, not the world's own.
        self.budget = budget
        self.clock = _cpu_clock(ident)
        self.began = _now(self.clock)
        self.lock = threading.Lock()
        self.over = False
        self.done = False
        self.struck_at = 0.0
        #: Where the user's code was when the world was first struck.
        self.where = ""

    def look(self) -> None:
        used = _now(self.clock) - self.began
        if used < self.allowance_s or (self.over and used < self.struck_at + _AGAIN_S):
            return
        with self.lock:
            if self.done:
                return
            if not self.over:
                frame = sys._current_frames().get(self.ident)
                self.where = _where(frame)
                self.over = True
            self.struck_at = used
            _raise_in(self.ident, _Stopped)


def _cpu_clock(ident: int) -> int | None:
    getter = getattr(time, "pthread_getcpuclockid", None)
    if getter is None:
        return None  # no clock per thread here: the process's CPU time stands in for it
    try:
        clock: int = getter(ident)
    except OSError:
        return None
    return clock


def _now(clock: int | None) -> float:
    return time.process_time() if clock is None else time.clock_gettime(clock)


def _raise_in(ident: int, kind: type[BaseException] | None) -> None:
    """Raise ``kind`` in thread ``ident`` at its next line of Python (None: take it back)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), ctypes.py_object(kind) if kind is not None else ctypes.c_void_p(0)
    )


class _Watchdog:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.watches: dict[int, _Watch] = {}
        #: Set while a world runs: between worlds the thread waits on it, and costs nothing.
        self.running = threading.Event()
        threading.Thread(target=self._loop, name="sims world watchdog", daemon=True).start()

    def _loop(self) -> None:
        while True:
            if not self.watches:
                self.running.clear()
                if not self.watches:  # a world that began since is not missed
                    self.running.wait()
            time.sleep(_LOOK_S)
            for watch in list(self.watches.values()):
                watch.look()


_dog: _Watchdog | None = None
_starting = threading.Lock()


def _watchdog() -> _Watchdog:
    """The process's watchdog; a forked worker starts its own (a fork copies no thread)."""
    global _dog
    with _starting:
        if _dog is None or _dog.pid != os.getpid():
            _dog = _Watchdog()
        return _dog


@contextmanager
def allowance(cpu_s: float | None) -> Iterator[None]:
    """Run the block with at most ``cpu_s`` seconds of CPU in this thread (None: no limit), or
    what a search's budget has left if that is less (:func:`within_budget`); past it, the block
    is stopped and :class:`WorldOverran` (:class:`BudgetSpent`) raised."""
    ends = _BUDGET_ENDS.get()
    left = None if ends is None else max(0.0, ends - time.process_time())
    budget = left is not None and (cpu_s is None or left < cpu_s)
    if budget:
        cpu_s = left
    if cpu_s is None:
        yield
        return
    dog = _watchdog()
    ident = threading.get_ident()
    watch = _Watch(ident, cpu_s, budget=budget)
    dog.watches[ident] = watch
    dog.running.set()
    try:
        yield
    except BaseException as error:
        if not _ended(watch, dog):
            raise
        # Told from where it was stopped: the deepest frame is the user's line.
        stopped = _stopped_in(error)
        overran = _overran(watch)
        if stopped is not None:
            overran = overran.with_traceback(stopped.__traceback__)
        raise overran from None
    if _ended(watch, dog):
        # It was struck as it ended and caught it (or it had not yet landed): still over.
        raise _overran(watch)


def _stopped_in(error: BaseException) -> BaseException | None:
    """The :class:`_Stopped` in ``error`` (in Trio's exception groups, or the cause or context of
    what the user's code raised on it), or None."""
    seen: set[int] = set()
    todo = [error]
    while todo:
        one = todo.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        if isinstance(one, _Stopped):
            return one
        if isinstance(one, BaseExceptionGroup):
            todo.extend(one.exceptions)
        todo.extend(e for e in (one.__cause__, one.__context__) if e is not None)
    return None


def _ended(watch: _Watch, dog: _Watchdog) -> bool:
    """Stop watching; whether the world overran. A strike not yet landed is taken back."""
    with watch.lock:
        watch.done = True
        dog.watches.pop(watch.ident, None)
        if watch.over:
            _raise_in(watch.ident, None)
        return watch.over


def _overran(watch: _Watch) -> WorldOverran:
    if watch.budget:
        return BudgetSpent(
            f"the search's time budget ran out while a world ran: it was stopped after "
            f"{watch.allowance_s:.1f} s of CPU{watch.where}"
        )
    return WorldOverran(
        f"the world used more than its {watch.allowance_s:g} s of CPU "
        f"(WorldSetup(cpu_allowance_s={watch.allowance_s:g})) and was stopped{watch.where}; "
        "virtual time moves only when every task awaits, so a loop that never awaits holds the "
        "world for ever: await inside it (trio.sleep(0) at least), or give a world that is only "
        "slow a larger WorldSetup(cpu_allowance_s=...)"
    )


def _where(frame: FrameType | None) -> str:
    """``' in job J's handler H, at FILE:LINE in F()'``: where the user's code was."""
    stack: list[FrameType] = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    users = [f for f in stack if not f.f_code.co_filename.startswith(_OURS)]
    if not users:
        return ""
    inner = users[0]
    place = f" at {_shown(inner.f_code.co_filename)}:{inner.f_lineno} in {inner.f_code.co_name}()"
    job = _job(stack)
    if job is None:
        return place
    # The handler is the outermost of the user's frames under the pass that runs it.
    handler = users[-1].f_code.co_name
    for f in users:
        if "ctx" in f.f_locals and f.f_locals["ctx"] is job[1]:
            handler = f.f_code.co_name
    return f" in the handler {handler}() of job {job[0]!r},{place}"


def _job(stack: list[FrameType]) -> tuple[str, object] | None:
    """The job whose pass the stack is in, and its context, or None (a check, the scenario)."""
    for f in stack:
        ctx = f.f_locals.get("ctx") if f.f_code.co_filename.startswith(_OURS) else None
        run = getattr(ctx, "run", None)
        job = getattr(run, "job", None)
        if isinstance(job, str):
            return job, ctx
    return None


def _shown(filename: str) -> str:
    try:
        return os.path.relpath(filename)
    except ValueError:
        return filename
