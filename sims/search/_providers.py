"""Where a provider's own behaviour can strike, learnt from the clean world; the faults aimed there.

A provider goes wrong in ways of its own, not on the wire: a lagging read answers from before a
write, a rate limit turns a request away with a retry-after, a batch call takes part of its items,
a webhook is lost, late, or sent twice. Each of those faults counts as the provider does: requests
by their arrival at the service (``nth`` of an operation, or of the service), callbacks by the
order the service sent them. So the clean world's ``svc.exec`` and ``svc.callback`` events say
where they can strike (:func:`provider_shape`), and :func:`provider_faults` lists, for each such
place, the faults stage 2 tries one by one and Hypothesis draws from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from .._trace import Trace
from ..faults._plan import (
    DelayCallback,
    DropCallback,
    Fault,
    PartialBatch,
    RateLimited,
    RepeatCallback,
    StaleRead,
)
from ..world._services import Operation, Service

if TYPE_CHECKING:
    from ._shape import CallsMade, ServiceCall


@attrs.frozen(kw_only=True)
class Arrival:
    """The ``nth`` request of ``operation`` (``"SERVICE.OPERATION"``) to arrive at its service,
    its ``of_service``-th request overall, at ``at_ms``; ``lagging``: a read that may lag;
    ``items``: how many items it carried, for a batch operation (else None)."""

    operation: str
    nth: int
    of_service: int
    at_ms: float
    lagging: bool = False
    items: int | None = None

    @property
    def service(self) -> str:
        return self.operation.split(".", 1)[0]


@attrs.frozen(kw_only=True)
class CallbackSent:
    """The ``nth`` callback ``service`` sent in the clean world, at ``sent_ms``."""

    service: str
    nth: int
    sent_ms: float


@attrs.frozen(kw_only=True)
class ProviderShape:
    """Every request that arrived at a service of the clean world, and every callback sent."""

    arrivals: tuple[Arrival, ...] = ()
    callbacks: tuple[CallbackSent, ...] = ()
    #: Each service's callback retry schedule (``Service(callback_retries_ms=...)``), by name.
    retries_ms: tuple[tuple[str, tuple[float, ...]], ...] = ()
    #: The operations (``"SERVICE.OPERATION"``) that are lagging reads, and that take batches.
    lagging: tuple[str, ...] = ()
    batches: tuple[str, ...] = ()
    #: The services that declare a rate limit (``Service(rate_limit=...)``).
    rate_limited: tuple[str, ...] = ()


def provider_shape(trace: Trace, services: tuple[Service, ...]) -> ProviderShape:
    """What the clean world of ``trace`` says of its ``services``' own behaviour."""
    declared = {service.name: service for service in services}
    items: dict[tuple[str, int], int] = {}
    arrived: Counter[str] = Counter()
    arrivals, callbacks = [], []
    for event in trace.of("svc.send", "svc.exec", "svc.callback"):
        if event["ev"] == "svc.callback":
            callbacks.append(
                CallbackSent(
                    service=str(event["service"]), nth=int(event["cb"]), sent_ms=float(event["t"])
                )
            )
            continue
        name, op = str(event["op"]).split(".", 1)
        service = declared.get(name)
        if service is None or op not in service.operations:
            continue
        operation = service.operation(op)
        where = (str(event["drive"]), int(event["seq"]))
        if event["ev"] == "svc.send":
            listed = event["args"].get(operation.batch) if operation.batch else None
            if isinstance(listed, list):
                items[where] = len(listed)
            continue
        arrived[name] += 1
        arrived[str(event["op"])] += 1
        arrivals.append(
            Arrival(
                operation=str(event["op"]),
                nth=arrived[str(event["op"])],
                of_service=arrived[name],
                at_ms=float(event["t"]),
                lagging=operation.lag_ms is not None,
                items=items.get(where),
            )
        )
    return ProviderShape(
        arrivals=tuple(arrivals),
        callbacks=tuple(callbacks),
        retries_ms=tuple((s.name, tuple(s.callback_retries_ms)) for s in services),
        rate_limited=tuple(s.name for s in services if s.rate_limit is not None),
        lagging=_operations(services, lambda op: op.lag_ms is not None),
        batches=_operations(services, lambda op: op.batch is not None),
    )


