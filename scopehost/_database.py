"""The scope's store: every ``JobRunStore`` operation as ONE SQLite transaction, synchronously.

Theory of operation. The scope actor owns one connection and calls exactly one method of this class
per message, so each method is the whole of one store operation and must be indivisible on its
own: it opens ``BEGIN IMMEDIATE``, runs the spec's statements verbatim (``_sql.py``), and commits —
or, on ANY error, rolls back, so a failed operation leaves no trace and the connection is ready for
the next message. An operation that is one read statement (the due read, the operator read) runs
it alone, which SQLite makes a transaction of its own. Nothing here awaits, sleeps or reads a
clock: the store's now is handed in by the actor as the keyword ``now``, read inside the message,
and every lease time (the claim's due test and expiry, BEGIN's margin, each renewal) is computed
from it and never from the caller's clock.

Inputs that would make a statement silently do the wrong thing — a negative lease, a negative
``LIMIT`` (which SQLite reads as "no limit"), a time not in the one ISO spelling (string order is
time order only for that spelling) — are refused with ``ValidationFailed`` before the transaction
opens. Decisions (coalescing conflicts, retries, when to miss) are the kernel's, not the store's.
"""

from __future__ import annotations

import builtins
import math
import os
import reprlib
import sqlite3
import sys
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final

import attrs

from driver import (
    JOB_COUNTERS_MAX_BYTES,
    JOB_CURSOR_MAX_BYTES,
    JOB_ERROR_MAX_BYTES,
    JOB_ID_MAX_BYTES,
    JOB_LEASE_EXPIRED_NOTE,
    JOB_LEASE_MAX_MS,
    JOB_PAYLOAD_MAX_BYTES,
    JOB_RUN_LIST_MAX,
    JOB_RUN_STATUSES,
    JOB_STEP_RESULT_MAX_BYTES,
    JobDueKey,
    JobMiss,
    JobRunClaim,
    JobRunFilter,
    JobRunKey,
    JobRunPatch,
    JobRunRow,
    JobStepBoundary,
    JobStepRow,
    ValidationFailed,
    admission_miss_outcome,
    iso_from_ms,
    job_run_list_limit,
    parse_iso_ms,
)
from driver._json import json_text_problem, surrogate_message
from driver._limits import size_problem, time_ahead_problem

from ._dump import (
    SQLITE_INT_MAX,
    JobRunDump,
    JobStepDumpRow,
    export_rows,
    import_rows,
    validate_dump,
)
from ._erasure import shred_subject_rows
from ._errors import ScopeFileGone
from ._operations import ModuleOperation, merge_operations
from ._schema import RUNS_TABLE, STEPS_TABLE, ensure_schema
from ._sql import (
    JOB_RUN_BEGIN_SQL,
    JOB_RUN_CLAIM_SQL,
    JOB_RUN_LIVE_SQL,
    JOB_RUN_MISS_SETTLE_SQL,
    JOB_RUN_MISS_SQL,
    JOB_RUN_PATCH_SQL,
    JOB_RUN_RENEW_SQL,
    JOB_STEP_RECORD_SQL,
)

__all__ = ["JobRunDump", "JobStepDumpRow", "ModuleOperation", "ScopeDatabase"]

_RUN_COLUMNS: Final = tuple(field.name for field in attrs.fields(JobRunRow))
_INSERT_RUN_SQL: Final = (
    f"INSERT INTO {RUNS_TABLE} ({', '.join(_RUN_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _RUN_COLUMNS)})"
)
_TAKEOVER_READ_SQL: Final = f"SELECT lease_began_at FROM {RUNS_TABLE} WHERE id = ?"
_STEP_READ_SQL: Final = (
    f"SELECT step, result, attempts, last_error FROM {STEPS_TABLE} WHERE run_id = ? AND step = ?"
)
_LEDGER_DROP_SQL: Final = f"DELETE FROM {STEPS_TABLE} WHERE run_id = ?"
_FILTER_COLUMNS: Final = ("module_id", "job", "instance", "status")
_ISO_EXAMPLE: Final = "'2026-10-04T12:00:00.000Z'"
_STATUS_CHOICES: Final = ", ".join(repr(status) for status in JOB_RUN_STATUSES)
#: The largest int every float-reading step takes (a limit is clamped as a number).
_FLOAT_INT_MAX: Final = int(sys.float_info.max)


