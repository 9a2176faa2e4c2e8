"""Services: the job's outside world (a payment provider, a mailer, a CRM), simulated in the world.

A job exists to change something outside its store, and that is where double charges and lost
payments come from. So a world declares its services (``WorldSetup(services=...)``), each with its
own state, made fresh for every world, and the operations over it; a handler calls them with
:func:`call_service`. A call is a message on the world's virtual clock, like a scope call:

- the REQUEST leg waits the service's latency (drawn from the seed), then the request arrives and
  the operation runs at once, whole, on the service's state (an outage or a transient refusal
  refuses it unrun);
- the REPLY leg waits the latency again and hands the caller a JSON copy of the result.

The caller may set ``timeout_ms``: when no reply has come by then, the call raises
:class:`ServiceTimeout` in the handler, while the request may have run or may still run later (a
real client's timeout says nothing about the provider). The legs are carried by a task of the
world's own, so a request on the wire arrives whatever became of its caller: given up on, timed
out, or killed.

Faults strike these legs as they strike a drive's scope calls: a plan names the call as
``operation="SERVICE.OPERATION"`` in ``DelayLeg``, ``DropLeg``, ``HoldLeg``, ``LateRequest`` and
``CrashAfter`` (counted per drive, as its scope calls are), and ``ServiceOutage`` refuses every
request that arrives within a window.

An operation that changed its service's state is an EFFECT (``svc.exec`` with ``effect: true``):
counted by ``effects_in``, judged by the checks, drawn on the timeline. One with an
``idempotency_key`` returns its first result again, without running, for a repeat of that
argument's value, as a payment API does.

A service can behave as a real provider does (docs/simulating-your-jobs.md, "Providers as they
behave"): an operation reads the world's clock and schedules its own later work (:mod:`._provider`,
:mod:`._own_work`), a read may lag its writes (``Operation(lag_ms=...)``, :mod:`._lag`), a batch
may be taken in part (``Operation(batch=...)``), a rate limit refuses with a retry-after
(``Service(rate_limit=...)``), and a callback reaches the job's endpoints (:mod:`._callbacks`).

A killed drive reaches no service: its leftover code's calls are refused before they leave
(``fault.fence``), and a reply to it is not delivered. A plain Python object a handler mutates is
not fenced: that is what a service is for.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections import Counter, deque
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs
import trio

from driver import ServiceCall, ServiceDeclined, ServiceTimedOut, ServiceUnavailable
from scopehost import DeliverLate, LinkCall, LinkOutcome
from scopehost._network import withdraw

from ..faults._check import PlanError
from ..faults._plan import PartialBatch, RateLimited, ServiceOutage, StaleRead
from ._callbacks import Callbacks
from ._fence import DriveKilled, Incarnation, current_incarnation
from ._lag import History
from ._own_work import OwnWork, own_fields
from ._provider import Running, running
from ._service_values import (
    check_key_argument,
    check_state,
    copied_state,
    new_empty_container,
    state_problem,
)

if TYPE_CHECKING:
    from driver import JobPassContext

    from ._world import SimDrive, World

#: An operation: ``fn(state, args) -> result``; it runs whole, at the moment its request arrives.
OperationFn: TypeAlias = Callable[[Any, dict[str, Any]], Any]
#: A leg's latency: a constant in ms, or ``(low, high)`` drawn uniformly per leg from the seed.
Latency: TypeAlias = float | tuple[float, float]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


#: The names services' outcomes had before the port (``driver.ServicePort``) took them over:
#: a refusal unrun is ``ServiceUnavailable``, no answer in time ``ServiceTimedOut``. Kept so that
#: worlds written against them go on working; a decline is ``ServiceDeclined``, which they lack.
ServiceRefused = ServiceUnavailable
ServiceTimeout = ServiceTimedOut


@attrs.frozen
class Operation:
    """One operation of a service: ``fn(state, args) -> result``. ``idempotent=True``: a call
    that repeats an ``idempotency_key`` (``ctx.call_service(..., idempotency_key=KEY)``) gets
    the first result again without running, as a provider that honours keys answers. With
    ``idempotency_key="ARG"``, the argument of that name is the key instead (the form before the
    port). A call without a key runs every time.

    ``lag_ms``: the operation is a read that sees the service's writes only after a lag, as a
    provider's search does: fixed (``500``), or drawn from the seed per call within
    ``(low, high)`` (:mod:`._lag`). ``batch="ARG"``: the argument ``ARG`` is a list of items, of
    which the service may take only a leading part (at most ``batch_max``, or fewer when a
    ``PartialBatch`` fault says so): ``fn`` gets the part taken, and its result says which."""

    fn: OperationFn
    idempotency_key: str | None = None
    idempotent: bool = attrs.field(default=False, kw_only=True)
    lag_ms: Latency | None = attrs.field(default=None, kw_only=True)
    batch: str | None = attrs.field(default=None, kw_only=True)
    batch_max: int | None = attrs.field(default=None, kw_only=True)

    def longest_lag_ms(self) -> float:
        """The longest lag this read may have (0 for an operation that does not lag)."""
        lag = self.lag_ms
        return 0.0 if lag is None else float(lag[1] if isinstance(lag, tuple) else lag)


def _check_name(what: str, name: object) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"{what} {name!r}: name it with one word of letters, digits, '_' or '-' (no dot: a "
            "fault plan names a call SERVICE.OPERATION)"
        )


def _check_latency(name: str, latency: object) -> None:
    def delay(value: object) -> bool:
        return (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= 0
        )

    if delay(latency):
        return
    pair = isinstance(latency, tuple) and len(latency) == 2 and all(delay(v) for v in latency)
    if pair and latency[0] <= latency[1]:  # type: ignore[index]
        return
    raise ValueError(
        f"Service({name!r}, latency_ms={latency!r}); give a finite number of ms >= 0, or "
        "(low, high) with 0 <= low <= high to draw each leg's latency from the seed"
    )


def _check_times(name: str, times: object) -> None:
    if not isinstance(times, Mapping):
        raise ValueError(
            f"Service({name!r}, times_ms={times!r}); give a dict of names to durations in ms, "
            "such as {'idempotency keys kept': 86_400_000}"
        )
    for what, ms in times.items():
        number = isinstance(ms, int | float) and not isinstance(ms, bool)
        if not isinstance(what, str) or not what or not number or not 0 < ms < math.inf:
            raise ValueError(
                f"Service({name!r}, times_ms={{{what!r}: {ms!r}}}); name each time with a "
                "non-empty str and give a finite number of ms above 0"
            )


def _check_operation(name: str, op: str, operation: Operation) -> None:
    """Refuse an operation's lag or batch where the service is declared."""
    where = f"Service({name!r}): operation {op!r}"
    if operation.lag_ms is not None:
        try:
            _check_latency(name, operation.lag_ms)
        except ValueError:
            raise ValueError(
                f"{where} has lag_ms={operation.lag_ms!r}; give a finite number of ms >= 0, or "
                "(low, high) with 0 <= low <= high to draw each read's lag from the seed"
            ) from None
    batch = operation.batch
    if batch is not None and (not isinstance(batch, str) or not batch):
        raise ValueError(
            f"{where} has batch={operation.batch!r}; name the argument that holds the list of "
            "items, such as batch='items'"
        )
    most = operation.batch_max
    if most is not None and (
        operation.batch is None or not isinstance(most, int) or isinstance(most, bool) or most < 1
    ):
        raise ValueError(
            f"{where} has batch_max={most!r}; give an int >= 1 together with batch='ARG' (the "
            "argument holding the items)"
        )


