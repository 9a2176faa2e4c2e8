"""A history recorded on a real host (``scopehost.HistoryRecorder``), read and judged by the oracle.

A recorded history is the events a world's trace holds, from real processes: the host's wire
events (``rpc.*``), the kernel's, and the handler's side (``hx.*``) from each
``RecordingJobDriver``. It lacks what only a simulator knows, so some checks cannot apply
(:data:`SKIPPED`, each with why), and it has no end.

What cannot be judged is refused with the reason (:class:`CannotJudge`), never judged wrongly:
a file that is not a recorded history, a history whose first part was rotated away, a drive that
did not record its side, a job with a pass deadline (the oracle has no model of a cancelled
handler), a file whose times go back.

Processes are merged by their wall-clock times. Processes on one machine share its clock; on
several machines the merge is right only as far as their clocks agree, and what depends on the
order of two processes' calls to one scope is judged in the merged order (docs/recording.md).
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

import attrs

from .._numbers import ms, plural
from .._trace import BadTraceLine, Trace, imported
from ._checks import MAX_REPEATS, TraceChecker
from ._report import MODEL_CHECKS, CheckReport, Finding

#: The first event of every part of a recorded history.
BEGIN: Final = "record.begin"
#: The formats of recorded histories ``check`` reads: 5, the trace format itself, and 6, which
#: leaves a reply's outcome out where it is its execution's (``"as_exec": true``).
FORMATS: Final = (5, 6)
#: The newest, what a recorder writes now.
FORMAT: Final = FORMATS[-1]
#: The scope operations only a drive sends: one on a link whose drive recorded nothing of its
#: own side means a drive was built as a plain ``JobDriver`` on a recording host.
_DRIVE_OPERATIONS: Final = frozenset({"due_keys", "claim", "begin", "commit_pass", "begin_step"})

#: The operations that write one run, naming it first.
_RUN_WRITES: Final = frozenset(
    {"claim", "begin", "miss", "patch", "commit_pass", "begin_step", "record_step"}
)

#: The spec's checks a recorded history cannot feed, and why.
SKIPPED: Final = {
    "runs-settle": "a recorded history has no end: a run still running when recording stopped "
    "is not a violation",
    "effects (services)": "calls to services are not recorded on a real host (the effect rows a "
    "step writes at its scope are, and are checked)",
    "a scenario's own checks": "a recorded history has no scenario",
}


class CannotJudge(Exception):
    """The history cannot be judged; the message says why, and what to do."""


@attrs.frozen
class Part:
    """One file of one process's history."""

    path: Path
    process: str
    part: int
    #: Its events, ``record.begin`` first.
    events: tuple[dict[str, Any], ...]
    #: Whether the file's last line was cut (the process was killed as it wrote it).
    cut: bool


@attrs.frozen
class History:
    """The merged events of every process, ``t`` in ms since the first of them."""

    events: tuple[dict[str, Any], ...]
    processes: tuple[str, ...]
    began_ms: float
    #: The files whose last line was cut, dropped and named.
    cut: tuple[Path, ...]
    #: The files read, in the order given.
    files: tuple[Path, ...]
    #: Per process whose history ends with handlers still running: the process, when its
    #: history ends (ms, as ``t``), and those passes' runs.
    left_running: tuple[tuple[str, float, tuple[str, ...]], ...] = ()
    #: The runs a process sent a write for and ended before its outcome was recorded, with when
    #: it was sent (ms, as ``t``) and what it was: the store may have run it, so what the checks
    #: say of the run from then on is not judged (:func:`judge_history`).
    in_flight: dict[str, tuple[float, str]] = attrs.field(factory=dict)

    @property
    def shared_scopes(self) -> dict[str, tuple[str, ...]]:
        """The scopes more than one process called, each with the hosts of those processes:
        what the merged order is trusted for (docs/recording.md, "Clocks")."""
        if len(self.processes) < 2:
            return {}
        callers: dict[str, set[str]] = {}
        for event in self.events:
            if event["ev"] == "rpc.exec":
                process = str(event["link"]).rpartition("@")[2]
                callers.setdefault(str(event["scope"]), set()).add(process)
        return {
            scope: tuple(sorted({process.rpartition(":")[0] for process in found}))
            for scope, found in sorted(callers.items())
            if len(found) > 1
        }


#: Findings set aside, by run: the run, why, and the findings.
SetAside = tuple[tuple[str, str, tuple[Finding, ...]], ...]


