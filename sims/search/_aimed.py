"""Fault plans as Hypothesis strategies, aimed at a world's windows.

Strategies list the faults that aim at an event first, because Hypothesis shrinks towards the
first alternative: a violation that one held reply or one crash after a call can cause is reported
as that one fault. Then the leg faults, with delays in the world's own terms
(:meth:`WorldShape.window_delays`), then the timed faults at moments inside passes, then the
rest. Every number a strategy draws comes from the world's shape, never from fixed edges alone.

A world with services gets the same faults on its service calls, after the scope's in each group
(a world without services draws exactly what it drew before): held, dropped and delayed legs,
crashes after a call, requests given up on, with delays in the call's own terms first (past the
caller's timeout, the timeout plus the service's latency: :meth:`WorldShape.service_delays`),
and each service's outages over windows of its calls. Never an eviction after a service call:
it runs in no scope.

A world whose drives start runs (every world but one that restores its runs) gets its starts
struck as calls, last of all: a start lost, given up on and delivered late, or sent again by its
caller, landing before, during and after the run it made (:meth:`StartCall.landing_ms`).
"""

from __future__ import annotations

import attrs
from hypothesis import strategies as st

from ..faults._plan import (
    OPERATIONS,
    PAUSE_POINTS,
    UNTIL_EVENTS,
    UPSTREAM_KINDS,
    CrashAfter,
    CrashDrive,
    DelayLeg,
    Deploy,
    DeployAfter,
    DropLeg,
    Evict,
    EvictAfter,
    Fault,
    FaultPlan,
    HoldLeg,
    LateRequest,
    PauseDrive,
    PctSchedule,
    RepeatStart,
    ServiceOutage,
    StoreClockFault,
    UpstreamFailure,
)
from ._shape import ServiceCall, StartCall, WorldShape


def _call(shape: WorldShape) -> st.SearchStrategy[tuple[str, str, int]]:
    """A (drive, operation, nth) that the clean world made, or, for a shape learnt from nothing,
    any of the first four calls of any operation."""
    made = [(d, op, n) for d, op, n in shape.calls if op in OPERATIONS]
    if not made:
        return st.tuples(
            st.sampled_from(shape.drives), st.sampled_from(OPERATIONS), st.integers(1, 4)
        )
    # Calls beyond the clean world's count can still happen (a retry, a takeover): one more.
    return st.sampled_from(made).flatmap(
        lambda call: st.tuples(st.just(call[0]), st.just(call[1]), st.integers(1, call[2] + 1))
    )


def _service_targets(shape: WorldShape) -> list[ServiceCall]:
    """The service calls a fault may strike: every one of the clean world, and the next call of
    each drive and operation (a retry, a fallback's or a takeover's call), with the timeout of
    the last one it made."""
    targets = list(shape.service_calls)
    last = {(call.drive, call.operation): call for call in shape.service_calls}
    targets.extend(attrs.evolve(call, nth=call.nth + 1) for call in last.values())
    return targets


def _service_call(shape: WorldShape) -> st.SearchStrategy[ServiceCall]:
    return st.sampled_from(_service_targets(shape))


def _service_delays(shape: WorldShape, call: ServiceCall) -> st.SearchStrategy[float]:
    """Delays of ``call``: its own terms first, then the world's."""
    return st.sampled_from(
        tuple(dict.fromkeys((*shape.service_delays(call), *shape.window_delays())))
    )


def service_event_faults(shape: WorldShape) -> st.SearchStrategy[Fault]:
    """A service call's leg held until another drive acts (an effect first), or a crash right
    after it ran."""
    until = st.sampled_from(("effect", *(u for u in UNTIL_EVENTS if u != "effect")))
    faults: list[st.SearchStrategy[Fault]] = [
        st.builds(
            lambda call, leg, until, max_ms: HoldLeg(
                drive=call.drive,
                operation=call.operation,
                nth=call.nth,
                leg=leg,
                until=until,
                max_ms=max_ms,
            ),
            _service_call(shape),
            st.sampled_from(("reply", "request")),
            until,
            st.sampled_from((shape.lease_ms * 10.0, shape.lease_ms * 3.0)),
        ),
        st.builds(
            lambda call, down: CrashAfter(
                drive=call.drive, operation=call.operation, nth=call.nth, down_ms=down
            ),
            _service_call(shape),
            st.sampled_from((0.0, float(shape.lease_ms), shape.lease_ms * 3.0)),
        ),
    ]
    if len(shape.drives) < 2:  # a hold waits for ANOTHER drive
        faults = faults[1:]
    return st.one_of(*faults)


