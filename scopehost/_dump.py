"""Dumps: a scope's job runs and step ledgers, exported row for row, validated, and imported.

Rows travel verbatim — no decoding, no re-encoding — so a dump replays exactly what the source
held, JSON columns that do not parse included: the operator read is what reports those, with
``decode_error``, and a pass on such a run fails with the reason on its record.

Importing is one transaction, and one of two things:

- A RESTORE, into the scope the dump was exported from: the scope's job tables are REPLACED by the
  dump's rows (every run and step row the scope held is deleted, then the dump's are inserted), so
  restoring an older dump can never leave two live runs for one key. Running runs stay running,
  and resumable.
- A COPY, into any other scope: the dump's rows are added. A running run in the copy did not run
  there and must not run twice, so it is settled ``failed`` with ``not_carried_note``, no lease and
  no due time, ``updated_at`` = ``ended_at`` = the store's now. A copy never replaces anything: a
  run id (or a step row's run id) the scope already holds is a ``Conflict`` with reason
  ``JOB_IMPORT_CLASH``, and nothing is written.

Before anything is written every row is validated (``validate_dump``), and a bad dump is one
``ValidationFailed`` naming the first bad row, by path (``dump.runs.3.status``) and run id.

A dump kept outside the scope (a backup) is one JSON document: ``JobRunDump.to_json`` writes it and
``JobRunDump.from_json`` reads it back into an equal dump, refusing a document that is not one.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Final

import attrs

from driver import (
    JOB_COUNTERS_MAX_BYTES,
    JOB_CURSOR_MAX_BYTES,
    JOB_ERROR_MAX_BYTES,
    JOB_ID_MAX_BYTES,
    JOB_IMPORT_CLASH,
    JOB_LEASE_MAX_MS,
    JOB_PAYLOAD_MAX_BYTES,
    JOB_RUN_STATUSES,
    JOB_STEP_RESULT_MAX_BYTES,
    Conflict,
    FieldError,
    JobRunRow,
    ValidationFailed,
    parse_iso_ms,
)
from driver._json import json_text_problem, surrogate_message
from driver._limits import size_problem, time_ahead_problem

from ._identity import recorded_scope
from ._schema import RUNS_TABLE, STEPS_TABLE

_RUN_COLUMNS: Final = tuple(field.name for field in attrs.fields(JobRunRow))


@attrs.frozen
class JobStepDumpRow:
    """The ``_substrat_job_steps`` row, every column, as a dump carries it."""

    run_id: str
    step: str
    result: str | None
    attempts: int
    last_error: str | None
    recorded_at: str


_STEP_COLUMNS: Final = tuple(field.name for field in attrs.fields(JobStepDumpRow))


#: The version of the document ``JobRunDump.to_json`` writes, kept in it as ``format``.
DUMP_FORMAT: Final = 1


@attrs.frozen
class JobRunDump:
    """Every run and step row of one scope, in id order, as exported."""

    scope_id: str
    runs: tuple[JobRunRow, ...]
    steps: tuple[JobStepDumpRow, ...]

    def to_json(self) -> str:
        """The dump as one JSON document, to keep in a file: ``{"format": 1, "scope_id": ...,
        "runs": [{column: value}], "steps": [...]}``, every column as stored. ASCII only, so any
        text the rows hold survives any file encoding."""
        return json.dumps(
            {
                "format": DUMP_FORMAT,
                "scope_id": self.scope_id,
                "runs": [attrs.asdict(run) for run in self.runs],
                "steps": [attrs.asdict(step) for step in self.steps],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, document: str | bytes) -> JobRunDump:
        """The dump ``to_json`` wrote. A document that is not one is refused with
        ``ValidationFailed`` naming the first thing wrong: its shape, then its rows, checked as
        ``import_dump`` checks them (so a dump read here imports, unless it clashes)."""
        try:
            data = json.loads(document)
        except (ValueError, TypeError) as error:
            raise ValidationFailed.at(
                "dump", f"is not JSON ({error}); pass the text JobRunDump.to_json wrote"
            ) from error
        except RecursionError:
            # The decoder recurses once a level: thousands of '[' exhaust Python's stack.
            raise ValidationFailed.at(
                "dump",
                "is not JSON a dump can be (it nests too deeply to be read); pass the text "
                "JobRunDump.to_json wrote",
            ) from None
        if not isinstance(data, dict) or set(data) != {"format", "scope_id", "runs", "steps"}:
            raise ValidationFailed.at(
                "dump",
                f"is {_shape(data)}; a dump's document is an object of format, scope_id, runs and "
                "steps, as JobRunDump.to_json writes it",
            )
        if data["format"] != DUMP_FORMAT:
            raise ValidationFailed.at(
                "dump.format",
                f"is {data['format']!r}; this version reads format {DUMP_FORMAT} (write the dump "
                "with the same version that reads it)",
            )
        dump = cls(
            data["scope_id"],
            tuple(JobRunRow(**row) for row in _rows(data, "runs", _RUN_COLUMNS)),
            tuple(JobStepDumpRow(**row) for row in _rows(data, "steps", _STEP_COLUMNS)),
        )
        if not isinstance(dump.scope_id, str) or not dump.scope_id:
            raise ValidationFailed.at(
                "dump.scope_id", f"is {dump.scope_id!r}; name the scope the dump came from"
            )
        validate_dump(dump)
        return dump


def _shape(data: object) -> str:
    """The document as given, short: an object by its keys, anything else by its repr, cut."""
    if isinstance(data, dict):
        keys = [f"{key!r}: ..." for key in sorted(data)[:8]]
        return "{" + ", ".join(keys + (["..."] if len(data) > 8 else [])) + "}"
    shown = repr(data)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _rows(data: dict[str, Any], kind: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """``data[kind]``: a list of rows, each an object of exactly ``columns``."""
    rows = data[kind]
    if not isinstance(rows, list):
        raise ValidationFailed.at(f"dump.{kind}", f"is {rows!r}, not a list of rows")
    shape = f"(a row's columns: {', '.join(columns)})"
    for index, row in enumerate(rows):
        path = f"dump.{kind}.{index}"
        if not isinstance(row, dict):
            raise ValidationFailed.at(path, f"is {row!r}, not an object of columns {shape}")
        missing = [column for column in columns if column not in row]
        unknown = sorted(set(row) - set(columns))
        if missing or unknown:
            problems = [f"lacks {', '.join(missing)}"] if missing else []
            problems += [f"has unknown columns {', '.join(unknown)}"] if unknown else []
            raise ValidationFailed.at(path, f"{'; '.join(problems)} {shape}")
    return rows


def not_carried_note(source_scope_id: str) -> str:
    """``last_error`` of a running run imported into a scope other than its own."""
    return (
        f"not carried: copied from scope {source_scope_id} before it ran; "
        "it runs in the scope that asked for it, never in a copy"
    )


def export_rows(conn: sqlite3.Connection, scope_id: str) -> JobRunDump:
    runs = tuple(
        JobRunRow.from_row(row) for row in conn.execute(f"SELECT * FROM {RUNS_TABLE} ORDER BY id")
    )
    steps = tuple(
        JobStepDumpRow(*row)
        for row in conn.execute(
            f"SELECT {', '.join(_STEP_COLUMNS)} FROM {STEPS_TABLE} ORDER BY run_id, step"
        )
    )
    return JobRunDump(scope_id, runs, steps)


def read_scope_file(path: str | Path) -> JobRunDump:
    """Every run and step row of a scope's file in a data folder, as ``export_dump`` returns
    them: what an incident left, to restore in a world (``World.restore``). It writes nothing
    (SQLite may make the ``-shm`` index beside the file). The scope id is the one the file
    records (its name's stem for a file older than that record). Read it while no host has the
    scope open, or a copy of the file with its ``-wal``: the log holds the latest writes."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{str(file)!r} is not a file; give a scope's .sqlite3 file")
    conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        conn.row_factory = sqlite3.Row
        scope_id = recorded_scope(conn) or file.stem
        return export_rows(conn, scope_id)
    except sqlite3.DatabaseError as error:
        wal = file.with_name(f"{file.name}-wal")
        hint = "" if wal.exists() else f" (if it is a copy, copy its {wal.name} beside it too)"
        raise ValueError(
            f"{str(file)!r} does not read as a scope's file ({error}){hint}; give a scope's "
            ".sqlite3 file from a host's folder"
        ) from None
    finally:
        conn.close()


