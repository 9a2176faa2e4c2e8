"""The scope actor: one task that owns a scope's database and serves one message at a time.

This is the Durable Object's input gate. A message is taken from the queue, the store's clock is
read, the operation runs as one synchronous SQLite transaction, and only then is the next message
looked at. There is no ``await`` between taking a message and answering it, so nothing can
interleave with an operation, and SQLite is called in this task itself: a worker thread would let
``MockClock``'s autojump see the wait as idle and leap virtual time.

An actor also RETIRES, as an idle Durable Object hibernates: when its host says so (idle too
long, or room needed for another scope) and nothing waits in its queue, it closes its database and
ends; the next call starts a fresh actor on the same database, so a retirement is invisible to
callers except as the cost of reopening.

Eviction is what a DO abort does. Every message not yet executed when it happens fails with
``ScopeEvicted`` and did not run; what was committed stays committed; the next call starts a fresh
actor on the same database.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from ._clock import Clock
from ._database import ScopeDatabase
from ._descriptors import lowest_free_descriptor
from ._errors import (
    HostClosed,
    ScopeDiskFailed,
    ScopeEvicted,
    ScopeFileChanged,
    ScopeHostError,
    ScopeSyncFailed,
    ScopeUnavailable,
)
from ._gate import OutputGate, ScopeFiles, runs_on_the_wall_clock
from ._heavy import PAUSED_COLLECTION, is_heavy
from ._link import LinkOutcome
from ._watch import Changed, FileWatch, changed_file_message

#: SQLite's primary result codes of a file that failed: SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL.
_DISK_FAILURES = frozenset({10, 11, 13})
_CORRUPT, _FULL = 11, 13


def disk_remedy(code: int, scope_id: str) -> str:
    """What to do about a file that failed, by SQLite's code: a damaged file is not mended by
    reopening it, a full disk is, once it has room."""
    if code == _CORRUPT:
        return (
            "the file itself is damaged, and reopening it opens the same damage — restore a "
            "backup (put it at the scope's path as a new file, then call "
            f"evict({scope_id!r}) on the scope host), or check it with sqlite3 FILE "
            "'PRAGMA integrity_check'"
        )
    if code == _FULL:
        return (
            f"make room on its disk, then call evict({scope_id!r}) on the scope host (the next "
            "call reopens the file)"
        )
    return (
        f"once the disk is sound, call evict({scope_id!r}) on the scope host (the next call "
        "reopens the file)"
    )


#: Closes a scope's database; with what its watch found when its file was written behind it.
CloseDatabase = Callable[[ScopeDatabase, Changed | None], None]


class Message:
    """One operation waiting for the actor, and who hears its answer.

    ``reply`` is called with the outcome in the actor's task, the moment the operation ran (a link
    uses it to start the reply leg without a scheduler round of its own); without one, the
    outcome lands in ``outcome`` and ``done`` is set."""

    __slots__ = ("_reply", "args", "done", "operation", "outcome")

    def __init__(
        self,
        operation: str,
        args: tuple[Any, ...],
        reply: Callable[[LinkOutcome], None] | None = None,
    ) -> None:
        self.operation = operation
        self.args = args
        self.outcome: LinkOutcome | None = None
        self.done: trio.Event | None = trio.Event() if reply is None else None
        self._reply = reply

    def settle(self, outcome: LinkOutcome) -> None:
        self.outcome = outcome
        if self._reply is not None:
            self._reply(outcome)
        else:
            assert self.done is not None
            self.done.set()


class ScopeActor:
    """Serves one scope until evicted or until its host closes."""

    def __init__(
        self,
        scope_id: str,
        open_database: Callable[[], ScopeDatabase],
        close_database: CloseDatabase,
        clock: Clock,
        on_idle: Callable[[ScopeActor], None] | None = None,
        gate: OutputGate | None = None,
        file_path: str | None = None,
    ) -> None:
        self.scope_id = scope_id
        #: The output gate a directory scope's replies pass (None: replies leave at commit).
        self._gate = gate if file_path is not None else None
        self._file_path = file_path
        self._files: ScopeFiles | None = None
        #: A directory scope's watch on its file and log (see ``_watch``), and whether it found
        #: them written behind it (the actor then serves nothing more).
        self._watch: FileWatch | None = None
        self._changed: str | None = None
        #: What SQLite said when the scope's file failed under an operation (``_disk_checked``),
        #: and what to do about it.
        self._disk_failed: str | None = None
        self._disk_remedy = ""
        #: Heavy operations go to a worker thread (only under the wall clock; see ``_heavy``).
        self._offload = runs_on_the_wall_clock()
        self._on_idle = on_idle
        #: The database while it is open (None before the first message and after closing).
        self._database: ScopeDatabase | None = None
        self._open_database = open_database
        self._close_database = close_database
        self._clock = clock
        #: The queue. A deque and a parked task rather than a memory channel: a host may hold
        #: thousands of actors, and a channel's pair of objects and statistics cost on each.
        self._inbox: deque[Message] = deque()
        self._accepting = True
        #: The actor's task while it waits for a message (None while it runs).
        self._parked: trio.lowlevel.Task | None = None
        self.evicted = False
        #: An operation is under way and the actor awaits it (see ``_offload``): its database
        #: must not close under it.
        self._in_operation = False
        #: Set once this actor will serve nothing more; the host then starts a fresh one.
        self.closed = False

    def submit(self, message: Message, *, at_once: bool = False) -> None:
        """Queue ``message``. With ``at_once`` (a request that just came off the wire, outside
        any caller's task), an idle actor serves it here and now instead, as an idle Durable
        Object runs a request the moment it arrives.

        Serving here is the actor's own rule kept: one message at a time, in arrival order, with
        nothing interleaved (the queue is empty, so nothing was before it; the operation runs
        synchronously, so nothing comes between). It saves the scheduler a round per call."""
        if not self._accepting:
            raise trio.ClosedResourceError(f"the actor of scope {self.scope_id!r} has ended")
        database = self._database
        if (
            at_once
            and self._parked is not None
            and database is not None
            and not self._inbox
            and not (self._offload and is_heavy(message.operation, message.args))
        ):
            self._look()
            self._serve_one(database, message)
            self._noted()
            if self._on_idle is not None and not self.closed:
                self._on_idle(self)
            return
        self._inbox.append(message)
        self._wake()

    def _wake(self) -> None:
        parked, self._parked = self._parked, None
        if parked is not None:
            trio.lowlevel.reschedule(parked)

    @property
    def busy(self) -> bool:
        """Messages wait in the queue (or the actor has not yet started on its first one), or a
        heavy operation is running in a worker thread."""
        return bool(self._inbox) or self._in_operation

    @property
    def has_database(self) -> bool:
        """The scope's database is open (from the first message until the actor closes)."""
        return self._database is not None

    def retire(self) -> bool:
        """Close the database now and end, if nothing waits; False (and nothing done) if busy."""
        if self._inbox or self.closed or self._in_operation:
            return False
        self.closed = True
        self._accepting = False
        self._wake()
        database, self._database = self._database, None
        if database is not None:
            self._close(database)
        return True

    def evict(self) -> None:
        """Abort: everything still queued fails (in the actor's task, as it drains), and the
        database closes now, before any fresh actor of the scope opens it again: two connections
        at once would share the old one's write-ahead log, which after a restore belongs to a
        file that is no longer there."""
        self.evicted = True
        self._accepting = False
        if not self._in_operation:
            database, self._database = self._database, None
            if database is not None:
                self._close(database)
        self._wake()

    async def serve(self) -> None:
        database: ScopeDatabase | None = None
        failure: Exception | None = None
        inbox = self._inbox
        try:
            if self.evicted:
                return  # evicted before it began: nothing to open
            try:
                # SQLite's descriptors are found near the first free one (see ``_descriptors``).
                near = lowest_free_descriptor() if self._file_path is not None else None
                database = self._database = self._open_database()
                if self._file_path is not None:
                    self._watch = FileWatch(self._file_path, near)
                if self._gate is not None and self._file_path is not None:
                    self._files = ScopeFiles(self._file_path, self._gate.sync)
            except Exception as error:
                # Answer every waiting call with the reason instead of taking the host down.
                failure = error
                return
            while True:
                # Whatever queued up is served in the same turn, still one message at a time: a
                # yield between two of them would let nothing new in that the queue's order does
                # not already admit, and would cost a scheduler round per message.
                if inbox:
                    self._look()
                while inbox:
                    message = inbox.popleft()
                    if (
                        self._offload
                        and not self.evicted
                        and is_heavy(message.operation, message.args)
                    ):
                        await self._serve_offloaded(database, message)
                    else:
                        self._serve_one(database, message)
                self._noted()
                if not self._accepting:
                    return
                if self._on_idle is not None:
                    self._on_idle(self)
                    if self.closed:
                        return  # retired as it fell idle (the host was over its cap)
                self._parked = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(self._abort)
        finally:
            # Cancelled with the host, or the database would not open: nobody waiting may hang.
            self.closed = True
            self._accepting = False
            while inbox:
                message = inbox.popleft()
                self._refuse(message, self._unserved_error(message, failure))
            # Unless a retirement closed it already.
            closing, self._database = self._database, None
            if closing is not None:
                self._close(closing)

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        self._parked = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _serve_one(self, database: ScopeDatabase, message: Message) -> None:
        refusal = self._refusal(message)
        if refusal is not None:
            self._refuse(message, refusal)
            return
        self._settle(database, message, self._execute(database, message, self._clock.now()))

    async def _serve_offloaded(self, database: ScopeDatabase, message: Message) -> None:
        """Serve a heavy message in a worker thread; the actor waits for it (one at a time), the
        other scopes do not. Not cancellable: the connection is the thread's until it returns."""
        refusal = self._refusal(message)
        if refusal is not None:
            self._refuse(message, refusal)
            return
        now = self._clock.now()
        self._in_operation = True
        try:
            with PAUSED_COLLECTION:
                outcome = await trio.to_thread.run_sync(self._execute, database, message, now)
        finally:
            self._in_operation = False
        self._settle(database, message, outcome)

    def _refusal(self, message: Message) -> ScopeHostError | None:
        """Why ``message`` may not run now, if it may not."""
        if self.evicted:
            return self._evicted_error(message)
        files = self._files
        if files is not None and files.failed is not None:
            return self._sync_failed_error(message, files.failed)
        if self._disk_failed is not None:
            return ScopeDiskFailed(
                f"{message.operation} on scope {self.scope_id!r} did not run: its file "
                f"{self._file_path} failed under an earlier operation ({self._disk_failed}); "
                f"{self._disk_remedy}"
            )
        if self._changed is not None:
            assert self._file_path is not None
            return ScopeFileChanged(
                f"{message.operation} did not run: "
                + changed_file_message(self.scope_id, Path(self._file_path))
            )
        return None

    def _look(self) -> None:
        """A turn begins: if the file or log was written behind the scope since its last turn,
        it closes now and refuses what it holds (see ``_watch``). Once a turn, not once a
        message: each look costs two ``stat`` calls."""
        if self._watch is None or self._database is None or self._changed is not None:
            return
        found = self._watch.changed()
        if found is not None:
            self._shut_on_change(found)

    def _noted(self) -> None:
        """A turn ended: the watch notes the file and log as the scope's own writes (and SQLite's
        checkpoints among them) left them."""
        # Not once the database is closed (a retirement wakes the actor to end it): its files
        # are SQLite's no more, and reading them would look for descriptors that are gone.
        if self._watch is not None and self._changed is None and self._database is not None:
            self._watch.noted()

    def _shut_on_change(self, found: str) -> None:
        """The file or log was written behind the scope: close now, without folding the log into
        what is there (see ``_watch``); the host's next actor refuses until an eviction."""
        self._changed = found
        self.closed = True
        self._accepting = False
        database, self._database = self._database, None
        if database is not None:
            self._close(database)

    def _close(self, database: ScopeDatabase) -> None:
        watch, found = self._watch, self._changed
        if watch is not None and found is None:
            found = watch.changed()
        changed = None if watch is None or found is None else (found, watch.log_is_ours)
        self._close_database(database, changed)

    def _settle(self, database: ScopeDatabase, message: Message, outcome: LinkOutcome) -> None:
        """Answer ``message`` with what it ran to (through the output gate, in a directory), or
        with the failure of its file, should SQLite have said so (``_disk_checked``)."""
        outcome = self._disk_checked(message, outcome)
        files = self._files
        if files is None:
            message.settle(outcome)
            return
        assert self._gate is not None
        # A module operation may write what total_changes does not count (a table it creates).
        files.note(database.connection.total_changes, may_write=message.operation == "invoke")
        self._gate.release(files, message, outcome)

    @staticmethod
    def _execute(database: ScopeDatabase, message: Message, now: str) -> LinkOutcome:
        try:
            value = getattr(database, message.operation)(*message.args, now=now)
        except Exception as error:
            return LinkOutcome(None, error, now)
        return LinkOutcome(value, None, now)

    def _refuse(self, message: Message, error: BaseException) -> None:
        message.settle(LinkOutcome(None, error, self._clock.now()))

    def _unserved_error(self, message: Message, failure: Exception | None) -> ScopeHostError:
        if isinstance(failure, ScopeUnavailable):
            # Of the same type, so a caller can tell a lost file (ScopeFileGone) from the rest.
            return type(failure)(f"{message.operation} did not run: {failure}")
        if failure is not None:
            where = f" file {self._file_path}" if self._file_path is not None else ""
            disk = any(said in str(failure) for said in ("disk I/O error", "disk is full"))
            remedy = (
                "; nothing was written, and the next call tries to open it again — if its disk "
                "is full or failing, make room or mend it first (SQLite says 'disk I/O error' "
                "for both)"
                if disk
                else ""
            )
            return ScopeUnavailable(
                f"{message.operation} on scope {self.scope_id!r} did not run: its database"
                f"{where} would not open ({type(failure).__name__}: {failure}){remedy}"
            )
        if self.evicted:
            return self._evicted_error(message)
        return HostClosed(
            f"{message.operation} on scope {self.scope_id!r} did not run: "
            "the scope host closed first"
        )

    def _disk_checked(self, message: Message, outcome: LinkOutcome) -> LinkOutcome:
        """``outcome``, or, when SQLite said the file failed under it (an I/O error, a full disk,
        a corrupt page: never a refusal of the operation's own), the error that says so, names
        the file and the remedy; the scope then serves nothing until it is evicted."""
        error = outcome.error
        code = getattr(error, "sqlite_errorcode", None)
        if not isinstance(error, sqlite3.DatabaseError) or code is None:
            return outcome
        if code & 0xFF not in _DISK_FAILURES:
            return outcome
        self._disk_failed = f"{type(error).__name__}: {error}"
        self._disk_remedy = disk_remedy(code & 0xFF, self.scope_id)
        failed = ScopeDiskFailed(
            f"{message.operation} on scope {self.scope_id!r}: SQLite reported that its file "
            f"{self._file_path or '(in memory)'} failed ({self._disk_failed}), so whether the "
            f"operation was written is not known; the scope serves no further call: "
            f"{self._disk_remedy}"
        )
        failed.__cause__ = error
        return LinkOutcome(None, failed, outcome.executed_at)

    def _sync_failed_error(self, message: Message, error: OSError) -> ScopeSyncFailed:
        return ScopeSyncFailed(
            f"{message.operation} on scope {self.scope_id!r} did not run: a sync of its file "
            f"{self._file_path} failed ({type(error).__name__}: {error}), so what it wrote since "
            "may not be on the disk whatever later syncs say; it serves no call until it is "
            "reopened and its file checked — once the disk is sound, call "
            f"evict({self.scope_id!r}) on the scope host (the next call reopens the scope, checks "
            "its file and keeps what it holds)"
        )

    def _evicted_error(self, message: Message) -> ScopeEvicted:
        return ScopeEvicted(
            f"{message.operation} on scope {self.scope_id!r} did not run: the scope was evicted "
            "while it waited; the next call starts a fresh actor on the same database"
        )
