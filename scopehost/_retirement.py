"""When a host closes idle scopes: after an idle time, and least recently used first at a cap.

A Durable Object that nobody calls is hibernated by its platform; a host holding thousands of
scopes would otherwise keep a database connection (three file handles in WAL mode) and a task per
scope it ever touched. Two limits, each optional:

* ``idle_ms``: an actor whose queue has been empty that long (host time: the virtual clock in a
  simulation) retires. The check is one entry in the host's network per idle stretch, so an actor
  in steady use costs nothing, and nothing is timed at all when the limit is unset.
* ``max_open``: before a new actor starts past the cap, the least recently used idle actors
  retire. An actor with messages waiting is never closed: if every open scope is busy, the new one
  opens anyway, and as each actor drains its queue while the host is over the cap, the least
  recently used idle ones retire until it is back at the cap.

Retiring is invisible to callers: the next call to a retired scope starts a fresh actor on the same
database, as after an eviction, but nothing queued is failed (nothing is queued). If the database's
file was deleted meanwhile, that call fails with ``ScopeFileGone`` instead of creating an empty one
(see ``scopehost._known``).
"""

from __future__ import annotations

import errno
import math
import os
import resource
from typing import TYPE_CHECKING

import trio

from ._errors import ScopeUnavailable

if TYPE_CHECKING:
    from ._actor import ScopeActor
    from ._network import Network


def check_idle_ms(idle_ms: object) -> float | None:
    if idle_ms is None:
        return None
    if (
        isinstance(idle_ms, bool)
        or not isinstance(idle_ms, int | float)
        or not (idle_ms > 0 and math.isfinite(idle_ms))
    ):
        raise ValueError(
            f"idle_ms={idle_ms!r}; pass the ms an idle scope stays open (a finite number > 0), "
            "or None to keep idle scopes open"
        )
    return float(idle_ms)


def check_max_open(max_open_scopes: object) -> int | None:
    if max_open_scopes is None:
        return None
    if type(max_open_scopes) is not int or max_open_scopes < 1:
        raise ValueError(
            f"max_open_scopes={max_open_scopes!r}; pass a whole number >= 1, or None for no cap"
        )
    return max_open_scopes


class Retirement:
    """The host's policy for closing idle scopes (see the module's docstring)."""

    def __init__(
        self,
        actors: dict[str, ScopeActor],
        network: Network,
        *,
        idle_ms: float | None,
        max_open: int | None,
    ) -> None:
        #: The host's open actors, oldest use first when ``max_open`` is set.
        self._actors = actors
        self._network = network
        self.idle_ms = idle_ms
        self.max_open = max_open
        #: Actors with an idle check in the network's heap, and when each was last busy.
        self._watched: dict[ScopeActor, float] = {}
        self.retired = 0

    def used(self, scope_id: str) -> None:
        """``scope_id`` was just called: it becomes the most recently used."""
        if self.max_open is not None:
            self._actors[scope_id] = self._actors.pop(scope_id)

    @property
    def watches_idle(self) -> bool:
        """Whether actors must report draining their queue (an idle time, or a cap to get back
        under once busy scopes opened past it)."""
        return self.idle_ms is not None or self.max_open is not None

    def make_room(self) -> None:
        """Before a new actor starts: retire least recently used idle ones down below the cap."""
        if self.max_open is not None and len(self._actors) >= self.max_open:
            self._retire_down_to(self.max_open - 1)

    def _retire_down_to(self, count: int) -> None:
        """Retire least recently used idle actors until at most ``count`` are open (or no idle
        one is left: a busy actor is never closed)."""
        excess = len(self._actors) - count
        retiring = []
        for scope_id, actor in self._actors.items():
            if excess == 0:
                break
            if actor.closed or not actor.busy:
                retiring.append(scope_id)
                excess -= 1
        for scope_id in retiring:
            actor = self._actors[scope_id]
            if actor.closed or actor.retire():
                del self._actors[scope_id]
                self.retired += 1

    def idle(self, actor: ScopeActor) -> None:
        """``actor`` drained its queue (called in its task, or in the network's when it served a
        request off the wire). It may be retired here, itself included."""
        if self.max_open is not None and len(self._actors) > self.max_open:
            # Busy scopes opened past the cap: now that one has drained, get back to it.
            self._retire_down_to(self.max_open)
            if actor.closed:
                return
        if self.idle_ms is None:
            return
        now = trio.current_time()
        if actor not in self._watched:
            self._network.at(now + self.idle_ms / 1000.0, lambda: self._check(actor))
        self._watched[actor] = now

    def _check(self, actor: ScopeActor) -> None:
        assert self.idle_ms is not None
        since = self._watched.pop(actor)
        if actor.closed or self._actors.get(actor.scope_id) is not actor:
            return
        due = since + self.idle_ms / 1000.0
        if actor.busy or trio.current_time() < due:
            # Used since (it will report idle again when it drains) or not idle long enough.
            if not actor.busy:
                self._watched[actor] = since
                self._network.at(due, lambda: self._check(actor))
            return
        if actor.retire():
            del self._actors[actor.scope_id]
            self.retired += 1


def out_of_file_handles(
    scope_id: str, max_open: int | None, others: int
) -> ScopeUnavailable | None:
    """The error to raise when opening ``scope_id``'s database failed for want of file handles,
    or None when the process still has some (the failure was something else). ``others``: how
    many other scopes have their file open."""
    # SQLite closed what it had opened before it failed, so a handle or two may be free again:
    # a scope needs three (the database, its WAL and its shared memory), so probe for three.
    probes: list[int] = []
    try:
        for _ in range(3):
            probes.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as error:
        if error.errno not in (errno.EMFILE, errno.ENFILE):
            return None
    else:
        return None
    finally:
        for probe in probes:
            os.close(probe)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if max_open is None:
        why = "no max_open_scopes is set"
        remedy = "pass open_scope_host a max_open_scopes well under a third of the limit"
    else:
        # A busy scope may open past the cap, but retires as soon as it drains: at the cap,
        # the cap itself is what holds too many.
        why = f"max_open_scopes is {max_open}, and {others} other scopes have their file open"
        remedy = (
            "lower max_open_scopes to well under a third of the limit (the process's other "
            "files count too)"
        )
    return ScopeUnavailable(
        f"scope {scope_id!r} cannot open its database: the process is out of file handles "
        f"(limit {soft}; a scope in WAL mode holds three, and {why}); {remedy}, or raise the "
        "limit (ulimit -n)"
    )
