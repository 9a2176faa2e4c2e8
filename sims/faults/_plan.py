"""Faults as data: what goes wrong in a world, written by hand or drawn from a seed.

A fault plan is a tuple of frozen values whose repr is valid Python, so a plan that a sweep or a
shrinker found can be pasted into a scenario or a test as it prints. Swarm-style drawing enables a
random SUBSET of fault kinds per seed: a world with every kind on at once hides the interactions a
world with two kinds shows.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

Leg: TypeAlias = Literal["request", "reply"]


@attrs.frozen(kw_only=True)
class DelayLeg:
    """Hold the ``nth`` ``operation`` call of ``drive`` on its ``leg`` for ``ms`` extra."""

    drive: str
    operation: str
    nth: int
    leg: Leg
    ms: float


@attrs.frozen(kw_only=True)
class DropLeg:
    """Drop the ``nth`` ``operation`` call of ``drive`` on its ``leg``."""

    drive: str
    operation: str
    nth: int
    leg: Leg


@attrs.frozen(kw_only=True)
class LateRequest:
    """The ``nth`` ``operation`` request of ``drive`` is abandoned by its caller (who gets a
    transport error at once, as a timeout gives) and delivered to the scope ``ms`` later all the
    same: the at-least-once wire, where a stale owner's write can land during a later pass."""

    drive: str
    operation: str
    nth: int
    ms: float


@attrs.frozen(kw_only=True)
class RepeatStart:
    """The caller of ``drive``'s ``nth`` start (a ``start_or_join``, the scenario's or a
    handler's ``ctx.start_run``) sends the same start again ``after_ms`` later: a user's second
    click, or a client that never saw the first answer and tries again. A start joins only a live
    run, so a repeat that lands after the run ended makes a new one."""

    drive: str
    nth: int
    after_ms: float

    @property
    def operation(self) -> str:
        """The call it repeats: what an unfired report counts the drive's calls of."""
        return START_OPERATION


#: The drive call a start is (``World.start``, ``ctx.start_run``).
START_OPERATION = "start_or_join"


@attrs.frozen(kw_only=True)
class Evict:
    """Abort ``scope``'s actor at ``at_ms`` of virtual time."""

    scope: str
    at_ms: float


@attrs.frozen(kw_only=True)
class CrashDrive:
    """Cancel ``drive``'s work at ``at_ms`` (a killed process); it comes back ``down_ms`` later."""

    drive: str
    at_ms: float
    down_ms: float = 0.0


#: Where in the walk a pause strikes: at the start of the drive's ``nth`` pass (before its page
#: read, which is not a step), before its ``nth`` step, inside its ``nth`` step just after the
#: effect landed, or after the last step of its ``nth`` pass, before the outcome is written.
PausePoint: TypeAlias = Literal["pass-start", "before-step", "after-effect", "before-outcome"]
PAUSE_POINTS: tuple[PausePoint, ...] = (
    "pass-start",
    "before-step",
    "after-effect",
    "before-outcome",
)


@attrs.frozen(kw_only=True)
class PauseDrive:
    """Stop ``drive`` for ``ms`` at a point of its walk (a GC pause, a stuck call)."""

    drive: str
    nth: int
    ms: float
    where: PausePoint = "before-step"


@attrs.frozen(kw_only=True)
class StoreClockFault:
    """The store's clock runs ``skew_ms`` ahead (or behind) and ``drift`` fast (or slow)."""

    skew_ms: float = 0.0
    drift: float = 0.0


#: What a held leg waits for, done by ANOTHER drive than the one whose call is held: a claim that
#: takes a run over, a step recorded, a write through the scope's door (an effect: any ``invoke``
#: but an ``items`` read), a pass committed, a drive call started.
Until: TypeAlias = Literal["takeover", "step", "effect", "commit", "tick"]
UNTIL_EVENTS: tuple[Until, ...] = ("takeover", "step", "effect", "commit", "tick")


@attrs.frozen(kw_only=True)
class HoldLeg:
    """Hold the ``nth`` ``operation`` call of ``drive`` on its ``leg`` until another drive does
    ``until`` (see :data:`UNTIL_EVENTS`), then let it go; at the latest after ``max_ms``.

    A delay in milliseconds reaches the spec's at-least-once window only when it happens to be
    longer than the lease plus the gap to another drive's next tick, and short enough to land
    before that drive's pass ends. A hold aims at the window itself, whatever the world's timings:
    a reply held ``until="effect"`` arrives just after another pass of the run did its effect."""

    drive: str
    operation: str
    nth: int
    leg: Leg
    until: Until
    max_ms: float = 60_000.0


