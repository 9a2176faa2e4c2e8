"""The output gate: a directory scope's reply leaves only once the write it follows is durable.

A Durable Object's output gate holds every message it sends until the writes made before it are
confirmed on disk. This is the same rule for a directory host. Each scope file commits in WAL mode
with ``synchronous=NORMAL``: a commit appends its frames to the write-ahead log without syncing it,
which a crash of the process never undoes (the operating system holds the pages), but a power loss
or an OS crash may. So the reply of an operation that changed rows waits until the log is synced;
a reply of an operation that changed nothing waits only if an earlier change of its scope is not yet
synced (it may show that change), and otherwise leaves at once.

Group commit. Under the wall clock the syncs run in worker threads, one batch at a time: every
reply held while a batch syncs joins the next one, and that one batch syncs each scope file it
covers once, however many transactions finished meanwhile, so the cost under concurrency stays
near that of ``synchronous=NORMAL``. The event loop hands a whole batch to one worker thread,
which spreads its files over a pool of threads (a disk serves concurrent syncs together); a task
and a hand-off per file cost the loop 35 to 50 µs per run on ``bench/bench_gate_load.py``'s load.
The actors keep serving while a batch syncs (still one message at a time each); only replies
wait. Across scopes, a caller acts on a reply only once it is
released, so a write it then makes in another scope (a parent run pointing at a child's) can never
be durable while the write it depends on is not.

Under a virtual clock (a test's ``MockClock``, the simulator's ``VirtualClock``) no thread may
run: Trio would see the thread's wait as idleness and jump virtual time. There the actor syncs
inline, right after the commit and before the reply, which delays nothing in virtual time and
keeps every trace byte-identical to one in memory.

The first sync of a file opened by this host also syncs the directory, so that a file and its log
created since the last power loss are found again by name. The database file itself is never
opened here: SQLite syncs it every time it writes it (as it creates it, before the host lowers
``synchronous``, and after each checkpoint), and opening and closing a descriptor of a file SQLite
holds open drops SQLite's locks on it (see ``_descriptors``). The log carries no lock.

A failed sync taints its scope. Linux reports a failed writeback once and marks the pages it could
not write clean, so the next sync of the file succeeds though they never reached the disk; a write
acknowledged after that would sit in the log behind frames SQLite's recovery stops at. So the
replies the failed sync held answer ``UnsyncedWrite``, and from then on the scope acknowledges
nothing: its actor refuses every call with ``ScopeSyncFailed`` (see ``_recheck``), and a reply
still held is answered ``UnsyncedWrite``, whatever a later sync says. The other scopes go on.

``open_scope_host(directory, durable=False)`` turns the gate off: replies leave at commit, as
before, for tests and simulations that want speed more than power-loss safety.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

import trio

from ._errors import UnsyncedWrite
from ._link import LinkOutcome

if TYPE_CHECKING:
    from ._actor import Message


#: How many scope files one batch syncs at once.
SYNC_THREADS = 16


class Syncer(Protocol):
    """How a file (or directory) is made durable: the disk's one promise the gate relies on.
    ``sync_path`` unless a simulation swaps the disk (``OutputGate.sync``) to learn what a power
    loss would keep."""

    def __call__(self, path: str, *, missing_ok: bool = False) -> None: ...


def sync_path(path: str, *, missing_ok: bool = False) -> None:
    """fsync one file (or directory) by its path; a log not created yet has nothing to sync."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ScopeFiles:
    """One open scope file's durability: how many row changes its connection made, and how many
    of them a sync has covered."""

    __slots__ = (
        "_first",
        "_uncounted",
        "changes",
        "database",
        "directory",
        "failed",
        "held",
        "log",
        "synced",
        "syncer",
    )

    def __init__(self, database: str, syncer: Syncer = sync_path) -> None:
        self.database = database
        self.syncer = syncer
        #: The error of a sync of these files that failed: the scope acknowledges nothing more.
        self.failed: OSError | None = None
        self.log = database + "-wal"
        self.directory = os.path.dirname(database)
        #: The connection's ``total_changes`` after its last operation (set by the actor).
        self.changes = 0
        #: The ``changes`` the last completed sync covered (-1: never synced by this host).
        self.synced = -1
        #: Replies of this scope held by the gate right now.
        self.held = 0
        self._first = True
        #: Operations that may have written what ``total_changes`` does not count.
        self._uncounted = 0

    def note(self, total_changes: int, *, may_write: bool) -> None:
        """An operation ran; ``total_changes`` is its connection's count after it."""
        if may_write:
            self._uncounted += 1
        self.changes = total_changes + self._uncounted

    @property
    def unsynced(self) -> bool:
        return self.changes != self.synced

    def sync(self) -> None:
        """Make every commit so far durable (blocking: a worker thread's work, or inline)."""
        self.syncer(self.log, missing_ok=True)
        if self._first:
            # The file and its log may be new: their names must survive a power loss too.
            self.syncer(self.directory)
            self._first = False


