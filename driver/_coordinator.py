"""The coordinator: registers job handlers and drives the scopes of a host through one link.

A ``JobDriver`` is one drive: its own link (latency, faults), its own clocks and random source, its
own owner mint. Several may work on one scope at once; the store's claims and leases keep them
apart. It adds to the kernel only what the kernel leaves to a host: which handler a job has, how
the scope is reached, and which door refusals are the host's own "not now" (``deferral``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol

from ._constants import JOB_ALREADY_REGISTERED, SYSTEM_DOOR_WAIT
from ._definition import JobDefinition
from ._drive import run_due_job_runs
from ._errors import Conflict, ValidationFailed
from ._ids import UlidMint
from ._operator import job_run_of
from ._options import check_drive_options
from ._policy import assert_deadline_ms, assert_lease_ms, resolve_retry_policy
from ._port import JobRunStore, Observer, SystemScope, Within
from ._reach import PassReach
from ._services import ServicePort
from ._start import name_errors, start_job_run
from ._time import parse_iso_ms
from ._values import (
    JobDriveReport,
    JobDueKey,
    JobHandler,
    JobRegistration,
    JobRun,
    JobRunFilter,
    JobRunRow,
    RetryPolicy,
    StartJobRunInput,
)


class DriveRandom(Protocol):
    """A drive's random source: ``random()`` for retry jitter, ``getrandbits`` for ULIDs (a
    ``random.Random`` is one)."""

    def random(self) -> float: ...

    def getrandbits(self, k: int, /) -> int: ...


class HostClock(Protocol):
    """The host's clock, which a drive reads as its own unless given ``now``."""

    def now(self) -> str: ...


class JobHost(Protocol):
    """What a ``JobDriver`` needs of a host (``scopehost.ScopeHost`` is one)."""

    @property
    def clock(self) -> HostClock: ...

    @property
    def rng(self) -> DriveRandom: ...

    def stub(self, scope_id: str, *, link: Any = None) -> JobRunStore: ...

    def door(
        self, scope_id: str, module_id: str, *, link: Any = None
    ) -> SystemScope | Awaitable[SystemScope]: ...

    def monotonic_ms(self) -> float: ...

    def check_link(self, link: Any) -> None:
        """Refuse (raise) a ``link`` this host cannot reach scopes through; None is its own."""


class _DoorMarks:
    """The exceptions this drive's door threw, by pass token: what ``deferral`` answers from.

    The host recognises its own "not now" by the identity of the object its door threw on this
    pass, never by the error's shape, and forgets the mark once it has said yes (docs/protocol.md,
    "Deferral"). Only a refusal the door itself
    raised carrying ``SYSTEM_DOOR_WAIT`` is marked; anything a step or an operation throws, with
    whatever reason, is not. One instance per drive call, so an unasked mark dies with it.
    """

    def __init__(self) -> None:
        self._marks: dict[object, BaseException] = {}

    def mark(self, token: object, err: BaseException) -> None:
        if getattr(err, "reason", None) == SYSTEM_DOOR_WAIT:
            self._marks[token] = err

    def deferral(self, err: BaseException, token: object) -> bool:
        if self._marks.get(token) is err:
            del self._marks[token]
            return True
        return False