@attrs.frozen(kw_only=True)
class CrashAfter:
    """Kill ``drive`` right after its ``nth`` ``operation`` call ran in the scope, before the reply
    reaches it: after BEGIN (``begin``: the handler never starts), inside a step body (``invoke``:
    the effect landed, the step is not recorded), with a resource taken and not yet given back. It
    comes back ``down_ms`` later. A crash at a time of day rarely lands inside a pass; this one
    lands where the call is."""

    drive: str
    operation: str
    nth: int
    down_ms: float = 0.0


@attrs.frozen(kw_only=True)
class EvictAfter:
    """Abort the actor of the scope that ``drive``'s ``nth`` ``operation`` call ran in, right after
    it ran and before its reply leaves (a Durable Object evicted mid-conversation)."""

    drive: str
    operation: str
    nth: int


@attrs.frozen(kw_only=True)
class PctSchedule:
    """Schedule the world's tasks PCT-style instead of by a seeded shuffle: each task gets a
    random priority, the highest ready one runs first, and at ``depth - 1`` random points among
    the first ``within`` scheduling steps the running task drops below all the others. ``seed``
    picks the priorities and the points (the world's seed still decides everything else).

    PCT (probabilistic concurrency testing, as in Coyote and shuttle) finds an ordering bug that
    needs ``depth`` ordering constraints with a probability bounded below per world, where a
    random shuffle's chance falls off with the number of steps (docs/search.md)."""

    seed: int
    depth: int = 3
    within: int = 2_000


@attrs.frozen(kw_only=True)
class ServiceOutage:
    """The world's ``service`` is down from ``from_ms`` until ``to_ms`` of virtual time: every
    request that arrives meanwhile is refused unrun (the caller gets ``ServiceRefused``)."""

    service: str
    from_ms: float
    to_ms: float


@attrs.frozen(kw_only=True)
class StaleRead:
    """The ``nth`` call of the lagging read ``operation`` (``"SERVICE.OPERATION"``, declared
    ``Operation(fn, lag_ms=...)``), counted as its requests arrive at the service, sees the
    service's state as it stood ``lag_ms`` ago: by default the longest lag the read may have."""

    operation: str
    nth: int
    lag_ms: float | None = None


@attrs.frozen(kw_only=True)
class RateLimited:
    """The ``nth`` request to arrive at ``service`` (counting only ``operation``,
    ``"SERVICE.OPERATION"``, when one is given) is refused unrun, as a rate limit refuses, and so
    is every request to the service until ``retry_after_ms`` has passed: each caller gets
    ``ServiceUnavailable`` with the time left as its ``retry_after_ms``."""

    service: str
    nth: int
    retry_after_ms: float
    operation: str = ""


@attrs.frozen(kw_only=True)
class PartialBatch:
    """The ``nth`` call of the batch ``operation`` (``"SERVICE.OPERATION"``, declared
    ``Operation(fn, batch="ARG")``), counted as its requests arrive, takes only the first
    ``taken`` of its items; its answer says which (``fn`` gets only those)."""

    operation: str
    nth: int
    taken: int


@attrs.frozen(kw_only=True)
class DropCallback:
    """The first delivery of the ``nth`` callback ``service`` sends is lost on its ``leg``: on
    the request, the endpoint never sees it; on the reply, the endpoint ran and the service never
    learns it did. Either way the service sends it again on its schedule
    (``Service(callback_retries_ms=...)``)."""

    service: str
    nth: int
    leg: Leg


@attrs.frozen(kw_only=True)
class DelayCallback:
    """The first delivery of the ``nth`` callback ``service`` sends arrives ``ms`` late: after
    the callbacks sent behind it, out of order."""

    service: str
    nth: int
    ms: float


@attrs.frozen(kw_only=True)
class RepeatCallback:
    """``service`` delivers its ``nth`` callback again ``after_ms`` after the first delivery
    began: a provider that sends a webhook twice."""

    service: str
    nth: int
    after_ms: float


