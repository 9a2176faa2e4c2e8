"""The scope actor: one task that owns a scope's database and serves one message at a time.

This is the Durable Object's input gate. A message is taken from the queue, the store's clock is
read, the operation runs as one synchronous SQLite transaction, and only then is the next message
looked at. There is no ``await`` between taking a message and answering it, so nothing can
interleave with an operation, and SQLite is called in this task itself: a worker thread would let
``MockClock``'s autojump see the wait as idle and leap virtual time.

Eviction is what a DO abort does. Every message not yet executed when it happens fails with
``ScopeEvicted`` and did not run; what was committed stays committed; the next call starts a fresh
actor on the same database.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import trio

from ._clock import Clock
from ._database import ScopeDatabase
from ._errors import HostClosed, ScopeEvicted, ScopeHostError, ScopeUnavailable
from ._link import LinkOutcome


@attrs.define
class Message:
    """One operation waiting for the actor, and the slot its answer lands in."""

    operation: str
    args: tuple[Any, ...]
    done: trio.Event = attrs.field(factory=trio.Event)
    outcome: LinkOutcome | None = None
    #: Told the answer the moment the actor settles it, in the actor's task: so a trace records
    #: executions in the order the store ran them (several callers woken by one actor turn resume
    #: in the scheduler's order), and records them even when the caller was cancelled meanwhile.
    on_settle: Callable[[LinkOutcome], None] | None = None

    def settle(self, outcome: LinkOutcome) -> None:
        self.outcome = outcome
        self.done.set()
        if self.on_settle is not None:
            self.on_settle(outcome)


class ScopeActor:
    """Serves one scope until evicted or until its host closes."""

    def __init__(
        self,
        scope_id: str,
        open_database: Callable[[], ScopeDatabase],
        close_database: Callable[[ScopeDatabase], None],
        clock: Clock,
    ) -> None:
        self.scope_id = scope_id
        self._open_database = open_database
        self._close_database = close_database
        self._clock = clock
        self._send, self._receive = trio.open_memory_channel[Message](math.inf)
        self.evicted = False
        #: Set once this actor will serve nothing more; the host then starts a fresh one.
        self.closed = False

    def submit(self, message: Message) -> None:
        self._send.send_nowait(message)

    def evict(self) -> None:
        """Abort: everything still queued fails; the task ends once the queue is drained."""
        self.evicted = True
        self._send.close()

    async def serve(self) -> None:
        database: ScopeDatabase | None = None
        failure: Exception | None = None
        try:
            try:
                database = self._open_database()
            except Exception as error:
                # Answer every waiting call with the reason instead of taking the host down.
                failure = error
                return
            async for message in self._receive:
                self._serve_one(database, message)
                # Whatever queued up meanwhile is served in the same turn, still one message at a
                # time: a yield between two of them would let nothing new in that the queue's
                # order does not already admit, and would cost a scheduler round per message.
                while True:
                    try:
                        message = self._receive.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    self._serve_one(database, message)
        finally:
            # Cancelled with the host, or the database would not open: nobody waiting may hang.
            self.closed = True
            self._send.close()
            while True:
                try:
                    message = self._receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                self._refuse(message, self._unserved_error(message, failure))
            if database is not None:
                self._close_database(database)

    def _serve_one(self, database: ScopeDatabase, message: Message) -> None:
        if self.evicted:
            self._refuse(message, self._evicted_error(message))
        else:
            message.settle(self._execute(database, message))

    def _execute(self, database: ScopeDatabase, message: Message) -> LinkOutcome:
        now = self._clock.now()
        try:
            value = getattr(database, message.operation)(*message.args, now=now)
        except Exception as error:
            return LinkOutcome(None, error, now)
        return LinkOutcome(value, None, now)

    def _refuse(self, message: Message, error: BaseException) -> None:
        message.settle(LinkOutcome(None, error, self._clock.now()))

    def _unserved_error(self, message: Message, failure: Exception | None) -> ScopeHostError:
        if failure is not None:
            return ScopeUnavailable(
                f"{message.operation} on scope {self.scope_id!r} did not run: its database "
                f"would not open ({type(failure).__name__}: {failure})"
            )
        if self.evicted:
            return self._evicted_error(message)
        return HostClosed(
            f"{message.operation} on scope {self.scope_id!r} did not run: "
            "the scope host closed first"
        )

    def _evicted_error(self, message: Message) -> ScopeEvicted:
        return ScopeEvicted(
            f"{message.operation} on scope {self.scope_id!r} did not run: the scope was evicted "
            "while it waited; the next call starts a fresh actor on the same database"
        )
