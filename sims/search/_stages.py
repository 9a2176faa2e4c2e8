"""The search's stages after the clean world, but Hypothesis's (:mod:`._drawn`), each a function
that lists or yields the plans it wants tried, numbered as docs/search.md numbers them. None of
them runs a world: the search runs their plans, in this process or on many workers, and feeds back
what each world reached.

1b. :func:`deploy_plans`, in a world with versions of its jobs: a deploy aimed at each of the
   job's own windows (between two steps of a pass, between a failed pass and its retry, with a
   pass in flight on the old version);
2. :func:`single_plans`: every single fault that strikes at an event of the world, the job's
   outside world first, and each drive kept away for a while;
2b. :func:`start_plans`: each start of the world (the scenario's, a handler's) lost, answered
   late, delivered late, and sent again by its caller, landing before, during and after the run
   it made: a start joins only a live run;
3. :func:`answer_in_doubt_then_down`: two faults that work together at a service: one call's
   answer left in doubt (its reply lost, or past the caller's timeout, or its request given up
   and delivered late), and the service down from just after that call ran, so that what the job
   does next (a retry, a fallback, a reconciliation) meets a refusal;
3b. :func:`in_own_time`: a service call's reply held, or its service down after its answer was
   lost, until just before and just past each time the service declares (a client's patience,
   how long keys are kept) and each retry of the job's schedule;
4. :func:`second_faults`: a fault, then a second aimed at the world the first one made: at the
   calls a drive made there and never made in the clean world (a takeover's pass, a retry), or,
   when the first kept a drive away, at the calls of the drives left, past the takeover that no
   longer comes;
5. :func:`guided_pairs`: the single faults whose worlds reached the rarest windows, probes and
   marks, combined in pairs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping

import attrs

from ..faults._plan import (
    OPERATIONS,
    UNTIL_EVENTS,
    CrashAfter,
    CrashDrive,
    DelayLeg,
    Deploy,
    DeployAfter,
    DropLeg,
    EvictAfter,
    Fault,
    FaultPlan,
    HoldLeg,
    LateRequest,
    RepeatStart,
    ServiceOutage,
    Until,
)
from ._coverage import Coverage
from ._providers import faults_at_new_calls
from ._shape import CallsMade, ServiceCall, StartCall, WorldShape

#: How many of the single faults that reached the rarest windows are combined in pairs.
_COMBINED = 10
#: Of those, in a world with services, how many are service faults (the rest strike the scope).
_COMBINED_SERVICE = 4


def single_plans(shape: WorldShape, share: int) -> list[FaultPlan]:
    """Stage 2: one fault at a time, in a fixed order, at most ``share`` of them (in a world of
    many calls, spread evenly over them, so Hypothesis gets the other half of the budget). The
    job's outside world first, and whole when it fits (few calls, and the effects a job exists
    for are there): each service call's faults, then each of the providers' own (a stale read,
    a partial batch, a rate limit, a callback lost, late or sent twice), then each service's
    outages; then every scope
    call's event faults; then each drive kept away (:func:`_kept_away`), which changes nothing
    alone in a world whose other drives take its work over, and is what :func:`second_faults`
    builds on."""
    away = _kept_away(shape)[: max(0, share // 4)]
    provider = [FaultPlan((fault,)) for fault in shape.provider_faults()]
    outside = _spread(
        [*_service_call_plans(shape), *provider, *_outage_plans(shape)], share - len(away)
    )
    inside = _spread(list(_single_event_plans(shape)), share - len(outside) - len(away))
    return outside + inside + away


def deploy_plans(shape: WorldShape, share: int) -> list[FaultPlan]:
    """Stage 1b, in a world with versions of its jobs, at most ``share`` plans: each version
    deployed at each of the job's windows (:func:`_deploy_windows`), in that order, so the
    simplest window that shows a bug is the one found."""
    plans = [
        FaultPlan(faults)
        for version in shape.versions
        for faults in _deploy_windows(shape, version)
    ]
    return _spread(plans, share)


def _deploy_windows(shape: WorldShape, version: str) -> Iterator[tuple[Fault, ...]]:
    """Where a deploy of ``version`` meets a run of the old code: right after each step a pass
    recorded (the next pass, on the new code, reads the old one's memo); after each service
    call's answer was lost and the pass failed, before its retry; right after each service call
    ran, its step not yet recorded; after each pass began, the other drives first, so that pass
    goes on on the old version while the new one serves; and a rolling deploy a lease apart at
    the first moments passes run."""
    made = shape.calls
    away = 3.0 * shape.lease_ms
    patches = {drive: n for drive, op, n in made if op == "patch"}
    for drive, op, count in made:
        if op == "record_step":
            for nth in range(1, count + 1):
                yield (DeployAfter(version=version, drive=drive, operation=op, nth=nth),)
    for call in shape.service_calls:
        nth = patches.get(call.drive, 0) + 1
        lost = DropLeg(drive=call.drive, operation=call.operation, nth=call.nth, leg="reply")
        yield lost, DeployAfter(version=version, drive=call.drive, operation="patch", nth=nth)
    for call in shape.service_calls:
        yield (
            DeployAfter(version=version, drive=call.drive, operation=call.operation, nth=call.nth),
        )
    for drive, op, count in made:
        others = tuple(other for other in shape.drives if other != drive)
        if op != "begin" or not others:
            continue
        for nth in range(1, count + 1):
            yield (
                DeployAfter(
                    version=version,
                    drive=drive,
                    operation=op,
                    nth=nth,
                    drives=(*others, drive),
                    every_ms=away,
                ),
            )
    for at in shape.crash_times()[:4]:
        yield (Deploy(version=version, at_ms=at, every_ms=float(shape.lease_ms)),)


def _kept_away(shape: WorldShape) -> list[FaultPlan]:
    """Each drive of a world of several, killed just before its first tick and kept away for a
    while (:func:`_kept_away_ms`): the other drives tick on and take its work over."""
    if len(shape.drives) < 2:
        return []
    firsts = {cadence.drive: cadence.first_ms for cadence in shape.cadences}
    down = _kept_away_ms(shape)
    return [
        FaultPlan((CrashDrive(drive=drive, at_ms=max(0.0, firsts[drive] - 1.0), down_ms=down),))
        for drive in shape.drives
        if drive in firsts
    ]


def _kept_away_ms(shape: WorldShape) -> float:
    """How long a drive kept away is down: three of the world's longest leases, time enough for
    a lease it held to run out and another drive to take the run over and end it; then it comes
    back (a fault is bounded: a drive down for good would leave runs only it drives running)."""
    return 3.0 * max(shape.leases or (shape.lease_ms,))


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
            yield FaultPlan((_held_reply(shape, drive, op, nth, "effect"),))
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


def start_plans(shape: WorldShape, share: int) -> list[FaultPlan]:
    """Stage 2b, at most ``share`` plans: every start of the clean world, the scenario's and its
    handlers', struck as a call: its request lost, its reply lost after it ran, its reply held
    until the run it made has ended; its request given up by its caller and delivered late, and
    the same start sent again by its caller, each landing before the run's first pass, during
    the run, just after it ended, and just after the run a start sent again made has ended
    (:meth:`StartCall.landing_ms`). The start's caller starts again when it fails (``World.start``
    does; a handler's pass fails and is retried): a late first start then makes a second run."""
    plans = [FaultPlan((fault,)) for start in shape.starts for fault in _start_faults(shape, start)]
    return _spread(plans, share)


def _start_faults(shape: WorldShape, start: StartCall) -> Iterator[Fault]:
    """The faults of one start, the lost ones first, then the late, then the repeated."""
    drive, nth, op = start.drive, start.nth, "start_or_join"
    yield DropLeg(drive=drive, operation=op, nth=nth, leg="request")
    yield DropLeg(drive=drive, operation=op, nth=nth, leg="reply")
    landings = start.landing_ms(shape.horizon_ms, shape.start_again_ms())
    if len(landings) > 2:  # past the run's end: the caller waits for an answer that long
        yield DelayLeg(drive=drive, operation=op, nth=nth, leg="reply", ms=landings[2])
    for ms in landings:
        yield LateRequest(drive=drive, operation=op, nth=nth, ms=ms)
    for ms in landings:
        yield RepeatStart(drive=drive, nth=nth, after_ms=ms)


def answer_in_doubt_then_down(shape: WorldShape, share: int) -> list[FaultPlan]:
    """Stage 3, coordinated faults at a service, at most ``share`` of them: for every service
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


def in_own_time(shape: WorldShape, share: int) -> list[FaultPlan]:
    """Stage 3b, faults timed by the services' own times and the job's retry schedule, at most
    ``share`` plans, for every service call of the clean world: its reply held just inside and
    just past each time its service declares (a client that gives up after 8 s needs a reply
    8 s late, which no delay counted in leases draws), then its answer lost with the service
    down from just after it ran until each end of :meth:`WorldShape.outage_ends` (a key the
    provider forgets after a minute, met only by the retry that comes after the minute)."""
    delays: list[FaultPlan] = []
    outages: list[FaultPlan] = []
    for call in shape.service_calls:
        drive, op, nth = call.drive, call.operation, call.nth
        trip = shape.round_trip_ms(call.service)
        for ms in shape.times_of(call.service):
            for delay in (ms - trip, ms + 1.0):
                if delay > 0:
                    held = DelayLeg(drive=drive, operation=op, nth=nth, leg="reply", ms=delay)
                    delays.append(FaultPlan((held,)))
        lost = DropLeg(drive=drive, operation=op, nth=nth, leg="reply")
        for end in shape.outage_ends(call):
            down = ServiceOutage(service=call.service, from_ms=shape.ran_ms(call), to_ms=end)
            outages.append(FaultPlan((lost, down)))
    return _spread(delays + outages, share)


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
                yield FaultPlan((_held_reply(shape, drive, op, nth, until),))
    for drive, op, nth in calls:
        yield FaultPlan((CrashAfter(drive=drive, operation=op, nth=nth),))
    for drive, op, nth in calls:
        yield FaultPlan((EvictAfter(drive=drive, operation=op, nth=nth),))


def _held_reply(shape: WorldShape, drive: str, op: str, nth: int, until: Until) -> HoldLeg:
    """The reply of a call held until another drive does ``until``, ten leases at the most."""
    return HoldLeg(
        drive=drive, operation=op, nth=nth, leg="reply", until=until, max_ms=shape.lease_ms * 10.0
    )


def _spread(plans: list[FaultPlan], share: int) -> list[FaultPlan]:
    """At most ``share`` of ``plans``, spread evenly over them."""
    if len(plans) <= share:
        return plans
    return [plans[i * len(plans) // share] for i in range(share)]


def guided_pairs(
    singles: list[FaultPlan], coverage: Coverage, reached: Mapping[FaultPlan, frozenset[str]]
) -> Iterator[FaultPlan]:
    """Stage 5, guided by what the worlds reached: the single faults whose worlds entered the
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


#: The events a second fault holds a scope call's reply until, in the order tried (after the
#: crashes, before the eviction: see ``_aimed_at``).
_SECOND_UNTIL: tuple[Until, ...] = ("takeover", "effect", "commit", "tick", "step")


@attrs.frozen
class _Moved:
    """What a fault changed of who did what, against the world before it: the calls its world
    made that the one before did not (by drive, operation and nth), and the drives that made
    fewer. A call is new when its drive made more of that operation, or when it was made in a
    pass of a run its drive never ran a pass of before (the takeover's drive, the retry's drive),
    even when the counts came out the same: two drives that swapped runs."""

    scope: tuple[tuple[str, str, int], ...]
    services: tuple[ServiceCall, ...]
    away: tuple[str, ...]

    @classmethod
    def of(cls, before: CallsMade, made: CallsMade) -> _Moved:
        counted, after = before.counts(), made.counts()
        elsewhere = set(made.passes) - set(before.passes)
        moved_runs = {
            (drive, op, nth) for drive, op, nth, run in made.on_runs if (drive, run) in elsewhere
        }
        # The calls that act on a run (not the due list's reads, one per idle tick).
        scope = tuple(
            (drive, op, nth)
            for drive, op, n in made.scope
            if op in OPERATIONS
            for nth in range(1, n + 1)
            if nth > counted[(drive, op)] or (drive, op, nth) in moved_runs
        )
        services = tuple(
            call
            for call in made.services
            if call.nth > counted[(call.drive, call.operation)]
            or (call.drive, call.run) in elsewhere
        )
        # A drive kept away made fewer calls that act on a run (not fewer idle reads: a world
        # that ended sooner made those too).
        fewer = {
            drive
            for (drive, op), n in counted.items()
            if (op in OPERATIONS or "." in op) and after[(drive, op)] < n
        }
        return cls(scope, services, tuple(sorted(fewer)))

    def key(self) -> tuple[object, ...]:
        return (self.scope, tuple((c.drive, c.operation, c.nth) for c in self.services), self.away)

    @property
    def took_over(self) -> bool:
        """Whether a drive began a pass it did not begin in the world before."""
        return any(op == "begin" for _, op, _ in self.scope)


def second_faults(
    shape: WorldShape, firsts: Mapping[FaultPlan, CallsMade], share: int
) -> list[FaultPlan]:
    """Stage 4, a fault and a second aimed at the world the first one made, at most ``share``:
    :func:`next_faults` over the worlds of the single faults, each against the clean world."""
    clean = shape.made()
    return next_faults(shape, {first: (clean, made) for first, made in firsts.items()}, share)


def next_faults(
    shape: WorldShape,
    worlds: Mapping[FaultPlan, tuple[CallsMade, CallsMade]],
    share: int,
    seen: set[tuple[object, ...]] | None = None,
) -> list[FaultPlan]:
    """Stage 4 and the chains after it: one fault more, aimed at the world each plan of
    ``worlds`` made (given as the calls of the world before its last fault and of its own), at
    most ``share`` plans.

    A clean world shows which drive runs which pass; a fault changes that: a pass fails and
    another drive takes the run over, a retry makes a call again, a lookup or a fallback makes a
    call never made before, a drive kept away leaves its work to the others. The next fault
    strikes the calls of THAT world: the calls a drive made there and not in the world before
    (:class:`_Moved`), or, when the last fault kept a drive away, every call of the drives left
    (a reply held past the lease is no longer cut short by a takeover). Of the plans whose last
    fault changed the same calls, the first one stands for all (``seen`` carries that across the
    depths of a chain). The plans are dealt out round-robin, takeovers first, so that each world
    gets its most likely next faults before any gets its least likely ones."""
    seen = set() if seen is None else seen
    moved: list[tuple[FaultPlan, _Moved, CallsMade]] = []
    for plan, (before, made) in worlds.items():
        change = _Moved.of(before, made)
        if change.key() in seen or not (change.scope or change.services or change.away):
            continue
        seen.add(change.key())
        moved.append((plan, change, made))
    moved.sort(key=lambda each: not each[1].took_over)  # stable: the given order within each
    lists = [
        [FaultPlan((*plan.faults, fault)) for fault in _aimed_at(shape, change, made=made)]
        for plan, change, made in moved
    ]
    dealt = (plan for row in itertools.zip_longest(*lists) for plan in row if plan is not None)
    return list(itertools.islice(dict.fromkeys(dealt), share))


def _aimed_at(shape: WorldShape, change: _Moved, *, made: CallsMade) -> Iterator[Fault]:
    """The second faults for the world ``change`` describes, most likely first: the new calls,
    or, for a drive kept away, the calls of every drive left."""
    scope = list(change.scope)
    services = list(change.services)
    if change.away and not scope and not services:
        scope = [
            (d, op, nth)
            for d, op, n in made.scope
            if d not in change.away and op in OPERATIONS
            for nth in range(1, n + 1)
        ]
        services = [call for call in made.services if call.drive not in change.away]
    # A pass the first fault failed, and a deploy before its retry: the retry runs new code
    # over the failed pass's ledger.
    for version in shape.versions:
        for drive, op, nth in scope:
            if op == "patch":
                yield DeployAfter(version=version, drive=drive, operation=op, nth=nth)
    # Killed right after the call and kept away too: the rest of the run is another drive's.
    away = _kept_away_ms(shape)
    # A lookup made anew (after a timeout, say) that answers from before the write it looks
    # for; a batch sent again that is taken in part.
    yield from faults_at_new_calls(shape.provider, services, made)
    for call in services:
        yield from _answers_in_doubt(shape, call)
        # Refused: the pass that made the call fails (a retry's, a takeover's pass failed too).
        trip = shape.round_trip_ms(call.service)
        yield ServiceOutage(service=call.service, from_ms=call.sent_ms, to_ms=call.sent_ms + trip)
        yield CrashAfter(drive=call.drive, operation=call.operation, nth=call.nth)
        yield CrashAfter(drive=call.drive, operation=call.operation, nth=call.nth, down_ms=away)
    for drive, op, nth in scope:
        yield CrashAfter(drive=drive, operation=op, nth=nth)
    for drive, op, nth in scope:
        yield CrashAfter(drive=drive, operation=op, nth=nth, down_ms=away)
    for until in _SECOND_UNTIL:
        for drive, op, nth in scope:
            yield _held_reply(shape, drive, op, nth, until)
    for drive, op, nth in scope:
        yield EvictAfter(drive=drive, operation=op, nth=nth)
