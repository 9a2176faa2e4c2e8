"""The search's first two stages, each a function that lists or yields the plans it wants tried
(stage 3, Hypothesis's, is :mod:`._drawn`). None of them runs a world: the search runs their
plans, in this process or on many workers, and feeds back what each world reached.

1. :func:`single_plans`: every single fault that strikes at an event of the world, the job's
   outside world first;
2. :func:`answer_in_doubt_then_down`: two faults that work together at a service: one call's
   answer left in doubt (its reply lost, or past the caller's timeout, or its request given up
   and delivered late), and the service down from just after that call ran, so that what the job
   does next (a retry, a fallback, a reconciliation) meets a refusal;
3. :func:`guided_pairs`: the single faults whose worlds reached the rarest windows, probes and
   marks, combined in pairs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..faults._plan import (
    UNTIL_EVENTS,
    CrashAfter,
    DelayLeg,
    DropLeg,
    EvictAfter,
    Fault,
    FaultPlan,
    HoldLeg,
    LateRequest,
    ServiceOutage,
)
from ._coverage import Coverage
from ._shape import ServiceCall, WorldShape

#: How many of the single faults that reached the rarest windows are combined in pairs.
_COMBINED = 10
#: Of those, in a world with services, how many are service faults (the rest strike the scope).
_COMBINED_SERVICE = 4


def single_plans(shape: WorldShape, share: int) -> list[FaultPlan]:
    """Stage 1: one fault at a time, in a fixed order, at most ``share`` of them (in a world of
    many calls, spread evenly over them, so Hypothesis gets the other half of the budget). The
    job's outside world first, and whole when it fits (few calls, and the effects a job exists
    for are there): each service call's faults, then each service's outages; then every scope
    call's event faults."""
    outside = _spread([*_service_call_plans(shape), *_outage_plans(shape)], share)
    return outside + _spread(list(_single_event_plans(shape)), share - len(outside))


def _service_call_plans(shape: WorldShape) -> Iterator[FaultPlan]:
    """For every service call of the clean world: its reply lost after it ran, held past the
    caller's own timeout, its request delivered after the caller gave up and moved on, its reply
    held until another drive's effect, and a crash right after it ran. (Never an eviction: a
    service call runs in no scope.)"""
    for call in shape.service_calls:
        drive, op, nth = call.drive, call.operation, call.nth
        for doubt in _answers_in_doubt(shape, call):
            yield FaultPlan((doubt,))
        if len(shape.drives) > 1:
            held = HoldLeg(
                drive=drive,
                operation=op,
                nth=nth,
                leg="reply",
                until="effect",
                max_ms=shape.lease_ms * 10.0,
            )
            yield FaultPlan((held,))
        yield FaultPlan((CrashAfter(drive=drive, operation=op, nth=nth),))


def _answers_in_doubt(shape: WorldShape, call: ServiceCall) -> tuple[Fault, Fault, Fault]:
    """The three ways ``call``'s caller is left not knowing whether it ran: its reply lost after
    it ran, its reply held past the caller's own timeout, its request given up and delivered after
    the caller moved on."""
    drive, op, nth = call.drive, call.operation, call.nth
    return (
        DropLeg(drive=drive, operation=op, nth=nth, leg="reply"),
        DelayLeg(drive=drive, operation=op, nth=nth, leg="reply", ms=shape.past_timeout_ms(call)),
        LateRequest(drive=drive, operation=op, nth=nth, ms=shape.moved_on_ms(call)),
    )