def _operations(
    services: tuple[Service, ...], which: Callable[[Operation], bool]
) -> tuple[str, ...]:
    return tuple(
        f"{service.name}.{name}"
        for service in services
        for name in service.operations
        if which(service.operation(name))
    )


def faults_at_new_calls(
    shape: ProviderShape, calls: Sequence[ServiceCall], made: CallsMade
) -> Iterator[Fault]:
    """A provider's own faults at the service calls a faulted world made anew (a lookup after a
    timeout, a batch sent again): a lagging read at its longest lag, a batch that takes none of
    its items. Such a call is counted among every call of its operation the world made, in the
    order they were sent, as the service counts them arriving."""
    for call in calls:
        if call.operation not in shape.lagging and call.operation not in shape.batches:
            continue
        same = [c for c in made.services if c.operation == call.operation]
        nth = next((n for n, c in enumerate(same, start=1) if c == call), len(same))
        if call.operation in shape.lagging:
            yield StaleRead(operation=call.operation, nth=nth)
        else:
            yield PartialBatch(operation=call.operation, nth=nth, taken=0)


def provider_faults(
    shape: ProviderShape, round_trip_ms: Mapping[str, float], ticked_until_ms: float
) -> Iterator[Fault]:
    """Each fault of a provider's own behaviour, at each place of the clean world it can
    strike, in the order the world met them: a lagging read at the longest lag; a batch that
    takes none, one, or all but one of its items; each request refused by a rate limit for a
    second and a round trip, at a service that declares one; and each callback's faults
    (:func:`_callback_faults`) that land while the drives still tick (``ticked_until_ms``)."""
    for arrival in shape.arrivals:
        if arrival.lagging:
            yield StaleRead(operation=arrival.operation, nth=arrival.nth)
        if arrival.items is not None and arrival.items > 0:
            for taken in dict.fromkeys((0, 1, arrival.items - 1)):
                if taken < arrival.items:
                    yield PartialBatch(operation=arrival.operation, nth=arrival.nth, taken=taken)
    for arrival in shape.arrivals:
        if arrival.service not in shape.rate_limited:
            continue  # a service with no rate limit declared refuses by an outage (stage 2)
        trip = round_trip_ms.get(arrival.service, 1.0)
        wait = 1_000.0 + trip
        yield RateLimited(service=arrival.service, nth=arrival.of_service, retry_after_ms=wait)
    for sent in shape.callbacks:
        trip = round_trip_ms.get(sent.service, 1.0)
        yield from _callback_faults(shape, sent, trip, ticked_until_ms)


def _callback_faults(
    shape: ProviderShape, sent: CallbackSent, trip: float, ticked_until_ms: float
) -> Iterator[Fault]:
    """A callback lost on either leg (sent again on the service's schedule), held past the next
    one it sent (or a round trip), and sent twice: at once, and after each of the service's own
    retry delays (a provider redelivering what it believes failed). A delivery that would land
    after the world's drives stopped ticking is not aimed at: a run it started would never be
    driven, which says nothing of the job."""
    yield DropCallback(service=sent.service, nth=sent.nth, leg="request")
    yield DropCallback(service=sent.service, nth=sent.nth, leg="reply")
    later = [c.sent_ms for c in shape.callbacks if c.service == sent.service and c.nth > sent.nth]
    held = round((later[0] - sent.sent_ms + trip) if later else trip, 3)
    if sent.sent_ms + held < ticked_until_ms:
        yield DelayCallback(service=sent.service, nth=sent.nth, ms=held)
    retries = dict(shape.retries_ms).get(sent.service, ())
    for after in dict.fromkeys((0.0, *retries)):
        if sent.sent_ms + after + trip < ticked_until_ms:
            yield RepeatCallback(service=sent.service, nth=sent.nth, after_ms=after)