class _Batch:
    __slots__ = ("marks", "replies")

    def __init__(self) -> None:
        #: Each scope the batch syncs, with the ``changes`` it covers (read as the batch starts).
        self.marks: dict[ScopeFiles, int] = {}
        self.replies: list[tuple[ScopeFiles, Message, LinkOutcome]] = []


class OutputGate:
    """Holds directory scopes' replies until their writes are durable. ``threaded``: sync in a
    worker thread, in batches (group commit, under the wall clock); otherwise inline."""

    def __init__(self, *, threaded: bool) -> None:
        self.threaded = threaded
        #: How the scope files opened from now on are synced: the disk. A simulation swaps it
        #: for one that also notes what each sync made durable, to cut the power at will.
        self.sync: Syncer = sync_path
        #: The batch a worker thread is syncing right now, and the one that fills meanwhile.
        self._syncing: _Batch | None = None
        self._next = _Batch()
        self._wake = trio.Event()
        #: How many syncs of scope files ran, and in how many batches (for tests and benches).
        self.file_syncs = 0
        self.batches = 0
        #: The worker threads one batch syncs its files in at once: a disk (and a journaling
        #: file system) serves concurrent syncs together, where one after another each waits.
        #: Started with the first batch of more than one file, ended with the loop.
        self._pool: ThreadPoolExecutor | None = None
        #: The scope files (by path) a sync of failed, with its error, until a reopening checked
        #: them: they outlive the actor whose sync failed (see ``_recheck``).
        self.tainted: dict[str, OSError] = {}
        #: Set once the group-commit loop has ended with its host: no batch will run again.
        self.closed = False

    def taint(self, files: ScopeFiles, error: OSError) -> None:
        """A sync of ``files`` failed: nothing of its scope is acknowledged until it reopens."""
        if files.failed is None:
            files.failed = error
        self.tainted[files.database] = files.failed

    def release(self, files: ScopeFiles, message: Message, outcome: LinkOutcome) -> None:
        """The actor ran ``message`` (and noted it in ``files``): settle it now if nothing it may
        show is unsynced, or hold it until a sync covers its scope's changes."""
        if files.failed is not None:
            # Ran before its actor heard of the failure: whatever it showed may not be durable.
            message.settle(_unsynced(files, message, outcome, files.failed))
            return
        if self.closed:
            # Ran as the host closed (a heavy operation's thread returned late): no batch will
            # sync it, and a reply held for one would wait for ever.
            unsynced = files.unsynced or files.held
            message.settle(_unsynced(files, message, outcome, None) if unsynced else outcome)
            return
        if not self.threaded:
            if files.unsynced:
                try:
                    files.sync()
                except OSError as error:
                    self.taint(files, error)
                    message.settle(_unsynced(files, message, outcome, error))
                    return
                files.synced = files.changes
                self.file_syncs += 1
            message.settle(outcome)
            return
        if not files.unsynced and not files.held:
            message.settle(outcome)
            return
        files.held += 1
        syncing = self._syncing
        if syncing is not None and syncing.marks.get(files) == files.changes:
            # Everything this reply can show is in the sync under way: it leaves with that batch.
            syncing.replies.append((files, message, outcome))
            return
        self._next.replies.append((files, message, outcome))
        self._next.marks[files] = -1  # its mark is read when the batch starts
        self._wake.set()

    async def serve(self) -> None:
        """The group-commit loop (threaded mode): one batch at a time."""
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                batch, self._next = self._next, _Batch()
                for files in batch.marks:
                    batch.marks[files] = files.changes
                self._syncing = batch
                # A tainted scope's files are not synced again: a sync that succeeds after one
                # that failed proves nothing about the pages the failed one dropped.
                sound = [files for files in batch.marks if files.failed is None]
                failed = await self._sync_all(sound)
                self._syncing = None
                self.batches += 1
                self.file_syncs += len(sound)
                for files, failure in failed.items():
                    self.taint(files, failure)
                for files, mark in batch.marks.items():
                    if files.failed is None:
                        files.synced = max(files.synced, mark)
                for files, message, outcome in batch.replies:
                    files.held -= 1
                    error = files.failed
                    message.settle(
                        outcome if error is None else _unsynced(files, message, outcome, error)
                    )
        finally:
            # The host is closing: nobody may wait for a sync that will never run, and nobody
            # may be told a write is durable that no sync covered.
            self.closed = True
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            for unsynced in (self._syncing, self._next):
                if unsynced is None:
                    continue
                for files, message, outcome in unsynced.replies:
                    files.held -= 1
                    message.settle(_unsynced(files, message, outcome, None))
                unsynced.replies.clear()

    async def _sync_all(self, scopes: list[ScopeFiles]) -> dict[ScopeFiles, OSError]:
        """Sync every file of a batch; the error of each that failed.

        The event loop hands the whole batch to one worker thread, which spreads the syncs over
        the pool's threads and waits for them all: each hand-off from the loop (``to_thread``)
        costs it tens of microseconds of its own time, and one per file, each in a task of its
        own, cost about 1.8 ms of the loop's time per batch of fifty files (0.1 ms now)."""
        if not scopes:
            return {}
        if len(scopes) == 1:
            return await trio.to_thread.run_sync(_sync_each, scopes, None)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="scope-sync")
        return await trio.to_thread.run_sync(_sync_each, scopes, self._pool)


