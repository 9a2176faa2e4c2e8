"""The trace: every RPC leg, every kernel decision and every world event, as JSON lines.

Each line is one event: ``t`` (virtual milliseconds since the world began), ``ev`` (its name), and
the event's own fields. Keys are sorted and floats are written by ``repr``, so the same seed and
code give the same bytes in any process and under any ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import trio

#: The version of the events and fields a trace carries (docs/trace-format.md), written in its
#: ``world.begin``. 2: the oracle's events (``job.register``, ``drive.call``, ``start.*``,
#: ``hx.*``), ``rpc.exec`` at the moment the store ran it, and ``world.sync`` with step rows.
#: 3: ``world_sha256`` in the ``world.begin`` of a user's world, the content hash of its file.
#: 4: ``hx.got`` (what each ``step()`` handed back to the handler) and a refused ``job.register``.
#: 5: the job's outside world (``svc.*``, ``fault.fence`` on a service call) and the world's end
#: (``world.closing``, then ``world.quiet`` or ``world.cut``), ``by``/``by_op`` on a release.
#: Every world writes the events of its end, so every trace is of this format (earlier versions
#: said the oldest that described the trace; a trace of theirs still reads, and replays against
#: the world that wrote it).
TRACE_FORMAT = 5


#: The ``kind`` of an effect row in a scope's items: what ``record_effect`` writes.
EFFECT_KIND = "effect"


def effect_recorded(args: Any, result: Any) -> str | None:
    """The ``RUN/STEP`` key of the effect an executed ``invoke`` call wrote, given the call's
    ``args`` and what it returned, or None when it wrote no effect.

    The ONE definition of an effect, read by the built-in ``effects`` check, by ``effects_in`` and
    by the timeline: a row of kind ``effect`` written by ``record`` (what ``record_effect``
    writes) or by a ``record_once`` that answered True (``record_effect_once``: one that answered
    False found the key there and wrote nothing). A row of any other kind (a claim, a note) is the
    job's own bookkeeping, not an effect a second run of a step body would repeat."""
    if not (
        isinstance(args, list | tuple)
        and len(args) >= 2
        and isinstance(args[1], dict)
        and args[1].get("kind") == EFFECT_KIND
    ):
        return None
    if (args[0] == "record" and result is not None) or (
        args[0] == "record_once" and result is True
    ):
        return str(args[1].get("key"))
    return None


def service_effect(event: dict[str, Any]) -> str | None:
    """The key of the effect a service call made, given its ``svc.exec`` event, or None when it
    changed nothing (a read, a refusal, a repeat answered from an idempotency key).

    The same definition of an effect as :func:`effect_recorded`, for the job's outside world: an
    operation that changed its service's state. Its key is ``RUN/SERVICE.OPERATION``: the run
    that called it, and what it called."""
    if event.get("ev") != "svc.exec" or event.get("effect") is not True:
        return None
    return f"{event['run']}/{event['op']}"


def imported(args: Any) -> tuple[dict[str, Any], Any] | None:
    """The dump an ``import_dump`` call carried and its source scope, as its ``rpc.send`` traces
    its arguments (``[dump, source_scope_id]``), or None when they are not that shape."""
    if not isinstance(args, list) or len(args) < 2:
        return None
    dump = args[0]
    if not isinstance(dump, dict) or not isinstance(dump.get("runs"), list):
        return None
    return dump, args[1]


def dump_ledgers(dump: dict[str, Any]) -> dict[str, set[str]]:
    """The steps whose results a traced dump holds, by run: what each run's ledger memoizes."""
    ledgers: dict[str, set[str]] = {}
    for step in dump.get("steps") or ():
        if isinstance(step, dict) and step.get("result") is not None:
            ledgers.setdefault(str(step.get("run_id")), set()).add(str(step.get("step")))
    return ledgers


class BadTraceLine(ValueError):
    """A line of a trace file that is JSON, but not an event: ``line N ...`` says which, and
    what it lacks, so that nothing reads a field the line does not have."""


def _event_problem(event: object) -> str | None:
    """What keeps ``event`` (a line read as JSON) from being an event, or None: an object with
    its name (``ev``) and its time (``t``, virtual ms since the world began)."""
    if not isinstance(event, dict):
        return (
            f"is {type(event).__name__} {_short(event)}, not an event (an object with 'ev' and 't')"
        )
    name = event.get("ev")
    if not isinstance(name, str) or not name:
        return f"is an object whose event name ('ev') is {_short(name)}, not an event's name"
    if "t" not in event:
        return f"is a {name} event without its time ('t')"
    t = event["t"]
    if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t < math.inf:
        return f"is a {name} event whose time ('t') is {_short(t)}, not a number of ms >= 0"
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: What a hidden folder's path reads as in a trace.
HIDDEN_FOLDER = "<the world's folder>"
#: How the name of a world's own temporary folder begins (``WorldSetup(on_files=True)``).
WORLD_FOLDER_PREFIX = "sims-world-"
_WORLD_FOLDER = re.compile(r"[^\s'\"]*" + WORLD_FOLDER_PREFIX + r"[A-Za-z0-9_]+")


