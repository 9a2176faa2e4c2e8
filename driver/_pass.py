"""One pass of one run: the handler, its memoized steps, and the one write that settles it.

Theory of operation
-------------------
A pass starts from the row its claim left and BEGIN committed to. It decodes the row's JSON
columns (a column that will not parse is an ordinary failed pass: the spec is strict where work
happens), hands the handler a ``JobPassContext``, and ends in exactly one outcome write, every one
of them a compare-and-set on the pass's lease:

* committed  -> ``store.commit_pass``: the new cursor and merged counters, ``attempts`` 0, no
  error, the step ledger dropped with it (``advanced``, or ``completed`` when the handler said
  ``done``);
* failed     -> ``store.patch``: NOTHING the handler produced (cursor and counters as committed,
  the ledger kept), ``attempts`` + 1 and the error, then either a backoff (``retrying``) or the
  end of the run (``failed``) when a step or the run has used its attempts;
* deferred   -> ``store.patch``: the host's own door said "not now": due again after
  ``JOB_DEFER_MS``, nothing charged, no error recorded;
* superseded -> nothing: a step boundary or the outcome write found the lease gone (taken over
  after it expired, or the run settled by an erasure). Whoever holds the run reports it.

Every step boundary goes through the store twice — ``begin_step`` (renew the lease, read the
ledger row) before the body and ``record_step`` (renew, write the attempt) after it — so a pass
longer than one lease keeps its run while it makes progress, and a pass that lost it learns so at
its next boundary and stops there without writing anything more.

What stops a pass is held in the context as STATE, not only raised: a handler that catches the
internal "lost" signal, a refused ``step``, or a step's own error cannot turn the pass into a
commit. The first of these decides the outcome.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Awaitable, Callable, Generator, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from ._constants import (
    JOB_COUNTERS_MAX_BYTES,
    JOB_CURSOR_MAX_BYTES,
    JOB_DEFER_MS,
    JOB_ID_MAX_BYTES,
    JOB_LEASE_MS,
    JOB_STEP_RESULT_MAX_BYTES,
    JOB_STEP_REUSED,
)
from ._errors import Conflict, ValidationFailed
from ._json import dumps, loads, queue_safety_errors, text_errors
from ._limits import size_errors, size_problem, stored_error
from ._operator import ColumnDecodeError, DecodedColumns, decode_columns
from ._policy import RandomSource, resolve_retry_policy, retry_backoff_ms
from ._port import JobRunStore, Observer, SystemScope, Within, ignore_event
from ._reach import PassReach
from ._services import service_call
from ._time import add_ms
from ._values import (
    KEEP_CURSOR,
    JobHandler,
    JobPassOutcome,
    JobPassResult,
    JobPassStatus,
    JobRun,
    JobRunKey,
    JobRunPatch,
    JobRunRow,
    RetryPolicy,
    StartJobRunInput,
)

#: Opens the system door for this run's module, handed this pass's token.
OpenPassScope = Callable[[object], Awaitable[SystemScope]]
#: Did the host's own door throw this value on this pass to say "not now"? Consumes the mark.
Deferral = Callable[[BaseException, object], bool]


def error_text(err: BaseException) -> str:
    """What a record says about ``err``: its message, or its type when it has none."""
    return str(err) or type(err).__name__


def _step_default(value: object) -> Any:
    # The spec round-trips a step's value through its stored JSON so a handler sees the same
    # thing on the first run and on replay; JSON.stringify turns a Date into its ISO text, and
    # so do we (datetime, date and time become ``isoformat()`` strings, both times).
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat) and type(value).__module__ == "datetime":
        return isoformat()
    raise TypeError(f"{type(value).__qualname__} is not JSON")


#: Built once: ``json.dumps`` with any keyword builds a fresh encoder per call.
_STEP_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_step_default
)


def step_result_json(value: object) -> str:
    """A step's value as the ledger stores it (compact, no NaN, datetimes as ISO text); raises
    ``ValueError`` naming the part the store could not hold (see ``queue_safety_errors``)."""
    errors = queue_safety_errors(value, "result", step_result=True)
    if errors:
        raise ValueError(str(ValidationFailed(errors)))
    return _STEP_ENCODER.encode(value)


@attrs.frozen
class JobPassRun:
    """The run a pass works on: its id and coalescing key."""

    id: str
    module_id: str
    job: str
    instance: str

    @property
    def key(self) -> JobRunKey:
        return JobRunKey(self.module_id, self.job, self.instance)


class _PassStopped(Exception):
    """Unwinds a handler from a step that must not go on; the context's state says why."""


