"""Failures of the wire and of the scope's lifetime, as distinct from the kernel's refusals.

The transport reports; it never decides. A caller that gets one of these does not know more than
the error says: a dropped request did not run, a dropped reply did (its write is committed), and a
call queued behind an eviction did not.
"""

from __future__ import annotations

from driver import SYSTEM_DOOR_WAIT


class ScopeHostError(Exception):
    """Base of every failure the scope host reports."""


class TransportError(ScopeHostError):
    """The RPC leg failed; what happened at the scope depends on which leg."""


class RequestDropped(TransportError):
    """The request never reached the scope: the operation did not run."""


class RequestAbandoned(TransportError):
    """The caller gave up on the request; the wire may still deliver it later, and it may run."""


class ReplyDropped(TransportError):
    """The operation ran and committed at the scope; its reply was lost on the way back."""


class ScopeEvicted(ScopeHostError):
    """The scope's actor was aborted while this call waited in its queue; the call did not run."""


class ScopeUnavailable(ScopeHostError):
    """The scope cannot serve (its database could not be opened, or may not be trusted); the
    call did not run."""


class ScopeFileGone(ScopeUnavailable):
    """The scope's database file was deleted (or replaced) while the scope had it open, or is
    missing though the host's directory held it before; the call did not run, rather than write
    into a file nobody can open again or start the scope over empty. ``ScopeHost.forget`` accepts
    the loss."""


class ScopeFileForeign(ScopeUnavailable):
    """The file at the scope's path records another scope (copied into place, or the one file two
    ids share on a file system that ignores case); the call did not run."""


class ScopeSyncFailed(ScopeUnavailable):
    """A sync of the scope's file failed, so the scope serves nothing until it is reopened and its
    file checked; the call did not run.

    A failed ``fsync`` may have dropped the pages it could not write while reporting the loss only
    once (Linux marks them clean, and the next sync succeeds): a write acknowledged after it could
    sit in the log behind frames that never reached the disk, and SQLite's recovery after a power
    cut stops at the first of those. So the scope acknowledges nothing more. ``ScopeHost.evict``
    (or an idle retirement) closes it; the next call reopens it, checks the file (``PRAGMA
    integrity_check``), folds the log into the file and syncs it, and only then serves again. A
    file that fails the check is refused with this error too, naming what the check found."""


class ScopeFileChanged(ScopeUnavailable):
    """The scope's file (or its log) was written by something other than its host while the scope
    had it open: copied over in place, rolled back to an older copy, or another scope's file put
    there. The scope closed without folding its log into the file, and refuses every call (they
    did not run) until ``ScopeHost.evict`` says the file now there is the one to open; that file
    is then checked before it serves."""


class ScopeDiskFailed(ScopeHostError):
    """SQLite reported that the scope's file failed under an operation (an I/O error, a full
    disk, a corrupt page): whether that operation was written is not known, and the scope serves
    no further call (they did not run) until ``ScopeHost.evict`` says the disk is sound; the next
    call then reopens the file."""


class UnsyncedWrite(ScopeHostError):
    """The operation committed, but the output gate could not make it durable (the sync failed,
    or the host closed first): it may or may not survive a power cut."""


class HostClosed(ScopeHostError):
    """The scope host has shut down (or was shutting down as the call came): no scope can be
    reached through it any more. The call did not run, unless the message says its reply was on
    the wire."""


def host_closed(scope_id: str, operation: str) -> HostClosed:
    """A call that found its host closed: it never reached the scope."""
    return HostClosed(
        f"{operation} on scope {scope_id!r}: the scope host is closed; the operation did not run"
    )


class DoorHeld(ScopeHostError):
    """The system door of a module on a scope is held: "not now", never "no"."""

    reason = SYSTEM_DOOR_WAIT
