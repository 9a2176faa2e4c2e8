"""The scope host: a namespace of scopes, each served by its own actor, reached through links.

Like a Durable Object namespace, a scope exists as soon as somebody calls it: the first message to
a scope id starts its actor. ``directory=None`` keeps each scope's database in memory (held by the
host, so it outlives an eviction as a DO's storage does); a directory keeps one SQLite file per
scope, in WAL mode, which also outlives the host.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeAlias

import trio

from driver import Observer

from ._actor import Message, ScopeActor
from ._clock import Clock, WallClock
from ._database import ModuleOperation, ScopeDatabase
from ._describe import describe
from ._errors import DoorHeld, HostClosed
from ._link import Link, LinkCall, LinkOutcome
from ._network import Network
from ._stub import ScopeDoor, ScopeStub

#: The name of the zero-latency link a stub gets when its caller passes none.
DIRECT_LINK = "direct"

#: Builds a scope's store over its connection (``ScopeDatabase`` or a subclass).
DatabaseFactory: TypeAlias = Callable[..., ScopeDatabase]

_SCOPE_ID = re.compile(r"^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$")


def check_scope_id(scope_id: object) -> str:
    if not isinstance(scope_id, str) or not _SCOPE_ID.match(scope_id):
        raise ValueError(
            f"scope id {scope_id!r} must be 1 to 128 letters, digits, '.', '_', ':' or '-', "
            "not starting with '.'"
        )
    return scope_id


class ScopeHost:
    """Spawns and evicts scope actors; see :func:`open_scope_host`."""

    def __init__(
        self,
        nursery: trio.Nursery,
        directory: Path | None,
        *,
        clock: Clock,
        observer: Observer | None,
        operations: Mapping[str, ModuleOperation] | None,
        rng: random.Random,
        database: DatabaseFactory = ScopeDatabase,
    ) -> None:
        self._nursery = nursery
        self._database = database
        self.directory = directory
        self.clock = clock
        #: The default random source of drives built on this host (a seeded world passes its own).
        self.rng = rng
        self.network = Network()
        self._observer = observer
        self._operations: dict[str, ModuleOperation] | None = (
            dict(operations) if operations is not None else None
        )
        self._actors: dict[str, ScopeActor] = {}
        self._memory: dict[str, sqlite3.Connection] = {}
        self._held_doors: set[tuple[str, str]] = set()
        self._direct = Link(name=DIRECT_LINK)
        self.closed = False

    # -- the scopes ---------------------------------------------------------------------------

    def stub(self, scope_id: str, *, link: Link | None = None) -> ScopeStub:
        """The RPC stub of one scope, over ``link`` (a zero-latency one by default)."""
        return ScopeStub(self, check_scope_id(scope_id), link if link is not None else self._direct)

    def door(self, scope_id: str, module_id: str, *, link: Link | None = None) -> ScopeDoor:
        """Open a module's system door on a scope; raises ``DoorHeld`` while it is held."""
        if (scope_id, module_id) in self._held_doors:
            raise DoorHeld(
                f"the system door of module {module_id!r} on scope {scope_id!r} is held: "
                "not now — it opens again once released"
            )
        return ScopeDoor(self.stub(scope_id, link=link), module_id)

    def hold_door(self, scope_id: str, module_id: str) -> None:
        self._held_doors.add((check_scope_id(scope_id), module_id))

    def release_door(self, scope_id: str, module_id: str) -> None:
        self._held_doors.discard((scope_id, module_id))

    def evict(self, scope_id: str) -> bool:
        """Abort the scope's actor as a DO eviction does. False when it had none running."""
        actor = self._actors.pop(check_scope_id(scope_id), None)
        if actor is None:
            return False
        actor.evict()
        return True

    def register_operation(self, name: str, operation: ModuleOperation) -> None:
        """Add a module operation; actors started from now on serve it."""
        if self._operations is None:
            self._operations = {}
        self._operations[name] = operation

    def start_soon(self, async_fn: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run a task in the host's nursery: work that outlives its caller, as a request the
        caller gave up on and the wire still carries."""
        self._nursery.start_soon(async_fn, *args)

    # -- time ---------------------------------------------------------------------------------

    def monotonic_ms(self) -> float:
        """Virtual time in ms: a drive's default monotonic clock."""
        return trio.current_time() * 1000.0

    async def sleep_ms(self, ms: float) -> None:
        """Sleep in virtual time through the host's deterministic timer."""
        await self.network.sleep_ms(ms)

    # -- what links call ----------------------------------------------------------------------

    async def execute(
        self,
        scope_id: str,
        operation: str,
        args: tuple[Any, ...],
        *,
        on_settle: Callable[[LinkOutcome], None] | None = None,
    ) -> LinkOutcome:
        """Queue one operation at the scope's actor and wait for its answer (``on_settle`` is told
        it as the actor settles it, whether or not this caller is still waiting)."""
        if self.closed:
            raise HostClosed(f"{operation} on scope {scope_id!r}: the scope host is closed")
        message = Message(operation, args, on_settle=on_settle)
        self._actor(scope_id).submit(message)
        await message.done.wait()
        assert message.outcome is not None
        return message.outcome

    def observe_rpc(self, event: str, call: LinkCall, outcome: LinkOutcome | None) -> None:
        if self._observer is None:
            return
        fields: dict[str, Any] = {
            "link": call.link,
            "seq": call.seq,
            "scope": call.scope_id,
            "op": call.operation,
        }
        if event == "rpc.send":
            fields["args"] = describe(call.args)
        elif outcome is not None:
            fields["store_at"] = outcome.executed_at
            if outcome.error is not None:
                fields["error"] = describe(outcome.error)
            else:
                fields["result"] = describe(outcome.value)
        if event == "rpc.drop":
            fields["leg"] = "request" if outcome is None else "reply"
        self._observer(event, fields)

    def _actor(self, scope_id: str) -> ScopeActor:
        actor = self._actors.get(scope_id)
        if actor is None or actor.closed:
            actor = ScopeActor(
                scope_id,
                lambda: self._open_database(scope_id),
                self._close_database,
                self.clock,
            )
            self._actors[scope_id] = actor
            self._nursery.start_soon(actor.serve, name=f"scope:{scope_id}")
        return actor

    def _open_database(self, scope_id: str) -> ScopeDatabase:
        if self.directory is None:
            connection = self._memory.get(scope_id)
            if connection is None:
                connection = sqlite3.connect(":memory:", isolation_level=None)
                self._memory[scope_id] = connection
        else:
            connection = sqlite3.connect(
                self.directory / f"{scope_id}.sqlite3", isolation_level=None
            )
            connection.execute("PRAGMA journal_mode=WAL")
        return self._database(connection, scope_id, operations=self._operations)

    def _close_database(self, database: ScopeDatabase) -> None:
        # An in-memory database IS its connection: it stays open for the next actor.
        if self.directory is not None:
            database.connection.close()

    def _close(self) -> None:
        self.closed = True
        for connection in self._memory.values():
            connection.close()
        self._memory.clear()


@asynccontextmanager
async def open_scope_host(
    directory: str | Path | None = None,
    *,
    clock: Clock | None = None,
    observer: Observer | None = None,
    operations: Mapping[str, ModuleOperation] | None = None,
    rng: random.Random | None = None,
    database: DatabaseFactory = ScopeDatabase,
) -> AsyncIterator[ScopeHost]:
    """A scope host whose actors and network run in a nursery for the block's duration.

    ``clock`` is the store's clock: UTC wall time (``WallClock``) unless given one. A test or a
    simulation on virtual time passes ``StoreClock()`` (virtual time plus a fixed epoch).

    ``database`` builds each actor's store over its connection: ``ScopeDatabase`` unless a test or
    a simulation wants a deliberately broken one, to show that a check notices.
    """
    path = None if directory is None else Path(directory)
    if path is not None and not path.is_dir():
        raise ValueError(f"directory {str(path)!r} does not exist; create it or pass None")
    async with trio.open_nursery() as nursery:
        host = ScopeHost(
            nursery,
            path,
            clock=clock if clock is not None else WallClock(),
            observer=observer,
            operations=operations,
            rng=rng if rng is not None else random.Random(0),
            database=database,
        )
        nursery.start_soon(host.network.serve, name="network")
        try:
            yield host
        finally:
            nursery.cancel_scope.cancel()
    host._close()