# -- input checks: each raises before any transaction opens ---------------------------------------


#: The spec's due read's rows (``JOB_RUN_DUE_SQL``) in its order, read as two ranges of the
#: ``(status, next_attempt_at, id)`` index: the running rows with no next attempt (due, ordered
#: by ``started_at``), and those whose next attempt is at or before now (ordered by it). Only due
#: rows are read and sorted, so runs that wait (leased, backing off, deferred) cost nothing however
#: many there are, where the spec's statement walks them all whenever fewer than ``max`` are due.
#: The two ranges are disjoint, and each one's sort key is exactly what
#: ``COALESCE(next_attempt_at, started_at)`` gives its rows; a property test holds this to the
#: spec's statement on random tables.
_DUE_BY_RANGES_SQL: Final = (
    "SELECT id, module_id, job FROM ("
    "SELECT id, module_id, job, started_at AS due_at FROM _substrat_job_runs "
    "WHERE status = 'running' AND next_attempt_at IS NULL "
    "UNION ALL "
    "SELECT id, module_id, job, next_attempt_at AS due_at FROM _substrat_job_runs "
    "WHERE status = 'running' AND next_attempt_at <= ?"
    ") ORDER BY due_at, id LIMIT ?"
)


def _time_ms(value: object, path: str) -> int:
    if isinstance(value, str):
        try:
            return parse_iso_ms(value)
        except ValueError:
            pass
    raise ValidationFailed.at(
        path,
        f"is {value!r}; store times are ISO-8601 UTC with milliseconds and Z, like {_ISO_EXAMPLE}",
    )


def _check_storable(value: object, path: str) -> None:
    """Refuse text SQLite cannot store (a lone surrogate has no UTF-8) before a write fails."""
    if isinstance(value, str):
        problem = surrogate_message(value)
        if problem is not None:
            raise ValidationFailed.at(path, problem)


def _check_json(value: object, path: str) -> None:
    """Refuse JSON text the store's readers could not read alike (see ``json_text_problem``)."""
    if isinstance(value, str):
        problem = json_text_problem(value)
        if problem is not None:
            raise ValidationFailed.at(path, problem)


def _check_size(value: object, cap: int, path: str, what: str) -> None:
    """Refuse text past its cap under the platform's row limit (see ``driver._limits``)."""
    problem = size_problem(value, cap, what)
    if problem is not None:
        raise ValidationFailed.at(path, problem)


def _check_written_time(value: object, path: str, now_ms: int, *, nullable: bool) -> None:
    """A time a write stores: the one ISO spelling, and not so far past now that a running run
    would wait for ages (``JOB_TIME_AHEAD_MAX_MS``)."""
    if value is None and nullable:
        return
    _time_ms(value, path)
    assert isinstance(value, str)
    problem = time_ahead_problem(value, now_ms)
    if problem is not None:
        raise ValidationFailed.at(path, f"is {value!r}: it {problem}")


#: The capped text columns of a run row, with their caps and what each is called in a refusal.
_RUN_CAPS: Final = (
    ("id", JOB_ID_MAX_BYTES, "an id"),
    ("module_id", JOB_ID_MAX_BYTES, "a module id"),
    ("job", JOB_ID_MAX_BYTES, "a job name"),
    ("instance", JOB_ID_MAX_BYTES, "an instance"),
    ("payload", JOB_PAYLOAD_MAX_BYTES, "a payload"),
    ("subject_id", JOB_ID_MAX_BYTES, "a subject id"),
    ("cursor", JOB_CURSOR_MAX_BYTES, "a cursor"),
    ("counters", JOB_COUNTERS_MAX_BYTES, "a run's counters"),
    ("last_error", JOB_ERROR_MAX_BYTES, "an error"),
    ("lease_owner", JOB_ID_MAX_BYTES, "a lease owner"),
)


