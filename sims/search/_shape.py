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

from driver import JOB_LEASE_ENTRY_MARGIN, RetryPolicy

from .._trace import Trace
from ..faults._plan import NO_FAULTS, Fault
from ..runners._outcome import Simulation
from ..runners._simulate import simulate
from ..scenarios._registry import ScenarioRef
from ..world._services import Service
from ..world._world import START_AGAIN_MS, WALK_MODULE
from ._providers import ProviderShape, provider_faults, provider_shape


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
    #: The run the call was made for, by its key (``MODULE/JOB/INSTANCE``: the same in every
    #: world of a seed, where a run's id may not be), or "" when unknown.
    run: str = ""

    @property
    def service(self) -> str:
        return self.operation.split(".", 1)[0]


@attrs.frozen(kw_only=True)
class StartCall:
    """The ``nth`` start (``start_or_join``) that ``drive`` made in the clean run, the scenario's
    or a handler's: sent at ``sent_ms``; the run it made or joined began its first pass at
    ``began_ms`` and ended at ``ended_ms`` (None: never, in the clean run). A start lost, late or
    sent again lands before, during or after that run: joined while it is live, a new run after."""

    drive: str
    nth: int
    sent_ms: float
    began_ms: float | None = None
    ended_ms: float | None = None
    #: When a drive last ticked the start's scope: a run made after that is never driven (the
    #: world stopped ticking it), which says nothing of the job.
    ticked_until_ms: float | None = None

    def landing_ms(self, horizon_ms: float, again_ms: float) -> tuple[float, ...]:
        """How long after it was sent a start lands before the run's first pass, in the middle
        of the run, just after it ended, and just after the run ended that a start sent again
        ``again_ms`` later made (its caller gave up on this one and started again, so that run
        began and ended that much later); each once, in that order, and only while the drives
        still tick its scope (before its last tick, and ``horizon_ms``, the clean world's end)."""
        until = min(horizon_ms, self.ticked_until_ms if self.ticked_until_ms is not None else 0.0)
        moments = [1.0]
        if self.began_ms is not None and self.ended_ms is not None:
            moments.append((self.began_ms + self.ended_ms) / 2)
            moments += [self.ended_ms + 1.0, self.ended_ms + again_ms + 1.0]
        return tuple(
            dict.fromkeys(
                round(max(1.0, moment - self.sent_ms), 3) for moment in moments if moment < until
            )
        )


@attrs.frozen(kw_only=True)
class CallsMade:
    """Every call one world's drives made: the scope's as (drive, operation, how many), and each
    service call. The clean world's are the shape's; a faulted world's say who did what once the
    fault struck (another drive took a pass over, a drive stayed away), which is what the search
    aims a second fault at."""

    scope: tuple[tuple[str, str, int], ...] = ()
    services: tuple[ServiceCall, ...] = ()
    #: Each scope call that acts on a run, as (drive, operation, nth, run key): which pass of
    #: which run a drive's nth call was made in.
    on_runs: tuple[tuple[str, str, int, str], ...] = ()
    #: (drive, run key) for every run a drive ran a pass of, in the order the passes began.
    passes: tuple[tuple[str, str], ...] = ()

    def counts(self) -> Counter[tuple[str, str]]:
        """How many calls of each (drive, operation), the scope's and the services' alike."""
        made = Counter({(drive, op): n for drive, op, n in self.scope})
        made.update((call.drive, call.operation) for call in self.services)
        return made


