"""The store-port wire: JSON requests and replies any adapter can speak; the reference speaks it.

Theory of operation. One request names one store operation of one scope at one store time::

    {"wire": 1, "op": "claim", "scope": "tenant-1", "now": "2026-10-04T12:00:00.000Z",
     "args": {"id": "r1", "owner": "o1", "lease_ms": 60000}}

and gets one reply: ``{"ok": true, "result": ...}``, or ``{"ok": false, "error": {"code": ...,
"message": ..., "paths": [...]}}``. ``now`` is the store's clock for that operation, set by the
caller: a store that speaks the wire never reads a clock of its own, which is what lets the kit
drive the reference and another adapter in lockstep and compare them reply for reply. The
operations are the ``JobRunStore`` port, the scope's own calls (erasure, export, import) and
``tables``, a read of both tables; ``docs/conformance.md`` is the full description.

The reference is ``ScopeDatabase``, one in-memory SQLite database per scope, called directly: each
request is one method call, hence one transaction, exactly as the scope actor makes it.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable, Mapping
from typing import IO, Any, Final, TypeAlias

import attrs

from driver import (
    STORE_PORT_OPERATIONS,
    JobError,
    JobRunFilter,
    JobRunKey,
    JobRunPatch,
    JobRunRow,
    ValidationFailed,
)
from scopehost import JobRunDump, JobStepDumpRow, ScopeDatabase

#: The wire's version. A request carries it as ``"wire"``; a store refuses one it does not speak.
WIRE_VERSION: Final = 1

#: Every operation of wire version 1, in the order docs/conformance.md describes them.
OPERATIONS: Final = (
    "hello",
    *STORE_PORT_OPERATIONS,
    "shred_subject",
    "export_dump",
    "import_dump",
    "tables",
)

Request: TypeAlias = Mapping[str, Any]
Reply: TypeAlias = dict[str, Any]
DatabaseFactory: TypeAlias = Callable[[sqlite3.Connection, str], ScopeDatabase]

_RUN_FIELDS: Final = tuple(field.name for field in attrs.fields(JobRunRow))
_STEP_FIELDS: Final = tuple(field.name for field in attrs.fields(JobStepDumpRow))
_PATCH_FIELDS: Final = tuple(field.name for field in attrs.fields(JobRunPatch))
_KEY_FIELDS: Final = tuple(field.name for field in attrs.fields(JobRunKey))
_FILTER_FIELDS: Final = tuple(field.name for field in attrs.fields(JobRunFilter))


class BadRequest(Exception):
    """A request that is not wire version 1 (the transport's mistake, not the store's refusal)."""


def ok(result: Any) -> Reply:
    return {"ok": True, "result": result}


def refused(code: str, message: str, paths: list[str] | None = None) -> Reply:
    error: dict[str, Any] = {"code": code, "message": message}
    if paths is not None:
        error["paths"] = paths
    return {"ok": False, "error": error}


def _object(value: Any, path: str, fields: tuple[str, ...], *, optional: bool = False) -> Any:
    if not isinstance(value, dict):
        raise BadRequest(f"{path} must be a JSON object")
    unknown = sorted(set(value) - set(fields))
    missing = [] if optional else [name for name in fields if name not in value]
    if unknown or missing:
        raise BadRequest(
            f"{path} must have exactly the fields {', '.join(fields)}"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            + (f"; missing: {', '.join(missing)}" if missing else "")
        )
    return value


def _args(request: Request, *names: str) -> list[Any]:
    args = request.get("args", {})
    if args is None:
        args = {}
    _object(args, "args", names)
    return [args[name] for name in names]


# Every column is a scalar: nothing to recurse into (and the kit reads both tables after every
# step, so the recursion's cost was a tenth of a conformance run).
def run_row(row: JobRunRow) -> dict[str, Any]:
    return attrs.asdict(row, recurse=False)


def step_row(row: JobStepDumpRow) -> dict[str, Any]:
    return attrs.asdict(row, recurse=False)


def _tables(database: ScopeDatabase) -> dict[str, Any]:
    # Read straight from the connection, outside any operation: it is the kit's look at the
    # store, not a store operation, so it must not move the store's clock or write anything.
    conn = database.connection
    runs = [JobRunRow.from_row(row) for row in conn.execute(_RUNS_READ)]
    steps = [JobStepDumpRow(*row) for row in conn.execute(_STEPS_READ)]
    return {"runs": [run_row(run) for run in runs], "steps": [step_row(step) for step in steps]}


_RUNS_READ: Final = "SELECT * FROM _substrat_job_runs ORDER BY id"
_STEPS_READ: Final = (
    f"SELECT {', '.join(_STEP_FIELDS)} FROM _substrat_job_steps ORDER BY run_id, step"
)


def _dump_of(value: Any) -> JobRunDump:
    dump = _object(value, "args.dump", ("scope_id", "runs", "steps"))
    if not isinstance(dump["runs"], list) or not isinstance(dump["steps"], list):
        raise BadRequest("args.dump.runs and args.dump.steps must be JSON arrays")
    runs = tuple(
        JobRunRow(**_object(run, f"args.dump.runs.{i}", _RUN_FIELDS))
        for i, run in enumerate(dump["runs"])
    )
    steps = tuple(
        JobStepDumpRow(**_object(step, f"args.dump.steps.{i}", _STEP_FIELDS))
        for i, step in enumerate(dump["steps"])
    )
    return JobRunDump(dump["scope_id"], runs, steps)


class ReferenceStore:
    """The reference answering wire requests: one in-memory ``ScopeDatabase`` per scope.

    ``database`` builds each scope's store from its connection and scope id; the default is
    ``ScopeDatabase`` itself, and a test passes a subclass to plant a bug in it."""

    name: Final = "reference"

    def __init__(self, *, database: DatabaseFactory = ScopeDatabase) -> None:
        self._database = database
        self._scopes: dict[str, ScopeDatabase] = {}

    def _scope(self, scope: str) -> ScopeDatabase:
        found = self._scopes.get(scope)
        if found is None:
            found = self._database(sqlite3.connect(":memory:", isolation_level=None), scope)
            self._scopes[scope] = found
        return found

    def close(self) -> None:
        for database in self._scopes.values():
            database.connection.close()
        self._scopes.clear()

    def call(self, request: Request) -> Reply:
        """One request's reply; never raises for anything a request can carry. With ``"tables":
        true`` the reply also carries both tables of the scope as the operation left them."""
        try:
            return self._call(request)
        except BadRequest as error:
            return refused("bad_request", str(error))
        except ValidationFailed as error:
            reply = refused(error.code, str(error), [field.path for field in error.errors])
        except JobError as error:
            reply = refused(error.code, str(error))
        except Exception as error:  # the store failed: a reply that says so, never a crash
            reply = refused("store_error", f"{type(error).__name__}: {error}")
        scope = request.get("scope") if isinstance(request, dict) else None
        if request.get("tables") is True and isinstance(scope, str) and scope in self._scopes:
            reply["tables"] = _tables(self._scopes[scope])
        return reply

    def _call(self, request: Request) -> Reply:
        if not isinstance(request, dict):
            raise BadRequest("a wire request is a JSON object")
        if request.get("wire") != WIRE_VERSION:
            raise BadRequest(
                f"wire {request.get('wire')!r} is not spoken here; this store speaks {WIRE_VERSION}"
            )
        op = request.get("op")
        if op == "hello":
            return ok({"wire": WIRE_VERSION, "store": self.name})
        if op not in OPERATIONS:
            raise BadRequest(f"op {op!r} is not an operation of wire {WIRE_VERSION}")
        scope = request.get("scope")
        if not isinstance(scope, str) or not scope:
            raise BadRequest("scope must name the scope, a non-empty string")
        database = self._scope(scope)
        now = request.get("now")
        reply = ok(_OPERATIONS[op](database, request, now))
        if request.get("tables") is True:
            reply["tables"] = _tables(database)
        return reply


def _start_or_join(db: ScopeDatabase, request: Request, now: Any) -> Any:
    key, row = _args(request, "key", "row")
    joined = db.start_or_join(
        JobRunKey(**_object(key, "args.key", _KEY_FIELDS)),
        JobRunRow(**_object(row, "args.row", _RUN_FIELDS)),
        now=now,
    )
    return run_row(joined)


def _due_keys(db: ScopeDatabase, request: Request, now: Any) -> Any:
    now_param, max = _args(request, "now_param", "max")
    return [attrs.asdict(key) for key in db.due_keys(now_param, max, now=now)]


def _claim(db: ScopeDatabase, request: Request, now: Any) -> Any:
    claim = db.claim(*_args(request, "id", "owner", "lease_ms"), now=now)
    return None if claim is None else {"run": run_row(claim.run), "takeover": claim.takeover}


def _begin(db: ScopeDatabase, request: Request, now: Any) -> Any:
    return db.begin(*_args(request, "id", "owner", "margin_ms"), now=now)


def _miss(db: ScopeDatabase, request: Request, now: Any) -> Any:
    miss = db.miss(*_args(request, "id", "owner", "note"), now=now)
    return None if miss is None else {"misses": miss.misses, "failed": miss.failed}


def _list(db: ScopeDatabase, request: Request, now: Any) -> Any:
    (filter,) = _args(request, "filter")
    fields = _object(filter, "args.filter", _FILTER_FIELDS, optional=True)
    return [run_row(row) for row in db.list(JobRunFilter(**fields), now=now)]


def _patch_args(request: Request) -> tuple[Any, JobRunPatch, Any]:
    id, patch, owner = _args(request, "id", "patch", "owner")
    return id, JobRunPatch(**_object(patch, "args.patch", _PATCH_FIELDS)), owner


def _patch(db: ScopeDatabase, request: Request, now: Any) -> Any:
    return db.patch(*_patch_args(request), now=now)


def _commit_pass(db: ScopeDatabase, request: Request, now: Any) -> Any:
    return db.commit_pass(*_patch_args(request), now=now)


def _begin_step(db: ScopeDatabase, request: Request, now: Any) -> Any:
    boundary = db.begin_step(*_args(request, "run_id", "name", "owner", "lease_ms"), now=now)
    return {
        "held": boundary.held,
        "row": None if boundary.row is None else attrs.asdict(boundary.row),
    }


def _record_step(db: ScopeDatabase, request: Request, now: Any) -> Any:
    names = ("run_id", "name", "result", "attempts", "last_error", "at", "owner", "lease_ms")
    return db.record_step(*_args(request, *names), now=now)


def _shred_subject(db: ScopeDatabase, request: Request, now: Any) -> Any:
    (subject_id,) = _args(request, "subject_id")
    return db.shred_subject(subject_id, now=now)


def _export_dump(db: ScopeDatabase, request: Request, now: Any) -> Any:
    _args(request)
    dump = db.export_dump(now=now)
    return {
        "scope_id": dump.scope_id,
        "runs": [run_row(run) for run in dump.runs],
        "steps": [step_row(step) for step in dump.steps],
    }


def _import_dump(db: ScopeDatabase, request: Request, now: Any) -> Any:
    dump, source_scope_id = _args(request, "dump", "source_scope_id")
    return db.import_dump(_dump_of(dump), source_scope_id, now=now)


def _read_tables(db: ScopeDatabase, request: Request, now: Any) -> Any:
    _args(request)
    return _tables(db)


_OPERATIONS: Final[Mapping[str, Callable[[ScopeDatabase, Request, Any], Any]]] = {
    "start_or_join": _start_or_join,
    "due_keys": _due_keys,
    "claim": _claim,
    "begin": _begin,
    "miss": _miss,
    "list": _list,
    "patch": _patch,
    "commit_pass": _commit_pass,
    "begin_step": _begin_step,
    "record_step": _record_step,
    "shred_subject": _shred_subject,
    "export_dump": _export_dump,
    "import_dump": _import_dump,
    "tables": _read_tables,
}


def encode(value: Any) -> str:
    """One line of the wire: compact JSON, non-ASCII escaped (so any text, a lone surrogate too,
    survives every transport), no NaN (JSON has none)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def serve_lines(store: ReferenceStore, lines: IO[str], out: IO[str]) -> None:
    """Answer newline-delimited requests from ``lines`` on ``out``, one reply line each, in order,
    until ``lines`` ends. A line that is not JSON gets a ``bad_request`` reply, never a crash."""
    for line in lines:
        if not line.strip():
            continue
        out.write(encode(_answer(store, line)) + "\n")
        out.flush()


