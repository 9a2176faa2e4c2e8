"""A world's shape, learnt from one run without faults: what a fault plan can aim at, in the
world's own terms.

The windows where a job goes wrong are relative to the world: a reply held past the lease PLUS
the gap until another drive's next tick is taken over; a crash lands inside a pass only at the
moments passes run. So the search reads them off a clean run: each drive's tick cadence, each
job's lease and margin, how many calls of each operation each drive makes, and how long the
world lasts.

The job's outside world has windows of its own, relative to the caller rather than to the lease:
a reply lost or held past the caller's own ``timeout_ms`` is a call the caller believes failed
while it ran. So the shape also holds every service call each drive made, with its timeout and
when it was sent, and each service's latency: delays and outages are drawn in those terms too.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable
from statistics import median
from typing import Any

import attrs

from driver import JOB_LEASE_ENTRY_MARGIN

from .._trace import Trace
from ..faults._plan import NO_FAULTS
from ..runners._outcome import Simulation
from ..runners._simulate import simulate
from ..scenarios._registry import ScenarioRef
from ..world._services import Service


@attrs.frozen(kw_only=True)
class Cadence:
    """When a drive ticks: first at ``first_ms``, then every ``every_ms`` (0: it ticked once)."""

    drive: str
    first_ms: float
    every_ms: float
    ticks: tuple[float, ...] = ()


@attrs.frozen(kw_only=True)
class ServiceCall:
    """The ``nth`` call of ``operation`` ("SERVICE.OPERATION") that ``drive`` made in the clean
    run: sent at ``sent_ms``, with the caller's ``timeout_ms`` (None: it waits for its reply)."""

    drive: str
    operation: str
    nth: int
    timeout_ms: float | None
    sent_ms: float

    @property
    def service(self) -> str:
        return self.operation.split(".", 1)[0]


@attrs.frozen(kw_only=True)
class CallsMade:
    """Every call one world's drives made: the scope's as (drive, operation, how many), and each
    service call. The clean world's are the shape's; a faulted world's say who did what once the
    fault struck (another drive took a pass over, a drive stayed away), which is what the search
    aims a second fault at."""

    scope: tuple[tuple[str, str, int], ...] = ()
    services: tuple[ServiceCall, ...] = ()

    def counts(self) -> Counter[tuple[str, str]]:
        """How many calls of each (drive, operation), the scope's and the services' alike."""
        made = Counter({(drive, op): n for drive, op, n in self.scope})
        made.update((call.drive, call.operation) for call in self.services)
        return made


def calls_made(simulation: Simulation) -> CallsMade:
    """The calls ``simulation``'s drives made, numbered per drive and operation as a plan counts
    them (the scenario's own calls, under no drive of the setup, are not aimed at)."""
    trace = simulation.outcome.trace
    drives = _drives_of(trace)
    scope = Counter((str(e["link"]), str(e["op"])) for e in trace.of("rpc.send"))
    return CallsMade(
        scope=tuple((d, op, n) for (d, op), n in sorted(scope.items()) if d in drives),
        services=_service_calls(trace.of("svc.send"), drives),
    )


def _drives_of(trace: Trace) -> dict[str, None]:
    """The drives that ticked or started a run, in the order they first did."""
    return {
        str(event["drive"]): None for event in trace.of("drive.tick", "drive.skip", "world.start")
    }


