"""The fence round a killed drive: a crash is a kill, not a cancellation.

A killed process runs none of its ``finally:`` or ``except`` blocks. Python cannot stop a
cancelled coroutine's from running, so the world fences them instead: each drive lives as a
series of INCARNATIONS (one per life between crashes), every task of a tick runs as the
incarnation that started it (a context variable, which the tasks it spawns inherit), and a crash
marks the incarnation killed before it cancels its work. From then on, whatever the dead
incarnation's code still runs never reaches the world, as a dead process's connection would not:

- a scope call it makes fails at once with :class:`DriveKilled`, never sent (``fault.fence``,
  leg ``request``);
- a reply still in flight to it is not delivered: the call raises :class:`DriveKilled` instead
  (``fault.fence``, leg ``reply``); the operation ran in the scope, as any dropped reply's did;
- an upstream call it makes is refused the same way, and so is a call to one of the world's
  services (``_services``); a service's reply in flight to it is not delivered.

A restarted drive's ticks run as a new, living incarnation. An ordinary cancellation (a
``move_on_after`` in a handler, a drive's own deadline) kills no incarnation, so its ``finally:``
reaches the world as before. ``DriveKilled`` is a ``BaseException``, like Trio's ``Cancelled``:
a handler's ``except Exception`` does not swallow the kill.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import attrs
import trio

from scopehost import Link

if TYPE_CHECKING:
    from scopehost import ScopeHost

    from .._trace import Trace


class DriveKilled(BaseException):
    """What a killed drive's leftover code gets when it reaches for the world: its process is
    gone, so the call never leaves it (or its answer never arrives)."""


@attrs.define(eq=False)
class Incarnation:
    """One life of a drive, from a (re)start to the crash that kills it."""

    drive: str
    number: int
    killed: bool = False


_LIVING_AS: ContextVar[Incarnation | None] = ContextVar("sims_incarnation", default=None)


@contextmanager
def living_as(incarnation: Incarnation) -> Iterator[None]:
    """Run the block (and every task it spawns) as ``incarnation``."""
    token = _LIVING_AS.set(incarnation)
    try:
        yield
    finally:
        _LIVING_AS.reset(token)


def current_incarnation() -> Incarnation | None:
    """The incarnation the calling task runs as (None outside any drive's work)."""
    return _LIVING_AS.get()


def killed_incarnation() -> Incarnation | None:
    """The calling task's incarnation if it was killed; None for a living one or none at all."""
    incarnation = _LIVING_AS.get()
    return incarnation if incarnation is not None and incarnation.killed else None


def refuse_if_killed(what: str) -> None:
    """Raise :class:`DriveKilled` when the calling task belongs to a killed incarnation."""
    dead = killed_incarnation()
    if dead is not None:
        raise DriveKilled(_killed(dead, f"{what} never left it"))


def only_kills(error: BaseException) -> bool:
    """Whether ``error`` is the kill (with the cancellation that carries it), and nothing else."""
    if isinstance(error, DriveKilled | trio.Cancelled):
        return True
    if isinstance(error, BaseExceptionGroup):
        return all(only_kills(inner) for inner in error.exceptions)
    return False


def _killed(incarnation: Incarnation, what: str) -> str:
    return f"drive {incarnation.drive} was killed (incarnation {incarnation.number}): {what}"


class FencedLink(Link):
    """A drive's link, which carries nothing for a killed incarnation of the drive."""

    def __init__(self, *, trace: Trace, **link: Any) -> None:
        super().__init__(**link)
        self._trace = trace

    async def call(
        self, host: ScopeHost, scope_id: str, operation: str, args: tuple[Any, ...]
    ) -> Any:
        dead = killed_incarnation()
        if dead is not None:
            self._trace.record(
                "fault.fence", {"drive": dead.drive, "op": operation, "leg": "request"}
            )
            raise DriveKilled(_killed(dead, f"its {operation} call never left it"))
        sent = self._seq + 1  # the number the call is about to take (``Link.call`` counts)
        value = await super().call(host, scope_id, operation, args)
        dead = killed_incarnation()
        if dead is not None:
            # Killed while the call was in flight, and still running (a shielded block): the
            # answer reaches a process that is gone.
            self._trace.record(
                "fault.fence",
                {"drive": dead.drive, "op": operation, "seq": sent, "leg": "reply"},
            )
            raise DriveKilled(_killed(dead, f"the reply to its {operation} #{sent} came too late"))
        return value