UpstreamKind: TypeAlias = Literal["any", "page", "object"]
UPSTREAM_KINDS: tuple[UpstreamKind, ...] = ("any", "page", "object")


@attrs.frozen(kw_only=True)
class UpstreamFailure:
    """The upstream system refuses its calls ``first`` to ``first + count - 1`` (1-based, counted
    among the calls of kind ``what``: page reads, object fetches, or all), transiently."""

    first: int
    count: int = 1
    what: UpstreamKind = "any"


@attrs.frozen(kw_only=True)
class Deploy:
    """Deploy the world's ``version`` of its jobs (``WorldSetup.versions``) at ``at_ms``, as a
    rolling deploy does: the ``drives`` restart on it one by one (by default every drive, in the
    world's order), ``every_ms`` apart, each killed where it stands (a pass in flight is cut, as a
    process stopped for a deploy is) and back ``down_ms`` later running the new code. Between two
    restarts, passes on both versions run side by side."""

    version: str
    at_ms: float
    drives: tuple[str, ...] = ()
    every_ms: float = 0.0
    down_ms: float = 0.0


@attrs.frozen(kw_only=True)
class DeployAfter:
    """Deploy ``version`` right after ``drive``'s ``nth`` ``operation`` call ran, before its reply
    reaches the drive: the ``drives`` restart on the new code one by one, ``every_ms`` apart (by
    default ``drive`` first, where the call left it, then the others in the world's order). After
    a ``record_step``, the deploy lands between two steps of a pass; after a ``patch`` (a failed
    pass's outcome), between that pass and its retry; with ``drive`` restarted last, while its
    pass goes on on the old version."""

    version: str
    drive: str
    operation: str
    nth: int
    drives: tuple[str, ...] = ()
    every_ms: float = 0.0
    down_ms: float = 0.0


Fault: TypeAlias = (
    DelayLeg
    | DropLeg
    | HoldLeg
    | CrashAfter
    | EvictAfter
    | PctSchedule
    | LateRequest
    | Evict
    | CrashDrive
    | PauseDrive
    | StoreClockFault
    | UpstreamFailure
    | ServiceOutage
    | Deploy
    | DeployAfter
    | RepeatStart
    | StaleRead
    | RateLimited
    | PartialBatch
    | DropCallback
    | DelayCallback
    | RepeatCallback
)
FAULT_KINDS: tuple[type, ...] = (
    DelayLeg,
    DropLeg,
    Evict,
    CrashDrive,
    PauseDrive,
    StoreClockFault,
    UpstreamFailure,
    LateRequest,
    HoldLeg,
    CrashAfter,
    EvictAfter,
    PctSchedule,
    ServiceOutage,
    Deploy,
    DeployAfter,
    RepeatStart,
    StaleRead,
    RateLimited,
    PartialBatch,
    DropCallback,
    DelayCallback,
    RepeatCallback,
)
#: The faults of a provider's own behaviour (its reads' lag, its rate limit, its batches, its
#: callbacks): drawn only at a world whose services have them.
PROVIDER_KINDS: tuple[type, ...] = (
    StaleRead,
    RateLimited,
    PartialBatch,
    DropCallback,
    DelayCallback,
    RepeatCallback,
)
#: The faults that change the code a world's drives run: drawn and aimed only in a world that
#: declares versions of its jobs (``WorldSetup.versions``).
DEPLOY_KINDS: tuple[type, ...] = (Deploy, DeployAfter)
#: The faults that only a world whose drives start runs can fire: drawn only when a draw is told
#: the world has starts (``draw_plan(starts=True)``), so no other world's seed draws anew.
START_KINDS: tuple[type, ...] = (RepeatStart,)
#: What :func:`draw_plan` draws from when given no ``kinds``: the timed and leg faults it has
#: always drawn, so a seed's plan stays the plan it was. The event faults and the PCT scheduler
#: are drawn when named (the ``random`` world and the search name them).
DRAWN_BY_DEFAULT: tuple[type, ...] = FAULT_KINDS[:8]
#: The faults that strike at an event of the world rather than at a time or a call count alone.
EVENT_KINDS: tuple[type, ...] = (HoldLeg, CrashAfter, EvictAfter, PctSchedule)
OPERATIONS = (
    "claim",
    "begin",
    "begin_step",
    "record_step",
    "commit_pass",
    "patch",
    "miss",
    "invoke",
)