def calls_made(simulation: Simulation) -> CallsMade:
    """The calls ``simulation``'s drives made, numbered per drive and operation as a plan counts
    them (the scenario's own calls, under no drive of the setup, are not aimed at), with the run
    each call acted on and the runs each drive ran passes of."""
    trace = simulation.outcome.trace
    drives = _drives_of(trace)
    scope: Counter[tuple[str, str]] = Counter()
    names: dict[str, str] = {}
    on_runs: list[tuple[str, str, int, str]] = []
    passes: dict[tuple[str, str], None] = {}
    for event in trace.of("rpc.send", "handler.invoke"):
        if event["ev"] == "handler.invoke":
            run = str(event["run"])
            passes[(str(event["drive"]), names.get(run, run))] = None
            continue
        drive, op = str(event["link"]), str(event["op"])
        args: list[Any] = list(event.get("args") or ())
        scope[(drive, op)] += 1
        if op == "start_or_join" and len(args) == 2 and isinstance(args[1], dict):
            names[str(args[1].get("id"))] = _run_name(args[0])
        elif op in _ON_A_RUN and args and isinstance(args[0], str) and drive in drives:
            on_runs.append((drive, op, scope[(drive, op)], names.get(args[0], args[0])))
    return CallsMade(
        scope=tuple((d, op, n) for (d, op), n in sorted(scope.items()) if d in drives),
        services=_service_calls(trace.of("svc.send"), drives, names),
        on_runs=tuple(on_runs),
        passes=tuple(passes),
    )


def merged(seen: CallsMade, made: CallsMade) -> CallsMade:
    """The calls of ``seen`` and of ``made`` together: of each (drive, operation) the most any
    of their worlds made, and each service call by (drive, operation, nth) once, the first seen."""
    counts = Counter({(d, op): n for d, op, n in seen.scope})
    grew = False
    for drive, op, n in made.scope:
        if n > counts[(drive, op)]:
            counts[(drive, op)], grew = n, True
    known = {(c.drive, c.operation, c.nth) for c in seen.services}
    more = tuple(c for c in made.services if (c.drive, c.operation, c.nth) not in known)
    if not grew and not more:
        return seen
    return CallsMade(
        scope=tuple((d, op, n) for (d, op), n in sorted(counts.items())),
        services=(*seen.services, *more),
    )


#: The scope calls whose first argument is the run they act on.
_ON_A_RUN = frozenset(
    ("claim", "begin", "begin_step", "record_step", "commit_pass", "patch", "miss")
)


