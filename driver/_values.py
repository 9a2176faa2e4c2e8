"""The values that cross the port: rows as the SQL returns them, and what the kernel reports.

Frozen ``attrs`` classes with fields named as the SQL columns, so a row reads the same here, in the
database and in a trace, and a repr can be pasted into a test.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from ._constants import (
    JOB_RETRY_BASE_DELAY_MS,
    JOB_RETRY_MAX_ATTEMPTS,
    JOB_RETRY_MAX_DELAY_MS,
)
from ._errors import ValidationFailed

JobRunStatus: TypeAlias = Literal["running", "done", "failed"]
JOB_RUN_STATUSES: tuple[JobRunStatus, ...] = ("running", "done", "failed")


@attrs.frozen
class JobRunKey:
    """The coalescing key: one LIVE run per triple."""

    module_id: str
    job: str
    instance: str


@attrs.frozen
class JobRunRow:
    """The ``_substrat_job_runs`` row, column for column."""

    id: str
    module_id: str
    job: str
    instance: str
    payload: str
    subject_id: str | None
    status: str
    cursor: str | None
    counters: str
    attempts: int
    last_error: str | None
    started_at: str
    updated_at: str
    next_attempt_at: str | None
    ended_at: str | None
    lease_owner: str | None = None
    lease_began_at: str | None = None
    admission_misses: int | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> JobRunRow:
        """From a mapping of column names (an ``sqlite3.Row`` or a dict); an older shape's
        missing optional columns read as NULL."""
        names = list(row.keys())
        if names == _RUN_COLUMNS:
            # The current shape, in the spec's column order: every store read takes this path.
            return cls(*(row[name] for name in _RUN_COLUMNS))
        present = set(names)
        values = {
            field.name: row[field.name]
            for field in attrs.fields(cls)
            if field.name in present or field.default is attrs.NOTHING
        }
        return cls(**values)

    @classmethod
    def fresh(
        cls,
        id: str,
        key: JobRunKey,
        *,
        payload: str,
        at: str,
        subject_id: str | None = None,
    ) -> JobRunRow:
        """A run as a start inserts it: running, no cursor, no counts, nothing charged."""
        return cls(
            id=id,
            module_id=key.module_id,
            job=key.job,
            instance=key.instance,
            payload=payload,
            subject_id=subject_id,
            status="running",
            cursor=None,
            counters="{}",
            attempts=0,
            last_error=None,
            started_at=at,
            updated_at=at,
            next_attempt_at=None,
            ended_at=None,
        )

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @property
    def key(self) -> JobRunKey:
        return JobRunKey(self.module_id, self.job, self.instance)


_RUN_COLUMNS = [field.name for field in attrs.fields(JobRunRow)]


@attrs.frozen
class JobStepRow:
    """The ``_substrat_job_steps`` row as a pass reads it. ``result`` not NULL means completed."""

    step: str
    result: str | None
    attempts: int
    last_error: str | None


@attrs.frozen
class JobRunPatch:
    """Everything a pass writes onto the run row, in one statement — never a partial update."""

    status: JobRunStatus
    cursor: str | None
    counters: str
    attempts: int
    last_error: str | None
    updated_at: str
    next_attempt_at: str | None
    ended_at: str | None


@attrs.frozen
class JobRunClaim:
    """A won claim: the run as the claim left it, and whether it took over a BEGUN lease."""

    run: JobRunRow
    takeover: bool


@attrs.frozen
class JobDueKey:
    """What a drive's snapshot holds of one due run: enough to pick it, never to act on it."""

    id: str
    module_id: str
    job: str


@attrs.frozen
class JobMiss:
    """An admission miss the store recorded: the new consecutive count, and whether it failed the
    run."""

    misses: int
    failed: bool


@attrs.frozen
class JobStepBoundary:
    """A step boundary: whether the pass still holds its run, and the step's ledger row."""

    held: bool
    row: JobStepRow | None


@attrs.frozen
class AdmissionMissOutcome:
    """The params of ``JOB_RUN_MISS_SETTLE_SQL`` before its id."""

    status: JobRunStatus
    next_attempt_at: str | None
    ended_at: str | None
    last_error: str | None