def _only_faults(plan: FaultPlan, attribute: attrs.Attribute[Any], faults: Any) -> None:
    # Refused as it is built, by the API as by --plan: anything else in a plan would ride through
    # a world as a fault that can never strike, reported "never fired" as if it were one.
    kinds = ", ".join(kind.__name__ for kind in FAULT_KINDS)
    if not isinstance(faults, tuple):
        raise TypeError(
            f"FaultPlan(faults={faults!r}) is given a {type(faults).__name__}; pass a tuple of "
            f"faults ({kinds})"
        )
    for fault in faults:
        if not isinstance(fault, FAULT_KINDS):
            raise TypeError(
                f"FaultPlan holds {fault!r}, which is not a fault; a plan holds only {kinds} values"
            )


@attrs.frozen
class FaultPlan:
    """The faults of one world, in the order they were written."""

    faults: tuple[Fault, ...] = attrs.field(default=(), validator=_only_faults)

    def of(self, kind: type) -> list[Fault]:
        return [fault for fault in self.faults if isinstance(fault, kind)]

    def __len__(self) -> int:
        return len(self.faults)

    def hold_up_ms(self) -> float:
        """The longest the plan's faults can hold a world's work up, all of them one after
        another: each held, delayed or given-up leg, each drive down or paused, each outage, the
        store's clock behind. A world under the plan ticks and settles this much longer, so that
        bounded faults leave every driven run time to end, however they add up."""
        return sum((_hold_up_ms(fault) for fault in self.faults), 0.0)


def _hold_up_ms(fault: Fault) -> float:
    if isinstance(fault, HoldLeg):
        return fault.max_ms
    if isinstance(fault, DelayLeg | LateRequest | PauseDrive):
        return fault.ms
    if isinstance(fault, CrashDrive | CrashAfter):
        return fault.down_ms
    if isinstance(fault, Deploy | DeployAfter):
        # Each drive down in turn, the next one ``every_ms`` after: a world of few drives.
        restarts = len(fault.drives) or _ASSUMED_DRIVES
        return restarts * fault.down_ms + (restarts - 1) * fault.every_ms
    if isinstance(fault, ServiceOutage):
        return fault.to_ms - fault.from_ms
    if isinstance(fault, StoreClockFault):
        return abs(fault.skew_ms)
    if isinstance(fault, RepeatStart | RepeatCallback):
        return fault.after_ms
    if isinstance(fault, DelayCallback):
        return fault.ms
    if isinstance(fault, RateLimited):
        return fault.retry_after_ms
    return 0.0


#: How many drives a deploy that names none is taken to restart, for its hold-up: more than a
#: world usually has (the built-in ones have two or three).
_ASSUMED_DRIVES = 4

#: The plan of a world where nothing goes wrong.
NO_FAULTS = FaultPlan()


def boundary_delays(lease_ms: int, margin_ms: float) -> tuple[float, ...]:
    """The delays where the spec's windows are: just inside and just past the margin and the
    lease, and a few ordinary ones."""
    edge = lease_ms - margin_ms
    return (
        1.0,
        5.0,
        edge - 1,
        edge,
        edge + 1,
        lease_ms - 1.0,
        float(lease_ms),
        lease_ms + 1.0,
        lease_ms * 1.5,
    )


