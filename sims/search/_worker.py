"""A search's worker process: where a world runs that the search can end.

A world blocked in real time (a ``time.sleep`` in a handler, a wait on a lock or a socket) or stuck
in one C call holds the thread that runs it, and no exception reaches a thread inside a C call. So
a search runs its worlds in worker processes, and a world that blocks costs its worker:

- the watchdog (:mod:`sims.runners._watchdog`) sees a world blocked in real time past its
  allowance; the worker's :class:`_Ending` sends the search what the world was doing (the job,
  the handler, the line) and ends the process at once;
- a world stuck in one call that never lets go of the interpreter keeps the watchdog from running
  too. For that one, the worker posts when its world began, with its allowance and the process's
  CPU time then (:class:`_Running`), and the search looks at the worker's CPU time: a world still
  running at twice its allowance of CPU and a second more is one the watchdog's strikes do not
  reach (a busy machine delays a world, but does not give it more CPU); one that has used none
  for ten times its allowance and ten seconds more, a C call that waits holding the interpreter.
  Past either, the search has ``faulthandler`` (a signal handler of C, which needs no
  interpreter) write the worker's stacks to a file, kills the worker, and reads from the file
  where the world was.

Either way the search starts a fresh worker and sends it the jobs the dead one still had. A world
that uses no allowance (``cpu_allowance_s=None`` and no time budget) is not watched.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import signal
import tempfile
import threading
import time
from collections import deque
from multiprocessing.connection import Connection
from multiprocessing.context import ForkContext
from typing import Any, NoReturn

import attrs

from ..runners._watchdog import ends_process, place_of
from ._jobs import WorldJob, WorldResult, run_world

#: A world stuck in one call is ended past this much CPU: its allowance twice, and a second.
_STUCK_CPU = (2.0, 1.0)
#: ... or past this much wall-clock time: its allowance ten times, and ten seconds.
_STUCK_WALL = (10.0, 10.0)
#: How long the search waits for ``faulthandler`` to write a stuck worker's stacks.
_DUMP_WAIT_S = 1.0
#: How often the search looks at its workers' worlds while it waits for their results.
LOOK_AGAIN_S = 0.25

#: A frame of a ``faulthandler`` dump: ``  File "PATH", line N in FUNCTION``.
_FRAME = re.compile(r'^\s*File "(?P<file>.*)", line (?P<line>\d+) in (?P<function>.*)$')


@attrs.define
class Ticket:
    """One job sent to a worker, and its result once it came (None: it was skipped, as its
    batch had been abandoned)."""

    job: WorldJob
    batch: int
    done: bool = False
    result: WorldResult | None = None


class Worker:
    """One worker process, the jobs sent to it in order, and a fresh process when one ends."""

    def __init__(self, context: ForkContext, reading: Any) -> None:
        self._context = context
        self._reading = reading
        #: The jobs sent and not yet answered, oldest first (a worker answers in order).
        self.sent: deque[Ticket] = deque()
        self._start()

    @property
    def connection(self) -> Connection:
        return self._connection

    def _start(self) -> None:
        self._dump = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self._running = _Running(self._context.Array("d", 3, lock=False))
        #: The limit a stuck world passed, once it was found stuck.
        self._stuck = ""
        ours, theirs = self._context.Pipe()
        self._process = self._context.Process(
            target=_serve,
            args=(theirs, self._reading, self._running, self._dump.fileno()),
            name="sims search worker",
            daemon=True,
        )
        self._process.start()
        theirs.close()
        self._connection = ours
        for ticket in self.sent:
            self._send(ticket)

    def send(self, ticket: Ticket) -> None:
        self.sent.append(ticket)
        self._send(ticket)

    def _send(self, ticket: Ticket) -> None:
        # A worker that ended takes no job: receive() finds out, and a fresh one gets it again.
        with contextlib.suppress(OSError):
            self._connection.send((ticket.job, ticket.batch))

    def receive(self) -> float:
        """Answer the oldest job sent, from the worker (or from its end); the CPU it used."""
        ticket = self.sent.popleft()
        try:
            result: WorldResult | None = self._connection.recv()
            ended = result is not None and result.blocked is not None
        except (EOFError, OSError):
            result, ended = self._died(), True
        ticket.done, ticket.result = True, result
        if ended:
            self._restart()
        return 0.0 if result is None else result.cpu_s

    def end_if_stuck(self) -> None:
        """Kill the worker if its world is stuck in one call, its stacks written first."""
        pid = self._process.pid
        stuck = None if pid is None else self._running.past_its_limit(pid)
        if pid is None or stuck is None:
            return
        self._stuck = stuck
        os.kill(pid, signal.SIGUSR1)
        _wait_for_dump(self._dump.fileno())
        self._process.kill()

    def _died(self) -> WorldResult:
        self._process.join()
        dump = os.pread(self._dump.fileno(), 1 << 20, 0).decode("utf-8", "replace")
        if self._stuck:
            return WorldResult(blocked=stuck_words(self._stuck, dump))
        return WorldResult(
            raised=(
                f"the worker process that ran the world ended without its result (exit code "
                f"{self._process.exitcode}): a handler, step body or service ended the process"
            )
        )

    def _restart(self) -> None:
        self.close()
        self._start()

    def close(self) -> None:
        self._process.kill()
        self._process.join()
        self._connection.close()
        self._dump.close()


def _wait_for_dump(fd: int) -> None:
    """Until ``faulthandler`` has written the stacks (its size stops growing), a second at most."""
    size, ends = -1, time.monotonic() + _DUMP_WAIT_S
    while time.monotonic() < ends:
        now = os.fstat(fd).st_size
        if now and now == size:
            return
        size = now
        time.sleep(0.02)


def stuck_words(limit: str, dump: str) -> str:
    """What a world stuck in one call was doing, after "world N", from its worker's stacks."""
    stacks = re.split(
        r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$",
        dump,
        flags=re.MULTILINE,
    )
    where = ""
    for stack in stacks:
        frames = [
            m.group("file", "line", "function") for m in map(_FRAME.match, stack.splitlines()) if m
        ]
        if any(function == "_serve" for _, _, function in frames):
            where = place_of([(file, int(line), function) for file, line, function in frames])
    return (
        f"was stuck in one call for more than {limit}{where}, never "
        "coming back to Python (a call into C that holds the interpreter): a handler, step body "
        "or service must not block on real time or compute without end; use trio.sleep, and "
        "await inside a long computation"
    )