# -- validation ----------------------------------------------------------------------------------

_STATUS_CHOICES: Final = ", ".join(repr(status) for status in JOB_RUN_STATUSES)
_ISO: Final = "ISO-8601 UTC with milliseconds and Z, like '2026-10-04T12:00:00.000Z'"


def _text_problem(value: object, *, nullable: bool, empty: bool) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        return "is not text" + (" or NULL" if nullable else "")
    if not value and not empty:
        return "is empty"
    message = surrogate_message(value)
    return None if message is None else message


def _json_problem(value: object, *, nullable: bool) -> str | None:
    """A JSON column: text (verbatim when it is not JSON at all), never JSON the store's readers
    could not read alike (see ``json_text_problem``)."""
    problem = _text_problem(value, nullable=nullable, empty=True)
    if problem is None and isinstance(value, str):
        problem = json_text_problem(value)
    return problem


#: The largest integer a SQLite column holds (a signed 64-bit int): a count past it would fail
#: as a raw ``OverflowError`` when bound, inside the transaction, instead of being refused.
SQLITE_INT_MAX: Final = 2**63 - 1


def _count_problem(value: object, *, nullable: bool) -> str | None:
    if value is None and nullable:
        return None
    if type(value) is not int or value < 0:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        return f"is {shown}, not a whole number of 0 or more" + (" or NULL" if nullable else "")
    if value > SQLITE_INT_MAX:
        return f"is more than {SQLITE_INT_MAX}, the largest integer SQLite holds"
    return None


