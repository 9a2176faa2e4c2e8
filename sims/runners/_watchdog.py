"""A CPU allowance per world: a handler that loops without awaiting is stopped, and named.

Virtual time moves only when every task of the world waits, so a handler (a step's body, a
service operation, a check) that spins without awaiting holds the world, and ``run``, ``sweep``,
``explore`` and ``sims_worlds`` with it, for ever. One watchdog thread per process looks every
:data:`_LOOK_S` seconds at the CPU time each running world's thread has used since its world began;
a world past its allowance gets :class:`_Stopped` raised in its thread, at the next line of
Python it runs (``PyThreadState_SetAsyncExc``), and :func:`allowance` turns that into a
:class:`WorldOverran` that says where the user's code was when it was stopped.

A world that waits in real time (``time.sleep``, a lock, a socket) uses no CPU, so its CPU clock
stands still while it holds the world. The watchdog therefore also looks at the time the world's
thread spent neither running nor waiting for a core (wall-clock time, less its CPU time, less the
time it waited on the run queue): past the same allowance (a second at least, when it is what a
search's budget left), the world is BLOCKED in real time. In a process that may be ended for it
(:func:`ends_process`: a search's worker), the watchdog hands what the world was doing to that
process's end, which ends the process; elsewhere it strikes the world as for a loop, and the
strike lands when the call that blocks returns (Python cannot stop a thread inside a C call). A
worker is also told when each world begins and ends (``arm``, ``disarm``), so that it can end a
world stuck in one C call that never lets the watchdog run.

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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import NoReturn, Protocol

#: How often the watchdog looks at the running worlds: a spinning world is stopped within its
#: allowance and this much (of wall-clock time) more.
_LOOK_S = 0.05
#: A world that caught what stopped it and spins on is struck again after this much more CPU.
_AGAIN_S = 0.5
#: A world whose allowance is what a search's budget left is found blocked in real time only
#: after this long at least: a budget nearly spent must not take a stall of the disk for a sleep.
_BLOCKED_AT_LEAST_S = 1.0

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


class WorldBlocked(WorldOverran):
    """A world blocked in real time past its allowance: a sleep or a wait the world's virtual
    clock cannot see, which no CPU allowance stops."""

    def __init__(self, words: str) -> None:
        super().__init__(f"the world {words}")
        #: What it was doing, after "the world" (:func:`blocked_words`).
        self.words = words


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


class Ending(Protocol):
    """How a process that may be ended for a world (a search's worker) ends it: told as each
    world begins, with its allowance, and as it ends; and ended, with what a world blocked in real
    time was doing (:func:`blocked_words`)."""

    def arm(self, allowance_s: float) -> None: ...

    def disarm(self) -> None: ...

    def end(self, words: str) -> NoReturn: ...


#: The end of this process, when a world blocked in real time may end it (:func:`ends_process`).
_ending: Ending | None = None


@contextmanager
def ends_process(ending: Ending) -> Iterator[None]:
    """In the block, a world blocked in real time past its allowance ends this process, through
    ``ending``, instead of being struck (which would land only when its blocking call returns)."""
    global _ending
    _ending = ending
    try:
        yield
    finally:
        _ending = None


def blocked_words(allowance_s: float, where: str) -> str:
    """What a world blocked in real time was doing, after "the world" (or "world N")."""
    return (
        f"was blocked in real time (not on the world's clock) for more than {allowance_s:.1f} s"
        f"{where}: a handler, step body or service must not sleep or block on real time; use "
        "trio.sleep"
    )


class _Stopped(BaseException):
    """Raised in a world's thread by the watchdog: a BaseException, so that a handler's
    ``except Exception`` does not swallow it."""


class _Watch:
    def __init__(self, ident: int, allowance_s: float, *, budget: bool = False) -> None:
        self.ident = ident
        self.allowance_s = allowance_s
        #: Whether the allowance is what a search's budget left, not the world's own.
        self.budget = budget
        #: How long the world may be blocked in real time.
        self.blocked_after_s = max(allowance_s, _BLOCKED_AT_LEAST_S) if budget else allowance_s
        self.clock = _cpu_clock(ident)
        self.began = _now(self.clock)
        self.native = threading.get_native_id()
        self.wall_began = time.monotonic()
        self.queued_began = _queued_s(self.native)
        self.lock = threading.Lock()
        self.over = False
        #: Whether it was struck for a wait in real time, not for its CPU.
        self.blocked = False
        self.done = False
        self.struck_at = 0.0
        #: Where the user's code was when the world was first struck.
        self.where = ""

    def look(self) -> None:
        used = _now(self.clock) - self.began
        if used < self.allowance_s:
            if not self.over and self._blocked_s(used) >= self.blocked_after_s:
                self._strike(used, blocked=True)
            return
        if not self.over or used >= self.struck_at + _AGAIN_S:
            self._strike(used, blocked=False)

    def _blocked_s(self, used: float) -> float:
        """The wall-clock time the world's thread spent neither on a core nor waiting for one."""
        idle = time.monotonic() - self.wall_began - used
        if idle < self.blocked_after_s:
            return idle  # the run queue is read only when it could matter
        return idle - (_queued_s(self.native) - self.queued_began)

    def _strike(self, used: float, *, blocked: bool) -> None:
        with self.lock:
            if self.done:
                return
            if not self.over:
                frame = sys._current_frames().get(self.ident)
                self.where = _where(frame)
                self.over = True
                self.blocked = blocked
                if blocked and _ending is not None:
                    _ending.end(blocked_words(self.blocked_after_s, self.where))
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


def _queued_s(native: int) -> float:
    """The seconds thread ``native`` of this process has waited on the run queue for a core (a
    busy machine's delay, not the world's), or 0.0 where the system does not say."""
    try:
        with open(f"/proc/self/task/{native}/schedstat", encoding="ascii") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _raise_in(ident: int, kind: type[BaseException]) -> None:
    """Raise ``kind`` in thread ``ident`` at its next line of Python."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(kind))


class _TakenBack(BaseException):
    """Delivered by :func:`_take_back` and caught there at once; never seen outside it."""


def _take_back(ident: int) -> None:
    """Take back a strike at this thread (``ident`` is the calling thread) that may not have
    landed yet, leaving nothing pending.

    ``PyThreadState_SetAsyncExc(NULL)`` would clear the strike but not the interpreter's flag
    that one is pending (CPython 3.11 lowers it only when it delivers one); with a trace function
    set later (``sys.settrace``, coverage.py, a debugger) that flag sends the interpreter round
    the first instruction of the next call for ever. So a harmless one replaces the strike and is
    delivered here, at the loop's first jump back, which lowers the flag."""
    try:
        _raise_in(ident, _TakenBack)
        for _ in range(1_000):
            pass
    except _TakenBack:
        return
    raise AssertionError("the interpreter did not deliver an exception set for this thread")


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
    ending = _ending
    if ending is not None:
        ending.arm(cpu_s)
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
        if _ending is not None:
            _ending.disarm()
        if watch.over:
            _take_back(watch.ident)
        return watch.over


#: Where a world was stopped when no frame of the user's was running.
NONE_OF_YOURS = ", while the simulator's own code ran (none of yours was running)"


def _overran(watch: _Watch) -> WorldOverran:
    # Struck while no code of the user's ran (the simulator, Trio, or Python itself, such as the
    # ``<frozen runpy>`` of ``python -m``): said so, rather than naming a frame that is nobody's.
    where = watch.where or NONE_OF_YOURS
    if watch.blocked:
        return WorldBlocked(blocked_words(watch.blocked_after_s, where))
    if watch.budget:
        return BudgetSpent(
            f"the search's time budget ran out while a world ran: it was stopped after "
            f"{watch.allowance_s:.1f} s of CPU{where}"
        )
    return WorldOverran(
        f"the world used more than its {watch.allowance_s:g} s of CPU "
        f"(WorldSetup(cpu_allowance_s={watch.allowance_s:g})) and was stopped{where}; "
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
    users = [f for f in stack if not _ours(f.f_code.co_filename)]
    if not users:
        return ""
    place = place_of([(f.f_code.co_filename, f.f_lineno, f.f_code.co_name) for f in users[:1]])
    job = _job(stack)
    if job is None:
        return place
    # The handler is the outermost of the user's frames under the pass that runs it.
    handler = users[-1].f_code.co_name
    for f in users:
        if "ctx" in f.f_locals and f.f_locals["ctx"] is job[1]:
            handler = f.f_code.co_name
    return f" in the handler {handler}() of job {job[0]!r},{place}"


def place_of(frames: Sequence[tuple[str, int, str]]) -> str:
    """``' at FILE:LINE in F()'``: the innermost of ``frames`` (file, line, function; innermost
    first) that is the user's code, not the simulator's or Python's, or "" when none is."""
    for filename, line, function in frames:
        if not _ours(filename):
            return f" at {_shown(filename)}:{line} in {function}()"
    return ""


def _ours(filename: str) -> bool:
    """Whether ``filename`` is code that is not the user's: the simulator's, the store's, the
    kernel's, the libraries', Python's own, and a frozen module of Python's (``<frozen runpy>``,
    the ``python -m`` that started the process)."""
    return filename.startswith(_OURS) or filename.startswith("<frozen ")


def _job(stack: list[FrameType]) -> tuple[str, object] | None:
    """The job whose pass the stack is in, and its context, or None (a check, the scenario)."""
    for f in stack:
        ctx = f.f_locals.get("ctx") if _ours(f.f_code.co_filename) else None
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
