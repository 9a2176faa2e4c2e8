"""The drive: advance every due run on one scope, within a budget, one leased pass at a time.

Theory of operation
-------------------
1. **One snapshot.** ``store.due_keys(now(), JOB_DRIVE_SCAN_MAX)`` is read ONCE. From it the drive
   picks up to ``limit`` runs whose ``(module_id, job)`` it has a handler for, each id once; keys
   of unregistered jobs are stepped over and never consume ``limit``. A run that moves, or becomes
   due, after the snapshot is the next drive's business.
2. **Claim just before running.** For each picked run and each pass (``max_passes``), a fresh
   owner is minted and the run claimed (the store's clock decides due-ness and the lease's
   expiry). A lost claim (None) ends that run's turn and counts nothing.
3. **Takeover exhaustion.** A claim that took over a BEGUN lease has charged the dead pass an
   attempt; when that reaches the job's ``max_attempts`` the run fails WITHOUT its handler.
4. **Admission.** The drive measures, on its OWN monotonic clock, from just before it sent the
   claim: the lease left is ``lease_ms - elapsed``, which counts the whole round trip and so can
   only err short. Only with more than the margin left (strict ``>``) does it send BEGIN, which
   the store checks again on its own clock. A claim that does not begin is an ADMISSION MISS:
   ``store.miss`` releases it and counts it (or fails the run at the tenth), and the drive reports
   and logs a warning. No handler ran, so it is ``superseded``, never an attempt.
5. **BEGIN is the commitment.** If and only if BEGIN wrote, the handler runs (``run_job_pass``);
   the drive never second-guesses BEGIN's reply, however late it came: whatever it did after an
   acknowledged write, that acknowledgement could arrive late too (docs/protocol.md, "BEGIN, the
   commitment point").
6. **Containment.** Any exception while driving one run (a transport error, an evicted scope) is
   that run's entry in ``errors``; the drive goes on with the next run.

Counting (``JobDriveReport``, tabled in docs/protocol.md, "Reading runs"): ``attempted`` counts
each run this call picked up, due and running: each run whose first pass this call BEGAN, and
each whose first claim was a takeover that found its attempts spent (the spec's "picked up — due,
and `running`"; the original counts it, and fails the run). A lost claim and an admission miss
are not attempted. ``advanced`` counts committed passes;
``completed``, ``retrying``, ``failed``, ``deferred`` and ``superseded`` count pass outcomes. An
admission miss is ``superseded`` — except the one that fails the run (the tenth), which is
``failed``. Every run this call left ``retrying`` or ``failed`` (a pass's outcome, the tenth miss,
takeover exhaustion) is also one entry in ``errors``, carrying the error written on its record.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from ._constants import (
    JOB_ADMISSION_MISS_MAX,
    JOB_DRIVE_LIMIT,
    JOB_DRIVE_SCAN_MAX,
    JOB_LEASE_ENTRY_MARGIN,
    JOB_LEASE_MS,
    JOB_LEASE_TOO_SHORT_NOTE,
)
from ._errors import ValidationFailed
from ._pass import Deferral, error_text, run_job_pass
from ._policy import RandomSource, resolve_retry_policy
from ._port import JobRunStore, Observer, SystemScope, Within, ignore_event
from ._reach import PassReach
from ._services import ServiceError
from ._values import (
    JobDriveError,
    JobDriveReport,
    JobDriveWarning,
    JobDueKey,
    JobPassOutcome,
    JobRegistration,
    JobRunClaim,
    JobRunPatch,
    JobRunRow,
)

#: The structured log line of an admission miss goes here unless a ``log`` is injected.
DRIVE_LOG = logging.getLogger("driver.drive")

HandlerFor = Callable[[JobDueKey], JobRegistration | None]
OpenRunScope = Callable[[JobRunRow, object], Awaitable[SystemScope]]


def _count_option(value: object, name: str) -> int:
    if type(value) is not int or value < 1:
        raise ValidationFailed.at(
            name, f"is {value!r}; it must be an int of at least 1 (it is not clamped)"
        )
    return value


def format_ms(ms: float) -> str:
    """Milliseconds as the warning spells them: whole numbers bare, else one decimal."""
    rounded = round(ms, 1)
    if not math.isfinite(rounded):
        return str(rounded)
    return str(int(rounded)) if rounded == int(rounded) else str(rounded)


def admission_miss_warning(
    *, module_id: str, job: str, lease_ms: int, waited_ms: float, miss: int
) -> str:
    """The admission-miss warning, word for word as docs/protocol.md ("Admission misses") has it."""
    return (
        f"job {module_id}/{job}: claim not begun in time — leaseMs {format_ms(lease_ms)}, "
        f"margin {format_ms(lease_ms * JOB_LEASE_ENTRY_MARGIN)} ms, claim and begin took "
        f"{format_ms(waited_ms)} ms (admission miss {miss} of {JOB_ADMISSION_MISS_MAX})"
    )


@attrs.define
class _Tally:
    attempted: int = 0
    advanced: int = 0
    completed: int = 0
    retrying: int = 0
    failed: int = 0
    superseded: int = 0
    deferred: int = 0
    errors: list[JobDriveError] = attrs.Factory(list)
    warnings: list[JobDriveWarning] = attrs.Factory(list)

    def report(self) -> JobDriveReport:
        return JobDriveReport(
            attempted=self.attempted,
            advanced=self.advanced,
            completed=self.completed,
            retrying=self.retrying,
            failed=self.failed,
            superseded=self.superseded,
            deferred=self.deferred,
            errors=tuple(self.errors),
            warnings=tuple(self.warnings),
        )


@attrs.frozen(kw_only=True)
class _Drive:
    store: JobRunStore
    now: Callable[[], str]
    open_scope: OpenRunScope
    deferral: Deferral | None
    max_passes: int
    monotonic: Callable[[], float]
    mint_owner: Callable[[], str]
    rng: RandomSource
    observe: Observer
    log: logging.Logger
    tally: _Tally
    within: Within | None
    reach: PassReach | None

    def emit(self, event: str, run_id: str, owner: str, **fields: Any) -> None:
        self.observe(event, {"run": run_id, "owner": owner, **fields})

    def waited_ms(self, started: float) -> float:
        """Milliseconds since ``started`` on the drive's monotonic clock, to the nanosecond: the
        float noise of a clock far from its origin must not decide the strict margin test."""
        return round(self.monotonic() - started, 6)

    async def run(self, key: JobDueKey, registration: JobRegistration) -> None:
        """Up to ``max_passes`` passes of one run, each on a claim of its own."""
        if registration.deadline_ms is not None and self.within is None:
            # Refused before the claim: a pass that could not be bounded must not begin.
            raise ValidationFailed.at(
                "within",
                f"is None, but job {key.module_id}/{key.job} has deadline_ms "
                f"{registration.deadline_ms!r}; pass the host's run_within to "
                "run_due_job_runs, which cancels the handler at the deadline",
            )
        lease_ms = registration.lease_ms if registration.lease_ms is not None else JOB_LEASE_MS
        for index in range(self.max_passes):
            owner = self.mint_owner()
            started = self.monotonic()
            claim = await self.store.claim(key.id, owner, lease_ms)
            if claim is None:
                self.emit("claim.lost", key.id, owner)
                return
            self.emit(
                "claim.won",
                key.id,
                owner,
                takeover=claim.takeover,
                attempts=claim.run.attempts,
            )
            if not await self.one_pass(
                claim, owner, registration, lease_ms, started, first=index == 0
            ):
                return

    async def one_pass(
        self,
        claim: JobRunClaim,
        owner: str,
        registration: JobRegistration,
        lease_ms: int,
        started: float,
        *,
        first: bool,
    ) -> bool:
        """One claimed pass; True when the run advanced and may take another."""
        run = claim.run
        policy = resolve_retry_policy(registration.retry)
        if claim.takeover and run.attempts >= policy.max_attempts:
            # Picked up, due and running, as the spec's `attempted` reads: counted, as the
            # original counts it, though no handler runs.
            if first:
                self.tally.attempted += 1
            await self.exhausted(run, owner)
            return False
        margin_ms = lease_ms * JOB_LEASE_ENTRY_MARGIN
        began = False
        # Strict `>`, on the drive's own clock: "the time left on its lease is `leaseMs` minus
        # that, which counts the whole round trip and so can only err short".
        if lease_ms - self.waited_ms(started) > margin_ms:
            began = await self.store.begin(run.id, owner, margin_ms)
            self.emit("begin.ok" if began else "begin.refused", run.id, owner)
        if not began:
            await self.admission_miss(run, owner, lease_ms, self.waited_ms(started))
            return False
        if first:
            self.tally.attempted += 1
        outcome = await run_job_pass(
            store=self.store,
            run=run,
            owner=owner,
            lease_ms=lease_ms,
            handler=registration.handler,
            retry=registration.retry,
            now=self.now,
            open_scope=lambda token: self.open_scope(run, token),
            deferral=self.deferral,
            rng=self.rng,
            observe=self.observe,
            deadline_ms=registration.deadline_ms,
            within=self.within,
            reach=self.reach,
        )
        if outcome.raised is not None and outcome.status in ("retrying", "failed"):
            self.handler_raised(run, outcome)
        tally = self.tally
        if outcome.status == "advanced":
            tally.advanced += 1
            return True
        if outcome.status == "completed":
            tally.completed += 1
        elif outcome.status == "retrying":
            tally.retrying += 1
            tally.errors.append(JobDriveError(run.id, outcome.error or "retrying"))
        elif outcome.status == "failed":
            tally.failed += 1
            tally.errors.append(JobDriveError(run.id, outcome.error or "failed"))
        elif outcome.status == "deferred":
            tally.deferred += 1
        else:
            tally.superseded += 1
        return False

    def handler_raised(self, run: JobRunRow, outcome: JobPassOutcome) -> None:
        """What a handler raised, with its traceback, where the operator looks: a run's
        ``last_error`` keeps only the message (``'sku'`` for a ``KeyError``)."""
        raised = outcome.raised
        assert raised is not None
        then = "failed the run" if outcome.status == "failed" else "will be retried"
        if isinstance(raised, ServiceError):
            # A service's answer the handler let fail its pass: what retries are for.
            self.log.info(
                "job %s/%s: run %s: %s: %s; the pass %s",
                run.module_id, run.job, run.id, type(raised).__name__, raised, then,
            )  # fmt: skip
            return
        self.log.warning(
            "job %s/%s: run %s: the handler raised %s; the pass %s",
            run.module_id, run.job, run.id, type(raised).__name__, then, exc_info=raised,
        )  # fmt: skip

    async def exhausted(self, run: JobRunRow, owner: str) -> None:
        """A takeover charged the dead pass its last attempt: fail the run, handler untouched."""
        self.emit("takeover.exhausted", run.id, owner, attempts=run.attempts)
        at = self.now()
        # The claim already wrote JOB_LEASE_EXPIRED_NOTE as last_error; the failure keeps it.
        error = run.last_error or "failed"
        patch = JobRunPatch(
            "failed", run.cursor, run.counters, run.attempts, run.last_error, at, None, at
        )
        written = await self.store.patch(run.id, patch, owner)
        self.emit(
            "pass.outcome",
            run.id,
            owner,
            status="failed" if written else "superseded",
            error=error if written else None,
            written=written,
        )
        if written:
            self.tally.failed += 1
            self.tally.errors.append(JobDriveError(run.id, error))
        else:
            self.tally.superseded += 1

    async def admission_miss(
        self, run: JobRunRow, owner: str, lease_ms: int, waited_ms: float
    ) -> None:
        """Release a claim that did not begin, count it, report it and log one line."""
        miss = (run.admission_misses or 0) + 1
        warning = admission_miss_warning(
            module_id=run.module_id, job=run.job, lease_ms=lease_ms, waited_ms=waited_ms, miss=miss
        )
        # The bare warning: the store's miss writes the prefixed failure text itself.
        settled = await self.store.miss(run.id, owner, warning)
        misses = settled.misses if settled is not None else None
        failed = settled.failed if settled is not None else False
        self.emit(
            "admission.miss", run.id, owner, waited_ms=waited_ms, misses=misses, failed=failed
        )
        if failed:
            self.tally.failed += 1
            # What the store wrote on the record (``admission_miss_outcome``'s text).
            self.tally.errors.append(
                JobDriveError(run.id, f"{JOB_LEASE_TOO_SHORT_NOTE}: {warning}")
            )
        else:
            self.tally.superseded += 1
        self.tally.warnings.append(JobDriveWarning(run.id, warning))
        self.log.warning(
            warning,
            extra={
                "job_run_id": run.id,
                "job_module_id": run.module_id,
                "job_name": run.job,
                "lease_ms": lease_ms,
                "margin_ms": lease_ms * JOB_LEASE_ENTRY_MARGIN,
                "waited_ms": waited_ms,
                "admission_misses": misses,
                "run_failed": failed,
            },
        )


def pick_runs(
    keys: list[JobDueKey], handler_for: HandlerFor, limit: int
) -> list[tuple[JobDueKey, JobRegistration]]:
    """Up to ``limit`` runnable keys of one snapshot, each id once, in the snapshot's order."""
    picked: list[tuple[JobDueKey, JobRegistration]] = []
    seen: set[str] = set()
    for key in keys:
        if len(picked) >= limit:
            break
        if key.id in seen:
            continue
        registration = handler_for(key)
        if registration is None:
            continue
        seen.add(key.id)
        picked.append((key, registration))
    return picked


