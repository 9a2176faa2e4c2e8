"""What a service's operation may do besides answer: read the clock, work later, call back.

A real provider lives in time. A capture runs 3.5 s after the charge; a settlement at a cutoff; an
idempotency key is forgotten a day later; a webhook tells the shop a charge went through. So in an
operation (and in the work it schedules):

- :func:`now_ms` is the world's clock, in ms of virtual time (the same clock as the world's
  ``trio.current_time()``, which it reads in ms);
- :func:`later` schedules the service's OWN work: ``work(state)`` runs on the service's state
  ``after_ms`` from now, traced as the service's event (``svc.own``), held while the service is
  down (an outage strikes it as it strikes calls: it runs once the outage ends), and run before the
  world ends, however far off it is (the virtual clock jumps there);
- :func:`call_back` sends a callback (a webhook) into the job's world, to an endpoint the scenario
  added (``World.add_endpoint``), with legs and faults of its own (:mod:`._callbacks`).

What an operation schedules or sends is kept only when it ran: a refusal or a decline undoes its
state, and its work and callbacks with it, as a provider's rolled-back transaction sends nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

if TYPE_CHECKING:
    from ._services import Services

#: A service's own work: ``work(state)``, run on the service's state when it falls due.
OwnWork: TypeAlias = Callable[[Any], object]


@attrs.define
class Running:
    """The service whose code runs in this task, and what it asked for meanwhile (kept only
    when the operation ran)."""

    services: Services
    service: str
    #: What it is: an operation ``SERVICE.OPERATION`` or its own work ``SERVICE:NAME``.
    what: str
    #: Work to schedule: (after_ms, name, work).
    work: list[tuple[float, str, OwnWork]] = attrs.field(factory=list)
    #: Callbacks to send: (endpoint, payload).
    callbacks: list[tuple[str, Any]] = attrs.field(factory=list)


_RUNNING: ContextVar[Running | None] = ContextVar("sims_running_service", default=None)


@contextmanager
def running(services: Services, service: str, what: str) -> Iterator[Running]:
    """Run a service's code (an operation, or its own work) as ``service``."""
    now = Running(services, service, what)
    token = _RUNNING.set(now)
    try:
        yield now
    finally:
        _RUNNING.reset(token)


def _running(what: str) -> Running:
    found = _RUNNING.get()
    if found is None:
        raise RuntimeError(
            f"{what} is for a service's own code: call it inside one of its operations "
            "(fn(state, args)) or inside work it scheduled with later(); a handler calls a "
            "service with ctx.call_service(...) instead"
        )
    return found


def now_ms() -> float:
    """The world's clock, in ms of virtual time: in a service's operation, in its own work, or
    anywhere else a world runs (a scenario, a handler in the world)."""
    from ._services import CURRENT_WORLD  # here: the services import this module

    world = CURRENT_WORLD.get()
    if world is None:
        raise RuntimeError(
            "now_ms() reads a simulated world's clock: call it while a world runs (in a service's "
            "operation, its own work, or a scenario)"
        )
    return round(world.now_ms(), 3)


def later(after_ms: float, work: OwnWork, *, name: str) -> None:
    """Schedule the calling service's own ``work(state)`` ``after_ms`` from now (a capture, a
    settlement, a key forgotten), traced as ``svc.own`` under ``name``."""
    running_now = _running("later()")
    number = isinstance(after_ms, int | float) and not isinstance(after_ms, bool)
    if not number or not 0 <= after_ms < math.inf:
        raise ValueError(
            f"later(after_ms={after_ms!r}, ...) in {running_now.what}: give a finite number of "
            "ms >= 0"
        )
    if not callable(work):
        raise ValueError(
            f"later(..., work={work!r}) in {running_now.what}: give a function work(state) that "
            "does the service's own work on its state"
        )
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"later(..., name={name!r}) in {running_now.what}: name the work with a non-empty "
            "str, such as 'capture' (the trace and the story say it)"
        )
    running_now.work.append((float(after_ms), name, work))


def call_back(endpoint: str, payload: Any = None) -> None:
    """Send a callback (a webhook) from the calling service to the world's ``endpoint`` with
    ``payload`` (JSON), once the operation or work that sends it has run."""
    running_now = _running("call_back()")
    if not isinstance(endpoint, str) or not endpoint:
        raise ValueError(
            f"call_back(endpoint={endpoint!r}, ...) in {running_now.what}: name the endpoint "
            "the scenario added with world.add_endpoint(NAME, fn, drive=...)"
        )
    running_now.callbacks.append((endpoint, payload))
