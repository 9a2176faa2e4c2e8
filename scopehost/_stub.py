"""A scope's RPC stub: the ``JobRunStore`` port, and the scope's own calls, over one link.

Every method is one message to the scope's actor, carried by the link; the stub adds nothing of
its own, so what a caller sees is exactly what the scope did and what the wire did to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from driver import (
    JobDueKey,
    JobMiss,
    JobRunClaim,
    JobRunFilter,
    JobRunKey,
    JobRunPatch,
    JobRunRow,
    JobStepBoundary,
)

from ._dump import JobRunDump
from ._link import Link

if TYPE_CHECKING:
    from ._host import ScopeHost


class ScopeStub:
    """One caller's handle on one scope. Implements ``driver.JobRunStore``."""

    def __init__(self, host: ScopeHost, scope_id: str, link: Link) -> None:
        self.host = host
        self.scope_id = scope_id
        self.link = link

    def __repr__(self) -> str:
        return f"ScopeStub(scope_id={self.scope_id!r}, link={self.link!r})"

    async def _call(self, operation: str, *args: Any) -> Any:
        return await self.link.call(self.host, self.scope_id, operation, args)

    async def start_or_join(self, key: JobRunKey, row: JobRunRow) -> JobRunRow:
        result: JobRunRow = await self._call("start_or_join", key, row)
        return result

    async def due_keys(self, now: str, max: int) -> list[JobDueKey]:
        result: list[JobDueKey] = await self._call("due_keys", now, max)
        return result

    async def claim(self, id: str, owner: str, lease_ms: int) -> JobRunClaim | None:
        result: JobRunClaim | None = await self._call("claim", id, owner, lease_ms)
        return result

    async def begin(self, id: str, owner: str, margin_ms: float) -> bool:
        result: bool = await self._call("begin", id, owner, margin_ms)
        return result

    async def miss(self, id: str, owner: str, note: str) -> JobMiss | None:
        result: JobMiss | None = await self._call("miss", id, owner, note)
        return result

    async def list(self, filter: JobRunFilter) -> list[JobRunRow]:
        result: list[JobRunRow] = await self._call("list", filter)
        return result

    async def patch(self, id: str, patch: JobRunPatch, owner: str | None) -> bool:
        result: bool = await self._call("patch", id, patch, owner)
        return result

    async def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None) -> bool:
        result: bool = await self._call("commit_pass", id, patch, owner)
        return result

    async def begin_step(
        self, run_id: str, name: str, owner: str, lease_ms: int
    ) -> JobStepBoundary:
        result: JobStepBoundary = await self._call("begin_step", run_id, name, owner, lease_ms)
        return result

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
        held: bool = await self._call(
            "record_step", run_id, name, result, attempts, last_error, at, owner, lease_ms
        )
        return held

    async def shred_subject(self, subject_id: str) -> int:
        """Erase a data subject from this scope's runs, in one message; the runs touched."""
        touched: int = await self._call("shred_subject", subject_id)
        return touched

    async def export_dump(self) -> JobRunDump:
        dump: JobRunDump = await self._call("export_dump")
        return dump

    async def import_dump(self, dump: JobRunDump, source: str) -> int:
        imported: int = await self._call("import_dump", dump, source)
        return imported

    async def invoke(self, operation: str, args: dict[str, Any] | None = None) -> Any:
        """Run one registered module operation inside the scope, as one message."""
        return await self._call("invoke", operation, dict(args or {}))


class ScopeDoor:
    """The scope through a module's system door, as a pass's ``ctx.scope()`` returns it."""

    def __init__(self, stub: ScopeStub, module_id: str) -> None:
        self.stub = stub
        self.module_id = module_id

    def __repr__(self) -> str:
        return f"ScopeDoor(scope_id={self.stub.scope_id!r}, module_id={self.module_id!r})"

    async def invoke(self, operation: str, args: dict[str, Any] | None = None) -> Any:
        return await self.stub.invoke(operation, args)