@attrs.frozen(kw_only=True)
class ServiceShape:
    """A service of the world: its name, its operations, and each leg's latency as (low, high)."""

    name: str
    operations: tuple[str, ...]
    latency_ms: tuple[float, float]

    @classmethod
    def of(cls, service: Service) -> ServiceShape:
        latency = service.latency_ms
        low, high = latency if isinstance(latency, tuple) else (latency, latency)
        return cls(
            name=service.name,
            operations=tuple(service.operations),
            latency_ms=(float(low), float(high)),
        )


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
    #: The world's services, as its setup declares them.
    services: tuple[ServiceShape, ...] = ()
    #: Every service call each drive made in the clean run, in the order they were sent.
    service_calls: tuple[ServiceCall, ...] = ()
    #: The versions of the world's jobs a deploy can put on its drives (``WorldSetup.versions``).
    versions: tuple[str, ...] = ()

    def calls_of(self, drive: str) -> dict[str, int]:
        return {op: n for d, op, n in self.calls if d == drive}

    def service_counts(self) -> tuple[tuple[str, str, int], ...]:
        """(drive, "SERVICE.OPERATION", how many calls) for every service call of the clean run,
        as :attr:`calls` counts the scope calls."""
        counts = Counter((call.drive, call.operation) for call in self.service_calls)
        return tuple((drive, op, n) for (drive, op), n in sorted(counts.items()))

    def services_by_name(self) -> dict[str, tuple[str, ...]]:
        """Each service's operations, by name: what a plan is checked against."""
        return {service.name: service.operations for service in self.services}

    def latency_of(self, service: str) -> float:
        """The longest one leg to ``service`` takes (the high end of its latency)."""
        for found in self.services:
            if found.name == service:
                return found.latency_ms[1]
        return 0.0

    def past_timeout_ms(self, call: ServiceCall) -> float:
        """A delay of a leg of ``call`` that lands just past the caller's own timeout (whatever
        the latency), or, for a caller with no timeout, just past the lease (a takeover)."""
        if call.timeout_ms is None:
            return float(self.lease_ms) + 1.0
        return call.timeout_ms + 1.0

    def moved_on_ms(self, call: ServiceCall) -> float:
        """How late a request given up by its caller lands after the caller moved on: past the
        caller's own timeout plus a round trip, so whatever the caller does when it gives up (a
        retry, a fallback) has been done."""
        return (call.timeout_ms or 0.0) + 2 * self.latency_of(call.service) + 1.0

    def service_delays(self, call: ServiceCall | None = None) -> tuple[float, ...]:
        """Delays in the terms of ``call`` (or of every service call): just past a round trip,
        just inside and just past the caller's timeout, the timeout plus the service's latency
        and its round trip, the lease past the timeout."""
        delays: set[float] = set()
        for made in (call,) if call is not None else self.service_calls:
            latency = self.latency_of(made.service)
            delays.update((latency + 1.0, 2 * latency + 1.0))
            if made.timeout_ms is not None:
                timeout = made.timeout_ms
                delays.update((timeout - 2 * latency - 1.0, timeout + 1.0))
                delays.update((timeout + latency + 1.0, timeout + 2 * latency + 1.0))
                delays.add(timeout + self.lease_ms + 1.0)
            else:
                delays.add(self.lease_ms + 1.0)
        return tuple(sorted(d for d in delays if d > 0))

    def outage_windows(self, service: str) -> tuple[tuple[float, float], ...]:
        """(from_ms, to_ms) outages of ``service`` in the world's terms: from the first call it
        got in the clean run, refusing that request, the caller's retries within its timeout,
        those until the lease ran out (a takeover's), and the whole world."""
        sent = [call for call in self.service_calls if call.service == service]
        if not sent:
            return ((0.0, self.horizon_ms + self.lease_ms),)
        first = sent[0]
        latency = self.latency_of(service)
        start = first.sent_ms
        ends = (
            start + latency + 1.0,
            start + (first.timeout_ms or 0.0) + 2 * latency + 1.0,
            start + self.lease_ms + 2 * latency + 1.0,
        )
        windows = dict.fromkeys((start, end) for end in ends)
        windows[(0.0, self.horizon_ms + self.lease_ms)] = None
        return tuple(windows)

    def window_delays(self) -> tuple[float, ...]:
        """Delays in the world's own terms: the spec's edges (the margin, the lease), the
        at-least-once window of a takeover, the lease plus the gap to another drive's tick, and
        the service calls' own (:meth:`service_delays`)."""
        delays: set[float] = {1.0, 5.0, *self.service_delays()}
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
    drives = _drives_of(trace)
    ticks: dict[str, list[float]] = {}
    for event in trace.of("drive.tick"):
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
    made = calls_made(simulation)
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
        calls=made.scope,
        cadences=tuple(cadences),
        horizon_ms=float(last),
        events=len(trace.events),
        services=tuple(ServiceShape.of(service) for service in setup.services),
        service_calls=made.services,
        versions=tuple(setup.versions),
    )


def _service_calls(
    sends: Iterable[dict[str, Any]], drives: dict[str, None]
) -> tuple[ServiceCall, ...]:
    """Every ``svc.send`` of a known drive, numbered per drive and operation as a plan counts."""
    made: Counter[tuple[str, str]] = Counter()
    calls = []
    for event in sends:
        drive, op = str(event["drive"]), str(event["op"])
        if drive not in drives:
            continue
        made[(drive, op)] += 1
        timeout = event.get("timeout_ms")
        calls.append(
            ServiceCall(
                drive=drive,
                operation=op,
                nth=made[(drive, op)],
                timeout_ms=None if timeout is None else float(timeout),
                sent_ms=float(event["t"]),
            )
        )
    return tuple(calls)


def world_shape(scenario: str | ScenarioRef, *, seed: int = 1) -> WorldShape:
    """The drives, scopes, leases, cadence and calls ``scenario`` has, learnt by running it once
    with no faults."""
    return shape_of(simulate(scenario, seed, plan=NO_FAULTS, keep_trace=True))
