"""A world's shape, learnt from one run without faults: what a fault plan can aim at, in the
world's own terms.

The windows where a job goes wrong are relative to the world: a reply held past the lease PLUS
the gap until another drive's next tick is taken over; a crash lands inside a pass only at the
moments passes run. So the search reads them off a clean run: each drive's tick cadence, each
job's lease and margin, how many calls of each operation each drive makes, and how long the
world lasts.
"""

from __future__ import annotations

import itertools
from collections import Counter
from statistics import median

import attrs

from driver import JOB_LEASE_ENTRY_MARGIN

from ..faults._plan import NO_FAULTS
from ..runners._outcome import Simulation
from ..runners._simulate import simulate
from ..scenarios._registry import ScenarioRef


@attrs.frozen(kw_only=True)
class Cadence:
    """When a drive ticks: first at ``first_ms``, then every ``every_ms`` (0: it ticked once)."""

    drive: str
    first_ms: float
    every_ms: float
    ticks: tuple[float, ...] = ()


@attrs.frozen(kw_only=True)
class WorldShape:
    """The names a fault plan of one scenario can point at: its drives and scopes, its lease;
    and, when learnt from a run, the world's cadence, calls and length."""

    drives: tuple[str, ...]
    scopes: tuple[str, ...]
    lease_ms: int
    #: Every lease a job of the world registered (the world's own first).
    leases: tuple[int, ...] = ()
    #: (drive, operation, how many calls) for every call a drive made in the clean run.
    calls: tuple[tuple[str, str, int], ...] = ()
    cadences: tuple[Cadence, ...] = ()
    #: When the clean world ended, in ms of virtual time.
    horizon_ms: float = 30_000.0
    #: How many events the clean world wrote: a measure of its scheduling steps.
    events: int = 0

    def calls_of(self, drive: str) -> dict[str, int]:
        return {op: n for d, op, n in self.calls if d == drive}

    def window_delays(self) -> tuple[float, ...]:
        """Delays in the world's own terms: the spec's edges (the margin, the lease) and the
        at-least-once window of a takeover, the lease plus the gap to another drive's tick."""
        delays: set[float] = {1.0, 5.0}
        for lease in self.leases or (self.lease_ms,):
            margin = lease * JOB_LEASE_ENTRY_MARGIN
            edge = lease - margin
            delays.update((edge - 1, edge, edge + 1, lease - 1.0, float(lease), lease + 1.0))
            delays.update((lease * 1.5, lease * 2.0, lease * 3.0))
            for cadence in self.cadences:
                every = cadence.every_ms or lease
                phase = cadence.first_ms % every if every else 0.0
                for gap in {phase, every, every / 2, every + phase, 2 * every}:
                    for extra in (1.0, 25.0, 100.0):
                        delays.add(lease + gap + extra)
        return tuple(sorted(d for d in delays if d > 0))

    def crash_times(self) -> tuple[float, ...]:
        """Moments inside passes: just after a tick began, when a pass is claiming, beginning or
        inside its first steps."""
        times: set[float] = set()
        for cadence in self.cadences:
            for tick in cadence.ticks[:12]:
                times.update(tick + offset for offset in (1.0, 3.0, 6.0, 12.0, 40.0, 150.0, 300.0))
        return tuple(sorted(t for t in times if t < self.horizon_ms)) or (0.0,)


def shape_of(simulation: Simulation) -> WorldShape:
    """What :class:`WorldShape` says of the world ``simulation`` ran."""
    trace = simulation.outcome.trace
    drives: dict[str, None] = {}
    ticks: dict[str, list[float]] = {}
    for event in trace.of("drive.tick", "drive.skip", "world.start"):
        drives.setdefault(str(event["drive"]), None)
        if event["ev"] == "drive.tick":
            ticks.setdefault(str(event["drive"]), []).append(float(event["t"]))
    if not drives:
        raise ValueError(
            f"scenario {simulation.scenario} ticks no drive; a fault plan needs a drive to aim at"
        )
    setup = simulation.outcome.setup
    leases = {setup.lease_ms: None}
    for event in trace.of("job.register"):
        if event.get("lease_ms") and "refused" not in event:
            leases.setdefault(int(event["lease_ms"]), None)
    calls = Counter((str(e["link"]), str(e["op"])) for e in trace.of("rpc.send"))
    cadences = []
    for drive, times in ticks.items():
        gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
        cadences.append(
            Cadence(
                drive=drive,
                first_ms=times[0],
                every_ms=float(median(gaps)) if gaps else 0.0,
                ticks=tuple(times),
            )
        )
    last = trace.events[-1]["t"] if trace.events else 30_000.0
    return WorldShape(
        # Only the drives and scopes the setup declares: those are what a plan is checked against.
        drives=tuple(d for d in drives if d in setup.drives) or tuple(drives),
        scopes=tuple(setup.scopes),
        lease_ms=setup.lease_ms,
        leases=tuple(leases),
        calls=tuple((drive, op, n) for (drive, op), n in sorted(calls.items()) if drive in drives),
        cadences=tuple(cadences),
        horizon_ms=float(last),
        events=len(trace.events),
    )


def world_shape(scenario: str | ScenarioRef, *, seed: int = 1) -> WorldShape:
    """The drives, scopes, leases, cadence and calls ``scenario`` has, learnt by running it once
    with no faults."""
    return shape_of(simulate(scenario, seed, plan=NO_FAULTS, keep_trace=True))
