"""A fault plan checked against its world before anything runs, and its faults that never fired.

A fault that names a drive, a scope, an operation or a leg the world does not have cannot strike,
and a world run under it would report a clean verdict about faults that never happened. So a plan
is checked first: each fault against the world's declared drives and scopes, the operations a
drive's wire carries and the numbers each field allows; the first fault that does not fit is a
one-line error (a ``PlanError``, which the CLI turns into exit code 2).

A fault that fits can still miss: the third ``begin`` of a drive that only ever sends two. Every
fault is marked as it fires; those left unmarked at the end are reported with the verdict, and a
scenario whose own plan documents them fails.
"""

from __future__ import annotations

import difflib
import math
import sys
from collections.abc import Iterable, Mapping

from driver import STORE_PORT_OPERATIONS

from ._plan import (
    PAUSE_POINTS,
    UNTIL_EVENTS,
    UPSTREAM_KINDS,
    CrashAfter,
    CrashDrive,
    DelayCallback,
    DelayLeg,
    Deploy,
    DeployAfter,
    DropCallback,
    DropLeg,
    Evict,
    EvictAfter,
    Fault,
    FaultPlan,
    HoldLeg,
    LateRequest,
    PartialBatch,
    PauseDrive,
    PctSchedule,
    RateLimited,
    RepeatCallback,
    RepeatStart,
    ServiceOutage,
    StaleRead,
    StoreClockFault,
    UpstreamFailure,
)

#: Every operation a drive's wire carries: the store port's, and the door's ``invoke``.
DRIVE_OPERATIONS = (*STORE_PORT_OPERATIONS, "invoke")
LEGS = ("request", "reply")


#: The largest skew of the store's clock, either way: a year, the longest lease.
SKEW_MAX_MS = 31_536_000_000
#: PCT's bounds: change points a depth draws, and the task steps they are drawn among.
PCT_MAX_DEPTH = 1_000
PCT_MAX_WITHIN = 1_000_000_000
_FLOAT_INT_MAX = int(sys.float_info.max)


class PlanError(ValueError):
    """A fault plan that does not fit its world."""


def did_you_mean(name: object, names: Iterable[str]) -> str:
    """``; did you mean 'NAME'?``, naming the one of ``names`` closest to ``name`` (a typo),
    or "" when none is close: said after the list of every name, which is easy to read past."""
    return _meant(_closest(name, names))


def _closest(name: object, names: Iterable[str]) -> str | None:
    if not isinstance(name, str):
        return None
    close = difflib.get_close_matches(name, list(names), n=1)
    return close[0] if close else None


def _meant(close: str | None) -> str:
    return f"; did you mean {close!r}?" if close is not None else ""


def _call_meant(operation: str, services: Mapping[str, tuple[str, ...]], calls: set[str]) -> str:
    """:func:`did_you_mean` for a service call. Of a service the world has, only its operations
    are compared: the ``SERVICE.`` they share would make any of them look close (``bank.charge``
    is no typo of ``bank.refund``)."""
    service, _, name = operation.partition(".")
    if service not in services:
        return did_you_mean(operation, calls)
    close = _closest(name, services[service])
    return _meant(None if close is None else f"{service}.{close}")


def check_plan(
    plan: FaultPlan,
    *,
    drives: Iterable[str],
    scopes: Iterable[str],
    services: Mapping[str, tuple[str, ...]] | None = None,
    versions: Iterable[str] = (),
) -> None:
    """Refuse ``plan`` with a one-line ``PlanError`` naming its first fault that cannot strike
    in a world of ``drives``, ``scopes``, ``services`` (each service's operations, by name) and
    ``versions`` (the names of the versions of its jobs it can deploy)."""
    drives, scopes, versions = tuple(drives), tuple(scopes), tuple(versions)
    calls = {f"{name}.{op}" for name, ops in (services or {}).items() for op in ops}
    clocks = schedulers = 0
    for fault in plan.faults:
        problem = (
            _service_problem(fault, services or {}, calls)
            or _deploy_problem(fault, drives, versions)
            or _problem(fault, drives, scopes)
        )
        if isinstance(fault, StoreClockFault):
            clocks += 1
            if clocks > 1 and problem is None:
                problem = "the store has one clock; give one StoreClockFault"
        if isinstance(fault, PctSchedule):
            schedulers += 1
            if schedulers > 1 and problem is None:
                problem = "a world has one scheduler; give one PctSchedule"
        if problem is not None:
            raise PlanError(f"fault {fault!r} cannot strike: {problem}")