def draw_plan(
    rng: random.Random,
    *,
    drives: tuple[str, ...],
    scopes: tuple[str, ...],
    lease_ms: int,
    margin_ms: float,
    horizon_ms: float,
    kinds: tuple[type, ...] | None = None,
    services: Mapping[str, Sequence[str]] | None = None,
    versions: Sequence[str] = (),
    starts: bool = False,
) -> FaultPlan:
    """A swarm draw: a random subset of ``kinds`` (by default :data:`DRAWN_BY_DEFAULT`, the
    timed and leg faults), then one to three faults of each. Narrow ``kinds`` to those the world
    can fire: pauses and upstream failures strike only the built-in walk, and a world without it
    would draw faults that never fire.

    ``services`` (each service's operations, by the service's name, as a world declares them)
    lets the draw strike the job's outside world: a leg fault, a late request, a held leg or a
    crash after a call may name a ``SERVICE.OPERATION`` call (never an eviction after one: a
    service call runs in no scope), and :class:`ServiceOutage` is drawn too (by default, or when
    ``kinds`` names it). Without ``services`` a seed draws exactly the plan it always drew.

    ``versions`` (the names of ``WorldSetup.versions``) lets the draw deploy one of them
    (:class:`Deploy` and :class:`DeployAfter`, by default or when ``kinds`` names them); a world
    without versions never draws a deploy, whatever ``kinds`` says: it has nothing to deploy.

    ``starts`` (the world's drives start runs: ``World.start``, a handler's ``ctx.start_run``)
    lets the draw strike the starts themselves: a leg fault, a late request, a held leg or a crash
    after a call may name ``start_or_join``, and :class:`RepeatStart` is drawn too (by default, or
    when ``kinds`` names it). Without ``starts`` a seed draws exactly the plan it always drew."""
    pool = _pool(kinds, services, versions, starts)
    # Each kind in the pool is on with even odds, so a world sees few kinds at a time.
    enabled = [kind for kind in pool if rng.random() < 0.5]
    delays = boundary_delays(lease_ms, margin_ms)
    # Without services or starts this is OPERATIONS itself, so a seed's choices stay what they
    # were.
    calls = (*OPERATIONS, *_service_calls(services), *((START_OPERATION,) if starts else ()))
    faults: list[Fault] = []
    for kind in enabled:
        for _ in range(rng.randint(1, 3)):
            drive = rng.choice(drives)
            if kind is ServiceOutage and services:
                faults.append(_outage(rng, services, delays, horizon_ms))
            elif kind is DelayLeg:
                faults.append(
                    DelayLeg(
                        drive=drive,
                        operation=rng.choice(calls),
                        nth=rng.randint(1, 4),
                        leg=rng.choice(("request", "reply")),
                        ms=rng.choice(delays),
                    )
                )
            elif kind is DropLeg:
                faults.append(
                    DropLeg(
                        drive=drive,
                        operation=rng.choice(calls),
                        nth=rng.randint(1, 4),
                        leg=rng.choice(("request", "reply")),
                    )
                )
            elif kind is LateRequest:
                faults.append(
                    LateRequest(
                        drive=drive,
                        operation=rng.choice(calls),
                        nth=rng.randint(1, 4),
                        ms=rng.choice(delays),
                    )
                )
            elif kind is Evict:
                faults.append(
                    Evict(scope=rng.choice(scopes), at_ms=round(rng.uniform(0, horizon_ms / 2), 1))
                )
            elif kind is CrashDrive:
                faults.append(
                    CrashDrive(
                        drive=drive,
                        at_ms=round(rng.uniform(0, horizon_ms / 2), 1),
                        down_ms=rng.choice((0.0, float(lease_ms), lease_ms * 2.0)),
                    )
                )
            elif kind is PauseDrive:
                faults.append(
                    PauseDrive(
                        drive=drive,
                        nth=rng.randint(1, 6),
                        ms=rng.choice(delays),
                        where=rng.choice(PAUSE_POINTS),
                    )
                )
            elif kind is StoreClockFault:
                skew, drift = rng.choice((-100.0, 0.0, 100.0)), rng.choice((-0.01, 0.0, 0.01))
                # A clock with neither skew nor drift changes nothing and is no fault. It is left
                # out rather than drawn again, so the rest of the draw stays what it was.
                if skew or drift:
                    faults.append(StoreClockFault(skew_ms=skew, drift=drift))
                break  # one store clock
            elif kind is HoldLeg:
                faults.append(
                    HoldLeg(
                        drive=drive,
                        operation=rng.choice(calls),
                        nth=rng.randint(1, 4),
                        leg=rng.choice(("request", "reply")),
                        until=rng.choice(UNTIL_EVENTS),
                        max_ms=rng.choice((lease_ms * 3.0, lease_ms * 10.0)),
                    )
                )
            elif kind is CrashAfter:
                faults.append(
                    CrashAfter(
                        drive=drive,
                        operation=rng.choice(calls),
                        nth=rng.randint(1, 4),
                        down_ms=rng.choice((0.0, float(lease_ms), lease_ms * 2.0)),
                    )
                )
            elif kind is EvictAfter:
                faults.append(
                    EvictAfter(drive=drive, operation=rng.choice(OPERATIONS), nth=rng.randint(1, 4))
                )
            elif kind is PctSchedule:
                faults.append(PctSchedule(seed=rng.randrange(2**16), depth=rng.randint(2, 4)))
                break  # one scheduler
            elif kind is RepeatStart:
                # A second click at once, or after the run it started had time to end.
                after = rng.choice((1.0, float(lease_ms), *delays[-3:]))
                faults.append(RepeatStart(drive=drive, nth=rng.randint(1, 2), after_ms=after))
            elif kind in DEPLOY_KINDS:
                faults.append(_deploy(rng, kind, versions, drive, calls, lease_ms, horizon_ms))
            elif kind is UpstreamFailure:
                what: UpstreamKind = rng.choice(UPSTREAM_KINDS)
                first = rng.randint(1, 6 if what == "page" else 20)
                faults.append(UpstreamFailure(first=first, count=rng.randint(1, 3), what=what))
    return FaultPlan(tuple(faults))