@attrs.frozen(kw_only=True)
class JobRunFilter:
    """The operator read's filter. Every field narrows; none is required."""

    module_id: str | None = None
    job: str | None = None
    instance: str | None = None
    status: JobRunStatus | None = None
    limit: float | None = None


@attrs.frozen(kw_only=True)
class StartJobRunInput:
    """What ``start_job_run`` is handed."""

    module_id: str
    job: str
    instance: str = "default"
    payload: Any = None
    subject: str | None = None


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How many attempts a pass or step gets (in total, the first included) and the backoff."""

    max_attempts: int = JOB_RETRY_MAX_ATTEMPTS
    base_delay_ms: int = JOB_RETRY_BASE_DELAY_MS
    max_delay_ms: int = JOB_RETRY_MAX_DELAY_MS


@attrs.frozen
class JobRun:
    """A row decoded for an operator — tolerantly: ``decode_error`` names what would not parse."""

    id: str
    module_id: str
    job: str
    instance: str
    status: str
    payload: Any
    subject_id: str | None
    cursor: Any
    counters: dict[str, float]
    attempts: int
    last_error: str | None
    started_at: str
    updated_at: str
    next_attempt_at: str | None
    ended_at: str | None
    lease_owner: str | None
    admission_misses: int
    decode_error: str | None


class _Keep:
    """The cursor a pass result leaves out: keep what the last commit wrote."""

    _instance: _Keep | None = None

    def __new__(cls) -> _Keep:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "KEEP_CURSOR"


#: ``JobPassResult(cursor=KEEP_CURSOR)`` (the default) keeps the last committed cursor; any other
#: value, ``None`` included, is the next pass's cursor.
KEEP_CURSOR: Any = _Keep()


def _check_done(_: object, __: attrs.Attribute[bool], done: object) -> None:
    # Refused where the handler builds it: "yes", 1 or a None would otherwise read as truthy or
    # falsy and end (or not end) the run silently. Raised inside the handler, it is that pass's
    # error, as any exception a handler raises is.
    if type(done) is not bool:
        raise ValidationFailed.at(
            "done",
            f"is {done!r}; a JobPassResult's done must be a bool — True ends the run, False (the "
            "default) lets it go on",
        )


@attrs.frozen(kw_only=True)
class JobPassResult:
    """What a handler says at the end of a pass. ``done`` is checked when it is built; the
    cursor when the pass commits (it must be queue-safe, see ``driver._json``)."""

    cursor: Any = KEEP_CURSOR
    done: bool = attrs.field(default=False, validator=_check_done)


JobPassStatus: TypeAlias = Literal[
    "advanced", "completed", "retrying", "failed", "deferred", "superseded"
]


@attrs.frozen
class JobPassOutcome:
    """What one pass did. ``error`` is present exactly on retrying, failed and deferred;
    ``raised`` is the exception the handler let out, when it did (not compared: the outcome is
    the status and the error text)."""

    status: JobPassStatus
    error: str | None = None
    raised: Exception | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class JobDriveError:
    run_id: str
    error: str


@attrs.frozen
class JobDriveWarning:
    run_id: str
    warning: str


@attrs.frozen(kw_only=True)
class JobDriveReport:
    """What one drive did, counted as docs/protocol.md ("Reading runs") tables it."""

    attempted: int = 0
    advanced: int = 0
    completed: int = 0
    retrying: int = 0
    failed: int = 0
    superseded: int = 0
    deferred: int = 0
    errors: tuple[JobDriveError, ...] = ()
    warnings: tuple[JobDriveWarning, ...] = ()


#: A job's body: one pass, given where the last one stopped. ``ctx`` is a ``JobPassContext``.
JobHandler: TypeAlias = Callable[[Any], Awaitable[JobPassResult | None]]


@attrs.frozen(kw_only=True)
class JobRegistration:
    """A job as ``register_job`` recorded it: its handler, its step policy, its lease and its
    pass deadline (None: a handler may run as long as it likes, as the spec has it)."""

    handler: JobHandler
    retry: RetryPolicy | None = None
    lease_ms: int | None = None
    deadline_ms: int | None = None