async def run_due_job_runs(
    *,
    store: JobRunStore,
    handler_for: HandlerFor,
    now: Callable[[], str],
    open_scope: OpenRunScope,
    deferral: Deferral | None = None,
    max_passes: int = 1,
    limit: int | None = None,
    monotonic: Callable[[], float],
    mint_owner: Callable[[], str],
    rng: RandomSource,
    observe: Observer = ignore_event,
    log: logging.Logger | None = None,
    within: Within | None = None,
    reach: PassReach | None = None,
) -> JobDriveReport:
    """Advance every due run on one scope, bounded by ``limit`` runs and ``max_passes`` each.

    Raises ``ValidationFailed`` for a bad ``limit`` or ``max_passes`` (before any store call), and
    lets a failure of the snapshot read itself escape; every per-run failure is reported instead.
    ``within`` cancels a handler whose registration has a ``deadline_ms`` (see ``run_job_pass``);
    ``reach`` is what each pass reaches beyond its run (the drive's services, starting runs).
    """
    budget = JOB_DRIVE_LIMIT if limit is None else _count_option(limit, "limit")
    passes = _count_option(max_passes, "max_passes")
    keys = await store.due_keys(now(), JOB_DRIVE_SCAN_MAX)
    tally = _Tally()
    drive = _Drive(
        store=store,
        now=now,
        open_scope=open_scope,
        deferral=deferral,
        max_passes=passes,
        monotonic=monotonic,
        mint_owner=mint_owner,
        rng=rng,
        observe=observe,
        log=log if log is not None else DRIVE_LOG,
        tally=tally,
        within=within,
        reach=reach,
    )
    for key, registration in pick_runs(keys, handler_for, budget):
        try:
            await drive.run(key, registration)
        except Exception as err:
            tally.errors.append(JobDriveError(key.id, error_text(err)))
    return tally.report()