def hide_world_folders(text: str) -> str:
    """``text`` with the path of any world's own temporary folder written as ``HIDDEN_FOLDER``:
    an error a world raised names it, and each process draws it anew."""
    return _WORLD_FOLDER.sub(HIDDEN_FOLDER, text)


def _hide(value: Any, folder: str) -> Any:
    """``value`` with ``folder`` written as ``HIDDEN_FOLDER`` in every string it holds."""
    if isinstance(value, str):
        return value.replace(folder, HIDDEN_FOLDER) if folder in value else value
    if isinstance(value, dict):
        return {key: _hide(item, folder) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_hide(item, folder) for item in value]
    return value


def _line(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@attrs.define
class Trace:
    """An append-only list of events; ``enabled=False`` keeps only the counts (for big worlds)."""

    events: list[dict[str, Any]] = attrs.field(factory=list)
    enabled: bool = True
    counts: dict[str, int] = attrs.field(factory=dict)
    #: Called with every event as it happens, kept or not: a checker can run live over a world
    #: too big to keep its trace.
    listeners: list[Callable[[dict[str, Any]], None]] = attrs.field(factory=list)
    #: Reads virtual time in seconds. A world passes its clock's own ``current_time``: the public
    #: ``trio.current_time()`` costs a microsecond a read, and every event reads it.
    now: Callable[[], float] = attrs.field(default=trio.current_time, repr=False)
    #: A folder whose path must not reach the trace (a world's own temporary folder: an error
    #: about a scope's file names it), written as ``HIDDEN_FOLDER`` instead, so the trace stays
    #: a function of the seed.
    hidden: str | None = None

    #: The last time read and its milliseconds as written: several events share each instant,
    #: and rounding a float to three places costs about as much as the rest of recording one.
    _last_now: float = attrs.field(default=math.nan, init=False, repr=False)
    _last_t: float = attrs.field(default=0.0, init=False, repr=False)

    def record(self, event: str, fields: dict[str, Any]) -> None:
        counts = self.counts
        counts[event] = counts.get(event, 0) + 1
        now = self.now()
        if now != self._last_now:
            self._last_now = now
            self._last_t = round(now * 1000.0, 3)
        entry = {"t": self._last_t, "ev": event, **fields}
        if self.hidden is not None:
            entry = _hide(entry, self.hidden)
        if self.enabled:
            self.events.append(entry)
        for listener in self.listeners:
            listener(entry)

    def of(self, *names: str) -> Iterator[dict[str, Any]]:
        wanted = set(names)
        return (event for event in self.events if event["ev"] in wanted)

    def lines(self) -> Iterator[str]:
        return (_line(event) for event in self.events)

    def to_bytes(self) -> bytes:
        return "".join(line + "\n" for line in self.lines()).encode("utf-8")

    def digest(self) -> str:
        """The sha256 of the trace's bytes: equal digests, identical traces."""
        return hashlib.sha256(self.to_bytes()).hexdigest()

    def write(self, path: str | Path) -> None:
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> Trace:
        """The trace of these JSON lines; :class:`BadTraceLine` for a line that is not an
        event, ``ValueError`` for one that is not JSON."""
        trace = cls()
        for number, line in enumerate(lines, 1):
            if line.strip():
                event = json.loads(line)
                problem = _event_problem(event)
                if problem is not None:
                    raise BadTraceLine(f"line {number} {problem}")
                trace.events.append(event)
                trace.counts[event["ev"]] = trace.counts.get(event["ev"], 0) + 1
        return trace

    @classmethod
    def read(cls, path: str | Path) -> Trace:
        with Path(path).open(encoding="utf-8") as handle:
            return cls.from_lines(handle)


def calls_by_drive(trace: Trace) -> dict[tuple[str, str], int] | None:
    """How many calls of each (drive, operation) the world's drives made: scope calls
    (``rpc.send``) and service calls (``svc.send``, as "SERVICE.OPERATION"), as a plan counts
    them. None when the trace kept no events (only their counts): it could say nothing true."""
    if not trace.events:
        return None
    made: dict[tuple[str, str], int] = {}
    for event in trace.of("rpc.send", "svc.send"):
        drive = event["link"] if event["ev"] == "rpc.send" else event["drive"]
        key = (str(drive), str(event["op"]))
        made[key] = made.get(key, 0) + 1
    return made
