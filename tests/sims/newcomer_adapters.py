"""Eight store adapters, each a port of the reference store with ONE porting slip.

Written from the docs (docs/conformance.md, docs/protocol.md, the spec) and the reference store's
public behaviour, to measure whether the conformance kit's default run catches slips it was not
tuned to. Each adapter serves the wire (version 1) on stdin and stdout:

    python tests/sims/newcomer_adapters.py NAME

Each adapter is the reference store (``ScopeDatabase``) with the slipped operation written again
as the port got it wrong, behind the port's own wire loop (``WireServer``); the kit's in-process
``LocalTarget(ReferenceStore(database=...))`` takes the same classes. ``clean`` is the port
without a slip, which must agree with the reference. The slips:

- ``list_limit_bool_as_number``: the operator read's limit clamp reads a boolean as the number
  JavaScript makes of it (``true`` 1, ``false`` 0, so both read one row), where the reference
  reads either as the default 50 (rule ``list-limit-boolean``).
- ``begin_keeps_misses``: BEGIN writes ``lease_began_at`` but forgets to clear
  ``admission_misses`` (rule ``begin-clears-misses``).
- ``erase_declared_only``: an erasure matches only the ``subject_id`` column, so a run that carries
  the subject only in its payload, its cursor or a step result is not touched (rules
  ``erase-payload-only``, ``erase-cursor-only``, ``erase-step-result-only``).
- ``copy_drops_misses``: a copy into another scope inserts every column but
  ``admission_misses``, which the port's INSERT list forgot (the column came late, #2042 r3)
  (rule ``copy-every-column``).
- ``commit_merges_counters``: a commit adds the given counters to the stored ones instead of
  writing them, as the schema comment "merged on each commit" reads (rule
  ``commit-over-counters``).
- ``due_tie_newest_first``: the due read breaks a tie of due times by id DESCENDING, the order the
  operator read uses (rule ``due-tie``).
- ``claim_strict_expiry``: the claim's due test is ``next_attempt_at < now`` instead of ``<=``,
  so a claim at the lease's expiry to the millisecond loses (rule ``claim-at-expiry``).
- ``patch_paths_unprefixed``: ``patch`` and ``commit_pass`` validate the patch object on its own,
  so a refusal's paths name its fields bare (``status``, ``next_attempt_at``) where the reference
  names them ``patch.status``, ``patch.next_attempt_at`` (the refusal table's paths; the code is
  right, and the message may be the port's own).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from driver import (
    Conflict,
    JobDueKey,
    JobRunFilter,
    JobRunKey,
    JobRunPatch,
    JobRunRow,
    ValidationFailed,
    iso_from_ms,
    parse_iso_ms,
)
from scopehost import JobRunDump, JobStepDumpRow, ScopeDatabase
from scopehost._erasure import shred_subject_rows

_RUNS: Final = "_substrat_job_runs"
_STEPS: Final = "_substrat_job_steps"


class CleanStore(ScopeDatabase):
    """The port without a slip: the reference's operations as they are."""


class ListLimitBoolAsNumber(CleanStore):
    def list(self, filter: JobRunFilter, *, now: str) -> list[JobRunRow]:
        # The slip: a boolean is read as JavaScript's Number(b), so true is 1 and false is 0.
        limit: object = filter.limit  # the wire hands over JSON's true and false as they are
        if isinstance(limit, bool):
            filter = attrs.evolve(filter, limit=float(limit))
        return super().list(filter, now=now)


class BeginKeepsMisses(CleanStore):
    def begin(self, id: str, owner: str, margin_ms: float, *, now: str) -> bool:
        # Validate as the reference does (a refusal is refused the same way), then write BEGIN
        # with the slip: lease_began_at only, admission_misses left as it was.
        misses = self.connection.execute(
            f"SELECT admission_misses FROM {_RUNS} WHERE id = ?", (id,)
        ).fetchone()
        began = super().begin(id, owner, margin_ms, now=now)
        if began and misses is not None:
            self.connection.execute(
                f"UPDATE {_RUNS} SET admission_misses = ? WHERE id = ?", (misses[0], id)
            )
        return began


class EraseDeclaredOnly(CleanStore):
    def shred_subject(self, subject_id: str, *, now: str) -> int:
        if not isinstance(subject_id, str) or not subject_id:
            return super().shred_subject(subject_id, now=now)
        conn = self.connection
        conn.execute("BEGIN IMMEDIATE")
        try:
            # The slip: only runs that DECLARE the subject are looked at; the others (and their
            # step rows) are set aside while the erasure runs, then put back untouched.
            conn.execute(
                f"CREATE TEMP TABLE aside_runs AS SELECT * FROM {_RUNS} WHERE subject_id IS NOT ?",
                (subject_id,),
            )
            conn.execute(
                f"CREATE TEMP TABLE aside_steps AS SELECT * FROM {_STEPS} "
                "WHERE run_id IN (SELECT id FROM aside_runs)"
            )
            conn.execute(f"DELETE FROM {_STEPS} WHERE run_id IN (SELECT id FROM aside_runs)")
            conn.execute(f"DELETE FROM {_RUNS} WHERE id IN (SELECT id FROM aside_runs)")
            touched = shred_subject_rows(conn, subject_id, now)
            conn.execute(f"INSERT INTO {_RUNS} SELECT * FROM aside_runs")
            conn.execute(f"INSERT INTO {_STEPS} SELECT * FROM aside_steps")
            conn.execute("DROP TABLE aside_runs")
            conn.execute("DROP TABLE aside_steps")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return touched


