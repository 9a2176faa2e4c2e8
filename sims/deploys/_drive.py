"""The check's world: the sources' scopes restored, the new code registered, and each run in
flight driven through its next pass, and its retry when that pass fails, with no faults.

One drive ticks a scope only when a run it watches is due: at once for a run that was waiting
for its next pass, at the end of its lease for a run a killed process held (the lease keeps
what it had left, ``World.restore``), at its due time for a run backing off after a failed pass.
A run is watched until the new code has run a pass over it that did not fail, or two passes (the
next, and its retry), or the run has ended.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import trio

from driver import JobDefinition, parse_iso_ms
from scopehost import JobRunDump

from .._trace import Trace
from ..world._world import DriveSpec, World

#: The one drive of the check's world.
DRIVE = "new-code"
#: The outcome of a pass that failed with attempts left: its retry is the next pass.
_RETRYING = "retrying"
#: The passes the check runs over a run: its next, and that one's retry.
_PASSES = 2
#: How long, in the world's time, a drive's tick may run its passes before they are cut.
PASS_BOUND_MS = 3_600_000


@attrs.define
class PassSeen:
    """One pass of the new code over a run, as the trace tells it: the steps its handler called,
    in order, the step whose body raised (if one did), how the handler ended (``hx.end``) and the
    pass's outcome."""

    owner: str
    called: list[str] = attrs.field(factory=list)
    failed_step: str | None = None
    ended: dict[str, Any] | None = None
    outcome: str | None = None

    @property
    def returned(self) -> bool:
        return self.ended is not None and "raised" not in self.ended


def passes_over(trace: Trace, runs: Iterable[str]) -> dict[str, list[PassSeen]]:
    """The passes the trace holds over each of ``runs``, in order."""
    passes: dict[str, list[PassSeen]] = {run: [] for run in runs}
    events = ("handler.invoke", "hx.step", "hx.fn.end", "hx.end", "pass.outcome")
    for event in trace.of(*events):
        seen = passes.get(str(event.get("run")))
        if seen is None:
            continue
        name = event["ev"]
        if name == "handler.invoke":
            seen.append(PassSeen(str(event["owner"])))
        elif name == "pass.outcome":
            for one in seen:
                if one.owner == event["owner"]:
                    one.outcome = str(event["status"])
        elif seen and seen[-1].ended is None:
            _handler_event(seen[-1], event)
    return passes


def _handler_event(current: PassSeen, event: dict[str, Any]) -> None:
    if event["ev"] == "hx.step":
        current.called.append(str(event["step"]))
    elif event["ev"] == "hx.fn.end" and event.get("error") is not None:
        current.failed_step = str(event["step"])
    elif event["ev"] == "hx.end":
        current.ended = event


def _watched(passes: list[PassSeen]) -> bool:
    """Whether the run still waits for a pass the check runs."""
    if len(passes) >= _PASSES:
        return False
    return all(one.outcome == _RETRYING for one in passes)


async def drive_next_passes(
    world: World,
    *,
    jobs: tuple[JobDefinition, ...],
    dumps: tuple[JobRunDump, ...],
    runs: frozenset[str],
) -> None:
    """The scenario of the check's world (see the module's docstring)."""
    world.add_drive(DriveSpec(name=DRIVE))
    for job in jobs:
        world.register(job)
    for dump in dumps:
        await world.restore(dump.scope_id, dump)
    scopes = tuple(dump.scope_id for dump in dumps)
    # Each round runs at least one pass of a watched run, or ends the check.
    for _ in range(_PASSES * len(runs) + 2):
        seen = passes_over(world.trace, runs)
        due = await _due(world, scopes, {run for run in runs if _watched(seen[run])})
        if not due:
            return
        at_ms = min(due.values())
        await world.sleep_until_ms(world.now_ms() + max(0.0, at_ms - world.host.clock.now_ms()))
        for scope in sorted(due):
            # A handler that never returns would hold the check for ever: its pass is cut, and
            # its run reported as not judged.
            with trio.move_on_after(PASS_BOUND_MS / 1000.0):
                await world.tick(DRIVE, scope, max_passes=len(runs))


async def _due(world: World, scopes: tuple[str, ...], watched: set[str]) -> dict[str, float]:
    """By scope, the store time (ms) its first watched run still running is due."""
    due: dict[str, float] = {}
    for scope in scopes:
        # Every row, however many: the operator's read stops at its limit.
        dump = await world.host.stub(scope).export_dump()
        for run in dump.runs:
            if run.id not in watched or run.status != "running":
                continue
            # The due read compares whole milliseconds: one more, and the run is due.
            at = (
                world.host.clock.now_ms()
                if run.next_attempt_at is None
                else parse_iso_ms(run.next_attempt_at) + 1
            )
            due[scope] = min(due.get(scope, at), at)
    return due