def _time_problem(value: object, *, nullable: bool) -> str | None:
    if value is None and nullable:
        return None
    if isinstance(value, str):
        try:
            parse_iso_ms(value)
            return None
        except ValueError:
            pass
    return f"is not a time in {_ISO}" + (" or NULL" if nullable else "")


#: The capped text columns of a run row and a step row (see ``driver._limits``).
_RUN_CAPS: Final = {
    "id": (JOB_ID_MAX_BYTES, "an id"),
    "module_id": (JOB_ID_MAX_BYTES, "a module id"),
    "job": (JOB_ID_MAX_BYTES, "a job name"),
    "instance": (JOB_ID_MAX_BYTES, "an instance"),
    "payload": (JOB_PAYLOAD_MAX_BYTES, "a payload"),
    "subject_id": (JOB_ID_MAX_BYTES, "a subject id"),
    "cursor": (JOB_CURSOR_MAX_BYTES, "a cursor"),
    "counters": (JOB_COUNTERS_MAX_BYTES, "a run's counters"),
    "last_error": (JOB_ERROR_MAX_BYTES, "an error"),
    "lease_owner": (JOB_ID_MAX_BYTES, "a lease owner"),
}
_STEP_CAPS: Final = {
    "run_id": (JOB_ID_MAX_BYTES, "an id"),
    "step": (JOB_ID_MAX_BYTES, "a step name"),
    "result": (JOB_STEP_RESULT_MAX_BYTES, "a step's result"),
    "last_error": (JOB_ERROR_MAX_BYTES, "an error"),
}
_RUN_TIMES: Final = ("started_at", "updated_at", "next_attempt_at", "ended_at", "lease_began_at")


def _size_problems(row: Any, caps: dict[str, tuple[int, str]]) -> list[tuple[str, str]]:
    found = []
    for column, (cap, what) in caps.items():
        problem = size_problem(getattr(row, column), cap, what)
        if problem is not None:
            found.append((column, problem))
    return found


def _time_bound_problems(run: JobRunRow, now_ms: int) -> list[tuple[str, str]]:
    """A restored run must be runnable: no time past ``JOB_TIME_AHEAD_MAX_MS`` ahead of the
    import's now, and a lease (a leased running run's ``next_attempt_at``) ending no later than
    ``JOB_LEASE_MAX_MS`` past it, the longest lease any store writes."""
    for column in _RUN_TIMES:
        value = getattr(run, column)
        if value is None:
            continue
        problem = time_ahead_problem(value, now_ms)
        if problem is not None:
            return [(column, f"{problem} (the import's now)")]
    if run.status == "running" and run.lease_owner is not None:
        assert run.next_attempt_at is not None
        if parse_iso_ms(run.next_attempt_at) - now_ms > JOB_LEASE_MAX_MS:
            return [
                (
                    "next_attempt_at",
                    f"is {run.next_attempt_at!r}, a lease ending more than {JOB_LEASE_MAX_MS} ms "
                    "(a year, the longest lease) past the import's now; no store wrote that "
                    "lease — clear lease_owner, or export the dump again",
                )
            ]
    return []