def _check_rate_limit(name: str, limit: object) -> None:
    if limit is None:
        return
    calls, per_ms = limit if isinstance(limit, tuple) and len(limit) == 2 else (None, None)
    if (
        isinstance(calls, int)
        and not isinstance(calls, bool)
        and calls >= 1
        and isinstance(per_ms, int | float)
        and not isinstance(per_ms, bool)
        and 0 < per_ms < math.inf
    ):
        return
    raise ValueError(
        f"Service({name!r}, rate_limit={limit!r}); give (CALLS, PER_MS): at most CALLS requests "
        "arrive in any PER_MS ms, such as (10, 1_000.0); the rest are refused with a retry-after"
    )


def _check_retries(name: str, retries: object) -> None:
    if isinstance(retries, tuple) and all(
        isinstance(ms, int | float) and not isinstance(ms, bool) and 0 < ms < math.inf
        for ms in retries
    ):
        return
    raise ValueError(
        f"Service({name!r}, callback_retries_ms={retries!r}); give a tuple of delays in ms, each "
        "above 0: how long after a failed delivery the service sends a callback again"
    )


@attrs.frozen
class Service:
    """A simulated external system: its ``operations`` by name (a function ``fn(state, args)`` or
    an :class:`Operation`), its ``state`` (made fresh per world by calling ``state()``), each
    leg's ``latency_ms``, the share of requests it ``refuses`` transiently (drawn from the
    seed; a refused request does not run), and its own ``times_ms``: how long it keeps
    idempotency keys, when its client gives up, a capture's delay, each by a name of yours. The
    search draws delays and outages just before and just past each of them (docs/search.md,
    "Time in the world's own terms"); the world does nothing else with them."""

    name: str
    operations: Mapping[str, OperationFn | Operation] = attrs.field(kw_only=True)
    state: Callable[[], Any] = attrs.field(default=dict, kw_only=True)
    latency_ms: Latency = attrs.field(default=1.0, kw_only=True)
    refuses: float = attrs.field(default=0.0, kw_only=True)
    times_ms: Mapping[str, float] = attrs.field(factory=dict, kw_only=True)
    #: ``(CALLS, PER_MS)``: at most CALLS requests arrive in any PER_MS ms; the rest are refused
    #: unrun (``ServiceUnavailable``) with the ``retry_after_ms`` after which one would pass.
    rate_limit: tuple[int, float] | None = attrs.field(default=None, kw_only=True)
    #: How long after each failed delivery of a callback the service sends it again; it gives
    #: up after the last (a provider retries its webhooks on a schedule of its own).
    callback_retries_ms: tuple[float, ...] = attrs.field(
        default=(1_000.0, 10_000.0, 60_000.0), kw_only=True
    )

    def __attrs_post_init__(self) -> None:
        _check_name("Service", self.name)
        if not isinstance(self.operations, Mapping) or not self.operations:
            raise ValueError(
                f"Service({self.name!r}, operations={self.operations!r}); give a dict of "
                "operation names to functions fn(state, args) -> result"
            )
        for op, fn in self.operations.items():
            _check_name(f"Service {self.name!r}: operation", op)
            target = fn.fn if isinstance(fn, Operation) else fn
            if not callable(target):
                raise ValueError(
                    f"Service {self.name!r}: operation {op!r} is {target!r}; give a function "
                    "fn(state, args) -> result"
                )
            _check_operation(self.name, op, self.operation(op))
        if not callable(self.state):
            raise ValueError(
                f"Service({self.name!r}, state={self.state!r}); give a function that makes the "
                "service's state, such as dict"
            )
        check_state(self.name, self.state, self.state())
        _check_latency(self.name, self.latency_ms)
        _check_times(self.name, self.times_ms)
        _check_rate_limit(self.name, self.rate_limit)
        _check_retries(self.name, self.callback_retries_ms)
        refuses = self.refuses
        number = isinstance(refuses, int | float) and not isinstance(refuses, bool)
        if not number or not 0 <= refuses < 1:
            raise ValueError(
                f"Service({self.name!r}, refuses={refuses!r}); give the share of requests "
                "refused, a number >= 0 and below 1"
            )

    def operation(self, name: str) -> Operation:
        found = self.operations[name]
        return found if isinstance(found, Operation) else Operation(found)