class PassLost(_PassStopped):
    """This pass no longer holds its run's lease; it stops, and writes nothing more."""


class StepSpent(_PassStopped):
    """A step has used its attempts; the run fails without running it again."""


@attrs.define
class _Failure:
    error: str
    policy: RetryPolicy
    fails_run: bool


@attrs.define
class _PassState:
    lost: bool = False
    spent: str | None = None
    failure: _Failure | None = None
    deferred: BaseException | None = None

    def fail_pass(self, error: str, policy: RetryPolicy, *, fails_run: bool) -> None:
        if self.failure is None:
            self.failure = _Failure(error, policy, fails_run)


class JobPassContext:
    """What one pass of a job is given (docs/protocol.md, "Runs, passes, steps and the cursor")."""

    def __init__(
        self,
        *,
        store: JobRunStore,
        row: JobRunRow,
        owner: str,
        lease_ms: int,
        job_policy: RetryPolicy,
        decoded: DecodedColumns,
        now: Callable[[], str],
        open_scope: OpenPassScope,
        deferral: Deferral | None,
        token: object,
        emit: Callable[..., None],
        reach: PassReach | None = None,
    ) -> None:
        self._store = store
        self._reach = reach if reach is not None else PassReach()
        self._owner = owner
        self._lease_ms = lease_ms
        self._job_policy = job_policy
        self._now = now
        self._open_scope = open_scope
        self._deferral = deferral
        self._token = token
        self._emit = emit
        self._run = JobPassRun(row.id, row.module_id, row.job, row.instance)
        self._payload = decoded.payload
        self._cursor = decoded.cursor
        self._counters: dict[str, float] = dict(decoded.counters)
        self._used: set[str] = set()
        self._scope: SystemScope | None = None
        self._scope_error: Exception | None = None
        self.state = _PassState()
        #: Step calls made and not (yet) awaited, in call order.
        self.unawaited: list[_StepCall] = []

    @property
    def run(self) -> JobPassRun:
        """This run's id and coalescing key."""
        return self._run

    @property
    def payload(self) -> Any:
        """What ``start_job_run`` was handed, decoded."""
        return self._payload

    @property
    def cursor(self) -> Any:
        """What the last committed pass handed forward; None on the first pass."""
        return self._cursor

    @property
    def counters(self) -> Mapping[str, float]:
        """The pass's copy of the counter bag: the last commit's, plus this pass's ``count``s."""
        return MappingProxyType(self._counters)

    def count(self, name: str, by: float = 1) -> None:
        """Add to a counter. Committed with the pass; discarded if the pass fails."""
        if not isinstance(name, str) or not name:
            raise ValidationFailed.at("count", f"name is {name!r}; it must be a non-empty str")
        name_problems = text_errors(name, "count") or size_errors(
            name, JOB_ID_MAX_BYTES, "count", "a counter's name"
        )
        if name_problems:
            raise ValidationFailed(name_problems)
        if isinstance(by, bool) or not isinstance(by, int | float) or not math.isfinite(by):
            raise ValidationFailed.at(f"count.{name}", f"is {by!r}; it must be a finite number")
        total = self._counters.get(name, 0) + by
        if not math.isfinite(total):
            raise ValidationFailed.at(
                f"count.{name}",
                f"overflows: adding {by!r} to {self._counters.get(name, 0)!r} is not a finite "
                "number — count in smaller units",
            )
        problems = queue_safety_errors(total, f"count.{name}")  # an int past the digit limit
        if problems:
            raise ValidationFailed(problems)
        self._counters[name] = total

    async def call_service(
        self,
        service: str,
        operation: str,
        args: Mapping[str, Any] | None = None,
        *,
        timeout_ms: float | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """Call ``operation`` of ``service`` with ``args`` (JSON) through the drive's service port
        (``driver.ServicePort``), and return its result. ``timeout_ms`` bounds the wait; past it
        the call raises ``ServiceTimedOut`` (it may have run). ``idempotency_key`` names the
        effect, so that a repeat is answered without running again by a service that honours
        keys. Raises ``ServiceUnavailable`` (refused unrun, for now) or ``ServiceDeclined`` (an
        answer: no)."""
        call = service_call(self._run.id, service, operation, args, timeout_ms, idempotency_key)
        port = self._reach.services
        if port is None:
            raise ValidationFailed.at(
                "call_service",
                f"{call.name}: this drive was given no service port; give "
                "JobDriver(..., services=PORT) (serviceclients.HttpServices, InProcessServices, "
                "or your own), or run the job in a world that declares the service",
            )
        return await port.call(call)

    async def start_run(
        self,
        module_id: str,
        job: str,
        *,
        instance: str = "default",
        payload: Any = None,
        subject: str | None = None,
        scope: str | None = None,
    ) -> JobRun:
        """Start (or join: runs coalesce by key) a run of ``module_id``/``job`` on ``scope`` (this
        run's scope unless given), through this pass's drive. At least once, like any body: a
        pass retried starts it again, and the start joins the run it already made, so a fan-out
        names each child by an ``instance`` the parent can make again (a customer's id)."""
        if self._reach.start is None:
            raise ValidationFailed.at(
                "start_run", "this pass was run without a drive to start runs through"
            )
        start = StartJobRunInput(
            module_id=module_id, job=job, instance=instance, payload=payload, subject=subject
        )
        return await self._reach.start(self._run.id, scope, start)

    async def scope(self) -> SystemScope:
        """The scope through the system door, opened on first call and reused for the pass."""
        if self._scope is not None:
            return self._scope
        if self._scope_error is not None:
            raise self._scope_error
        try:
            self._scope = await self._open_scope(self._token)
        except Exception as err:
            # "Called at most once per pass": a refusal is the pass's answer, not a reason to
            # knock on the door again.
            self._scope_error = err
            raise
        return self._scope

    def is_deferral(self, err: BaseException) -> bool:
        """Whether the host says ``err`` is its own door's "not now" on this pass (asked once)."""
        if self.state.deferred is err:
            return True
        if self._deferral is not None and self._deferral(err, self._token):
            self.state.deferred = err
            return True
        return False

    def _stop_if_stopped(self) -> None:
        if self.state.lost:
            raise PassLost(self._lost_message())
        if self.state.spent is not None:
            raise StepSpent(self.state.spent)

    def _lost_message(self) -> str:
        return (
            f"run {self._run.id}: this pass no longer holds its lease (taken over after it "
            "expired, or the run was settled meanwhile); it stops and writes nothing more"
        )

    def _lose(self, step: str) -> PassLost:
        self.state.lost = True
        self._emit("step.lost", step=step)
        return PassLost(self._lost_message())

    def step(
        self, name: str, fn: Callable[[], Any], retry: RetryPolicy | None = None
    ) -> Awaitable[Any]:
        """Run one NAMED step, at most once per run-pass; a completed step returns its memo.

        At-least-once: the ledger row is written after ``fn`` resolves, so ``fn`` must be
        idempotent. The value is round-tripped through its stored JSON either way.

        Awaitable, and nothing happens until it is awaited. A call left un-awaited is remembered:
        the pass then fails naming the step, rather than committing over a body that never ran.

        Its arguments are checked here, when they are passed, not when it is awaited: a refusal
        (``ValidationFailed``) fails the pass even if the handler catches it.
        """
        try:
            policy = self._step_policy(name, fn, retry)
        except ValidationFailed as refused:
            self.state.fail_pass(error_text(refused), self._job_policy, fails_run=False)
            raise
        call = _StepCall(self, name, fn, policy)
        self.unawaited.append(call)
        return call

    def _step_policy(self, name: object, fn: object, retry: RetryPolicy | None) -> RetryPolicy:
        """The policy the step runs under, once its name, body and policy are known good."""
        if not isinstance(name, str) or not name:
            raise ValidationFailed.at("step", f"name is {name!r}; it must be a non-empty str")
        name_problems = text_errors(name, "step") or size_errors(
            name, JOB_ID_MAX_BYTES, "step", "a step's name"
        )
        if name_problems:
            raise ValidationFailed(name_problems)
        if not callable(fn):
            raise ValidationFailed.at(
                "step",
                f"{name!r} was given {fn!r} as its body; pass a function of no arguments (a def, "
                "an async def or a lambda), not its result",
            )
        # A retry that is not a RetryPolicy is refused there, by this path.
        return resolve_retry_policy(self._job_policy, retry, step_path=f"step {name!r} retry")

    async def _step(self, name: str, fn: Callable[[], Any], policy: RetryPolicy) -> Any:
        self._stop_if_stopped()
        if name in self._used:
            reused = Conflict(
                JOB_STEP_REUSED,
                f"step {name!r} was already used in this pass of run {self._run.id} — give each "
                "step in a pass its own name, a pure function of the payload and prior results",
            )
            self.state.fail_pass(error_text(reused), self._job_policy, fails_run=False)
            raise reused
        self._used.add(name)
        run_id, owner, lease_ms = self._run.id, self._owner, self._lease_ms
        boundary = await self._store.begin_step(run_id, name, owner, lease_ms)
        if not boundary.held:
            raise self._lose(name)
        row = boundary.row
        if row is not None and row.result is not None:
            self._emit("step.memo", step=name)
            try:
                return loads(row.result)
            except ValueError as err:
                raise ValueError(f"step {name!r} memo is not valid JSON ({err})") from err
        attempts = row.attempts if row is not None else 0
        if attempts >= policy.max_attempts:
            spent = (row.last_error if row is not None else None) or (
                f"step {name!r} has used all {policy.max_attempts} of its attempts"
            )
            self.state.spent = spent
            raise StepSpent(spent)
        attempt = attempts + 1
        self._emit("step.run", step=name, attempt=attempt)
        try:
            value = fn()
            if inspect.isawaitable(value):
                value = await value
            try:
                text = step_result_json(value)
            except (TypeError, ValueError) as err:
                raise ValueError(
                    f"step {name!r} returned a value JSON cannot carry ({err}) — return ids, "
                    "numbers, strings, lists and dicts"
                ) from err
            too_big = size_problem(text, JOB_STEP_RESULT_MAX_BYTES, "a step's result")
            if too_big is not None:
                raise ValueError(f"step {name!r} returned a value whose JSON {too_big}")
        except _PassStopped:
            raise
        except Exception as err:
            error = stored_error(error_text(err))
            if self.is_deferral(err):
                # The door's own "not now" is not the step's failure: nothing is charged.
                self._emit("step.end", step=name, error=error, recorded=False)
                raise
            recorded = await self._store.record_step(
                run_id, name, None, attempt, error, self._now(), owner, lease_ms
            )
            self._emit("step.end", step=name, error=error, recorded=recorded)
            if not recorded:
                raise self._lose(name) from err
            self.state.fail_pass(error, policy, fails_run=attempt >= policy.max_attempts)
            raise
        recorded = await self._store.record_step(
            run_id, name, text, attempt, None, self._now(), owner, lease_ms
        )
        self._emit("step.end", step=name, error=None, recorded=recorded)
        if not recorded:
            raise self._lose(name)
        return loads(text)

    def committed_counters(self) -> str:
        return dumps(self._counters)


class _StepCall:
    """One ``ctx.step(...)`` call: runs the step when awaited, once."""

    __slots__ = ("_ctx", "_fn", "_policy", "awaited", "name")

    def __init__(
        self, ctx: JobPassContext, name: str, fn: Callable[[], Any], policy: RetryPolicy
    ) -> None:
        self._ctx = ctx
        self.name = name
        self._fn = fn
        self._policy = policy
        self.awaited = False

    def __await__(self) -> Generator[Any, None, Any]:
        if self.awaited:
            raise RuntimeError(f"step {self.name!r} was already awaited; call ctx.step again")
        self.awaited = True
        self._ctx.unawaited.remove(self)
        return self._ctx._step(self.name, self._fn, self._policy).__await__()


class _Settler:
    """Writes a pass's one outcome, each a compare-and-set on the lease, and reports it."""

    def __init__(
        self,
        *,
        store: JobRunStore,
        run: JobRunRow,
        owner: str,
        job_policy: RetryPolicy,
        now: Callable[[], str],
        rng: RandomSource,
        emit: Callable[..., None],
    ) -> None:
        self._store = store
        self._run = run
        self._owner = owner
        self._job_policy = job_policy
        self._now = now
        self._rng = rng
        self._emit = emit

    def _report(self, status: JobPassStatus, error: str | None, written: bool) -> JobPassOutcome:
        self._emit("pass.outcome", status=status, error=error, written=written)
        return JobPassOutcome(status, error)

    def superseded(self) -> JobPassOutcome:
        return self._report("superseded", None, False)

    async def _write(
        self, patch: JobRunPatch, status: JobPassStatus, error: str | None, *, commit: bool
    ) -> JobPassOutcome:
        write = self._store.commit_pass if commit else self._store.patch
        if not await write(self._run.id, patch, self._owner):
            return self._report("superseded", None, False)
        return self._report(status, error, True)

    async def fail(
        self, error: str, *, policy: RetryPolicy | None = None, fails_run: bool = False
    ) -> JobPassOutcome:
        """A failed pass: nothing the handler produced, one more attempt, a backoff or the end."""
        error = stored_error(error)
        run = self._run
        attempts = run.attempts + 1
        at = self._now()
        if fails_run or attempts >= self._job_policy.max_attempts:
            patch = JobRunPatch("failed", run.cursor, run.counters, attempts, error, at, None, at)
            return await self._write(patch, "failed", error, commit=False)
        backoff = retry_backoff_ms(policy or self._job_policy, attempts, self._rng)
        patch = JobRunPatch(
            "running", run.cursor, run.counters, attempts, error, at, add_ms(at, backoff), None
        )
        return await self._write(patch, "retrying", error, commit=False)

    async def defer(self, refusal: str) -> JobPassOutcome:
        """The host's door said "not now": due after ``JOB_DEFER_MS``, nothing charged or
        recorded (the refusal is reported, never written)."""
        run = self._run
        at = self._now()
        patch = JobRunPatch(
            "running",
            run.cursor,
            run.counters,
            run.attempts,
            run.last_error,
            at,
            add_ms(at, JOB_DEFER_MS),
            None,
        )
        return await self._write(patch, "deferred", refusal, commit=False)

    async def commit(self, cursor: str | None, counters: str, *, done: bool) -> JobPassOutcome:
        at = self._now()
        patch = JobRunPatch(
            "done" if done else "running", cursor, counters, 0, None, at, None, at if done else None
        )
        return await self._write(patch, "completed" if done else "advanced", None, commit=True)


async def run_job_pass(
    *,
    store: JobRunStore,
    run: JobRunRow,
    owner: str,
    lease_ms: int = JOB_LEASE_MS,
    handler: JobHandler,
    retry: RetryPolicy | None = None,
    now: Callable[[], str],
    open_scope: OpenPassScope,
    deferral: Deferral | None = None,
    rng: RandomSource,
    observe: Observer = ignore_event,
    deadline_ms: int | None = None,
    within: Within | None = None,
    reach: PassReach | None = None,
) -> JobPassOutcome:
    """Run ONE pass of ``run`` (as its claim left it, BEGIN already written) and write what
    happened. A run's failure is reported, never raised; only a store call that raises (a
    transport error on the outcome write) escapes, for the drive to report.

    ``deadline_ms`` bounds the handler (steps and store calls included) through ``within``: past
    it the handler is cancelled and the pass fails like any failed pass (one more attempt, a
    backoff or the run's end). None, the default, is the spec's: no deadline."""
    if deadline_ms is not None and within is None:
        raise ValidationFailed.at(
            "within",
            f"is None, but deadline_ms is {deadline_ms!r}; pass the host's run_within, which "
            "cancels the handler at the deadline, or no deadline",
        )
    job_policy = resolve_retry_policy(retry)

    def emit(event: str, **fields: Any) -> None:
        observe(event, {"run": run.id, "owner": owner, **fields})

    settle = _Settler(
        store=store, run=run, owner=owner, job_policy=job_policy, now=now, rng=rng, emit=emit
    )
    try:
        decoded = decode_columns(run)
    except ColumnDecodeError as err:
        return await settle.fail(f"run {run.id} cannot be decoded: {err}")
    ctx = JobPassContext(
        store=store,
        row=run,
        owner=owner,
        lease_ms=lease_ms,
        job_policy=job_policy,
        decoded=decoded,
        now=now,
        open_scope=open_scope,
        deferral=deferral,
        token=object(),
        emit=emit,
        reach=reach,
    )
    emit("handler.invoke")
    escaped: Exception | None = None
    result: object = None

    async def call_handler() -> None:
        nonlocal escaped, result
        try:
            result = handler(ctx)
            if inspect.isawaitable(result):
                result = await result
        except Exception as err:
            escaped = err

    if deadline_ms is None or within is None:
        await call_handler()
    elif not await within(deadline_ms, call_handler):
        # Whatever the handler did after the cancel (caught it and returned, or raised something
        # else) is not a pass the run can trust: the deadline decides.
        escaped, result = PassDeadlineExceeded(deadline_ms), None
    emit("handler.end", error=None if escaped is None else error_text(escaped))
    outcome = await _settle(ctx, settle, escaped, result, run)
    return outcome if escaped is None else attrs.evolve(outcome, raised=escaped)


class PassDeadlineExceeded(Exception):
    """A handler ran past its job's ``deadline_ms`` and was cancelled: its pass failed."""

    def __init__(self, deadline_ms: int) -> None:
        super().__init__(
            f"the handler ran past its pass deadline of {deadline_ms} ms and was cancelled; "
            "make a pass do less (return a cursor sooner) or raise deadline_ms in register_job"
        )


async def _settle(
    ctx: JobPassContext,
    settle: _Settler,
    escaped: Exception | None,
    result: object,
    run: JobRunRow,
) -> JobPassOutcome:
    state = ctx.state
    if state.lost:
        return settle.superseded()
    if state.spent is not None:
        return await settle.fail(state.spent, fails_run=True)
    if state.failure is not None:
        failure = state.failure
        return await settle.fail(failure.error, policy=failure.policy, fails_run=failure.fails_run)
    if ctx.unawaited:
        names = ", ".join(repr(call.name) for call in ctx.unawaited)
        which = f"step {names} was" if len(ctx.unawaited) == 1 else f"steps {names} were"
        return await settle.fail(
            f"{which} called without await, so the body never ran — write `await ctx.step(...)`"
        )
    if escaped is not None:
        if ctx.is_deferral(escaped):
            return await settle.defer(error_text(escaped))
        return await settle.fail(error_text(escaped))
    if result is None:
        result = JobPassResult()
    if not isinstance(result, JobPassResult):
        return await settle.fail(
            f"the handler returned {result!r}; return a JobPassResult (or None to keep the cursor)"
        )
    if result.cursor is KEEP_CURSOR:
        cursor = run.cursor
    else:
        errors = queue_safety_errors(result.cursor, "cursor")
        if errors:
            return await settle.fail(str(ValidationFailed(errors)))
        cursor = dumps(result.cursor)
        errors = size_errors(cursor, JOB_CURSOR_MAX_BYTES, "cursor", "a cursor's JSON")
        if errors:
            return await settle.fail(str(ValidationFailed(errors)))
    # The counters always serialize: ``count`` refuses a total the store could not hold. Their
    # size is known only now: many names, each fine, can add up past the cap.
    counters = ctx.committed_counters()
    errors = size_errors(counters, JOB_COUNTERS_MAX_BYTES, "counters", "a run's counters' JSON")
    if errors:
        return await settle.fail(str(ValidationFailed(errors)))
    return await settle.commit(cursor, counters, done=result.done)
