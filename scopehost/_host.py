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
from urllib.parse import quote

import trio

from driver import Observer, ValidationFailed
from driver._start import name_errors

from ._actor import Message, ScopeActor
from ._clock import Clock, WallClock
from ._database import ModuleOperation, ScopeDatabase
from ._deadline import run_within
from ._describe import describe
from ._errors import DoorHeld, HostClosed, ScopeFileForeign, ScopeFileGone, host_closed
from ._files import OpenedFiles
from ._gate import OutputGate, runs_on_the_wall_clock
from ._history import HistoryRecorder
from ._identity import (
    foreign_file_message,
    foreign_tables,
    record_scope,
    recorded_scope,
    unowned_file_message,
)
from ._known import KnownScopes
from ._link import Link, LinkCall, LinkOutcome
from ._network import Network, check_jumpable_clock
from ._recheck import check_reopened
from ._retirement import Retirement, check_idle_ms, check_max_open, out_of_file_handles
from ._stub import ScopeDoor, ScopeStub
from ._wal_mode import switch_to_wal
from ._watch import (
    Changed,
    accept_changed,
    check_noted,
    kept_log_path,
    note_changed,
    note_path,
)
from ._writable import unwritable_file

#: The name of the zero-latency link a stub gets when its caller passes none.
DIRECT_LINK = "direct"

#: Builds a scope's store over its connection (``ScopeDatabase`` or a subclass).
DatabaseFactory: TypeAlias = Callable[..., ScopeDatabase]

_SCOPE_ID = re.compile(r"[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}")


def check_scope_id(scope_id: object) -> str:
    # fullmatch, not match with `$`: `$` also matches before a trailing newline, and "s1\n" would
    # name a second scope (and file) that looks like "s1".
    if not isinstance(scope_id, str) or not _SCOPE_ID.fullmatch(scope_id):
        raise ValidationFailed.at(
            "scope_id",
            f"is {scope_id!r}; a scope id is 1 to 128 letters, digits, '.', '_', ':' or '-', "
            "not starting with '.'",
        )
    return scope_id