def service_operations(services: tuple[Service, ...]) -> dict[str, tuple[str, ...]]:
    """Each service's operations, by the service's name: what a plan is checked against."""
    return {service.name: tuple(service.operations) for service in services}


def check_services(setup: object, attribute: object, services: object) -> None:
    """Refuse a bad ``WorldSetup(services=...)`` where the setup is written."""
    if not isinstance(services, tuple) or not all(isinstance(s, Service) for s in services):
        raise ValueError(f"WorldSetup(services={services!r}); give a tuple of Service(...) values")
    names = [service.name for service in services]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"WorldSetup(services=...) declares the service {name!r} twice")


#: The step whose body is running in this task, if any: a service call names it in the trace.
CURRENT_STEP: ContextVar[str | None] = ContextVar("sims_current_step", default=None)
#: The world whose handlers run in this task (set for the whole of a world's run).
CURRENT_WORLD: ContextVar[World | None] = ContextVar("sims_current_world", default=None)


async def call_service(
    ctx: JobPassContext,
    service: str,
    operation: str,
    args: Mapping[str, Any] | None = None,
    *,
    timeout_ms: float | None = None,
    idempotency_key: str | None = None,
) -> Any:
    """``ctx.call_service(service, operation, args, ...)``, the form before the port: a handler
    written against the port (``driver``) imports nothing from ``sims`` and runs unchanged on a
    real host."""
    if not callable(getattr(ctx, "call_service", None)):
        raise TypeError(
            f"call_service(ctx, {service!r}, {operation!r}): ctx is {ctx!r}; pass the context "
            "your handler was given (or call ctx.call_service(...) on it)"
        )
    return await ctx.call_service(
        service, operation, args, timeout_ms=timeout_ms, idempotency_key=idempotency_key
    )


@attrs.define
class _Flight:
    """One service call, as its caller waits for it."""

    call: LinkCall
    incarnation: Incarnation
    #: The caller's own timeout: a caller with one learns of a lost call only when it runs out.
    timeout_ms: float | None
    done: trio.Event = attrs.field(factory=trio.Event)
    value: Any = None
    error: BaseException | None = None
    #: The caller stopped waiting (timed out, gave up, was cancelled): a reply goes nowhere.
    gone: bool = False

    def answer(self, value: Any = None, error: BaseException | None = None) -> None:
        if not self.gone:
            self.value, self.error, self.gone = value, error, True
            self.done.set()