def _service_problem(
    fault: Fault, services: Mapping[str, tuple[str, ...]], calls: set[str]
) -> str | None:
    """What keeps a fault aimed at a service call (``operation="SERVICE.OPERATION"``) or at a
    service (``ServiceOutage``) from striking; None when it can, or when it aims elsewhere."""
    if isinstance(fault, ServiceOutage):
        if fault.service not in services:
            have = ", ".join(services) or "none (declare them in WorldSetup(services=...))"
            return (
                f"the world has no service {fault.service!r}; its services are {have}"
                + did_you_mean(fault.service, services)
            )
        problem = _duration(fault.from_ms, "from_ms") or _duration(fault.to_ms, "to_ms")
        if problem is None and not fault.to_ms > fault.from_ms:
            problem = "to_ms must be later than from_ms, or the outage lasts no time"
        return problem
    provider = _provider_problem(fault, services)
    if provider is not None:
        return provider
    operation = getattr(fault, "operation", None)
    if not isinstance(operation, str) or "." not in operation:
        return None
    if operation not in calls:
        have = ", ".join(sorted(calls)) or "none (declare them in WorldSetup(services=...))"
        return (
            f"the world has no service call {operation!r}; its service calls are {have}"
            + _call_meant(operation, services, calls)
        )
    if isinstance(fault, EvictAfter):
        return "a service call runs in no scope, so nothing can be evicted after it"
    return None


def _provider_problem(fault: Fault, services: Mapping[str, tuple[str, ...]]) -> str | None:
    """What keeps a fault of a provider's own behaviour from striking: a service the world does
    not have, a count below 1, a negative or endless wait, a leg or an item count that is none;
    None for any other fault (a ``StaleRead`` or ``PartialBatch`` names its call, checked as
    every call is, and the world checks that the call lags or takes a batch)."""
    if isinstance(fault, StaleRead | PartialBatch):
        calls = {f"{name}.{op}" for name, ops in services.items() for op in ops}
        if fault.operation not in calls:
            have = ", ".join(sorted(calls)) or "none (declare them in WorldSetup(services=...))"
            return (
                f"the world has no service call {fault.operation!r} (name it "
                f"SERVICE.OPERATION); its service calls are {have}"
                + did_you_mean(fault.operation, calls)
            )
        lag = None if isinstance(fault, PartialBatch) else fault.lag_ms
        taken = fault.taken if isinstance(fault, PartialBatch) else 0
        problem = _whole(fault.nth, "nth") or (None if lag is None else _duration(lag, "lag_ms"))
        if problem is None and (type(taken) is not int or taken < 0):
            problem = f"taken={taken!r}; give a whole number of items >= 0"
        return problem
    if not isinstance(fault, RateLimited | DropCallback | DelayCallback | RepeatCallback):
        return None
    if fault.service not in services:
        have = ", ".join(services) or "none (declare them in WorldSetup(services=...))"
        return (
            f"the world has no service {fault.service!r}; its services are {have}"
            + did_you_mean(fault.service, services)
        )
    problem = _whole(fault.nth, "nth")
    if isinstance(fault, RateLimited):
        problem = problem or _duration(fault.retry_after_ms, "retry_after_ms")
        ops = {f"{fault.service}.{op}" for op in services[fault.service]}
        if problem is None and fault.operation and fault.operation not in ops:
            problem = (
                f"operation={fault.operation!r}; give one of {', '.join(sorted(ops))} or ''"
                + did_you_mean(fault.operation, ops)
            )
    elif isinstance(fault, DropCallback) and fault.leg not in LEGS:
        problem = f"leg={fault.leg!r}; a callback's legs are request and reply"
    elif isinstance(fault, DelayCallback):
        problem = problem or _duration(fault.ms, "ms")
    elif isinstance(fault, RepeatCallback):
        problem = problem or _duration(fault.after_ms, "after_ms")
    return problem


def _deploy_problem(fault: Fault, drives: tuple[str, ...], versions: tuple[str, ...]) -> str | None:
    """What keeps a deploy from striking: a version the world does not have, a drive to restart
    it does not have (or named twice), a negative or endless wait; None for any other fault."""
    if not isinstance(fault, Deploy | DeployAfter):
        return None
    if fault.version not in versions:
        have = ", ".join(versions) or "none (declare them in WorldSetup(versions=...))"
        return (
            f"the world has no version {fault.version!r} of its jobs; its versions are {have}"
            + did_you_mean(fault.version, versions)
        )
    # Held to be a tuple first: anything else (a number, a str of letters) is no order of drives.
    if not isinstance(fault.drives, tuple) or any(d not in drives for d in fault.drives):
        return (
            f"drives={fault.drives!r}; give a tuple of the world's drives ({', '.join(drives)}) "
            "in the order they restart, or () for every drive"
        )
    if len(set(fault.drives)) < len(fault.drives):
        return f"drives={fault.drives!r} names a drive twice; a deploy restarts each drive once"
    timed = _duration(fault.at_ms, "at_ms") if isinstance(fault, Deploy) else None
    return timed or _duration(fault.every_ms, "every_ms") or _duration(fault.down_ms, "down_ms")