class CopyDropsMisses(CleanStore):
    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        if isinstance(dump, JobRunDump) and dump.scope_id != self.scope_id:
            # The slip: the copy's INSERT column list has no admission_misses.
            runs = tuple(attrs.evolve(run, admission_misses=None) for run in dump.runs)
            dump = attrs.evolve(dump, runs=runs)
        return super().import_dump(dump, source_scope_id, now=now)


class CommitMergesCounters(CleanStore):
    def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        stored = self.connection.execute(
            f"SELECT counters FROM {_RUNS} WHERE id = ?", (id,)
        ).fetchone()
        if stored is not None and isinstance(patch.counters, str):
            # The slip: the given counters are added to the stored ones ("merged on each commit").
            try:
                merged = json.loads(stored[0])
                for name, value in json.loads(patch.counters).items():
                    merged[name] = merged.get(name, 0) + value
                patch = attrs.evolve(patch, counters=json.dumps(merged, separators=(",", ":")))
            except (ValueError, TypeError, AttributeError):
                pass
        return super().commit_pass(id, patch, owner, now=now)


_DUE_NEWEST_FIRST_SQL: Final = (
    "SELECT id, module_id, job FROM _substrat_job_runs WHERE status = 'running' AND "
    "(next_attempt_at IS NULL OR next_attempt_at <= ?) "
    "ORDER BY COALESCE(next_attempt_at, started_at), id DESC LIMIT ?"
)


class DueTieNewestFirst(CleanStore):
    def due_keys(self, now_param: str, max: int, *, now: str) -> list[JobDueKey]:
        super().due_keys(now_param, max, now=now)  # refused as the reference refuses
        # The slip: a tie of due times is broken by id descending.
        rows = self.connection.execute(_DUE_NEWEST_FIRST_SQL, (now_param, max)).fetchall()
        return [JobDueKey(row[0], row[1], row[2]) for row in rows]


class ClaimStrictExpiry(CleanStore):
    def claim(self, id: str, owner: str, lease_ms: int, *, now: str) -> Any:
        if isinstance(now, str) and isinstance(id, str):
            held = self.connection.execute(
                f"SELECT next_attempt_at FROM {_RUNS} WHERE id = ? AND status = 'running'", (id,)
            ).fetchone()
            # The slip: the due test is strict, so a lease expiring exactly now still holds.
            if held is not None and held[0] == now:
                super().claim(id, owner, lease_ms, now=iso_from_ms(parse_iso_ms(now) - 1))
                return None
        return super().claim(id, owner, lease_ms, now=now)


def _relative_to_patch(error: ValidationFailed) -> ValidationFailed:
    # The slip: the port validates the patch object on its own, so its paths are relative to it.
    return ValidationFailed(
        [attrs.evolve(field, path=field.path.removeprefix("patch.")) for field in error.errors]
    )