def check_module_id(module_id: object) -> str:
    # The rule a run's module_id is held to at its start: a door held under "" or None would
    # hold no module's door, and say nothing.
    errors = name_errors(module_id, "module_id")
    if errors:
        raise ValidationFailed(errors)
    assert isinstance(module_id, str)
    return module_id


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
        jump_clock: bool = False,
        observe_direct: bool | frozenset[str] = True,
        idle_ms: float | None = None,
        max_open_scopes: int | None = None,
        durable: bool = True,
    ) -> None:
        self._nursery = nursery
        #: The output gate of a directory host's replies (see ``_gate``); None in memory, where
        #: nothing survives a power loss anyway, and when the embedder turned it off.
        self.gate = (
            OutputGate(threaded=runs_on_the_wall_clock())
            if directory is not None and durable
            else None
        )
        self._observe_direct = observe_direct
        self._database = database
        self.directory = directory
        self.clock = clock
        #: The default random source of drives built on this host (a seeded world passes its own).
        self.rng = rng
        self.network = Network(jump_clock=jump_clock)
        self._observer = observer
        self._operations: dict[str, ModuleOperation] | None = (
            dict(operations) if operations is not None else None
        )
        self._actors: dict[str, ScopeActor] = {}
        self.retirement = Retirement(
            self._actors,
            self.network,
            idle_ms=check_idle_ms(idle_ms),
            max_open=check_max_open(max_open_scopes),
        )
        self._memory: dict[str, sqlite3.Connection] = {}
        #: The files each open directory database was opened on (see ``OpenedFiles``).
        self._opened: dict[ScopeDatabase, OpenedFiles] = {}
        #: The scopes the directory has held, so a missing file is an error (see ``_known``).
        self._known = KnownScopes(directory) if directory is not None else None
        self._held_doors: set[tuple[str, str]] = set()
        self._direct = Link(name=DIRECT_LINK)
        #: Set as the host begins to close, before its tasks are cancelled: from then on no call
        #: reaches a scope, and each is answered ``HostClosed`` instead.
        self.closed = False

    @property
    def recorder(self) -> HistoryRecorder | None:
        """Where the host writes its history, when it records one (``record=``)."""
        return self._observer if isinstance(self._observer, HistoryRecorder) else None

    # -- the scopes ---------------------------------------------------------------------------

    def check_link(self, link: object) -> None:
        """Refuse a ``link`` that is neither a ``Link`` nor None (the host's zero-latency one):
        a drive asks when it is built, not at its first call."""
        if link is not None and not isinstance(link, Link):
            raise ValidationFailed.at(
                "link",
                f"is {link!r}; pass a scopehost.Link (e.g. Link(request_ms=3, reply_ms=3)), or "
                "None for the host's zero-latency link",
            )

    def stub(self, scope_id: str, *, link: Link | None = None) -> ScopeStub:
        """The RPC stub of one scope, over ``link`` (a zero-latency one by default)."""
        self.check_link(link)
        return ScopeStub(self, check_scope_id(scope_id), link if link is not None else self._direct)

    def door(self, scope_id: str, module_id: str, *, link: Link | None = None) -> ScopeDoor:
        """Open a module's system door on a scope; raises ``DoorHeld`` while it is held."""
        check_module_id(module_id)
        if (scope_id, module_id) in self._held_doors:
            raise DoorHeld(
                f"the system door of module {module_id!r} on scope {scope_id!r} is held: "
                "not now — it opens again once released"
            )
        return ScopeDoor(self.stub(scope_id, link=link), module_id)

    def hold_door(self, scope_id: str, module_id: str) -> None:
        """Hold a module's system door on a scope: each ``door`` call raises ``DoorHeld``."""
        self._held_doors.add((check_scope_id(scope_id), check_module_id(module_id)))

    def release_door(self, scope_id: str, module_id: str) -> None:
        """Open a held door again (a door not held stays open)."""
        self._held_doors.discard((check_scope_id(scope_id), check_module_id(module_id)))

    def evict(self, scope_id: str) -> bool:
        """Abort the scope's actor as a DO eviction does. False when it had none running.

        In a directory it also says: open the file at the scope's path as it is now. A file
        written behind the open scope (see ``_watch``) is refused until then, and checked at the
        next open."""
        actor = self._actors.pop(check_scope_id(scope_id), None)
        if actor is not None:
            actor.evict()
        if self.directory is not None:
            accept_changed(self._path(scope_id))
        return actor is not None

    def register_operation(self, name: str, operation: ModuleOperation) -> None:
        """Add a module operation; actors started from now on serve it."""
        if self._operations is None:
            self._operations = {}
        self._operations[name] = operation

    def start_soon(self, async_fn: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run a task in the host's nursery: work that outlives its caller, as a request the
        caller gave up on and the wire still carries."""
        if self.closed:
            # Its nursery is closing or closed: Trio would refuse with a RuntimeError of its own.
            raise HostClosed("the scope host is closed; it starts no more work")
        self._nursery.start_soon(async_fn, *args)

    # -- time ---------------------------------------------------------------------------------

    def monotonic_ms(self) -> float:
        """Virtual time in ms: a drive's default monotonic clock."""
        return self.network.now() * 1000.0

    async def sleep_ms(self, ms: float) -> None:
        """Sleep in virtual time through the host's deterministic timer."""
        await self.network.sleep_ms(ms)

    async def run_within(self, ms: float, body: Callable[[], Awaitable[None]]) -> bool:
        """Run ``body``, cancelled after ``ms``; False when the deadline fell (a drive's pass
        deadline, see ``_deadline``)."""
        return await run_within(self.network, ms, body)

    # -- what links call ----------------------------------------------------------------------

    async def execute(
        self,
        scope_id: str,
        operation: str,
        args: tuple[Any, ...],
    ) -> LinkOutcome:
        """Queue one operation at the scope's actor and wait for its answer."""
        if self.closed:
            raise host_closed(scope_id, operation)
        message = Message(operation, args)
        self._actor(scope_id).submit(message)
        assert message.done is not None
        await message.done.wait()
        assert message.outcome is not None
        return message.outcome

    def submit(
        self,
        scope_id: str,
        operation: str,
        args: tuple[Any, ...],
        reply: Callable[[LinkOutcome], None],
        *,
        at_once: bool = False,
    ) -> None:
        """Queue one operation at the scope's actor; ``reply`` hears the outcome as it runs.
        ``at_once``: the request is off the wire, outside any task, and an idle actor may serve
        it at once (see ``ScopeActor.submit``)."""
        if self.closed:
            raise host_closed(scope_id, operation)
        self._actor(scope_id).submit(Message(operation, args, reply), at_once=at_once)

    def observe_rpc(
        self,
        event: str,
        call: LinkCall,
        outcome: LinkOutcome | None,
        described: Any = None,
    ) -> Any:
        """Tell the observer about one leg event; returns the outcome as described, so the
        reply's events can share one description (``described``) instead of building two."""
        if self._observer is None:
            return None
        if call.link == DIRECT_LINK and (
            not self._observe_direct
            or (
                isinstance(self._observe_direct, frozenset)
                and call.operation not in self._observe_direct
            )
        ):
            return None
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
            if described is None:
                described = describe(outcome.error if outcome.error is not None else outcome.value)
            fields["error" if outcome.error is not None else "result"] = described
        if event == "rpc.drop":
            fields["leg"] = "request" if outcome is None else "reply"
        self._observer(event, fields)
        return described

    def _actor(self, scope_id: str) -> ScopeActor:
        actor = self._actors.get(scope_id)
        if actor is not None and not actor.closed:
            self.retirement.used(scope_id)
            return actor
        if actor is not None:
            del self._actors[scope_id]
        self.retirement.make_room()
        actor = ScopeActor(
            scope_id,
            lambda: self._open_database(scope_id),
            self._close_database,
            self.clock,
            on_idle=self.retirement.idle if self.retirement.watches_idle else None,
            gate=self.gate,
            file_path=None if self.directory is None else str(self._path(scope_id)),
        )
        self._actors[scope_id] = actor
        self._nursery.start_soon(actor.serve, name=f"scope:{scope_id}")
        return actor

    @property
    def open_scopes(self) -> int:
        """How many scopes have an actor (and, in a directory, an open database) right now."""
        return sum(1 for actor in self._actors.values() if not actor.closed)

    @property
    def open_files(self) -> int:
        """How many scopes have their database open right now (an actor waiting to start has not
        yet opened its own)."""
        return sum(1 for actor in self._actors.values() if actor.has_database)

    def _path(self, scope_id: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{scope_id}.sqlite3"

    def _open_database(self, scope_id: str) -> ScopeDatabase:
        if self.directory is None:
            connection = self._memory.get(scope_id)
            if connection is None:
                # Used from a worker thread for a heavy operation (see ``_heavy``), one at a time.
                connection = sqlite3.connect(
                    ":memory:", isolation_level=None, check_same_thread=False
                )
                self._memory[scope_id] = connection
            return self._database(connection, scope_id, operations=self._operations)
        assert self._known is not None
        path = self.directory / f"{scope_id}.sqlite3"
        # A scope this directory has held is opened without the right to create its file
        # (mode=rw): if the file is gone, SQLite fails instead of starting it over empty.
        known = self._known.holds(scope_id)
        check_noted(None, path, scope_id)
        try:
            connection = sqlite3.connect(
                f"file:{quote(str(path))}?mode={'rw' if known else 'rwc'}",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                self._check_if_tainted(connection, path, scope_id)
                # Before the WAL switch below, which writes the file's header.
                if recorded_scope(connection) is None and (tables := foreign_tables(connection)):
                    raise ScopeFileForeign(unowned_file_message(scope_id, str(path), tables))
                # WAL with synchronous=NORMAL: a commit is durable against a crash of this
                # process, and the output gate (``_gate``) holds its reply until a sync covers it,
                # once for every commit that finished meanwhile. A full sync per commit, inside
                # the actor, cost twelve times as much and could not be shared.
                switch_to_wal(connection)
                connection.execute("PRAGMA synchronous=NORMAL")
                check_noted(connection, path, scope_id)
                owner = recorded_scope(connection)
                if owner is not None and owner != scope_id:
                    raise ScopeFileForeign(foreign_file_message(scope_id, str(path), owner))
                database = self._database(connection, scope_id, operations=self._operations)
                if owner is None:
                    record_scope(connection, scope_id)
                self._opened[database] = OpenedFiles.of(path)
            except BaseException:
                connection.close()
                raise
        except sqlite3.OperationalError as error:
            # SQLite says only "unable to open database file": find out whether the process
            # ran out of file handles, the one cause a host's own settings can fix, may not
            # write the folder or the file, or whether the file of a scope this directory has
            # held is gone.
            handles = out_of_file_handles(scope_id, self.retirement.max_open, self.open_files)
            if handles is not None:
                raise handles from error
            if not known or path.exists():
                unwritable = unwritable_file(scope_id, path)
                if unwritable is not None:
                    raise unwritable from error
                raise
            self._known.refresh()
            if scope_id not in self._known:
                # Another host on this directory forgot the scope meanwhile: start it over.
                return self._open_database(scope_id)
            raise ScopeFileGone(
                f"scope {scope_id!r}: its database file {path} is gone, and this directory held "
                "it before; nothing was written and no empty file was created in its place — "
                f"restore the file{_stale_log_warning(path)}, or call forget({scope_id!r}) on the "
                "scope host to start the scope over empty"
            ) from error
        try:
            self._known.add(scope_id)
        except BaseException:
            connection.close()
            raise
        return database

    def _check_if_tainted(self, connection: sqlite3.Connection, path: Path, scope_id: str) -> None:
        """A scope whose sync failed serves again only once its file is checked and durable."""
        failure = self.gate.tainted.get(str(path)) if self.gate is not None else None
        if failure is None:
            return
        check_reopened(connection, path, scope_id, failure)
        assert self.gate is not None
        del self.gate.tainted[str(path)]

    def forget(self, scope_id: str) -> None:
        """Accept that a scope's database file is gone: the next call to the scope starts it over
        with a fresh, empty file instead of failing with ``ScopeFileGone``.

        Refused while the path still holds the scope's file (forgetting is for a loss, not a way
        to delete), and while calls wait in the scope's queue. An actor still open on the deleted
        file is closed first, and the write-ahead log and shared memory the file left behind are
        removed: a new file must never share them with a connection to the old one."""
        check_scope_id(scope_id)
        if self.directory is None:
            raise ValueError(
                f"forget({scope_id!r}): this host keeps its scopes in memory, where no file can "
                "go missing; there is nothing to forget"
            )
        assert self._known is not None
        path = self.directory / f"{scope_id}.sqlite3"
        if path.exists():
            raise ValueError(
                f"forget({scope_id!r}): its database file {path} is still there; to start the "
                "scope over empty, delete the file (with its -wal and -shm files) first"
            )
        if not self._known.holds(scope_id):
            # Most likely a misspelt name: saying nothing would leave the real lost scope failing.
            raise ValueError(
                f"forget({scope_id!r}): the directory {self.directory} holds no record of that "
                "scope (never opened here, or forgotten already); there is nothing to forget — "
                "check the scope's name"
            )
        actor = self._actors.get(scope_id)
        if actor is not None and not actor.closed:
            if not actor.retire():  # closes the old connection now, unless calls wait
                raise ValueError(
                    f"forget({scope_id!r}): calls to the scope are waiting in its queue; "
                    "forget it once they have been answered"
                )
            del self._actors[scope_id]
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        note_path(path).unlink(missing_ok=True)
        self._known.discard(scope_id)

    def _close_database(self, database: ScopeDatabase, changed: Changed | None = None) -> None:
        # An in-memory database IS its connection: it stays open for the next actor.
        if self.directory is None:
            return
        opened = self._opened.pop(database, None)
        if changed is not None and opened is not None:
            # Written behind the scope: keep exactly what was put there, keep the scope's own
            # log aside, and refuse the file until an eviction says to open it (see ``_watch``).
            found, log_is_ours = changed
            kept = kept_log_path(opened.path) if log_is_ours and opened.log is not None else None
            note_changed(opened.path, found, kept)
            opened.close_unfolded(database.connection, kept)
            return
        database.connection.close()
        if opened is not None:
            opened.clear_stale_log()

    def _begin_closing(self) -> None:
        """Before the host's tasks are cancelled: no call may reach a scope from now on (an actor
        started now would never run, and Trio refuses a task once the nursery closed)."""
        self.closed = True

    def _close(self) -> None:
        self.closed = True
        if self._known is not None:
            self._known.close()
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
    jump_clock: bool = False,
    observe_direct: bool | frozenset[str] = True,
    idle_ms: float | None = None,
    max_open_scopes: int | None = None,
    durable: bool = True,
    record: str | Path | HistoryRecorder | None = None,
) -> AsyncIterator[ScopeHost]:
    """A scope host whose actors and network run in a nursery for the block's duration.

    ``clock`` is the store's clock: UTC wall time (``WallClock``) unless given one. A test or a
    simulation on virtual time passes ``StoreClock()`` (virtual time plus a fixed epoch).

    ``rng`` is the host's random source, which drives use unless given their own (run ids, lease
    owners, retry jitter): seeded from the operating system unless given, so that two processes
    on one directory never mint the same ids. A test or a simulation that must replay passes a
    seeded one, as it passes its clock.

    ``database`` builds each actor's store over its connection: ``ScopeDatabase`` unless a test or
    a simulation wants a deliberately broken one, to show that a check notices.
    ``jump_clock=True`` lets the host's network move a ``MockClock(autojump_threshold=0)`` itself
    (see ``Network``): faster, and only right when nothing else waits for all tasks to block.
    ``observe_direct=False`` keeps calls over the host's own zero-latency link (``DIRECT_LINK``)
    from the observer, before anything is described for it; a set of operation names observes
    only those over that link.

    ``idle_ms`` closes a scope's database once nobody has called it for that long (host time);
    ``max_open_scopes`` caps the scopes open at once, closing the least recently used idle ones
    first. A closed scope reopens on its next call. See ``scopehost._retirement``.

    ``durable`` (a directory host): each reply waits until the write it follows is synced to disk,
    as a Durable Object's output gate holds it (see ``scopehost._gate``). ``durable=False`` lets
    replies leave at commit: faster, and the last commits before a power loss may be lost.

    ``record`` (a folder, or a ``HistoryRecorder``) writes the host's history there as it happens,
    for ``python -m sims check``; the ``RecordingJobDriver``s built on the host write theirs into
    it too (docs/recording.md). It is the host's observer: give one or the other.
    """
    made: HistoryRecorder | None = None
    if record is not None:
        if observer is not None:
            raise ValueError(
                "record= and observer= were both given; a recording host's observer is its "
                "history: read the history file, or record without it and observe"
            )
        if isinstance(record, HistoryRecorder):
            observer = record
        else:
            # Made here from a folder: the host's to close (one given is the giver's).
            observer = made = HistoryRecorder(record)
    path = None if directory is None else _scope_directory(directory)
    if jump_clock:
        check_jumpable_clock()
    check_idle_ms(idle_ms)
    check_max_open(max_open_scopes)
    if not isinstance(durable, bool):
        raise ValueError(
            f"durable is {durable!r}; pass True (replies wait until their writes are on disk) or "
            "False (replies at commit, faster, and the last commits may be lost in a power cut)"
        )
    async with trio.open_nursery() as nursery:
        host = ScopeHost(
            nursery,
            path,
            clock=clock if clock is not None else WallClock(),
            observer=observer,
            operations=operations,
            rng=rng if rng is not None else random.Random(),
            database=database,
            jump_clock=jump_clock,
            observe_direct=observe_direct,
            idle_ms=idle_ms,
            max_open_scopes=max_open_scopes,
            durable=durable,
        )
        nursery.start_soon(host.network.serve, name="network")
        if host.gate is not None and host.gate.threaded:
            nursery.start_soon(host.gate.serve, name="output gate")
        try:
            yield host
        finally:
            # Every call gets an answer: none reaches a scope from now on; the actors answer the
            # calls they hold as they end (``HostClosed``), the gate the replies it holds
            # (``UnsyncedWrite``); and the network runs what is left on its timer for the callers
            # outside this block, whose tasks are not cancelled with it.
            host._begin_closing()
            nursery.cancel_scope.cancel()
            host.network.close()
    host._close()
    if made is not None:
        made.close()


def _scope_directory(directory: str | Path) -> Path:
    """The host's directory, resolved once: a relative one would follow the process's working
    directory, and a later chdir would turn every known scope into a lost one and create new files
    elsewhere. Resolved as SQLite names a file, so every message spells one path."""
    if isinstance(directory, str) and not directory.strip():
        # Path("") is ".": an unset setting would quietly put the scopes wherever the process runs.
        raise ValueError(
            f"directory {directory!r} is empty; pass the directory to keep the scopes' files in "
            '("." for the working directory), or None to keep them in memory'
        )
    path = Path(directory)
    if not path.exists():
        raise ValueError(f"directory {str(path)!r} does not exist; create it or pass None")
    if not path.is_dir():
        raise ValueError(
            f"directory {str(path)!r} is a file, not a directory; pass the directory to keep the "
            "scopes' files in, or None to keep them in memory"
        )
    return path.resolve()


def _stale_log_warning(path: Path) -> str:
    """What to say when the lost file's write-ahead log outlived it (a crash left it there).
    SQLite applies a ``-wal`` to whatever file it finds at the path, so a copy put back beside
    the lost file's log would open with the lost file's pages written into it."""
    wal = path.with_name(path.name + "-wal")
    if not wal.exists():
        return ""
    return (
        f" (the lost file's write-ahead log {wal} is still there: remove it and its -shm file, "
        "or replace it with the restored copy's own, before putting the file back, since SQLite "
        "would apply it to whatever file is put back)"
    )