class Services:
    """The services of one world: their state, their legs, and the faults that strike them."""

    def __init__(self, world: World, services: tuple[Service, ...]) -> None:
        self.world = world
        self.declared = {service.name: service for service in services}
        #: Each service's state, made fresh for this world.
        self.state: dict[str, Any] = {service.name: service.state() for service in services}
        #: The first result of each idempotent call, by (service, operation, key).
        self._first: dict[tuple[str, str, str], Any] = {}
        self._rng = {service.name: world.rng(f"service:{service.name}") for service in services}
        #: The lags of lagging reads, drawn from a stream of their own: a service that gains
        #: such a read draws the same latencies it drew before.
        self._lag_rng = {s.name: world.rng(f"service-lag:{s.name}") for s in services}
        self._outages = [f for f in world.plan.faults if isinstance(f, ServiceOutage)]
        #: Calls whose legs are still on the wire: the world waits for them before it ends.
        self.in_flight = 0
        #: Requests that arrived, by service and by ``SERVICE.OPERATION``: what ``nth`` counts.
        self._arrived: Counter[str] = Counter()
        #: Until when a ``RateLimited`` fault refuses each service's requests.
        self._limited_until: dict[str, float] = {}
        #: When each rate-limited service let its latest requests in, within its window.
        self._window: dict[str, deque[float]] = {service.name: deque() for service in services}
        #: The states each service with a lagging read went through (:mod:`._lag`).
        self._histories = {
            service.name: History(keep_ms=_longest_lag(service)) for service in services
        }
        for name, history in list(self._histories.items()):
            if history.keep_ms:
                history.wrote(world.now_ms(), self.state[name])
            else:
                del self._histories[name]
        self._provider_faults = _provider_faults(world.plan.faults)
        #: The services' own work (``sims.later``) and their callbacks (``sims.call_back``).
        self.own_work = OwnWork(self)
        self.callbacks = Callbacks(self)

    def restore(
        self, name: str, state: Any, answered: Mapping[tuple[str, str], Any] | None = None
    ) -> None:
        """Service ``name`` as a real one stood at an incident: its ``state``, and the first
        answer it gave to each (operation, idempotency key) it remembers."""
        service = self._declared(name)
        problem = state_problem(state)
        if problem is not None:
            raise ValueError(f"the state restored to service {name!r}: {problem}")
        for given, result in (answered or {}).items():
            operation, key = given if isinstance(given, tuple) and len(given) == 2 else (None, None)
            if operation not in service.operations or not isinstance(key, str):
                raise ValueError(
                    f"answered[{given!r}] of service {name!r}: give (OPERATION, KEY) with an "
                    f"operation of the service ({', '.join(service.operations)}) and the key as "
                    "a string"
                )
            self._first[(name, f"{name}.{operation}", key)] = _json_copy(
                result, f"the answer restored to {name}.{operation} for key {key!r}"
            )
        self.state[name] = copy.deepcopy(state)
        if name in self._histories:
            self._histories[name].wrote(self.world.now_ms(), self.state[name])

    def final(self) -> dict[str, Any]:
        """Every service's state as the world ends, by name (a copy)."""
        return copy.deepcopy(self.state)

    async def finish(self) -> None:
        """Let the services' own work and their callbacks run to their end, however far off."""
        while self.own_work.pending or self.callbacks.in_flight:
            await self.own_work.pending.wait()
            await self.callbacks.in_flight.wait()

    def due_before(self, at_ms: float) -> bool:
        """Whether the services will still act before ``at_ms``: a callback on the wire, or
        their own work due by then (which may call back, and so start a run)."""
        return bool(self.callbacks.in_flight) or self.own_work.due_before(at_ms)

    def outage_at(self, service: str, now_ms: float) -> ServiceOutage | None:
        """The plan's outage of ``service`` at ``now_ms``, if it is down then."""
        for outage in self._outages:
            if outage.service == service and outage.from_ms <= now_ms < outage.to_ms:
                return outage
        return None

    def _declared(self, service: str) -> Service:
        found = self.declared.get(service)
        if found is None:
            have = ", ".join(self.declared) or "none"
            raise ValueError(
                f"no service {service!r} in this world (its services: {have}); declare it in "
                "WorldSetup(services=(Service(...),))"
            )
        return found

    def _check(self, service: str, operation: str) -> Service:
        found = self._declared(service)
        if operation not in found.operations:
            raise ValueError(
                f"service {service!r} has no operation {operation!r}; its operations are "
                f"{', '.join(found.operations)}"
            )
        return found

    def provides(self, service: str) -> bool:
        """The port's question: does this world declare ``service``?"""
        return service in self.declared

    async def call(self, request: ServiceCall) -> Any:
        """The port's call (``driver.ServicePort``): a message on the world's clock, its legs
        and faults as the module says."""
        service, operation, timeout_ms = request.service, request.operation, request.timeout_ms
        run, key = request.run_id, request.idempotency_key
        found = self._check(service, operation)
        check_key_argument(found.operation(operation).idempotency_key, request)
        name = request.name
        sent = dict(request.args)
        incarnation = current_incarnation()
        if incarnation is None:
            raise RuntimeError(f"{name} was called outside a drive's work: call it from a handler")
        drive = self.world.drives[incarnation.drive]
        if incarnation.killed:
            self.world.trace.record(
                "fault.fence", {"drive": drive.name, "op": name, "leg": "request"}
            )
            raise DriveKilled(
                f"drive {drive.name} was killed (incarnation {incarnation.number}): its {name} "
                "call never left it"
            )
        drive.link._seq += 1  # one numbering of a drive's calls, to the scope and to services
        call = LinkCall(drive.name, drive.link._seq, service, name, (sent, key))
        fields: dict[str, Any] = {"drive": drive.name, "seq": call.seq, "run": run, "op": name}
        step = CURRENT_STEP.get()
        if step is not None:
            fields["step"] = step
        sending = {**fields, "args": sent, "timeout_ms": timeout_ms, "service": service}
        if key is not None:
            sending["key"] = key
        self.world.trace.record("svc.send", sending)
        flight = _Flight(call, incarnation, timeout_ms)
        self.in_flight += 1
        self.world.nursery.start_soon(self._carry, drive, found, flight, fields)
        network = self.world.host.network
        timer = None
        if timeout_ms is not None:
            timer = network.after(timeout_ms / 1000.0, lambda: self._time_out(flight, fields))
        try:
            await flight.done.wait()
        finally:
            flight.gone = True
            if timer is not None:
                withdraw(timer)
        if flight.error is not None:
            raise flight.error
        return flight.value

    def _time_out(self, flight: _Flight, fields: dict[str, Any]) -> None:
        if flight.gone:
            return
        self.world.trace.record("svc.timeout", fields)
        flight.answer(
            error=_timed_out(
                fields,
                f"{fields['op']} #{fields['seq']} got no reply within its timeout: the operation "
                "may have run, or may still run",
            )
        )

    def _lost(self, flight: _Flight, fields: dict[str, Any], what: str) -> None:
        """The caller learns that its call went wrong (a lost connection), at once, unless its
        own timeout will tell it (a client with a timeout waits for it)."""
        if flight.gone or flight.timeout_ms is not None:
            return
        flight.answer(
            error=_timed_out(
                fields, f"{fields['op']} #{fields['seq']}: {what}; the operation may have run"
            )
        )

    async def _carry(
        self, drive: SimDrive, service: Service, flight: _Flight, fields: dict[str, Any]
    ) -> None:
        """Both legs of one call, in a task of the world's own: a request on the wire arrives
        whatever became of its caller."""
        try:
            await self._legs(drive, service, flight, fields)
        finally:
            self.in_flight -= 1
            self.world.quiet_check()

    async def _legs(
        self, drive: SimDrive, service: Service, flight: _Flight, fields: dict[str, Any]
    ) -> None:
        trace = self.world.trace
        call = flight.call
        wanted = drive._request_wanted(call)
        await self.world.host.sleep_ms(self.latency(service))
        verdict = await drive._on_request(call) if wanted else None
        if verdict == "drop":
            trace.record("svc.drop", {**fields, "leg": "request"})
            self._lost(flight, fields, "the connection was lost before the request arrived")
            return
        if isinstance(verdict, DeliverLate):
            trace.record("svc.abandon", fields)
            flight.answer(
                error=_timed_out(
                    fields,
                    f"{fields['op']} #{fields['seq']} was given up by its caller: the request "
                    "may still arrive and run",
                )
            )
            await self.world.host.sleep_ms(verdict.ms)
        outcome = self._arrive(service, call, fields)
        if isinstance(outcome.error, ServiceUnavailable):
            await self.world.host.sleep_ms(self.latency(service))
            self._deliver(flight, fields, outcome)
            return
        if drive._reply_wanted(call, outcome) and await drive._on_reply(call, outcome) == "drop":
            trace.record("svc.drop", {**fields, "leg": "reply"})
            self._lost(flight, fields, "the connection was lost before the reply came")
            return
        await self.world.host.sleep_ms(self.latency(service))
        self._deliver(flight, fields, outcome)

    def _deliver(self, flight: _Flight, fields: dict[str, Any], outcome: LinkOutcome) -> None:
        if flight.incarnation.killed:
            # The reply reaches a process that is gone.
            self.world.trace.record(
                "fault.fence",
                {
                    "drive": fields["drive"],
                    "op": fields["op"],
                    "seq": fields["seq"],
                    "leg": "reply",
                },
            )
            flight.answer(error=DriveKilled(f"the reply to {fields['op']} came too late"))
            return
        if flight.gone:
            self.world.trace.record("svc.late", fields)
            return
        self.world.trace.record("svc.reply", fields)
        flight.answer(outcome.value, outcome.error)

    def _arrive(self, service: Service, call: LinkCall, fields: dict[str, Any]) -> LinkOutcome:
        """The request arrives: refused, or run whole on the service's state."""
        now = self.world.now_ms()
        trace = self.world.trace
        self._arrived[service.name] += 1
        self._arrived[call.operation] += 1
        refusal, retry_after_ms = None, None
        outage = self.outage_at(service.name, now)
        if outage is not None:
            self.world.fired.add(outage)
            refusal = f"{service.name} is down (an outage from {outage.from_ms:g} ms)"
        if refusal is None:
            refusal, retry_after_ms = self._rate_limited(service, call.operation, now)
        rng = self._rng[service.name]
        if refusal is None and service.refuses and rng.random() < service.refuses:
            refusal = f"{service.name} refused the request (a transient refusal)"
        if refusal is None:
            try:
                return self._run(service, call, fields)
            except ServiceUnavailable as refused:
                refusal = str(refused) or f"{call.operation} refused the request"
                retry_after_ms = refused.retry_after_ms
            except ServiceDeclined as declined:
                # An answer: it did not run and will not, and its reply is a reply like any.
                said = str(declined) or f"{call.operation} declined the request"
                code = {"code": declined.code} if declined.code else {}
                trace.record(
                    "svc.exec",
                    {**fields, "refused": said, "declined": True, **code, "effect": False},
                )
                return LinkOutcome(None, _named(declined, fields), "")
        after = {} if retry_after_ms is None else {"retry_after_ms": retry_after_ms}
        trace.record("svc.exec", {**fields, "refused": refusal, **after, "effect": False})
        unavailable = ServiceUnavailable(
            refusal,
            service=service.name,
            operation=call.operation.split(".", 1)[1],
            retry_after_ms=retry_after_ms,
        )
        return LinkOutcome(None, unavailable, "")

    def _rate_limited(
        self, service: Service, operation: str, now: float
    ) -> tuple[str | None, float | None]:
        """A refusal and its retry-after, when the plan's ``RateLimited`` or the service's own
        ``rate_limit`` turns this request away; (None, None) when it passes."""
        for fault in self._provider_faults.get(RateLimited, ()):
            assert isinstance(fault, RateLimited)
            counted = fault.operation or service.name
            ours = fault.service == service.name and counted in (service.name, operation)
            if ours and self._arrived[counted] == fault.nth:
                self.world.fired.add(fault)
                until = max(self._limited_until.get(service.name, 0.0), now + fault.retry_after_ms)
                self._limited_until[service.name] = until
        until = self._limited_until.get(service.name, 0.0)
        if now < until:
            wait = round(until - now, 3)
            return (
                f"{service.name} is rate limited (a RateLimited fault): try again in {wait:g} ms",
                wait,
            )
        if service.rate_limit is None:
            return None, None
        calls, per_ms = service.rate_limit
        window = self._window[service.name]
        while window and window[0] <= now - per_ms:
            window.popleft()
        if len(window) < calls:
            window.append(now)
            return None, None
        wait = round(window[0] + per_ms - now, 3)
        return (
            f"{service.name} is rate limited ({calls} requests in {per_ms:g} ms): try again in "
            f"{wait:g} ms",
            wait,
        )

    def _run(self, service: Service, call: LinkCall, fields: dict[str, Any]) -> LinkOutcome:
        operation = service.operation(call.operation.split(".", 1)[1])
        args, given = call.args
        key = None
        if operation.idempotent and given is not None:
            key = (service.name, call.operation, given)
        elif operation.idempotency_key is not None and operation.idempotency_key in args:
            key = (service.name, call.operation, json.dumps(args[operation.idempotency_key]))
        if key is not None and key in self._first:
            result = self._first[key]
            self.world.trace.record(
                "svc.exec", {**fields, "result": result, "effect": False, "repeat": True}
            )
            return LinkOutcome(copy.deepcopy(result), None, "")
        told: dict[str, Any] = {}
        args = self._batch_taken(service, operation, call.operation, args, told)
        if operation.lag_ms is not None:
            result = self._read_lagging(service, operation, call.operation, args, told)
            effect = False
        else:
            result, effect = self._apply(service, operation, call.operation, args)
        if key is not None:
            self._first[key] = result
        self.world.trace.record("svc.exec", {**fields, "result": result, **told, "effect": effect})
        return LinkOutcome(copy.deepcopy(result), None, "")

    def _apply(
        self, service: Service, operation: Operation, name: str, args: dict[str, Any]
    ) -> tuple[Any, bool]:
        """Run ``operation`` on the service's state: its result, and whether it changed it."""
        state = self.state[service.name]
        before = copied_state(service.name, name, state)
        # The operation gets its own copy of the arguments, and the caller a copy of the result:
        # nothing crosses the wire by reference.
        with running(self, service.name, name) as asked:
            try:
                result = operation.fn(state, copy.deepcopy(args))
            except (ServiceUnavailable, ServiceDeclined):
                # A refusal or a decline means it did not run: what the operation wrote before
                # it said so is undone, as a provider's transaction would be (its key not
                # remembered, its work and callbacks not sent).
                self.state[service.name] = before
                raise
        result = _json_copy(result, f"the result of {name}")
        effect = state != before
        if effect:
            self._warn_if_empty(service, name, operation, before, state)
        if effect and service.name in self._histories:
            self._histories[service.name].wrote(self.world.now_ms(), state)
        self._kept(service, asked)
        return result, effect

    def _warn_if_empty(
        self, service: Service, name: str, operation: Operation, before: Any, after: Any
    ) -> None:
        """Say where an operation's only change was a new empty container: it counts as an
        effect (the state changed), which a read that sets up its state by the way is not."""
        path = new_empty_container(before, after)
        if path is None:
            return
        code = getattr(operation.fn, "__code__", None)
        where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "?"
        self.world.trace.record(
            "svc.warn",
            {
                "op": name,
                "where": where,
                "text": (
                    f"{name} changed {service.name}'s state only by adding the empty {path}, "
                    "which counts as an effect; make it in the service's state() instead, so "
                    "that a call that adds nothing is no effect"
                ),
            },
        )

    def _kept(self, service: Service, asked: Running) -> None:
        """What an operation or own work that ran asked for: its later work, its callbacks."""
        for after_ms, name, work in asked.work:
            self.own_work.schedule(service.name, asked.what, after_ms, name, work)
        for endpoint, payload in asked.callbacks:
            self.callbacks.send(service, asked.what, endpoint, payload)

    def run_own(self, service: str, number: int, name: str, work: Any) -> None:
        """A piece of ``service``'s own work falls due and runs on its state."""
        state = self.state[service]
        what = f"{service}:{name}"
        before = copied_state(service, what, state)
        with running(self, service, what) as asked:
            work(state)
        effect = state != before
        if effect and service in self._histories:
            self._histories[service].wrote(self.world.now_ms(), state)
        self.world.trace.record("svc.own", {**own_fields(service, number, name), "effect": effect})
        self._kept(self.declared[service], asked)

    def _read_lagging(
        self,
        service: Service,
        operation: Operation,
        name: str,
        args: dict[str, Any],
        told: dict[str, Any],
    ) -> Any:
        """A read that sees the service's writes only after its lag (:mod:`._lag`): run on the
        state as it stood then, and compared with what a fresh read answers."""
        history = self._histories[service.name]
        stale = self._fault_at(StaleRead, name)
        if stale is not None:
            self.world.fired.add(stale)
            told["fault"] = "StaleRead"
        lag = self._lag(service, operation, stale)
        now = self.world.now_ms()
        seen = history.seen_at(now - lag)
        view = copy.deepcopy(seen)
        with running(self, service.name, name):
            result = _json_copy(operation.fn(view, copy.deepcopy(args)), f"the result of {name}")
        if view != seen:
            raise ValueError(
                f"{name} changed the service's state, but it is declared a lagging read "
                f"(Operation(..., lag_ms={operation.lag_ms!r})), which sees an old copy of it: "
                "a read with a lag must only read; give a write no lag_ms"
            )
        fresh_state = copy.deepcopy(self.state[service.name])
        with running(self, service.name, name):
            fresh = _json_copy(operation.fn(fresh_state, copy.deepcopy(args)), name)
        told["lag_ms"] = round(lag, 3)
        if fresh != result:
            told["stale"] = {"missed": history.writes_since(now - lag), "fresh": fresh}
        return result

    def _lag(self, service: Service, operation: Operation, stale: StaleRead | None) -> float:
        """This call's lag: the plan's ``StaleRead``'s, or the declared lag (drawn per call)."""
        if stale is not None:
            return operation.longest_lag_ms() if stale.lag_ms is None else stale.lag_ms
        lag = operation.lag_ms
        if isinstance(lag, tuple):
            return self._lag_rng[service.name].uniform(*lag)
        return float(lag or 0.0)

    def _fault_at(self, kind: type, name: str) -> Any:
        """The plan's fault of ``kind`` (a ``StaleRead``, a ``PartialBatch``) aimed at the
        request of ``name`` (``SERVICE.OPERATION``) arriving now, or None."""
        for fault in self._provider_faults.get(kind, ()):
            if fault.operation == name and self._arrived[name] == fault.nth:
                return fault
        return None

    def _batch_taken(
        self,
        service: Service,
        operation: Operation,
        name: str,
        args: dict[str, Any],
        told: dict[str, Any],
    ) -> dict[str, Any]:
        """The arguments with only the leading part of a batch's items the service takes."""
        if operation.batch is None:
            return args
        items = args.get(operation.batch)
        if not isinstance(items, list):
            raise ValueError(
                f"{name} takes its items as a list in args[{operation.batch!r}] "
                f"(Operation(..., batch={operation.batch!r})), and got {items!r}"
            )
        taken = len(items) if operation.batch_max is None else operation.batch_max
        partial = self._fault_at(PartialBatch, name)
        if partial is not None:
            if partial.taken < len(items):  # one that takes them all changes nothing
                self.world.fired.add(partial)
                told["fault"] = "PartialBatch"
            taken = min(taken, partial.taken)
        if taken >= len(items):
            return args
        told["batch"] = {"taken": taken, "of": len(items)}
        return {**args, operation.batch: items[:taken]}

    def latency(self, service: Service) -> float:
        latency = service.latency_ms
        if isinstance(latency, tuple):
            return self._rng[service.name].uniform(*latency)
        return float(latency)