def _problem(fault: Fault, drives: tuple[str, ...], scopes: tuple[str, ...]) -> str | None:
    drive_faults = (
        DelayLeg
        | DropLeg
        | LateRequest
        | PauseDrive
        | CrashDrive
        | HoldLeg
        | CrashAfter
        | EvictAfter
        | DeployAfter
        | RepeatStart
    )
    if isinstance(fault, drive_faults) and fault.drive not in drives:
        return (
            f"the world has no drive {fault.drive!r}; its drives are {', '.join(drives)} "
            "(a world declares its drives in WorldSetup(drives=...))"
            + did_you_mean(fault.drive, drives)
        )
    wire_faults = DelayLeg | DropLeg | LateRequest | HoldLeg | CrashAfter | EvictAfter | DeployAfter
    if (
        isinstance(fault, wire_faults)
        and fault.operation not in DRIVE_OPERATIONS
        and "." not in fault.operation
    ):
        return (
            f"a drive sends no operation {fault.operation!r}; "
            f"its operations are {', '.join(DRIVE_OPERATIONS)}, and SERVICE.OPERATION for a "
            "call to one of the world's services" + did_you_mean(fault.operation, DRIVE_OPERATIONS)
        )
    if isinstance(fault, DelayLeg | DropLeg | HoldLeg) and fault.leg not in LEGS:
        return f"a call has no leg {fault.leg!r}; its legs are request and reply"
    if isinstance(
        fault,
        DelayLeg
        | DropLeg
        | LateRequest
        | PauseDrive
        | HoldLeg
        | CrashAfter
        | EvictAfter
        | DeployAfter
        | RepeatStart,
    ):
        problem = _whole(fault.nth, "nth")
        if problem is not None:
            return problem
    if isinstance(fault, DelayLeg | LateRequest | PauseDrive):
        problem = _duration(fault.ms, "ms")
        if problem is not None:
            return problem
    # A fault that can change nothing would be reported as fired (a pause, a clock) or as never
    # fired (a held leg, which the wire only marks when it holds it) while nothing happened.
    # A late request of 0 ms still changes the world: its caller gives up on it at once.
    if isinstance(fault, DelayLeg) and fault.ms == 0:
        return "ms=0 holds the leg for no time, which changes nothing; give ms > 0"
    if isinstance(fault, PauseDrive) and fault.ms == 0:
        return "ms=0 stops the drive for no time, which changes nothing; give ms > 0"
    if isinstance(fault, PauseDrive) and fault.where not in PAUSE_POINTS:
        return (
            f"a walk has no pause point {fault.where!r}; its points are {', '.join(PAUSE_POINTS)}"
        )
    if isinstance(fault, HoldLeg):
        if fault.until not in UNTIL_EVENTS:
            return (
                f"a held leg cannot wait for {fault.until!r}; it waits for one of "
                f"{', '.join(UNTIL_EVENTS)} (by another drive)"
            )
        if len(drives) < 2:
            return "a held leg waits for ANOTHER drive, and the world has one; declare two"
        problem = _duration(fault.max_ms, "max_ms")
        if problem is None and fault.max_ms == 0:
            problem = "max_ms=0 holds the leg for no time, which changes nothing; give max_ms > 0"
        return problem
    if isinstance(fault, CrashAfter):
        return _duration(fault.down_ms, "down_ms")
    if isinstance(fault, RepeatStart):
        # 0 ms is a start sent twice at once: two clicks, both on the wire together.
        return _duration(fault.after_ms, "after_ms")
    if isinstance(fault, PctSchedule):
        if type(fault.seed) is not int or fault.seed < 0:
            return f"seed={fault.seed!r}; give a whole number >= 0"
        if type(fault.depth) is not int or not 1 <= fault.depth <= PCT_MAX_DEPTH:
            return (
                f"depth={_shown(fault.depth)}; give a whole number from 1 (no change point) to "
                f"{PCT_MAX_DEPTH:,}"
            )
        problem = _whole(fault.within, "within")
        if problem is None and fault.within > PCT_MAX_WITHIN:
            problem = (
                f"within={_shown(fault.within)}; give a whole number of task steps from 1 to "
                f"{PCT_MAX_WITHIN:,} (more than a world takes)"
            )
        return problem
    if isinstance(fault, Evict):
        if fault.scope not in scopes:
            return (
                f"the world has no scope {fault.scope!r}; its scopes are {', '.join(scopes)}"
                + did_you_mean(fault.scope, scopes)
            )
        return _duration(fault.at_ms, "at_ms")
    if isinstance(fault, CrashDrive):
        return _duration(fault.at_ms, "at_ms") or _duration(fault.down_ms, "down_ms")
    if isinstance(fault, StoreClockFault):
        if not _number(fault.skew_ms) or not -math.inf < fault.skew_ms < math.inf:
            return f"skew_ms={_shown(fault.skew_ms)}; give a finite number of ms"
        if abs(fault.skew_ms) > SKEW_MAX_MS:
            # Far enough off, the store's clock leaves the years its times can be written in.
            return (
                f"skew_ms={_shown(fault.skew_ms)}; give a skew of at most {SKEW_MAX_MS} ms (a "
                "year) either way"
            )
        if not _number(fault.drift) or not -1 < fault.drift < 1:
            return f"drift={fault.drift!r}; give a number above -1 and below 1"
        if fault.skew_ms == 0 and fault.drift == 0:
            return (
                "with skew_ms=0 and drift=0 the store's clock runs true, which changes nothing; "
                "give a skew, a drift or both"
            )
    if isinstance(fault, UpstreamFailure):
        if fault.what not in UPSTREAM_KINDS:
            return (
                f"the upstream has no calls of kind {fault.what!r}; its kinds are any, page, object"
            )
        return _whole(fault.first, "first") or _whole(fault.count, "count")
    return None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shown(value: object) -> str:
    """``value`` as a problem names it: its repr, but an int too long to read by its length."""
    if type(value) is not int or -(10**30) < value < 10**30:
        return repr(value)
    try:
        digits = f"of {len(str(abs(value)))} digits"
    except ValueError:  # past sys.get_int_max_str_digits()
        digits = "of thousands of digits"
    return f"{'a negative' if value < 0 else 'an'} int {digits}"