def service_leg_faults(shape: WorldShape) -> st.SearchStrategy[Fault]:
    """A service call's leg delayed (its reply first) or dropped, or its request given up on by
    its caller and delivered later, in the call's own terms."""
    legs = st.sampled_from(("reply", "request"))

    def delayed(call: ServiceCall) -> st.SearchStrategy[Fault]:
        drive, op, nth = call.drive, call.operation, call.nth
        delays = _service_delays(shape, call)
        return st.one_of(
            st.builds(
                lambda leg, ms: DelayLeg(drive=drive, operation=op, nth=nth, leg=leg, ms=ms),
                legs,
                delays,
            ),
            st.builds(lambda leg: DropLeg(drive=drive, operation=op, nth=nth, leg=leg), legs),
            st.builds(lambda ms: LateRequest(drive=drive, operation=op, nth=nth, ms=ms), delays),
        )

    return _service_call(shape).flatmap(delayed)


def outage_faults(shape: WorldShape) -> st.SearchStrategy[Fault]:
    """A service down over one of its windows (:meth:`WorldShape.outage_windows`), or from just
    after one of its calls ran until a moment of its own time or the retry schedule
    (:meth:`WorldShape.own_time_windows`)."""
    windows = [
        ServiceOutage(service=service.name, from_ms=begin, to_ms=end)
        for service in shape.services
        for begin, end in (
            *shape.outage_windows(service.name),
            *shape.own_time_windows(service.name),
        )
    ]
    return st.sampled_from(windows)


def event_faults(shape: WorldShape) -> st.SearchStrategy[Fault]:
    """The faults that strike at an event: a leg held until another drive acts, a crash or an
    eviction right after a call ran."""
    legs = st.sampled_from(("reply", "request"))
    until = st.sampled_from(UNTIL_EVENTS)
    max_ms = st.sampled_from((shape.lease_ms * 10.0, shape.lease_ms * 3.0))
    downs = st.sampled_from((0.0, float(shape.lease_ms), shape.lease_ms * 3.0))
    faults: list[st.SearchStrategy[Fault]] = [
        st.builds(
            lambda call, leg, until, max_ms: HoldLeg(
                drive=call[0], operation=call[1], nth=call[2], leg=leg, until=until, max_ms=max_ms
            ),
            _call(shape),
            legs,
            until,
            max_ms,
        ),
        st.builds(
            lambda call, down: CrashAfter(
                drive=call[0], operation=call[1], nth=call[2], down_ms=down
            ),
            _call(shape),
            downs,
        ),
        st.builds(
            lambda call: EvictAfter(drive=call[0], operation=call[1], nth=call[2]), _call(shape)
        ),
    ]
    if len(shape.drives) < 2:  # a hold waits for ANOTHER drive
        faults = faults[1:]
    return st.one_of(*faults)


def deploy_faults(shape: WorldShape) -> st.SearchStrategy[Fault]:
    """A deploy of one of the world's versions: right after a call (a step recorded, a failed
    pass's outcome, a pass begun, a service call), or at a moment inside passes; the drives
    restart at once or a lease or three apart, the struck drive first or last."""
    version = st.sampled_from(shape.versions)
    every = st.sampled_from((0.0, float(shape.lease_ms), shape.lease_ms * 3.0))
    calls = [(d, op, n) for d, op, n in shape.calls if op in ("record_step", "patch", "begin")]
    calls += [(d, "patch", 1) for d in shape.drives]  # after a failed pass, where one fails
    calls += [(c.drive, c.operation, c.nth) for c in shape.service_calls]

    def after(version: str, call: tuple[str, str, int], every: float, last: bool) -> Fault:
        drive, op, nth = call
        others = tuple(other for other in shape.drives if other != drive)
        order = (*others, drive) if last and others else ()
        return DeployAfter(
            version=version, drive=drive, operation=op, nth=nth, drives=order, every_ms=every
        )

    return st.one_of(
        st.builds(after, version, st.sampled_from(calls), every, st.booleans()),
        st.builds(
            lambda version, at, every: Deploy(version=version, at_ms=at, every_ms=every),
            version,
            st.sampled_from(shape.crash_times()),
            every,
        ),
    )


def leg_faults(shape: WorldShape) -> st.SearchStrategy[Fault]:
    delays = st.sampled_from(shape.window_delays())
    legs = st.sampled_from(("request", "reply"))
    return st.one_of(
        st.builds(
            lambda call, leg, ms: DelayLeg(
                drive=call[0], operation=call[1], nth=call[2], leg=leg, ms=ms
            ),
            _call(shape),
            legs,
            delays,
        ),
        st.builds(
            lambda call, leg: DropLeg(drive=call[0], operation=call[1], nth=call[2], leg=leg),
            _call(shape),
            legs,
        ),
    )