#: The deepest nesting a request may have: the deepest request (an import's dump: request,
#: args, dump, runs, row) nests five levels, and JSON TEXT inside a row is a string, not nesting.
REQUEST_MAX_DEPTH: Final = 32


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > REQUEST_MAX_DEPTH:
                return True
            stack.extend(
                (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
            )
    return False


def _answer(store: ReferenceStore, line: str) -> Reply:
    """The reply to one line, whatever the line holds: the server never dies on input."""
    try:
        request = json.loads(line)
    except ValueError as error:
        return refused("bad_request", f"the line is not JSON: {error}")
    except RecursionError:
        return refused("bad_request", f"the line nests deeper than {REQUEST_MAX_DEPTH} levels")
    if _too_deep(request):
        return refused("bad_request", f"the request nests deeper than {REQUEST_MAX_DEPTH} levels")
    try:
        reply = store.call(request)
        encode(reply)
    except Exception as error:  # the last guard: a reply that says so, never a dead server
        return refused("store_error", f"the store failed on this request ({type(error).__name__})")
    return reply


def serve_stdio(store: ReferenceStore | None = None) -> None:
    """The reference as a COMMAND target: requests on stdin, replies on stdout."""
    serve_lines(store or ReferenceStore(), sys.stdin, sys.stdout)