def _whole(value: object, name: str) -> str | None:
    if type(value) is not int or value < 1:
        return f"{name}={value!r}; give a whole number >= 1 (the first is 1)"
    return None


def _duration(value: object, name: str) -> str | None:
    # Compared, not converted: an int of any size compares with a float exactly (NaN fails).
    if not (isinstance(value, int | float) and _number(value)) or not 0 <= value < math.inf:
        return f"{name}={_shown(value)}; give a finite number of ms >= 0"
    if value > _FLOAT_INT_MAX:
        # Virtual time is a float: an int past every float would overflow where it is waited.
        return f"{name}={_shown(value)}, more than a float holds; give a finite number of ms >= 0"
    return None


def unfired_line(
    unfired: tuple[Fault, ...],
    *,
    given: bool = False,
    made: Mapping[tuple[str, str], int] | None = None,
) -> str:
    """``1 fault never fired: DelayLeg(...)`` — what a verdict says about them (``given``: of a
    plan given in place of the scenario's own, which says what the world was to test). Given
    ``made``, how many calls of each (drive, operation) the world's drives made, a fault aimed at
    a call says which drives made that operation, and how often: the fix is usually the ``nth``
    or the drive."""
    count = len(unfired)
    faults = "; ".join(repr(fault) + _who_made(fault, made) for fault in unfired)
    if given:
        return (
            f"{count} fault{'' if count == 1 else 's'} of the given plan never fired, so the "
            f"world did not test {'it' if count == 1 else 'them'}: {faults}"
        )
    return f"{count} fault{'' if count == 1 else 's'} never fired: {faults}"


def _who_made(fault: Fault, made: Mapping[tuple[str, str], int] | None) -> str:
    """`` (cron made 1 begin call; alarm made 2)``: who made the operation a call fault aims
    at, its own drive first; empty for a fault that aims at no call, or with no count."""
    operation, drive = getattr(fault, "operation", None), getattr(fault, "drive", None)
    if made is None or operation is None or drive is None:
        return ""
    counts = {d: n for (d, op), n in made.items() if op == operation and n and d != drive}
    own = made.get((drive, operation), 0)
    calls = "call" if own == 1 else "calls"
    told = [f"{drive} made {own or 'no'} {operation} {calls}"]
    told += [f"{other} made {n}" for other, n in sorted(counts.items())]
    return f" ({'; '.join(told)})"