def _run_name(key: object) -> str:
    """A run's key as a name the same in every world: ``MODULE/JOB/INSTANCE``."""
    if not isinstance(key, dict):
        return str(key)
    return f"{key.get('module_id')}/{key.get('job')}/{key.get('instance')}"


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
    #: The service's own times (``Service(times_ms=...)``), as (name, ms), shortest first.
    times_ms: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, service: Service) -> ServiceShape:
        latency = service.latency_ms
        low, high = latency if isinstance(latency, tuple) else (latency, latency)
        return cls(
            name=service.name,
            operations=tuple(service.operations),
            latency_ms=(float(low), float(high)),
            times_ms=tuple(
                sorted(((n, float(ms)) for n, ms in service.times_ms.items()), key=lambda t: t[1])
            ),
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
    #: When each retry of a failed pass may be due, counted from the failure, as (earliest,
    #: latest) ms with the retry policy's jitter, over the whole schedule of each of the
    #: world's jobs (:func:`retry_schedule`), soonest first.
    retries_ms: tuple[tuple[float, float], ...] = ()
    #: Every start each drive made in the clean run, the scenario's and the handlers', in order.
    starts: tuple[StartCall, ...] = ()
    #: The clean run's scope calls that act on a run, and its passes (:class:`CallsMade`).
    on_runs: tuple[tuple[str, str, int, str], ...] = ()
    passes: tuple[tuple[str, str], ...] = ()
    #: Where the services' own behaviour can strike: lagging reads, batches, every request a
    #: rate limit can refuse, every callback (:mod:`._providers`).
    provider: ProviderShape = attrs.field(factory=ProviderShape)

    def provider_faults(self) -> tuple[Fault, ...]:
        """Every fault of a provider's own behaviour aimed at the clean world, in its order."""
        trips = {service.name: self.round_trip_ms(service.name) for service in self.services}
        ticked = max((c.ticks[-1] for c in self.cadences if c.ticks), default=self.horizon_ms)
        return tuple(provider_faults(self.provider, trips, ticked))

    def widened(self, seen: CallsMade) -> WorldShape:
        """This shape with every call some world of the search made (``seen``, :func:`merged`)
        as if the clean world had made it too: a drive the clean world never used for a run (a
        takeover's, a retry's) is aimed at as soon as one world used it."""
        clean = CallsMade(scope=self.calls, services=self.service_calls)
        both = merged(clean, seen)
        if both is clean:
            return self
        return attrs.evolve(self, calls=both.scope, service_calls=both.services)

    def made(self) -> CallsMade:
        """The calls the clean world made: what a first fault's world is compared with."""
        return CallsMade(
            scope=self.calls,
            services=self.service_calls,
            on_runs=self.on_runs,
            passes=self.passes,
        )

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

    def times_of(self, service: str) -> tuple[float, ...]:
        """The times ``service`` declares (``Service(times_ms=...)``), shortest first."""
        for found in self.services:
            if found.name == service:
                return tuple(ms for _, ms in found.times_ms)
        return ()

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
        return (call.timeout_ms or 0.0) + self.round_trip_ms(call.service)

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
            for ms in self.times_of(made.service):  # just inside and just past each
                delays.update((ms - 2 * latency - 1.0, ms + 1.0))
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

    def own_time_windows(self, service: str) -> tuple[tuple[float, float], ...]:
        """(from_ms, to_ms) outages of ``service`` from just after each of its calls in the clean
        run ran, until each moment of :meth:`outage_ends`: in the service's own time and the
        job's retry schedule (what stage 3b pairs with a lost answer; Hypothesis draws them)."""
        return tuple(
            dict.fromkeys(
                (self.ran_ms(call), end)
                for call in self.service_calls
                if call.service == service
                for end in self.outage_ends(call)
            )
        )

    def round_trip_ms(self, service: str) -> float:
        """Just past the longest round trip to ``service``: both legs at the high end of its
        latency, and 1 ms more."""
        return 2 * self.latency_of(service) + 1.0

    def ran_ms(self, call: ServiceCall) -> float:
        """When ``call`` ran at its service, at the latest: its request's leg after it was sent."""
        return call.sent_ms + self.latency_of(call.service) + 1.0

    def outage_ends(self, call: ServiceCall) -> tuple[float, ...]:
        """When an outage of ``call``'s service that begins just after the call ran ends, in the
        world's own terms: just before and just past each time the service declares (a key it
        stops keeping, a client that gives up), counted from the call; and just before and just
        past each retry of the job's schedule (the retry that meets it refused, and the first
        that gets through), counted from the moment the call's pass fails when its answer is
        lost (its timeout, or the lease for a caller that waits)."""
        trip = self.round_trip_ms(call.service)
        ran = self.ran_ms(call)
        ends: list[float] = []
        for ms in self.times_of(call.service):
            ends += [ran + ms - 1.0, ran + ms + trip]
        wait = call.timeout_ms if call.timeout_ms is not None else float(self.lease_ms)
        failed = call.sent_ms + wait
        for earliest, latest in self.retries_ms:
            ends += [failed + earliest - 1.0, failed + latest + trip]
        return tuple(dict.fromkeys(round(end, 3) for end in ends if end > ran))

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

    def start_again_ms(self) -> float:
        """How much later a run begins when its scenario's start was lost and started again: the
        world's wait before it starts again, and the longest gap to a drive's next tick."""
        gaps = [cadence.every_ms for cadence in self.cadences] or [0.0]
        return START_AGAIN_MS + max(gaps)

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
        retries_ms=retry_schedule(trace),
        starts=_starts(trace, drives),
        on_runs=made.on_runs,
        passes=made.passes,
        provider=provider_shape(trace, setup.services),
    )