def _longest_lag(service: Service) -> float:
    return max(service.operation(op).longest_lag_ms() for op in service.operations)


def check_provider_faults(faults: tuple[Any, ...], services: tuple[Service, ...]) -> None:
    """Refuse, with a one-line ``PlanError``, a fault of a provider's own behaviour that does not
    fit the operation it names (a stale read of a call that does not lag, a lag past the read's
    bound, a partial batch of a call that takes no batch)."""
    declared = {service.name: service for service in services}
    for fault in faults:
        if isinstance(fault, StaleRead | PartialBatch):
            problem = _provider_problem(fault, declared)
            if problem is not None:
                raise PlanError(f"fault {fault!r} cannot strike: {problem}")


def _provider_faults(faults: tuple[Any, ...]) -> dict[type, list[Any]]:
    """The plan's faults of a provider's own behaviour that strike at a request, by kind."""
    found: dict[type, list[Any]] = {}
    for fault in faults:
        if isinstance(fault, StaleRead | PartialBatch | RateLimited):
            found.setdefault(type(fault), []).append(fault)
    return found


def _provider_problem(
    fault: StaleRead | PartialBatch, services: Mapping[str, Service]
) -> str | None:
    service_name, _, op = fault.operation.partition(".")
    service = services.get(service_name)
    if service is None or op not in service.operations:
        return None  # the plan's check names what the world has
    operation = service.operation(op)
    if isinstance(fault, StaleRead):
        if operation.lag_ms is None:
            return (
                f"{fault.operation} is no lagging read; declare it Operation(fn, lag_ms=...) for "
                "its reads to lag"
            )
        longest = operation.longest_lag_ms()
        if fault.lag_ms is not None and not 0 <= fault.lag_ms <= longest:
            return (
                f"lag_ms={fault.lag_ms!r}; a StaleRead stretches the read's lag within its bound, "
                f"0 to {longest:g} ms (lag_ms=None: the bound)"
            )
        return None
    if operation.batch is None:
        return (
            f"{fault.operation} is no batch; declare it Operation(fn, batch='ARG') for the "
            "service to take part of its items"
        )
    if type(fault.taken) is not int or fault.taken < 0:
        return f"taken={fault.taken!r}; give a whole number of items >= 0"
    return None


def _timed_out(fields: dict[str, Any], message: str) -> ServiceTimedOut:
    service, operation = str(fields["op"]).split(".", 1)
    return ServiceTimedOut(message, service=service, operation=operation)


def _named(error: ServiceDeclined, fields: dict[str, Any]) -> ServiceDeclined:
    """A decline an operation raised, named after the call it answered."""
    error.service, error.operation = str(fields["op"]).split(".", 1)
    return error


def _json_copy(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{what} is not JSON-safe ({error}): a service call carries JSON"
        ) from None