def _pool(
    kinds: tuple[type, ...] | None,
    services: Mapping[str, Sequence[str]] | None,
    versions: Sequence[str] = (),
    starts: bool = False,
) -> tuple[type, ...]:
    """The kinds a draw may switch on: ``kinds``, or the default ones (with the outage when the
    world has services, the deploys when it has versions, the repeated start when it has
    starts); never a deploy without a version, nor a repeated start without starts."""
    if kinds is None:
        pool = (*DRAWN_BY_DEFAULT, ServiceOutage) if services else DRAWN_BY_DEFAULT
        pool = (*pool, *DEPLOY_KINDS) if versions else pool
        return (*pool, *START_KINDS) if starts else pool
    pool = tuple(kinds)
    strangers = [kind for kind in pool if kind not in FAULT_KINDS]
    if strangers or not pool:
        raise ValueError(
            f"kinds={kinds!r}; give one or more of {', '.join(k.__name__ for k in FAULT_KINDS)}"
        )
    pool = pool if versions else tuple(kind for kind in pool if kind not in DEPLOY_KINDS)
    # A provider's own faults need to know which reads lag, which calls take batches and which
    # callbacks a world sends: the search aims them (``sims.search._providers``); a draw never
    # does, and its seeds draw what they drew before those kinds were known.
    pool = tuple(kind for kind in pool if kind not in PROVIDER_KINDS)
    return pool if starts else tuple(kind for kind in pool if kind not in START_KINDS)


def _deploy(
    rng: random.Random,
    kind: type,
    versions: Sequence[str],
    drive: str,
    calls: tuple[str, ...],
    lease_ms: int,
    horizon_ms: float,
) -> Fault:
    """A deploy of one of ``versions``: at a moment of the world's first half, or right after a
    call of ``drive`` (a step recorded, a failed pass's outcome, a pass begun, or any call); the
    drives restart at once or a lease or three apart."""
    version = rng.choice(list(versions))
    every = rng.choice((0.0, float(lease_ms), lease_ms * 3.0))
    if kind is Deploy:
        return Deploy(
            version=version, at_ms=round(rng.uniform(0, horizon_ms / 2), 1), every_ms=every
        )
    operation = rng.choice(("record_step", "patch", "begin", *calls))
    return DeployAfter(
        version=version, drive=drive, operation=operation, nth=rng.randint(1, 4), every_ms=every
    )


def _service_calls(services: Mapping[str, Sequence[str]] | None) -> tuple[str, ...]:
    """Every ``SERVICE.OPERATION`` a plan can name, in the order given."""
    if services is None:
        return ()
    if not isinstance(services, Mapping) or not all(
        isinstance(ops, Sequence) and not isinstance(ops, str) and ops for ops in services.values()
    ):
        raise ValueError(
            f"services={services!r}; give each service's operations by its name, as "
            "{'bank': ('pay', 'refund')}"
        )
    return tuple(f"{name}.{op}" for name, ops in services.items() for op in ops)