def _run_problems(run: JobRunRow) -> list[tuple[str, str]]:
    """``(column, problem)`` for each thing wrong with one run row, in column order."""
    checks: list[tuple[str, str | None]] = [
        ("id", _text_problem(run.id, nullable=False, empty=False)),
        ("module_id", _text_problem(run.module_id, nullable=False, empty=False)),
        ("job", _text_problem(run.job, nullable=False, empty=False)),
        ("instance", _text_problem(run.instance, nullable=False, empty=False)),
        # JSON columns: text not JSON at all travels verbatim (the operator read tolerates it);
        # JSON the readers could not read alike is refused.
        ("payload", _json_problem(run.payload, nullable=False)),
        ("subject_id", _text_problem(run.subject_id, nullable=True, empty=False)),
        (
            "status",
            None
            if run.status in JOB_RUN_STATUSES
            else f"is {run.status!r}, not one of {_STATUS_CHOICES}",
        ),
        ("cursor", _json_problem(run.cursor, nullable=True)),
        ("counters", _json_problem(run.counters, nullable=False)),
        ("attempts", _count_problem(run.attempts, nullable=False)),
        ("last_error", _text_problem(run.last_error, nullable=True, empty=True)),
        ("started_at", _time_problem(run.started_at, nullable=False)),
        ("updated_at", _time_problem(run.updated_at, nullable=False)),
        ("next_attempt_at", _time_problem(run.next_attempt_at, nullable=True)),
        ("ended_at", _time_problem(run.ended_at, nullable=True)),
        ("lease_owner", _text_problem(run.lease_owner, nullable=True, empty=False)),
        ("lease_began_at", _time_problem(run.lease_began_at, nullable=True)),
        ("admission_misses", _count_problem(run.admission_misses, nullable=True)),
    ]
    problems = [(column, problem) for column, problem in checks if problem is not None]
    problems = problems or _size_problems(run, _RUN_CAPS)
    if problems:
        return problems
    # The lease and the lifecycle, consistent with each other (only once every column is sound).
    if run.status == "running":
        if run.ended_at is not None:
            problems.append(("ended_at", "is set on a running run, which has not ended"))
        if run.lease_owner is not None and run.next_attempt_at is None:
            problems.append(
                ("next_attempt_at", "is NULL on a leased run: it is the lease's expiry")
            )
    else:
        if run.ended_at is None:
            problems.append(("ended_at", f"is NULL on a {run.status} run, which has ended"))
        if run.lease_owner is not None:
            problems.append(("lease_owner", f"is set on a {run.status} run, which no pass holds"))
    if run.lease_began_at is not None and run.lease_owner is None:
        problems.append(("lease_began_at", "is set with no lease_owner: nobody began"))
    return problems


def _step_problems(step: JobStepDumpRow) -> list[tuple[str, str]]:
    checks: list[tuple[str, str | None]] = [
        ("run_id", _text_problem(step.run_id, nullable=False, empty=False)),
        ("step", _text_problem(step.step, nullable=False, empty=False)),
        ("result", _json_problem(step.result, nullable=True)),
        ("attempts", _count_problem(step.attempts, nullable=False)),
        ("last_error", _text_problem(step.last_error, nullable=True, empty=True)),
        ("recorded_at", _time_problem(step.recorded_at, nullable=False)),
    ]
    problems = [(column, problem) for column, problem in checks if problem is not None]
    return problems or _size_problems(step, _STEP_CAPS)


def _refuse(kind: str, index: int, what: str, problems: list[tuple[str, str]]) -> None:
    column, problem = problems[0]
    raise ValidationFailed([FieldError(f"dump.{kind}.{index}.{column}", f"{problem} ({what})")])