def _starts(trace: Trace, drives: dict[str, None]) -> tuple[StartCall, ...]:
    """Every ``start_or_join`` a known drive sent, numbered per drive as a plan counts them, with
    the moments the run it made (or joined) began its first pass and ended its last."""
    sent: dict[tuple[str, int], StartCall] = {}
    made: Counter[str] = Counter()
    runs: dict[tuple[str, int], str] = {}
    began: dict[str, float] = {}
    ended: dict[str, float] = {}
    ticked: dict[str, float] = {}
    scopes: dict[tuple[str, int], str] = {}
    for event in trace.of("rpc.send", "rpc.exec", "handler.invoke", "pass.outcome", "drive.tick"):
        kind, t = event["ev"], float(event["t"])
        if kind == "drive.tick":
            ticked[str(event["scope"])] = t
        elif kind == "handler.invoke":
            began.setdefault(str(event["run"]), t)
        elif kind == "pass.outcome":
            ended[str(event["run"])] = t
        elif event["op"] != "start_or_join" or str(event["link"]) not in drives:
            continue
        elif kind == "rpc.send":
            drive = str(event["link"])
            made[drive] += 1
            sent[(drive, int(event["seq"]))] = StartCall(drive=drive, nth=made[drive], sent_ms=t)
            scopes[(drive, int(event["seq"]))] = str(event["scope"])
        elif isinstance(event.get("result"), dict):
            runs[(str(event["link"]), int(event["seq"]))] = str(event["result"]["id"])
    return tuple(
        attrs.evolve(
            start,
            began_ms=began.get(runs.get(at, "")),
            ended_ms=ended.get(runs.get(at, "")),
            ticked_until_ms=ticked.get(scopes[at]),
        )
        for at, start in sent.items()
    )


def retry_schedule(trace: Trace) -> tuple[tuple[float, float], ...]:
    """When each retry of a failed pass may be due, counted from the failure, as (earliest,
    latest) ms, for every retry policy a job of the world registered (the walk's, the
    simulator's own, aside): the policy's backoff, summed, with its jitter either way
    (docs/protocol.md, "Retries and backoff")."""
    policies = {
        _policy_of(event.get("retry"))
        for event in trace.of("job.register")
        if event.get("module_id") != WALK_MODULE and "refused" not in event
    }
    due: set[tuple[float, float]] = set()
    for policy in policies:
        earliest = latest = 0.0
        for attempt in range(1, policy.max_attempts):
            delay = min(policy.base_delay_ms * 2 ** (attempt - 1), policy.max_delay_ms)
            earliest += delay * (1 - _RETRY_JITTER)
            latest += delay * (1 + _RETRY_JITTER)
            due.add((round(earliest, 3), round(latest, 3)))
    return tuple(sorted(due))


def _policy_of(retry: object) -> RetryPolicy:
    """The retry policy a ``job.register`` event names (None: the default one)."""
    if not isinstance(retry, dict):
        return RetryPolicy()
    fields = {name: retry[name] for name in _POLICY_FIELDS if name in retry}
    return RetryPolicy(**fields)


_POLICY_FIELDS = ("max_attempts", "base_delay_ms", "max_delay_ms")
#: A backoff is jittered by this share either way (``driver._policy.retry_backoff_ms``).
_RETRY_JITTER = 0.2


def _service_calls(
    sends: Iterable[dict[str, Any]], drives: dict[str, None], names: dict[str, str] | None = None
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
                run=(names or {}).get(str(event.get("run")), ""),
            )
        )
    return tuple(calls)


def world_shape(scenario: str | ScenarioRef, *, seed: int = 1) -> WorldShape:
    """The drives, scopes, leases, cadence and calls ``scenario`` has, learnt by running it once
    with no faults."""
    return shape_of(simulate(scenario, seed, plan=NO_FAULTS, keep_trace=True))