@attrs.frozen
class HistoryVerdict:
    """The checks' report on what could be judged, and the findings set aside, by run."""

    report: CheckReport
    #: Findings the oracle could not be right about, and why, by run: a run whose beginning the
    #: history never saw, or the findings on a run from a write left in flight by a process's end.
    set_aside: SetAside
    #: Why the oracle's models of the store and the kernel did not run on this history (the
    #: invariant checks did), or None: they ran (:func:`models_unfit`).
    models_skipped: str | None = None
    #: Where the models stopped following the history, and what they said after, set aside.
    models_cut: ModelsCut | None = None


def history_files(paths: Iterable[str | Path]) -> list[Path]:
    """The files named, a folder standing for every ``history-*.jsonl`` in it."""
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(path.glob("history-*.jsonl"))
            if not found:
                raise CannotJudge(f"{path}: the folder holds no history-*.jsonl file")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise CannotJudge(f"{path}: no such file or folder")
    return files


def read_part(path: Path) -> Part:
    """One file, held to what a recorded history is."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CannotJudge(f"{path}: cannot be read ({error})") from None
    lines = text.split("\n")
    cut = bool(lines[-1])  # a whole file ends with a newline, leaving an empty last piece
    whole = lines[:-1]
    if not whole:
        raise CannotJudge(f"{path}: empty; a recorded history begins with {BEGIN}")
    try:
        events = Trace.from_lines(whole).events  # each line an event with its time
    except BadTraceLine as error:
        raise CannotJudge(f"{path}: {error}") from None
    except (ValueError, RecursionError):
        raise CannotJudge(f"{path}: {_first_not_json(whole)} is not JSON") from None
    head = events[0]
    if head.get("ev") != BEGIN:
        raise CannotJudge(
            f"{path}: its first line is a {head.get('ev')!r} event, not {BEGIN}: not a history "
            "recorded on a real host (a world's trace is judged by `python -m sims replay`)"
        )
    process, part = head.get("process"), head.get("part")
    if head.get("format") not in FORMATS or not isinstance(process, str) or type(part) is not int:
        raise CannotJudge(
            f"{path}: its {BEGIN} line says format {head.get('format')!r}, process {process!r}, "
            f"part {part!r}; this check reads what a recorder of format "
            f"{' or '.join(map(str, FORMATS))} writes (the format, the process as HOST:PID, the "
            "part as 1, 2, ...)"
        )
    return Part(path, process, part, tuple(events), cut)


def _first_not_json(lines: list[str]) -> str:
    for number, line in enumerate(lines, 1):
        try:
            json.loads(line)
        except (ValueError, RecursionError):
            return f"line {number}"
    return "a line"


def read_history(paths: Iterable[str | Path]) -> History:
    """The history in these files (or folders), merged, or :class:`CannotJudge`."""
    # A file named twice (itself and by its folder, say) is one file.
    files = list({path.resolve(): path for path in history_files(paths)}.values())
    by_process: dict[str, list[Part]] = {}
    for path in files:
        part = read_part(path)
        by_process.setdefault(part.process, []).append(part)
    read = [_process(process, parts) for process, parts in sorted(by_process.items())]
    several = len(read) > 1
    merged = list(
        heapq.merge(
            *(_named(one.events, one.process) if several else one.events for one in read),
            key=lambda e: e["t"],
        )
    )
    if not merged:
        raise CannotJudge(
            f"{plural(len(files), 'file')} of {', '.join(sorted(by_process))} hold no event after "
            f"{BEGIN}: nothing happened on the host while it recorded, so there is nothing to judge"
        )
    began = merged[0]["t"]
    rebased = tuple({**e, "t": round(e["t"] - began, 3)} for e in merged)
    _hold_to_judgeable(rebased)
    in_flight: dict[str, tuple[float, str]] = {}
    for one in read:
        for run, (t, op) in one.in_flight.items():
            in_flight.setdefault(run, (round(t - began, 3), f"{op} sent by process {one.process}"))
    return History(
        events=rebased,
        processes=tuple(sorted(by_process)),
        began_ms=began,
        cut=tuple(p.path for parts in by_process.values() for p in parts if p.cut),
        files=tuple(files),
        left_running=tuple(
            (one.process, round(one.events[-1]["t"] - began, 3), one.left_running)
            for one in read
            if one.left_running
        ),
        in_flight=in_flight,
    )


@attrs.frozen
class _Process:
    """One process's history, its parts joined: its events (a crash of its drives added where
    it ended with handlers running), those handlers' runs, and its writes left in flight."""

    process: str
    events: list[dict[str, Any]]
    left_running: tuple[str, ...]
    in_flight: dict[str, tuple[float, str]]