def _check_owner(owner: object) -> None:
    if not isinstance(owner, str) or not owner:
        raise ValidationFailed.at(
            "owner", f"is {owner!r}; pass the non-empty lease owner its claim was made with"
        )
    _check_storable(owner, "owner")
    _check_size(owner, JOB_ID_MAX_BYTES, "owner", "a lease owner")


def _check_patch_owner(owner: object) -> None:
    # IS ?, not = ?: NULL is a legitimate owner for a coordinator from before leases.
    if owner is not None:
        _check_owner(owner)


def _shown(value: object) -> str:
    """``value`` as a refusal names it: its repr, but an int too long to read (or past Python's
    own limit on printing one) by its length."""
    if type(value) is not int or -(10**30) < value < 10**30:
        return repr(value)
    try:
        digits = f"of {len(str(abs(value)))} digits"
    except ValueError:  # past sys.get_int_max_str_digits()
        digits = "of thousands of digits"
    return f"{'a negative' if value < 0 else 'an'} int {digits}"


def _check_whole(value: object, path: str, *, minimum: int, remedy: str) -> None:
    if type(value) is not int or value < minimum:
        raise ValidationFailed.at(path, f"is {_shown(value)}; {remedy}")
    if value > SQLITE_INT_MAX:
        # Bound as it is, it would fail as a raw OverflowError inside the transaction.
        raise ValidationFailed.at(
            path,
            f"is {_shown(value)}, more than {SQLITE_INT_MAX}, the largest integer SQLite holds; "
            f"{remedy}",
        )


_ATTEMPTS_REMEDY: Final = "attempts counts consecutive failed passes, a whole number of 0 or more"


def _check_start_row(row: JobRunRow, now_ms: int) -> None:
    """What a live run inserted by ``start_or_join`` may hold besides its text: counts SQLite
    holds, no ``ended_at`` (it has not ended), and no lease longer than any claim writes."""
    _check_whole(row.attempts, "row.attempts", minimum=0, remedy=_ATTEMPTS_REMEDY)
    if row.admission_misses is not None:
        _check_whole(
            row.admission_misses,
            "row.admission_misses",
            minimum=0,
            remedy="admission_misses counts consecutive claims that did not begin, a whole "
            "number of 0 or more, or None for none",
        )
    if row.ended_at is not None:
        raise ValidationFailed.at(
            "row.ended_at",
            f"is {_shown(row.ended_at)}; start_or_join inserts a live run, which has not ended "
            "— leave ended_at None",
        )
    _check_written_time(row.started_at, "row.started_at", now_ms, nullable=False)
    _check_written_time(row.updated_at, "row.updated_at", now_ms, nullable=False)
    _check_written_time(row.next_attempt_at, "row.next_attempt_at", now_ms, nullable=True)
    _check_written_time(row.lease_began_at, "row.lease_began_at", now_ms, nullable=True)
    # A leased row's next_attempt_at is its lease's expiry, held to the longest lease a claim
    # writes, as an import holds a restored lease (see ``_dump``).
    expiry = row.next_attempt_at if row.lease_owner is not None else None
    if expiry is not None and parse_iso_ms(expiry) - now_ms > JOB_LEASE_MAX_MS:
        raise ValidationFailed.at(
            "row.next_attempt_at",
            f"is {expiry!r}, a lease ending more than {JOB_LEASE_MAX_MS} ms (a year, the longest "
            "lease) past the store's now; no claim writes that lease — write an expiry within a "
            "year of now, or leave lease_owner None",
        )


def _check_lease_ms(lease_ms: object) -> None:
    if type(lease_ms) is not int or not 1 <= lease_ms <= JOB_LEASE_MAX_MS:
        raise ValidationFailed.at(
            "lease_ms",
            f"is {lease_ms!r}; a lease is a whole number of milliseconds from 1 to "
            f"{JOB_LEASE_MAX_MS} (a year), which keeps its expiry a time the store can write",
        )


def _check_text(value: object, path: str, *, nullable: bool, remedy: str) -> None:
    if not (isinstance(value, str) or (nullable and value is None)):
        raise ValidationFailed.at(path, f"is {value!r}; {remedy}")
    _check_storable(value, path)