class PatchPathsUnprefixed(CleanStore):
    def patch(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        try:
            return super().patch(id, patch, owner, now=now)
        except ValidationFailed as error:
            raise _relative_to_patch(error) from error

    def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        try:
            return super().commit_pass(id, patch, owner, now=now)
        except ValidationFailed as error:
            raise _relative_to_patch(error) from error


ADAPTERS: Final[Mapping[str, type[ScopeDatabase]]] = {
    "clean": CleanStore,
    "list_limit_bool_as_number": ListLimitBoolAsNumber,
    "begin_keeps_misses": BeginKeepsMisses,
    "erase_declared_only": EraseDeclaredOnly,
    "copy_drops_misses": CopyDropsMisses,
    "commit_merges_counters": CommitMergesCounters,
    "due_tie_newest_first": DueTieNewestFirst,
    "claim_strict_expiry": ClaimStrictExpiry,
    "patch_paths_unprefixed": PatchPathsUnprefixed,
}

#: The slips alone: every adapter but the clean port.
SLIPS: Final = tuple(name for name in ADAPTERS if name != "clean")

# -- the wire --------------------------------------------------------------------------------------


def _run_row(value: Mapping[str, Any]) -> JobRunRow:
    return JobRunRow(**value)


def _patch(value: Mapping[str, Any]) -> JobRunPatch:
    return JobRunPatch(**value)


def _dump(value: Mapping[str, Any]) -> JobRunDump:
    return JobRunDump(
        value["scope_id"],
        tuple(JobRunRow(**row) for row in value["runs"]),
        tuple(JobStepDumpRow(**step) for step in value["steps"]),
    )


def _dumped(dump: JobRunDump) -> dict[str, Any]:
    return {
        "scope_id": dump.scope_id,
        "runs": [attrs.asdict(run) for run in dump.runs],
        "steps": [attrs.asdict(step) for step in dump.steps],
    }


def _plain(value: Any) -> Any:
    if attrs.has(type(value)):
        return {key: _plain(item) for key, item in attrs.asdict(value, recurse=False).items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _tables(store: ScopeDatabase) -> dict[str, Any]:
    conn = store.connection
    runs = conn.execute(f"SELECT * FROM {_RUNS} ORDER BY id").fetchall()
    steps = conn.execute(f"SELECT * FROM {_STEPS} ORDER BY run_id, step").fetchall()
    return {"runs": [dict(row) for row in runs], "steps": [dict(row) for row in steps]}


_Op = Callable[[ScopeDatabase, Mapping[str, Any], str], Any]

_OPS: Final[Mapping[str, _Op]] = {
    "start_or_join": lambda s, a, now: s.start_or_join(
        JobRunKey(**a["key"]), _run_row(a["row"]), now=now
    ),
    "due_keys": lambda s, a, now: s.due_keys(a["now_param"], a["max"], now=now),
    "claim": lambda s, a, now: s.claim(a["id"], a["owner"], a["lease_ms"], now=now),
    "begin": lambda s, a, now: s.begin(a["id"], a["owner"], a["margin_ms"], now=now),
    "miss": lambda s, a, now: s.miss(a["id"], a["owner"], a["note"], now=now),
    "list": lambda s, a, now: s.list(JobRunFilter(**a["filter"]), now=now),
    "patch": lambda s, a, now: s.patch(a["id"], _patch(a["patch"]), a["owner"], now=now),
    "commit_pass": lambda s, a, now: s.commit_pass(
        a["id"], _patch(a["patch"]), a["owner"], now=now
    ),
    "begin_step": lambda s, a, now: s.begin_step(
        a["run_id"], a["name"], a["owner"], a["lease_ms"], now=now
    ),
    "record_step": lambda s, a, now: s.record_step(
        a["run_id"],
        a["name"],
        a["result"],
        a["attempts"],
        a["last_error"],
        a["at"],
        a["owner"],
        a["lease_ms"],
        now=now,
    ),
    "shred_subject": lambda s, a, now: s.shred_subject(a["subject_id"], now=now),
    "export_dump": lambda s, a, now: _dumped(s.export_dump(now=now)),
    "import_dump": lambda s, a, now: s.import_dump(_dump(a["dump"]), a["source_scope_id"], now=now),
    "tables": lambda s, a, now: _tables(s),
}


class WireServer:
    """One adapter's scopes, each an in-memory SQLite database, answering wire requests."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._store_type = ADAPTERS[name]
        self._scopes: dict[str, ScopeDatabase] = {}

    def _scope(self, scope: str) -> ScopeDatabase:
        if scope not in self._scopes:
            conn = sqlite3.connect(":memory:", isolation_level=None)
            self._scopes[scope] = self._store_type(conn, scope)
        return self._scopes[scope]

    def answer(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict) or request.get("wire") != 1:
            return _refusal("bad_request", f"{request!r} is not a wire version 1 request")
        op: Any = request.get("op")
        if op == "hello":
            return {"ok": True, "result": {"wire": 1, "store": f"newcomer-{self._name}"}}
        if op not in _OPS or not isinstance(request.get("scope"), str):
            return _refusal("bad_request", f"op {op!r} or its scope is not the wire's")
        store = self._scope(request["scope"])
        try:
            now: Any = request.get("now")
            result = _plain(_OPS[op](store, request.get("args") or {}, now))
            reply: dict[str, Any] = {"ok": True, "result": result}
        except ValidationFailed as error:
            reply = {
                "ok": False,
                "error": {
                    "code": "validation_failed",
                    "message": str(error),
                    "paths": [field.path for field in error.errors],
                },
            }
        except Conflict as error:
            reply = _refusal("conflict", str(error))
        except (sqlite3.Error, OverflowError, ValueError) as error:
            reply = _refusal("store_error", str(error))
        except (KeyError, TypeError) as error:
            reply = _refusal("bad_request", f"the request's args do not fit {op}: {error}")
        if request.get("tables"):
            reply["tables"] = _tables(store)
        return reply


def _refusal(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


def serve(name: str) -> None:
    """Answer one request per line of stdin, one reply per line of stdout."""
    server = WireServer(name)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError as error:
            reply = _refusal("bad_request", f"the line is not JSON: {error}")
        else:
            reply = server.answer(request)
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ADAPTERS:
        sys.exit(f"usage: newcomer_adapters.py NAME, NAME one of {', '.join(ADAPTERS)}")
    serve(sys.argv[1])