class _Running:
    """The world a worker runs, as the search sees it: [the monotonic time it began (0: none
    runs), its allowance, the worker's CPU time when it began], in memory both processes share."""

    def __init__(self, shared: Any) -> None:
        self.shared = shared

    def arm(self, allowance_s: float) -> None:
        self.shared[1] = allowance_s
        self.shared[2] = time.process_time()
        self.shared[0] = time.monotonic()  # last: a world runs once this is set

    def disarm(self) -> None:
        self.shared[0] = 0.0

    def past_its_limit(self, pid: int) -> str | None:
        """The limit the running world of worker ``pid`` is past ("3.0 s of CPU"), or None."""
        began, allowance_s, cpu_began = (float(value) for value in self.shared)
        if began == 0:
            return None
        cpu = _cpu_s(pid)
        cpu_limit = allowance_s * _STUCK_CPU[0] + _STUCK_CPU[1]
        if cpu is not None and cpu - cpu_began >= cpu_limit:
            return f"{cpu_limit:.1f} s of CPU"
        wall_limit = allowance_s * _STUCK_WALL[0] + _STUCK_WALL[1]
        if time.monotonic() - began >= wall_limit:
            return f"{wall_limit:.1f} s of wall-clock time"
        return None


def _cpu_s(pid: int) -> float | None:
    """The CPU time process ``pid`` has used, or None where the system does not say."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class _Ending:
    """How the worker ends a world (see :class:`~sims.runners._watchdog.Ending`)."""

    def __init__(self, connection: Connection, running: _Running) -> None:
        self.connection = connection
        self.running = running
        #: One message at a time: a world's result, or the end of a world blocked in real time.
        self.sending = threading.Lock()
        #: The process's CPU time when the running world began.
        self.began = 0.0

    def send(self, result: WorldResult | None) -> None:
        with self.sending:
            self.connection.send(result)

    def arm(self, allowance_s: float) -> None:
        self.running.arm(allowance_s)

    def disarm(self) -> None:
        self.running.disarm()

    def end(self, words: str) -> NoReturn:
        self.sending.acquire()  # never released: the process ends holding it
        try:
            cpu_s = time.process_time() - self.began
            self.connection.send(WorldResult(blocked=words, cpu_s=cpu_s))
        finally:
            os._exit(0)


def _serve(connection: Connection, reading: Any, running: _Running, dump: int) -> None:
    """The worker: run each job sent, unless the search stopped reading its batch (a queued job
    the search abandoned costs nothing), and send its result back."""
    # A Ctrl-C reaches every process of the terminal's group: the search stops its workers
    # itself, and a worker's traceback would only bury the summary it prints.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)
    ending = _Ending(connection, running)
    with ends_process(ending):
        while True:
            try:
                job, batch = connection.recv()
            except (EOFError, OSError):
                return
            if reading.value != batch:
                ending.send(None)
                continue
            ending.began = time.process_time()
            result = run_world(job)
            ending.send(attrs.evolve(result, cpu_s=time.process_time() - ending.began))