def _check_status(status: object, path: str) -> None:
    if status not in JOB_RUN_STATUSES:
        raise ValidationFailed.at(
            path, f"is {status!r}; a run's status is one of {_STATUS_CHOICES}"
        )


def _check_patch(patch: JobRunPatch, now_ms: int) -> None:
    if not isinstance(patch, JobRunPatch):
        raise ValidationFailed.at(
            "patch",
            f"is {reprlib.repr(patch)}, a {type(patch).__name__}; pass a driver.JobRunPatch, "
            "which names every column a pass writes (JobRunPatch(status=..., cursor=..., "
            "counters=..., attempts=..., last_error=..., updated_at=..., next_attempt_at=..., "
            "ended_at=...))",
        )
    _check_status(patch.status, "patch.status")
    for column in ("cursor", "counters", "last_error"):
        _check_storable(getattr(patch, column), f"patch.{column}")
    _check_whole(
        patch.attempts,
        "patch.attempts",
        minimum=0,
        remedy="attempts counts consecutive failed passes, a whole number of 0 or more",
    )
    _check_json(patch.cursor, "patch.cursor")
    _check_json(patch.counters, "patch.counters")
    _check_size(patch.cursor, JOB_CURSOR_MAX_BYTES, "patch.cursor", "a cursor")
    _check_size(patch.counters, JOB_COUNTERS_MAX_BYTES, "patch.counters", "a run's counters")
    _check_size(patch.last_error, JOB_ERROR_MAX_BYTES, "patch.last_error", "an error")
    # A patch writes these three; a run left 'running' with a next attempt that never comes (or
    # a time no reader can order) blocks its key for good, as every start joins it.
    _check_written_time(patch.updated_at, "patch.updated_at", now_ms, nullable=False)
    _check_written_time(patch.next_attempt_at, "patch.next_attempt_at", now_ms, nullable=True)
    _check_written_time(patch.ended_at, "patch.ended_at", now_ms, nullable=True)


class _FileWatch:
    """The scope's database file as it was opened, checked before each operation.

    SQLite keeps writing into a file deleted under an open connection (on POSIX the inode lives
    on), and every commit after that is lost the moment the connection closes. So each operation
    first checks that the path still names the file that was opened (same device and inode), and
    refuses to run otherwise.
    """

    __slots__ = ("_identity", "_path", "_scope_id")

    def __init__(self, path: str, scope_id: str) -> None:
        self._path = path
        self._scope_id = scope_id
        self._identity = self._stat()

    def _stat(self) -> tuple[int, int] | None:
        try:
            found = os.stat(self._path)
        except FileNotFoundError:
            return None
        return found.st_dev, found.st_ino

    def check(self) -> None:
        found = self._stat()
        if self._identity is not None and found == self._identity:
            return
        scope = self._scope_id
        if found is not None:
            # Another file is at the path: most often a backup put back, as the restore
            # procedure says; forget would refuse, as the path holds a file.
            raise ScopeFileGone(
                f"scope {scope!r}: its database file {self._path} was replaced by another file "
                "while the scope had it open (deleted or replaced: the file there now is not "
                "the one it opened); nothing was written — if the file there now is the one to "
                f"keep (a backup put back), call evict({scope!r}) on the scope host and the next "
                "call opens it"
            )
        raise ScopeFileGone(
            f"scope {scope!r}: its database file {self._path} was deleted or replaced "
            "while the scope had it open; nothing was written — restore the file and evict the "
            f"scope to reopen it, or call forget({scope!r}) on the scope host to start "
            "the scope over empty"
        )


def _file_watch(conn: sqlite3.Connection, scope_id: str) -> _FileWatch | None:
    """A watch on the main database's file, or None for an in-memory database (no file).

    SQLite names a file database by its full path. An in-memory one has no name, or, once a
    serialized database was loaded into it (``Connection.deserialize``), the bare name ``x``
    that SQLite gives its memory storage: only an absolute path is a file."""
    for _, name, path in conn.execute("PRAGMA database_list"):
        if name == "main" and path and os.path.isabs(path):
            return _FileWatch(str(path), scope_id)
    return None