def other_faults(shape: WorldShape) -> st.SearchStrategy[Fault]:
    delays = st.sampled_from(shape.window_delays())
    drive = st.sampled_from(shape.drives)
    when = st.sampled_from(shape.crash_times())
    return st.one_of(
        st.builds(
            CrashDrive,
            drive=drive,
            at_ms=when,
            down_ms=st.sampled_from((0.0, float(shape.lease_ms), shape.lease_ms * 2.0)),
        ),
        st.builds(Evict, scope=st.sampled_from(shape.scopes), at_ms=when),
        st.builds(
            lambda call, ms: LateRequest(drive=call[0], operation=call[1], nth=call[2], ms=ms),
            _call(shape),
            delays,
        ),
        st.builds(
            PauseDrive,
            drive=drive,
            nth=st.integers(1, 6),
            ms=delays,
            where=st.sampled_from(PAUSE_POINTS),
        ),
        st.builds(
            PctSchedule,
            seed=st.integers(0, 2**16),
            depth=st.integers(2, 4),
            within=st.just(max(100, shape.events * 4)),
        ),
        st.builds(
            UpstreamFailure,
            first=st.integers(1, 20),
            count=st.integers(1, 3),
            what=st.sampled_from(UPSTREAM_KINDS),
        ),
        # Every skew and drift but the true clock, which changes nothing and is refused.
        st.sampled_from(
            [(s, d) for s in (0.0, 100.0, -100.0) for d in (0.0, 0.01, -0.01) if s or d]
        ).map(lambda clock: StoreClockFault(skew_ms=clock[0], drift=clock[1])),
    )


def start_faults(shape: WorldShape) -> st.SearchStrategy[Fault]:
    """A start of the clean world struck as a call: given up on by its caller and delivered
    late, or sent again, landing before, during or after the run it made; or a leg of it lost."""
    again_ms = shape.start_again_ms()
    op = "start_or_join"

    def struck(start: StartCall) -> st.SearchStrategy[Fault]:
        drive, nth = start.drive, start.nth
        landings = st.sampled_from(start.landing_ms(shape.horizon_ms, again_ms))
        return st.one_of(
            st.builds(lambda ms: LateRequest(drive=drive, operation=op, nth=nth, ms=ms), landings),
            st.builds(lambda ms: RepeatStart(drive=drive, nth=nth, after_ms=ms), landings),
            st.builds(
                lambda leg: DropLeg(drive=drive, operation=op, nth=nth, leg=leg),
                st.sampled_from(("reply", "request")),
            ),
        )

    return st.sampled_from(shape.starts).flatmap(struck)


def aimed_plans(
    shape: WorldShape, *, max_faults: int = 4, kinds: str = "all"
) -> st.SearchStrategy[FaultPlan]:
    """Plans of up to ``max_faults`` faults aimed at ``shape``: ``kinds`` is ``"events"`` (held
    legs, crashes and evictions after a call), ``"legs"`` (those and late or dropped legs) or
    ``"all"``."""
    services = bool(shape.service_calls)
    # A world with versions of its jobs is there to test its deploys: they come first.
    parts = [deploy_faults(shape)] if shape.versions else []
    parts.append(event_faults(shape))
    if services:
        parts.append(service_event_faults(shape))
    if kinds in ("legs", "all"):
        parts.append(leg_faults(shape))
        if services:
            parts.append(service_leg_faults(shape))
        if shape.starts:
            parts.append(start_faults(shape))
    if kinds == "all":
        parts.append(other_faults(shape))
        if shape.services:
            parts.append(outage_faults(shape))
        provider = shape.provider_faults()
        if provider:
            # A provider's own behaviour (a stale read, a partial batch, a rate limit, a
            # callback lost, late or sent twice), where the clean world met it.
            parts.append(st.sampled_from(provider))
    fault = st.one_of(*parts)
    return st.lists(fault, max_size=max_faults).map(_one_of_each_world_fault)


def _one_of_each_world_fault(faults: list[Fault]) -> FaultPlan:
    """The plan of ``faults`` with only the first store clock and the first scheduler: a world
    has one of each."""
    kept: list[Fault] = []
    for fault in faults:
        if isinstance(fault, StoreClockFault | PctSchedule) and any(
            type(other) is type(fault) for other in kept
        ):
            continue
        kept.append(fault)
    return FaultPlan(tuple(kept))


def fault_plans(
    *,
    drives: tuple[str, ...] = ("cron", "alarm"),
    scopes: tuple[str, ...] = ("scope-1", "scope-2"),
    lease_ms: int = 1_000,
    max_faults: int = 4,
    legs_only: bool = False,
    shape: WorldShape | None = None,
) -> st.SearchStrategy[FaultPlan]:
    """Fault plans over a world's drives and scopes. Given a ``shape`` (``world_shape`` learns
    one), the plans aim at its windows; without one, at the spec's edges for ``lease_ms``.
    ``legs_only`` draws only the faults of a call: held, late, dropped legs and crashes after a
    call."""
    if shape is None:
        # The shape's window delays include the spec's edges for the lease.
        shape = WorldShape(drives=drives, scopes=scopes, lease_ms=lease_ms, leases=(lease_ms,))
    return aimed_plans(shape, max_faults=max_faults, kinds="legs" if legs_only else "all")