def _process(process: str, parts: list[Part]) -> _Process:
    """One process's parts, held to being whole and in order, and joined."""
    parts.sort(key=lambda p: p.part)
    numbers = [p.part for p in parts]
    if numbers != list(range(1, len(parts) + 1)):
        missing = min(set(range(1, max(numbers) + 1)) - set(numbers))
        raise CannotJudge(
            f"process {process}: part {missing} of its history is missing (rotated away, or "
            "not given); a history is judged from its beginning: give every part, or record "
            "with a larger keep= or max_bytes="
        )
    cut_inside = [p.path for p in parts[:-1] if p.cut]
    if cut_inside:
        raise CannotJudge(f"{cut_inside[0]}: its last line is cut, and a later part follows")
    _hold_to_order(process, [e for p in parts for e in p.events])
    events = _outcomes_put_back(process, [e for p in parts for e in p.events[1:]])
    running = _still_in_their_handler(events)
    in_flight = _writes_in_flight(events)
    if running:
        events.extend(_ended(events))
    return _Process(process, events, running, in_flight)


def _outcomes_put_back(process: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each reply the recorder wrote ``as_exec`` (format 6) with the outcome of its execution,
    as a world's trace spells it."""
    executed: dict[tuple[Any, Any], dict[str, Any]] = {}
    whole = []
    for event in events:
        if event["ev"] == "rpc.exec":
            executed[(event.get("link"), event.get("seq"))] = event
        elif event["ev"] == "rpc.deliver" and event.get("as_exec"):
            ran = executed.get((event.get("link"), event.get("seq")))
            if ran is None:
                raise CannotJudge(
                    f"process {process}: the reply to call {event.get('seq')} of "
                    f"{event.get('link')} is written as its execution's, and no execution of it "
                    "is in the history: not what a recorder writes"
                )
            outcome = {key: ran[key] for key in ("result", "error") if key in ran}
            event = {k: v for k, v in event.items() if k != "as_exec"} | outcome
        whole.append(event)
    return whole


def _writes_in_flight(events: list[dict[str, Any]]) -> dict[str, tuple[float, str]]:
    """The runs written to by a call sent in these events whose outcome never came: a process
    killed between the store's commit and the recorder's line. By the run it names (every
    operation on one run takes its id first), with when it was sent and the operation."""
    pending: dict[tuple[Any, Any], dict[str, Any]] = {}
    for event in events:
        key = (event.get("link"), event.get("seq"))
        if event["ev"] == "rpc.send":
            pending[key] = event
        elif event["ev"] in ("rpc.exec", "rpc.drop"):
            pending.pop(key, None)
    found: dict[str, tuple[float, str]] = {}
    for event in pending.values():
        args = event.get("args")
        if event["op"] in _RUN_WRITES and isinstance(args, list) and args:
            found.setdefault(str(args[0]), (event["t"], str(event["op"])))
    return found


def _ended(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A process whose history ends with handlers running was killed there (or stopped recording
    as if it had been): each of its drives ends as a crashed drive does in a world (``fault.crash``,
    marked ``ended``), so the checks judge its passes as stopped there, not as stale passes still
    running when a later pass took their run over."""
    drives = sorted(_drives(events))
    t = events[-1]["t"]
    return [
        {"t": t, "ev": "fault.crash", "drive": drive, "down_ms": 0, "working": [], "ended": True}
        for drive in drives
    ]


def _still_in_their_handler(events: list[dict[str, Any]]) -> tuple[str, ...]:
    """The runs of the passes whose handler began and never ended in these events."""
    running: dict[str, str] = {}
    for event in events:
        if event["ev"] == "handler.invoke":
            running[str(event["owner"])] = str(event["run"])
        elif event["ev"] == "handler.end":
            running.pop(str(event["owner"]), None)
    return tuple(sorted(set(running.values())))


def _hold_to_order(process: str, events: list[dict[str, Any]]) -> None:
    """A recorder never writes a time earlier than the one before it; a file that does was
    not written by one, or was edited."""
    last = -1.0
    for event in events:
        if event["t"] < last:
            raise CannotJudge(
                f"process {process}: its events go back in time (an event at {event['t']} ms "
                f"after one at {last} ms): not as a recorder writes them"
            )
        last = event["t"]


def _named(events: list[dict[str, Any]], process: str) -> Iterator[dict[str, Any]]:
    """Events of one of several processes, their drives and links named ``NAME@PROCESS``: two
    processes' drives may share a name, and each numbers its calls from 1."""
    for event in events:
        renamed = dict(event)
        for field in ("drive", "link"):
            if isinstance(renamed.get(field), str):
                renamed[field] = f"{renamed[field]}@{process}"
        yield renamed


def _drives(events: Iterable[dict[str, Any]]) -> set[str]:
    """The drives that recorded their own side: what they registered, or a drive call."""
    return {str(e["drive"]) for e in events if e["ev"] in ("job.register", "drive.call")}


def _hold_to_judgeable(events: tuple[dict[str, Any], ...]) -> None:
    recorded = _drives(events)
    for event in events:
        if event["ev"] == "job.register" and "deadline_ms" in event:
            raise CannotJudge(
                f"drive {event['drive']} registered job {event['job']!r} with a pass deadline "
                f"({event['deadline_ms']} ms): the oracle has no model of a cancelled handler, "
                "so a history with one is not judged; record without deadlines to check"
            )
        if (
            event["ev"] == "rpc.send"
            and event["op"] in _DRIVE_OPERATIONS
            and event["link"] not in recorded
        ):
            raise CannotJudge(
                f"a drive on link {event['link']!r} sent {event['op']} but recorded nothing of "
                "its own side (what it registered, what its handlers asked): on a recording "
                "host, build every drive as scopehost.RecordingJobDriver(host, name=...)"
            )


def judge_history(history: History) -> HistoryVerdict:
    """Every check that applies to a recorded history, over its merged events.

    The oracle models a run from its beginning: a run the history never saw begin (it was made
    before recording began, or by a start whose outcome a killed process never wrote) looks to it
    like a run that appeared from nowhere, and a write a process sent and never recorded the
    outcome of (killed between the store's commit and the recorder's line) may have run while
    the oracle takes it for unrun. What the checks find on such a run (from the moment of the
    write, for the second) is set aside and named with why, never reported as the spec's
    violation, and never counted as held. The oracle's models of the store and the kernel run
    only on a history they can follow (:func:`models_unfit`), and only up to its first write left
    in flight (:func:`_models_cut`)."""
    checker = TraceChecker()
    begun = runs_begun(history.events)
    unfit = models_unfit(history, begun)
    # The history's beginning, as the oracle reads a world's, turns the store's and the kernel's
    # models on (the recorder's own record.begin lines are each file's, not the merge's): only on
    # a history they can follow, or they would blame the spec for what they cannot know.
    opening = [] if unfit else [{"t": 0.0, "ev": BEGIN, "format": FORMAT}]
    checker.feed([*opening, *history.events])
    report = checker.report(settles=False)
    aside = _runs_set_aside(history, report, begun)
    cut = None if unfit else _models_cut(history, report, aside)
    dropped = [f for _, _, found in aside for f in found] + list(cut.findings if cut else ())
    if dropped:
        report = _without(report, checker, dropped)
    return HistoryVerdict(report, aside, unfit, cut)


def _runs_set_aside(history: History, report: CheckReport, begun: set[str]) -> SetAside:
    """The findings on each run the history cannot tell the oracle about, with why: a run whose
    beginning it lacks (all of them), a run a write left in flight (from that write on)."""
    why: dict[str, tuple[float, str]] = {}
    for finding in report.findings:
        run = finding.run
        if run is None or run in why:
            continue
        if run not in begun:
            why[run] = (
                0.0,
                "its beginning is not in the history (made before recording began, "
                "or by a start whose outcome its process never wrote)",
            )
        elif run in history.in_flight:
            t, what = history.in_flight[run]
            why[run] = (
                t,
                f"{what} at {ms(t)} ms had no recorded outcome (the process ended "
                "between the store's commit and its record, or before the store ran it)",
            )
    aside = {
        run: tuple(f for f in report.findings if f.run == run and f.t >= t)
        for run, (t, _) in why.items()
    }
    return tuple((run, why[run][1], found) for run, found in sorted(aside.items()) if found)


@attrs.frozen
class ModelsCut:
    """Where the oracle's models stopped being able to follow a history: the first write a
    process's end left without its outcome (the store may have run it, the models take it for
    unrun), and what they said from then on, set aside."""

    t: float
    what: str
    findings: tuple[Finding, ...]


def _models_cut(history: History, report: CheckReport, aside: SetAside) -> ModelsCut | None:
    """The models' findings from the history's first write left in flight on, or None."""
    if not history.in_flight:
        return None
    run, (t, what) = min(history.in_flight.items(), key=lambda item: item[1][0])
    already = {id(f) for _, _, found in aside for f in found}
    after = tuple(
        f for f in report.findings if f.check in MODEL_CHECKS and f.t >= t and id(f) not in already
    )
    return ModelsCut(t, f"{what} (run {run})", after)


def models_unfit(history: History, begun: set[str]) -> str | None:
    """Why the oracle's models cannot follow ``history`` at all, or None. They model a scope
    from its first row and a drive one call at a time, as a world makes them: a run whose
    beginning the history lacks, and a drive whose calls overlapped (several tasks driving one
    ``JobDriver``), would each make them predict what did not happen. (A write left in flight by
    a process's end stops them only from its moment on: :func:`_models_cut`.)"""
    unknown = sorted(_run_ids(history.events) - begun)
    if unknown:
        return (
            f"{plural(len(unknown), 'run')} began before the history ({', '.join(unknown[:3])}"
            f"{', …' if len(unknown) > 3 else ''}): the models know a run from its start"
        )
    overlapping = _overlapping_calls(history.events)
    if overlapping:
        drive, most = overlapping
        return (
            f"drive {drive} made up to {most} calls at once (several tasks driving one "
            "JobDriver): the models follow one call of a drive at a time, as a world makes them"
        )
    return None


def _run_ids(events: tuple[dict[str, Any], ...]) -> set[str]:
    """Every run id a store's answer named: the runs the history touched."""
    ids: set[str] = set()
    for event in events:
        if event["ev"] != "rpc.exec":
            continue
        result = event.get("result")
        rows = result if isinstance(result, list) else [result]
        ids.update(str(row["id"]) for row in rows if isinstance(row, dict) and "id" in row)
    return ids


def _overlapping_calls(events: tuple[dict[str, Any], ...]) -> tuple[str, int] | None:
    """The first drive that had more than one call open at once, and the most it had."""
    open_calls: dict[str, int] = {}
    most: dict[str, int] = {}
    for event in events:
        drive = str(event.get("drive"))
        if event["ev"] == "drive.call":
            open_calls[drive] = open_calls.get(drive, 0) + 1
            most[drive] = max(most.get(drive, 0), open_calls[drive])
        elif event["ev"] in ("drive.report", "drive.failed"):
            open_calls[drive] = max(0, open_calls.get(drive, 0) - 1)
    over = [(drive, n) for drive, n in most.items() if n > 1]
    return over[0] if over else None


def runs_begun(events: tuple[dict[str, Any], ...]) -> set[str]:
    """The runs whose beginning the history holds: made by a start, or copied in by an import,
    that it recorded."""
    begun: set[str] = set()
    imports: dict[tuple[Any, Any], Any] = {}
    for event in events:
        key = (event.get("link"), event.get("seq"))
        if event["ev"] == "rpc.send" and event.get("op") == "import_dump":
            imports[key] = event.get("args")
        if event["ev"] != "rpc.exec" or "result" not in event:
            continue
        if event["op"] == "start_or_join" and isinstance(event["result"], dict):
            begun.add(str(event["result"].get("id")))
        elif event["op"] == "import_dump" and (found := imported(imports.pop(key, None))):
            begun.update(str(row["id"]) for row in found[0]["runs"] if "id" in row)
    return begun


def _without(report: CheckReport, checker: TraceChecker, dropped: list[Finding]) -> CheckReport:
    """``report`` without the ``dropped`` findings, its counts made again: a check and run of
    which a finding was dropped counts the findings kept (those past the listed ones were later
    still, and go with them)."""
    gone = {id(f) for f in dropped}
    touched = {(f.check, f.run) for f in dropped}
    kept = tuple(f for f in report.findings if id(f) not in gone)
    counted: Counter[str] = Counter()
    unlisted = 0
    for (check, run), seen in checker.violations_of.items():
        if (check, run) in touched:
            seen = sum(1 for f in kept if (f.check, f.run, f.verdict) == (check, run, "violation"))
        else:
            unlisted += max(0, seen - MAX_REPEATS)
        counted[check] += seen
    return attrs.evolve(
        report,
        findings=kept,
        violations_unlisted=unlisted,
        violations_by_check=tuple(sorted((c, n) for c, n in counted.items() if n)),
    )