class JobDriver:
    """One drive over a host's scopes: ``register_job``, then ``start_job_run``, ``run_due_jobs``
    and ``job_runs`` by scope id. Every observer event carries ``"drive": name``."""

    def __init__(
        self,
        host: JobHost,
        *,
        name: str = "drive",
        link: Any = None,
        now: Callable[[], str] | None = None,
        monotonic: Callable[[], float] | None = None,
        rng: DriveRandom | None = None,
        observer: Observer | None = None,
        log: logging.Logger | None = None,
        services: ServicePort | None = None,
    ) -> None:
        # Checked now, not at the first call that would use them (see ``_options``).
        check_drive_options(
            host, name=name, now=now, monotonic=monotonic, rng=rng, observer=observer, log=log
        )
        host.check_link(link)
        self._host = host
        self.name = name
        self._link = link
        self._now = now if now is not None else host.clock.now
        self._monotonic = monotonic if monotonic is not None else host.monotonic_ms
        self._rng = rng if rng is not None else host.rng
        self._observer = observer
        self._log = log
        self._mint = UlidMint(lambda: parse_iso_ms(self._now()), self._rng)
        self._jobs: dict[tuple[str, str], JobRegistration] = {}
        if services is not None and not (
            callable(getattr(services, "call", None))
            and callable(getattr(services, "provides", None))
        ):
            raise ValidationFailed.at(
                "services",
                f"is {services!r}; give a service port (driver.ServicePort: provides(service) "
                "and async call(call)), such as serviceclients.HttpServices",
            )
        #: Where a handler's service calls go (``ctx.call_service``); None: it has none.
        self.services = services
        #: How a pass deadline cancels a handler: the host's, which knows its event loop (the
        #: kernel imports none). Optional: a host without one takes no deadlines.
        self._within: Within | None = getattr(host, "run_within", None)

    def __repr__(self) -> str:
        return f"JobDriver(name={self.name!r}, link={self._link!r})"

    @property
    def link(self) -> Any:
        """The link this drive reaches every scope through (None: the host's default)."""
        return self._link

    def _observe(self, event: str, fields: dict[str, Any]) -> None:
        if self._observer is not None:
            self._observer(event, {"drive": self.name, **fields})

    def _store(self, scope_id: str) -> JobRunStore:
        return self._host.stub(scope_id, link=self._link)

    def register_job(
        self,
        module_id: str,
        name: str,
        handler: JobHandler,
        *,
        retry: RetryPolicy | None = None,
        lease_ms: int | None = None,
        deadline_ms: int | None = None,
    ) -> JobRegistration:
        """Record a job's handler, its retry policy, its lease and its pass deadline; refused when
        already known.

        ``deadline_ms`` bounds each pass's handler: past it the handler is cancelled and the pass
        fails as any failed pass does (an attempt charged, then a backoff or the run's end). None,
        the default, is the spec's: a handler runs as long as it likes."""
        errors = name_errors(module_id, "module_id") + name_errors(name, "name")
        if errors:
            raise ValidationFailed(errors)
        if not callable(handler):
            raise ValidationFailed.at("handler", f"is {handler!r}; it must be callable")
        assert_lease_ms(lease_ms)
        assert_deadline_ms(deadline_ms)
        if deadline_ms is not None and self._within is None:
            raise ValidationFailed.at(
                "deadline_ms",
                f"is {deadline_ms!r}, but the host {self._host!r} has no run_within to cancel a "
                "handler with; use a scopehost host, or no deadline",
            )
        if retry is not None:
            resolve_retry_policy(retry)
        if (module_id, name) in self._jobs:
            raise Conflict(
                JOB_ALREADY_REGISTERED,
                f"job {module_id}/{name} is already registered with drive {self.name!r} — "
                "register each job once",
            )
        registration = JobRegistration(
            handler=handler, retry=retry, lease_ms=lease_ms, deadline_ms=deadline_ms
        )
        self._jobs[(module_id, name)] = registration
        return registration

    def register(self, definition: JobDefinition) -> JobRegistration:
        """Register a job as its definition says (the same value a simulated world takes),
        refused when the drive's service port lacks a service the job names."""
        if not isinstance(definition, JobDefinition):
            raise ValidationFailed.at(
                "definition", f"is {definition!r}; give a driver.JobDefinition(...)"
            )
        missing = [
            name
            for name in definition.services
            if self.services is None or not self.services.provides(name)
        ]
        if missing:
            raise ValidationFailed.at(
                "services",
                f"job {definition.module_id}/{definition.job} calls {', '.join(missing)}, which "
                f"drive {self.name!r} cannot reach (its service port: {self.services!r}); give "
                "JobDriver(..., services=PORT) a port that provides them",
            )
        return self.register_job(
            definition.module_id,
            definition.job,
            definition.handler,
            retry=definition.retry,
            lease_ms=definition.lease_ms,
            deadline_ms=definition.deadline_ms,
        )

    def _handler_for(self, key: JobDueKey) -> JobRegistration | None:
        return self._jobs.get((key.module_id, key.job))

    async def start_job_run(self, scope_id: str, input: StartJobRunInput) -> JobRun:
        """Start a run on the scope, or join the live one for the same key (returned unchanged)."""
        row = await start_job_run(self._store(scope_id), input, self._mint, self._now)
        return job_run_of(row)

    async def run_due_jobs(
        self, scope_id: str, *, max_passes: int = 1, limit: int | None = None
    ) -> JobDriveReport:
        """One drive over the scope's due runs (see ``run_due_job_runs``)."""
        marks = _DoorMarks()
        link = self._link

        async def open_scope(run: JobRunRow, token: object) -> SystemScope:
            try:
                door = self._host.door(scope_id, run.module_id, link=link)
                if inspect.isawaitable(door):
                    door = await door
            except Exception as err:
                marks.mark(token, err)
                raise
            return door

        return await run_due_job_runs(
            store=self._store(scope_id),
            handler_for=self._handler_for,
            now=self._now,
            open_scope=open_scope,
            deferral=marks.deferral,
            max_passes=max_passes,
            limit=limit,
            monotonic=self._monotonic,
            mint_owner=self._mint,
            rng=self._rng,
            observe=self._observe,
            log=self._log,
            within=self._within,
            reach=PassReach(self.services, partial(self._start_for_pass, scope_id)),
        )

    async def _start_for_pass(
        self, scope_id: str, parent: str, scope: str | None, input: StartJobRunInput
    ) -> JobRun:
        """A handler's ``ctx.start_run`` in run ``parent``: a start through this drive, on the
        pass's own scope unless it names another."""
        return await self.start_job_run(scope_id if scope is None else scope, input)

    async def job_runs(self, scope_id: str, filter: JobRunFilter | None = None) -> list[JobRun]:
        """The operator read: newest first, its limit clamped, each row decoded tolerantly."""
        rows = await self._store(scope_id).list(_run_filter(filter))
        return [job_run_of(row) for row in rows]


def _run_filter(filter: object) -> JobRunFilter:
    """``filter`` as the store reads it, refused unless a ``JobRunFilter`` (or None: every run).
    The store checks the fields; a dict of them would fail there as a bare AttributeError."""
    if filter is None:
        return JobRunFilter()
    if not isinstance(filter, JobRunFilter):
        raise ValidationFailed.at(
            "filter",
            f"is {filter!r}; pass a JobRunFilter (e.g. JobRunFilter(status='done')), or None for "
            "every run",
        )
    return filter