def validate_dump(dump: Any, *, now: str | None = None) -> None:
    """Raise ``ValidationFailed`` for the first problem of the first bad row of ``dump`` (one
    error, by path ``dump.runs.<i>.<column>`` or ``dump.steps.<i>.<column>``, columns checked in
    table order), else return.

    A run row: every column of its declared type (ids and names non-empty text; payload, counters
    and cursor text, whether or not it parses; status one of running, done, failed; counts whole,
    not negative and within SQLite's integers; times in the one ISO spelling, which also keeps them
    before the year 10000); no text holding a lone surrogate; a running run has no ``ended_at`` and,
    when leased, a lease expiry (``next_attempt_at``); a finished run has an ``ended_at`` and no
    lease; a ``lease_began_at`` only with a ``lease_owner``. Ids are unique, and at most one run per
    ``(module_id, job, instance)`` is running. A step row: columns of their types, its ``run_id``
    one of the dump's runs, ``(run_id, step)`` unique. Every text within its cap under the row limit
    (``driver._limits``). Given the importing store's ``now``, every time at most
    ``JOB_TIME_AHEAD_MAX_MS`` past it, and a lease ending at most ``JOB_LEASE_MAX_MS`` past it.
    """
    now_ms = None if now is None else parse_iso_ms(now)
    if not isinstance(dump, JobRunDump):
        raise ValidationFailed.at(
            "dump", f"is {dump!r}; pass the JobRunDump that export_dump returned"
        )
    if not (isinstance(dump.runs, tuple | list) and isinstance(dump.steps, tuple | list)):
        raise ValidationFailed.at("dump", "holds runs and steps that are not sequences of rows")
    ids: set[str] = set()
    live: dict[tuple[str, str, str], str] = {}
    for index, run in enumerate(dump.runs):
        if not isinstance(run, JobRunRow):
            raise ValidationFailed.at(f"dump.runs.{index}", f"is {run!r}, not a JobRunRow")
        what = f"run {run.id!r}"
        problems = _run_problems(run)
        if not problems and now_ms is not None:
            problems = _time_bound_problems(run, now_ms)
        if not problems and run.id in ids:
            problems = [("id", "appears twice in the dump")]
        if not problems and run.status == "running":
            key = (run.module_id, run.job, run.instance)
            if key in live:
                problems = [
                    (
                        "status",
                        f"is 'running' for the key {key!r}, which run {live[key]!r} already "
                        "holds live: one live run per key",
                    )
                ]
            live[key] = run.id
        if problems:
            _refuse("runs", index, what, problems)
        ids.add(run.id)
    seen: set[tuple[str, str]] = set()
    for index, step in enumerate(dump.steps):
        if not isinstance(step, JobStepDumpRow):
            raise ValidationFailed.at(f"dump.steps.{index}", f"is {step!r}, not a JobStepDumpRow")
        what = f"step {step.step!r} of run {step.run_id!r}"
        problems = _step_problems(step)
        if not problems and now_ms is not None:
            ahead = time_ahead_problem(step.recorded_at, now_ms)
            problems = [] if ahead is None else [("recorded_at", f"{ahead} (the import's now)")]
        if not problems and step.run_id not in ids:
            problems = [("run_id", "names no run in the dump")]
        if not problems and (step.run_id, step.step) in seen:
            problems = [("step", "appears twice for its run in the dump")]
        if problems:
            _refuse("steps", index, what, problems)
        seen.add((step.run_id, step.step))


# -- writing -------------------------------------------------------------------------------------

_RUN_INSERT: Final = (
    f"INSERT INTO {RUNS_TABLE} ({', '.join(_RUN_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _RUN_COLUMNS)})"
)
_STEP_INSERT: Final = (
    f"INSERT INTO {STEPS_TABLE} ({', '.join(_STEP_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _STEP_COLUMNS)})"
)


def _not_carried(run: JobRunRow, source_scope_id: str, now: str) -> JobRunRow:
    if run.status != "running":
        return run
    return attrs.evolve(
        run,
        status="failed",
        last_error=not_carried_note(source_scope_id),
        updated_at=now,
        next_attempt_at=None,
        ended_at=now,
        lease_owner=None,
        lease_began_at=None,
    )


def import_rows(
    conn: sqlite3.Connection,
    dump: JobRunDump,
    *,
    scope_id: str,
    now: str,
) -> int:
    """Restore or copy an already validated ``dump`` (see the module docstring) inside the
    caller's transaction; returns the number of runs imported."""
    if dump.scope_id == scope_id:
        conn.execute(f"DELETE FROM {STEPS_TABLE}")
        conn.execute(f"DELETE FROM {RUNS_TABLE}")
        runs = dump.runs
    else:
        held = {row[0] for row in conn.execute(f"SELECT id FROM {RUNS_TABLE}")}
        held |= {row[0] for row in conn.execute(f"SELECT DISTINCT run_id FROM {STEPS_TABLE}")}
        for index, run in enumerate(dump.runs):
            if run.id in held:
                raise Conflict(
                    JOB_IMPORT_CLASH,
                    f"dump.runs.{index}.id is {run.id!r}, which scope {scope_id!r} already "
                    "holds; a copy never replaces a run — import into a scope without it, or "
                    f"restore into scope {dump.scope_id!r}, where the dump came from",
                )
        runs = tuple(_not_carried(run, dump.scope_id, now) for run in dump.runs)
    conn.executemany(_RUN_INSERT, (attrs.astuple(run) for run in runs))
    conn.executemany(_STEP_INSERT, (attrs.astuple(step) for step in dump.steps))
    return len(dump.runs)