def _outage(
    rng: random.Random,
    services: Mapping[str, Sequence[str]],
    delays: tuple[float, ...],
    horizon_ms: float,
) -> ServiceOutage:
    """One service down from a moment of the world's first half, for one of the spec's delays."""
    begin = round(rng.uniform(0, horizon_ms / 2), 1)
    length = rng.choice([delay for delay in delays if delay > 0] or [1.0])
    return ServiceOutage(service=rng.choice(list(services)), from_ms=begin, to_ms=begin + length)


def _shown_plan(text: str) -> str:
    """``text`` as a refusal quotes it: whole, or its start and its length when it is too long
    to read on one line (a plan bomb of 100,000 characters)."""
    if len(text) <= 200:
        return repr(text)
    return f"{text[:60]!r}… ({len(text):,} characters)"


def _is_signed_number(node: ast.UnaryOp) -> bool:
    """``-5`` or ``-2.5``: one minus sign before a number, the only operator a plan holds."""
    operand = node.operand
    return isinstance(operand, ast.Constant) and type(operand.value) in (int, float)


def plan_from_text(text: str) -> FaultPlan:
    """A fault plan from its repr (what a sweep or a shrinker prints), or a tuple or list of
    faults, or one fault alone, read safely: only the fault
    classes, keywords, numbers (with at most one minus sign), strings and tuples are allowed,
    nothing is executed. Text too deeply nested to parse (thousands of signs or calls) is refused
    as a ``ValueError``, as any other text that is no plan is."""
    if not isinstance(text, str):
        # Bytes would otherwise be read as the name 'bytes' and refused as a fault kind.
        raise TypeError(
            f"plan is {type(text).__name__} {text!r:.80}, not text; a plan is a str such as "
            "repr(plan) prints (decode bytes first)"
        )
    names = {kind.__name__: kind for kind in (*FAULT_KINDS, FaultPlan)}
    shown = _shown_plan(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        if "integer string conversion" in str(error.msg):
            raise ValueError(
                f"plan {shown} holds an int of thousands of digits, which Python does not read; "
                "a fault's numbers are counts and milliseconds"
            ) from None
        raise ValueError(f"plan {shown} is not Python: {error.msg}") from None
    except (MemoryError, RecursionError):
        # The parser's own stack: a chain of thousands of signs, calls or operators.
        raise ValueError(
            f"plan {shown} nests too deeply to be read; a plan is FaultPlan((FAULT(...), ...)), "
            "each number with at most one minus sign"
        ) from None
    if isinstance(tree.body, ast.List):
        # A list of faults, written as the whole plan, is the tuple of them (a list anywhere
        # else, as a fault's field, is still refused: a plan's values are immutable).
        tree.body = ast.copy_location(ast.Tuple(tree.body.elts, ast.Load()), tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in names):
                raise ValueError(
                    f"plan {shown} calls something other than {', '.join(sorted(names))}"
                )
        elif isinstance(node, ast.Name) and node.id not in names:
            # A bare name that is not a fault kind (a typo, or a plan pasted without its class)
            # would otherwise end in eval's NameError.
            raise ValueError(
                f"plan {shown} names {node.id!r}, which is not a fault kind; the kinds are: "
                f"{', '.join(sorted(names))}"
            )
        elif (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and not _is_signed_number(node)
        ):
            # "--5" means 5, and a thousand signs are a bomb the compiler recurses into.
            raise ValueError(
                f"plan {shown} puts a sign before something other than a number; write a "
                "negative number with one minus sign, as -5"
            )
        elif not isinstance(
            node,
            ast.Expression
            | ast.Name
            | ast.keyword
            | ast.Constant
            | ast.Tuple
            | ast.Load
            | ast.UnaryOp
            | ast.USub,
        ):
            raise ValueError(
                f"plan {shown} holds an expression of kind {type(node).__name__}, which a plan "
                "cannot"
            )
    value = eval(compile(tree, "<plan>", "eval"), {"__builtins__": {}}, names)
    if isinstance(value, tuple):
        value = FaultPlan(value)
    elif isinstance(value, FAULT_KINDS):
        one: Fault = value  # type: ignore[assignment]  # FAULT_KINDS holds the Fault classes
        value = FaultPlan((one,))  # one fault, written alone: the plan of it
    if not isinstance(value, FaultPlan):
        raise ValueError(
            f"plan {shown} is a {type(value).__name__}, not a FaultPlan; write "
            "FaultPlan((FAULT(...), ...)), or one fault alone"
        )
    return value
