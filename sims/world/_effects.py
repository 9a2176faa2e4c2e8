"""Effects: what a step body does to the world, recorded where the checks can see it.

A step body that changes something outside the run (charges a card, sends a mail, writes a row)
records that it did, with :func:`record_effect`, inside the step. The record is a row in the run's
scope (the scope's ``record`` operation), so it lands even when the step's own record is lost, and
it is in the trace: the built-in checks tell an effect that landed twice inside the spec's
at-least-once window (its step was never recorded) from a completed step that ran again, and a
user's check can count effects with :func:`effects_in`.

:func:`record_effect_once` is the idempotent effect, as a provider that dedupes by key makes it:
the scope's ``record_once`` looks for the key and writes only if it is new, in one transaction, so
a body that runs twice (or two passes racing) lands the effect once. Every count here reads it the
same way as a ``record`` row: it counts when it wrote, not when it found the key already there.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from driver import JobPassContext

from .._trace import EFFECT_KIND, Trace, effect_recorded, service_effect


def effect_key(run_id: str, step: str) -> str:
    """The key an effect of ``step`` in run ``run_id`` is recorded under: ``RUN/STEP``."""
    return f"{run_id}/{step}"


async def record_effect(ctx: JobPassContext, step: str, *, data: Any = None) -> int:
    """Record, from inside the body of step ``step``, that the body caused its effect; returns the
    effect row's number. ``data`` (JSON-safe) is stored with it. Call it once per effect, where
    the real effect would happen, so that a body that runs twice records twice."""
    door = await ctx.scope()
    args: dict[str, Any] = {"kind": EFFECT_KIND, "key": effect_key(ctx.run.id, step)}
    if data is not None:
        args["data"] = data
    seq: int = await door.invoke("record", args)
    return seq


async def record_effect_once(ctx: JobPassContext, step: str, *, data: Any = None) -> bool:
    """Record, from inside the body of step ``step``, the body's effect unless it is already
    recorded; True when this call recorded it, False when an earlier run of the body had.

    One scope call, one transaction: the look for ``RUN/STEP`` and the write cannot be split by
    another pass's write, as reading ``items`` and then calling :func:`record_effect` can. Make the
    real effect conditional on the answer only where the provider itself dedupes (an idempotency
    key): this row stands for that provider's own record."""
    door = await ctx.scope()
    args: dict[str, Any] = {"kind": EFFECT_KIND, "key": effect_key(ctx.run.id, step)}
    if data is not None:
        args["data"] = data
    recorded: bool = await door.invoke("record_once", args)
    return recorded


def effects_in(trace: Trace) -> Counter[str]:
    """How many times each effect landed in the world of ``trace``, by ``RUN/STEP`` key (an
    effect whose reply was lost still landed, and is counted). An effect is a row of kind
    ``effect`` written by :func:`record_effect`, or by :func:`record_effect_once` when its key was
    new, or a service call that changed its service's state, keyed ``RUN/SERVICE.OPERATION``; the
    built-in ``effects`` check counts the same (``sims._trace.effect_recorded`` and
    ``service_effect`` are the one definition)."""
    return Counter({key: len(times) for key, times in effects_at(trace).items()})


def effects_at(trace: Trace) -> dict[str, list[float]]:
    """When each effect landed in the world of ``trace`` (virtual ms, in order), by ``RUN/STEP``
    key: the times a check gives its findings (``UserFinding(at_ms=...)``), so that the page
    marks the second effect where it landed."""
    sent: dict[tuple[str, int], Any] = {}
    landed: dict[str, list[float]] = {}
    for event in trace.of("rpc.send", "rpc.exec", "svc.exec"):
        if event["ev"] == "svc.exec":
            service_key = service_effect(event)
            if service_key is not None:
                landed.setdefault(service_key, []).append(event["t"])
            continue
        where = (event["link"], event["seq"])
        if event["ev"] == "rpc.send":
            if event.get("op") == "invoke":
                sent[where] = event.get("args")
            continue
        key = effect_recorded(sent.pop(where, None), event.get("result"))
        if key is not None:
            landed.setdefault(key, []).append(event["t"])
    return landed