class _Transaction:
    """``BEGIN IMMEDIATE`` on entry; ``COMMIT`` on a clean exit, ``ROLLBACK`` on any other."""

    __slots__ = ("_conn", "_watch")

    def __init__(self, conn: sqlite3.Connection, watch: _FileWatch | None) -> None:
        self._conn = conn
        self._watch = watch

    def __enter__(self) -> None:
        if self._watch is not None:
            self._watch.check()
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            try:
                self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        else:
            self._rollback()

    def _rollback(self) -> None:
        # An operation may have failed before BEGIN took, or SQLite may already have rolled
        # back on its own (some errors do): only a transaction still open needs ending.
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")


class _OneRead:
    """What a store operation that is ONE read statement runs in: no ``BEGIN``/``COMMIT`` of its
    own, since SQLite runs a lone statement as a transaction by itself (its snapshot is just as
    consistent), and those two statements were most of the cost of a due read."""

    __slots__ = ("_watch",)

    def __init__(self, watch: _FileWatch | None) -> None:
        self._watch = watch

    def __enter__(self) -> None:
        if self._watch is not None:
            self._watch.check()

    def __exit__(self, *exc_info: object) -> None:
        pass


class ScopeDatabase:
    """One scope's job-run store over a connection this object then owns.

    ``conn`` must be opened with ``isolation_level=None`` (each method's explicit transaction is
    then the only one); its ``row_factory`` is set to ``sqlite3.Row``. The constructor creates the
    spec's tables or upgrades an older shape in place. ``operations`` adds module operations to
    (or replaces) the defaults ``record`` and ``items``.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        scope_id: str,
        *,
        operations: Mapping[str, ModuleOperation] | None = None,
    ) -> None:
        if not isinstance(scope_id, str) or not scope_id:
            raise ValidationFailed.at(
                "scope_id", f"is {scope_id!r}; name the scope with a non-empty str"
            )
        if conn.isolation_level is not None:
            raise ValueError(
                f"the connection has isolation_level {conn.isolation_level!r}; open it with "
                "sqlite3.connect(..., isolation_level=None) so each operation's explicit "
                "transaction is the only one"
            )
        self._operations = merge_operations(operations)
        self._scope_id = scope_id
        self._conn = conn
        conn.row_factory = sqlite3.Row
        self._added_columns = ensure_schema(conn)
        watch = _file_watch(conn, scope_id)
        self._tx = _Transaction(conn, watch)
        self._one_read = _OneRead(watch)

    @property
    def scope_id(self) -> str:
        return self._scope_id

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn

    @property
    def added_columns(self) -> tuple[str, ...]:
        """The columns opening this scope added to an older shape (empty when it was current)."""
        return self._added_columns

    @property
    def operation_names(self) -> tuple[str, ...]:
        return tuple(sorted(self._operations))

    # -- the JobRunStore operations ----------------------------------------------------------------

    def start_or_join(self, key: JobRunKey, row: JobRunRow, *, now: str) -> JobRunRow:
        """The newest live run for ``key`` unchanged, or else ``row`` inserted — atomically."""
        now_ms = _time_ms(now, "now")
        for column, value in attrs.asdict(row).items():
            _check_storable(value, f"row.{column}")
        if row.key != key:
            raise ValidationFailed.at(
                "row",
                f"has the key {row.key!r} but the join asked for {key!r}; "
                "build the row for the key being joined",
            )
        if row.status != "running":
            raise ValidationFailed.at(
                "row.status",
                f"is {row.status!r}; start_or_join inserts a live run, whose status is 'running'",
            )
        for column in ("payload", "cursor", "counters"):
            _check_json(getattr(row, column), f"row.{column}")
        for column, cap, what in _RUN_CAPS:
            _check_size(getattr(row, column), cap, f"row.{column}", what)
        _check_start_row(row, now_ms)
        with self._tx:
            live = self._conn.execute(
                JOB_RUN_LIVE_SQL, (key.module_id, key.job, key.instance)
            ).fetchone()
            if live is not None:
                return JobRunRow.from_row(live)
            self._conn.execute(_INSERT_RUN_SQL, attrs.astuple(row))
        return row

    def due_keys(self, now_param: str, max: int, *, now: str) -> builtins.list[JobDueKey]:
        """Up to ``max`` due keys as of the CALLER's ``now_param`` (as the spec binds it).

        The rows and order of ``JOB_RUN_DUE_SQL``, read as ``_DUE_BY_RANGES_SQL`` does."""
        _time_ms(now, "now")
        _time_ms(now_param, "now_param")
        _check_whole(
            max,
            "max",
            minimum=0,
            remedy="a due snapshot reads a whole number of keys, 0 or more "
            "(SQLite would read a negative limit as no limit)",
        )
        with self._one_read:
            rows = self._conn.execute(_DUE_BY_RANGES_SQL, (now_param, max)).fetchall()
        return [JobDueKey(row[0], row[1], row[2]) for row in rows]

    def claim(self, id: str, owner: str, lease_ms: int, *, now: str) -> JobRunClaim | None:
        """``JOB_RUN_CLAIM_SQL`` at the store's now; None when the run was not running and due."""
        now_ms = _time_ms(now, "now")
        _check_storable(id, "id")
        _check_owner(owner)
        _check_lease_ms(lease_ms)
        expiry = iso_from_ms(now_ms + lease_ms)
        with self._tx:
            # takeover is what the row carried BEFORE the claim, so it is read first, inside
            # the same transaction: nothing can begin or release the lease in between.
            before = self._conn.execute(_TAKEOVER_READ_SQL, (id,)).fetchone()
            claimed = self._conn.execute(
                JOB_RUN_CLAIM_SQL, (owner, expiry, now, JOB_LEASE_EXPIRED_NOTE, id, now)
            ).fetchall()
        if not claimed:
            return None
        return JobRunClaim(JobRunRow.from_row(claimed[0]), before[0] is not None)

    def begin(self, id: str, owner: str, margin_ms: float, *, now: str) -> bool:
        """``JOB_RUN_BEGIN_SQL``: True only while ``owner`` holds a lease that runs more than
        ``floor(margin_ms)`` past the store's now."""
        now_ms = _time_ms(now, "now")
        _check_storable(id, "id")
        _check_owner(owner)
        if (
            not isinstance(margin_ms, int | float)
            or isinstance(margin_ms, bool)
            or not 0 <= margin_ms < math.inf  # NaN too; an int of any size compares exactly
        ):
            raise ValidationFailed.at(
                "margin_ms",
                f"is {_shown(margin_ms)}; the BEGIN margin is a finite number of milliseconds, "
                "0 or more",
            )
        if margin_ms > JOB_LEASE_MAX_MS:
            # No lease outlasts it, and now + margin would be no time the store can write.
            raise ValidationFailed.at(
                "margin_ms",
                f"is {_shown(margin_ms)}; the BEGIN margin is at most {JOB_LEASE_MAX_MS} ms (a "
                "year, the longest lease), as no lease could run longer past now",
            )
        threshold = iso_from_ms(now_ms + math.floor(margin_ms))
        with self._tx:
            began = self._conn.execute(JOB_RUN_BEGIN_SQL, (now, id, owner, threshold)).rowcount
        return began == 1

    def miss(self, id: str, owner: str, note: str, *, now: str) -> JobMiss | None:
        """An admission miss: release ``owner``'s unbegun claim, count it, and back off — or fail
        the run with ``note`` at the tenth. None when ``owner`` no longer held it unbegun."""
        _time_ms(now, "now")
        _check_storable(id, "id")
        _check_owner(owner)
        _check_text(
            note, "note", nullable=False, remedy="pass the warning a tenth miss fails the run with"
        )
        with self._tx:
            counted = self._conn.execute(JOB_RUN_MISS_SQL, (now, id, owner)).fetchall()
            if not counted:
                return None
            misses = int(counted[0][0])
            outcome = admission_miss_outcome(misses, now, note)
            settled = self._conn.execute(
                JOB_RUN_MISS_SETTLE_SQL,
                (
                    outcome.status,
                    outcome.next_attempt_at,
                    outcome.ended_at,
                    outcome.last_error,
                    id,
                    misses,
                ),
            ).rowcount
            if settled != 1:
                # Unreachable while both statements share this transaction; refusing here keeps
                # a released lease from ever being committed without its backoff.
                raise RuntimeError(f"admission miss {misses} of run {id!r} did not settle")
        return JobMiss(misses, outcome.status == "failed")

    def patch(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        """``JOB_RUN_PATCH_SQL``: a pass outcome, only while ``owner`` holds the run."""
        now_ms = _time_ms(now, "now")
        _check_storable(id, "id")
        _check_patch_owner(owner)
        _check_patch(patch, now_ms)
        with self._tx:
            return self._apply_patch(id, patch, owner)

    def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        """The patch and the ledger drop together; the ledger only when the patch applied, so a
        stale holder's commit cannot empty the ledger of the pass that took the run over."""
        now_ms = _time_ms(now, "now")
        _check_storable(id, "id")
        _check_patch_owner(owner)
        _check_patch(patch, now_ms)
        with self._tx:
            applied = self._apply_patch(id, patch, owner)
            if applied:
                self._conn.execute(_LEDGER_DROP_SQL, (id,))
        return applied

    def begin_step(
        self, run_id: str, name: str, owner: str, lease_ms: int, *, now: str
    ) -> JobStepBoundary:
        """A step boundary: renew the lease to the store's now plus ``lease_ms`` and read the
        step's ledger row, together. ``held`` False means the pass lost the run."""
        now_ms = _time_ms(now, "now")
        _check_storable(run_id, "run_id")
        _check_storable(name, "name")
        _check_owner(owner)
        _check_lease_ms(lease_ms)
        expiry = iso_from_ms(now_ms + lease_ms)
        with self._tx:
            if not self._renew(run_id, owner, expiry):
                return JobStepBoundary(False, None)
            found = self._conn.execute(_STEP_READ_SQL, (run_id, name)).fetchone()
        return JobStepBoundary(True, None if found is None else JobStepRow(*found))

    def record_step(
        self,
        run_id: str,
        name: str,
        result: str | None,
        attempts: int,
        last_error: str | None,
        at: str,
        owner: str,
        lease_ms: int,
        *,
        now: str,
    ) -> bool:
        """Renew, then record one step attempt — both only while ``owner`` holds the run."""
        now_ms = _time_ms(now, "now")
        _check_storable(run_id, "run_id")
        _check_storable(name, "name")
        _time_ms(at, "at")
        _check_owner(owner)
        _check_lease_ms(lease_ms)
        _check_text(result, "result", nullable=True, remedy="a step result is JSON text or None")
        _check_text(last_error, "last_error", nullable=True, remedy="pass the error text or None")
        _check_whole(
            attempts,
            "attempts",
            minimum=0,
            remedy="a step's attempts is a whole number of 0 or more",
        )
        _check_json(result, "result")
        _check_size(name, JOB_ID_MAX_BYTES, "name", "a step name")
        _check_size(result, JOB_STEP_RESULT_MAX_BYTES, "result", "a step's result")
        _check_size(last_error, JOB_ERROR_MAX_BYTES, "last_error", "an error")
        expiry = iso_from_ms(now_ms + lease_ms)
        with self._tx:
            if not self._renew(run_id, owner, expiry):
                return False
            self._conn.execute(
                JOB_STEP_RECORD_SQL,
                (run_id, name, result, attempts, last_error, at, run_id, owner),
            )
        return True

    # -- the scope's own calls ---------------------------------------------------------------------

    def shred_subject(self, subject_id: str, *, now: str) -> int:
        """Erase ``subject_id`` from the scope's runs (see ``_erasure``); the runs touched."""
        _time_ms(now, "now")
        if not isinstance(subject_id, str) or not subject_id:
            raise ValidationFailed.at(
                "subject_id", f"is {subject_id!r}; name the data subject to erase"
            )
        _check_storable(subject_id, "subject_id")
        with self._tx:
            return shred_subject_rows(self._conn, subject_id, now)

    def export_dump(self, *, now: str) -> JobRunDump:
        """Every run and step row, verbatim, read in one transaction."""
        _time_ms(now, "now")
        with self._tx:
            return export_rows(self._conn, self._scope_id)

    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        """Restore ``dump`` into the scope it came from (the job tables replaced by its rows), or
        copy it into another (rows added, running runs failed as not carried, a clashing id a
        ``Conflict``); every row validated first (see ``_dump``). Returns the runs imported."""
        _time_ms(now, "now")
        if not isinstance(dump, JobRunDump):
            raise ValidationFailed.at(
                "dump", f"is {dump!r}; pass the JobRunDump that export_dump returned"
            )
        if source_scope_id != dump.scope_id:
            # The copy rule keys on where the dump was taken; a source that disagrees with the
            # dump would put one scope's name on another's runs.
            raise ValidationFailed.at(
                "source_scope_id",
                f"is {source_scope_id!r} but the dump was exported from scope "
                f"{dump.scope_id!r}; pass the scope the dump came from",
            )
        validate_dump(dump, now=now)
        with self._tx:
            return import_rows(self._conn, dump, scope_id=self._scope_id, now=now)

    def invoke(self, operation: str, args: Mapping[str, Any], *, now: str) -> Any:
        """Run the module operation named ``operation`` inside one transaction."""
        _time_ms(now, "now")
        function = self._operations.get(operation)
        if function is None:
            raise ValidationFailed.at(
                "operation",
                f"is {operation!r}, which this scope does not have; "
                f"it has {', '.join(repr(name) for name in self.operation_names)}",
            )
        if not isinstance(args, Mapping):
            raise ValidationFailed.at(
                "args", f"is {args!r}; pass the operation's arguments as a dict"
            )
        with self._tx:
            return function(self._conn, dict(args), now)

    def list(self, filter: JobRunFilter, *, now: str) -> builtins.list[JobRunRow]:
        """The operator read: every field of ``filter`` narrows, newest first, limit clamped."""
        _time_ms(now, "now")
        if filter.status is not None:
            _check_status(filter.status, "filter.status")
        for column in ("module_id", "job", "instance"):
            _check_text(
                getattr(filter, column),
                f"filter.{column}",
                nullable=True,
                remedy="a filter field is a str, or None to leave it open",
            )
        if filter.limit is not None and not isinstance(filter.limit, int | float):
            raise ValidationFailed.at(
                "filter.limit", f"is {filter.limit!r}; a limit is a number, or None for the default"
            )
        limit: object = filter.limit
        if type(limit) is int and abs(limit) > _FLOAT_INT_MAX:
            # Past every float, it is no number a JavaScript caller could pass (the clamp
            # would raise OverflowError reading it as one).
            raise ValidationFailed.at(
                "filter.limit",
                f"is {_shown(limit)}, past any number JSON carries; pass a limit of up to "
                f"{JOB_RUN_LIST_MAX} rows, or None for the default",
            )
        clauses: builtins.list[str] = []
        params: builtins.list[object] = []
        for column in _FILTER_COLUMNS:
            value = getattr(filter, column)
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        params.append(job_run_list_limit(filter.limit))
        with self._one_read:
            rows = self._conn.execute(
                f"SELECT * FROM {RUNS_TABLE}{where} ORDER BY id DESC LIMIT ?", params
            ).fetchall()
        return [JobRunRow.from_row(row) for row in rows]

    # -- statements shared by several operations, run inside the caller's transaction -------------

    def _apply_patch(self, id: str, patch: JobRunPatch, owner: str | None) -> bool:
        changed = self._conn.execute(
            JOB_RUN_PATCH_SQL,
            (
                patch.status,
                patch.cursor,
                patch.counters,
                patch.attempts,
                patch.last_error,
                patch.updated_at,
                patch.next_attempt_at,
                patch.ended_at,
                id,
                owner,
            ),
        ).rowcount
        return changed == 1

    def _renew(self, run_id: str, owner: str, expiry: str) -> bool:
        return self._conn.execute(JOB_RUN_RENEW_SQL, (expiry, run_id, owner)).rowcount == 1