def answer_in_doubt_then_down(shape: WorldShape, share: int) -> list[FaultPlan]:
    """Stage 2, coordinated faults at a service, at most ``share`` of them: for every service
    call of the clean world, its answer left in doubt, and its service down from just after the
    call ran (the call itself runs), until the lease has passed twice (a retry of a later pass
    gets through) or until the world's end (none does). A refusal is honest about the request it
    answers, not about the earlier one that ran: a job that falls back on a refusal after a
    timeout does its effect twice, and no single fault shows it."""
    plans: list[FaultPlan] = []
    for call in shape.service_calls:
        doubts = _answers_in_doubt(shape, call)
        ran = call.sent_ms + shape.latency_of(call.service) + 1.0
        ends = (ran + 2.0 * shape.lease_ms, shape.horizon_ms + shape.lease_ms)
        for end in dict.fromkeys(max(end, ran + 1.0) for end in ends):
            down = ServiceOutage(service=call.service, from_ms=ran, to_ms=end)
            plans.extend(FaultPlan((doubt, down)) for doubt in doubts)
    return _spread(plans, share)


def _outage_plans(shape: WorldShape) -> Iterator[FaultPlan]:
    """Each service down over each of its windows (:meth:`WorldShape.outage_windows`)."""
    for service in shape.services:
        for begin, end in shape.outage_windows(service.name):
            yield FaultPlan((ServiceOutage(service=service.name, from_ms=begin, to_ms=end),))


def _single_event_plans(shape: WorldShape) -> Iterator[FaultPlan]:
    """One event fault at a time, over every scope call the clean world made: replies held first
    (the at-least-once window of a step body), then crashes and evictions after a call."""
    calls = [(d, op, n) for d, op, count in shape.calls for n in range(1, count + 1)]
    if len(shape.drives) > 1:
        for until in ("effect", "commit", "takeover", "step", "tick"):
            assert until in UNTIL_EVENTS
            for drive, op, nth in calls:
                yield FaultPlan(
                    (
                        HoldLeg(
                            drive=drive,
                            operation=op,
                            nth=nth,
                            leg="reply",
                            until=until,
                            max_ms=shape.lease_ms * 10.0,
                        ),
                    )
                )
    for drive, op, nth in calls:
        yield FaultPlan((CrashAfter(drive=drive, operation=op, nth=nth),))
    for drive, op, nth in calls:
        yield FaultPlan((EvictAfter(drive=drive, operation=op, nth=nth),))


def _spread(plans: list[FaultPlan], share: int) -> list[FaultPlan]:
    """At most ``share`` of ``plans``, spread evenly over them."""
    if len(plans) <= share:
        return plans
    return [plans[i * len(plans) // share] for i in range(share)]


def guided_pairs(
    singles: list[FaultPlan], coverage: Coverage, reached: Mapping[FaultPlan, frozenset[str]]
) -> Iterator[FaultPlan]:
    """Stage 2, guided by what the worlds reached: the single faults whose worlds entered the
    rarest windows, probes and marks, combined in pairs (a takeover held open while another
    pass crashes after its effect: the windows compose). A world with services pairs the rarest
    of its service calls' faults and of its outages too, so a lost reply meets a takeover and an
    outage a crash."""

    def rarest(plans: list[FaultPlan], most: int) -> list[FaultPlan]:
        ran = [plan for plan in plans if plan in reached]
        return sorted(ran, key=lambda plan: -coverage.rarity(reached[plan]))[:most]

    outages = [plan for plan in singles if plan.of(ServiceOutage)]
    calls = [plan for plan in singles if _strikes_a_service(plan) and plan not in outages]
    inside = [plan for plan in singles if not _strikes_a_service(plan)]
    if calls or outages:
        # One outage among the service faults: a service down meets a takeover or a crash.
        down = rarest(outages, 1)
        pool = [
            *rarest(inside, _COMBINED - _COMBINED_SERVICE),
            *rarest(calls, _COMBINED_SERVICE - len(down)),
            *down,
        ]
    else:
        pool = rarest(inside, _COMBINED)
    for i, first in enumerate(pool):
        for second in pool[i + 1 :]:
            yield FaultPlan((*first.faults, *second.faults))


def _strikes_a_service(plan: FaultPlan) -> bool:
    return any(
        isinstance(fault, ServiceOutage) or "." in str(getattr(fault, "operation", ""))
        for fault in plan.faults
    )