def _unsynced(
    files: ScopeFiles, message: Message, outcome: LinkOutcome, error: OSError | None
) -> LinkOutcome:
    """The reply of a write that committed but is not known to be durable: an error, since the
    caller must not act as if it were (it may or may not survive a power cut). It names the file
    and what to do: read the write back once the scope is sound, rather than assume either way."""
    if error is None:
        why = "the scope host closed before it was synced"
        then = "read it back once a host has the scope open again"
    else:
        why = f"the scope file could not be synced ({type(error).__name__}: {error})"
        then = (
            "the scope serves nothing more until the disk is sound and evict() reopens and "
            "checks it; then read the write back"
        )
    return LinkOutcome(
        None,
        UnsyncedWrite(
            f"{message.operation} committed, but {why}; it may be lost in a power cut "
            f"(file {files.database}): {then}"
        ),
        outcome.executed_at,
    )


def _sync_each(
    scopes: list[ScopeFiles], pool: ThreadPoolExecutor | None
) -> dict[ScopeFiles, OSError]:
    """In a worker thread: sync each of ``scopes`` (in ``pool``'s threads at once, if given)."""
    failed: dict[ScopeFiles, OSError] = {}
    if pool is None:
        for files in scopes:
            try:
                files.sync()
            except OSError as error:
                failed[files] = error
        return failed
    for files, done in [(files, pool.submit(files.sync)) for files in scopes]:
        problem = done.exception()
        if isinstance(problem, OSError):
            failed[files] = problem
        elif problem is not None:
            raise problem
    return failed


def runs_on_the_wall_clock() -> bool:
    """Whether this Trio run keeps real time (its own ``SystemClock``), where a worker thread's
    wait is just a wait; under any other clock a thread would let virtual time jump."""
    clock = type(trio.lowlevel.current_clock())
    return clock.__name__ == "SystemClock" and clock.__module__.startswith("trio.")
