"""The storage the kernel runs against: the ONE thing an adapter supplies.

Every decision lives in the kernel; an adapter only makes each of these calls one indivisible store
operation (one transaction in one actor message), reading its OWN clock for every lease time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ._values import (
    JobDueKey,
    JobMiss,
    JobRunClaim,
    JobRunFilter,
    JobRunKey,
    JobRunPatch,
    JobRunRow,
    JobStepBoundary,
)


class JobRunStore(Protocol):
    async def start_or_join(self, key: JobRunKey, row: JobRunRow) -> JobRunRow:
        """The live run for ``key`` if there is one, else ``row`` inserted; atomic."""
        ...

    async def due_keys(self, now: str, max: int) -> list[JobDueKey]:
        """One snapshot of up to ``max`` due keys, by ``JOB_RUN_DUE_AT`` then id."""
        ...

    async def claim(self, id: str, owner: str, lease_ms: int) -> JobRunClaim | None:
        """``JOB_RUN_CLAIM_SQL`` at the store's now; None when the claim lost."""
        ...

    async def begin(self, id: str, owner: str, margin_ms: float) -> bool:
        """``JOB_RUN_BEGIN_SQL`` at the store's now: the commitment point."""
        ...

    async def miss(self, id: str, owner: str, note: str) -> JobMiss | None:
        """``JOB_RUN_MISS_SQL`` then ``JOB_RUN_MISS_SETTLE_SQL``, one transaction."""
        ...

    async def list(self, filter: JobRunFilter) -> list[JobRunRow]:
        """The operator read, newest first, its limit clamped by ``job_run_list_limit``."""
        ...

    async def patch(self, id: str, patch: JobRunPatch, owner: str | None) -> bool:
        """``JOB_RUN_PATCH_SQL``; False = refused."""
        ...

    async def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None) -> bool:
        """The patch and the ledger drop together; the ledger only when the patch applied."""
        ...

    async def begin_step(
        self, run_id: str, name: str, owner: str, lease_ms: int
    ) -> JobStepBoundary:
        """Renew the lease and read the step's row, in one operation."""
        ...

    async def record_step(
        self,
        run_id: str,
        name: str,
        result: str | None,
        attempts: int,
        last_error: str | None,
        at: str,
        owner: str,
        lease_ms: int,
    ) -> bool:
        """Renew then record one step attempt, both only while ``owner`` holds the run."""
        ...


#: The port's operations by name, in the order the protocol declares them: what a wire that
#: carries the port (a drive's link, the conformance wire) must offer.
STORE_PORT_OPERATIONS: tuple[str, ...] = tuple(
    name for name, member in vars(JobRunStore).items() if callable(member) and name[0] != "_"
)


class SystemScope(Protocol):
    """The scope through the system door, as a pass's ``ctx.scope()`` returns it."""

    async def invoke(self, operation: str, args: dict[str, Any] | None = None) -> Any:
        """Run one registered module operation inside the scope, as one message."""
        ...


class Observer(Protocol):
    """Where the kernel reports what it did, for traces; it must not raise or block."""

    def __call__(self, event: str, fields: dict[str, Any]) -> None: ...


def ignore_event(event: str, fields: dict[str, Any]) -> None:
    """The observer used when nobody is watching."""


#: How a drive bounds a handler in time without knowing its event loop: ``within(ms, body)`` runs
#: ``body`` and cancels it once ``ms`` milliseconds have passed, returning True when the body
#: finished first and False when the deadline cancelled it (the host's ``run_within`` is one).
Within = Callable[[float, Callable[[], Awaitable[None]]], Awaitable[bool]]
