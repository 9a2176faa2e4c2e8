"""The timeline's model: what both renderings draw, in virtual milliseconds.

A drive lane holds the drive's passes (one per lease owner) and marks for what happened to the
drive itself; a scope lane holds the store's view of each run: its leases, placed by the store's
clock as fitted from the trace (:class:`StoreClockFit`), and its effects; a service lane holds the
calls the world's services ran (:class:`ServiceCall`), one row per operation. Two owners of one run
whose handler spans overlap are a double run (:func:`find_overlaps`). :mod:`._reader` fills the
model from a trace.
"""

from __future__ import annotations

import math

import attrs

#: Rows drawn per scope (one per run).
MAX_RUN_ROWS = 12
#: Lanes drawn per kind; a world with more is summarised in a note.
MAX_LANES = 16
#: Double-run bands that get a text label (every band is drawn; labels would pile up).
MAX_OVERLAP_LABELS = 8


def short(ident: str) -> str:
    """The tail of an id: ULIDs minted close together share their head (the timestamp)."""
    return "…" + ident[-6:] if len(ident) > 8 else ident


@attrs.frozen
class StoreClockFit:
    """``store_ms = origin_ms + rate * t``, fitted to the (t, store_at) pairs of executions."""

    origin_ms: float
    rate: float = 1.0

    def to_store(self, t: float) -> float:
        return self.origin_ms + self.rate * t

    def to_virtual(self, store_ms: float) -> float:
        return (store_ms - self.origin_ms) / self.rate

    @classmethod
    def fit(cls, pairs: list[tuple[float, float]]) -> StoreClockFit | None:
        if not pairs:
            return None
        n = len(pairs)
        mean_t = math.fsum(t for t, _ in pairs) / n
        mean_s = math.fsum(s for _, s in pairs) / n
        var = math.fsum((t - mean_t) ** 2 for t, _ in pairs)
        cov = math.fsum((t - mean_t) * (s - mean_s) for t, s in pairs)
        # One instant (or a clock that stood still) gives no slope: assume the store keeps pace.
        rate = cov / var if var > 0 and cov > 0 else 1.0
        return cls(mean_s - rate * mean_t, rate)


@attrs.define
class Step:
    name: str
    attempt: int
    start: float
    end: float | None = None
    error: str | None = None
    recorded: bool | None = None


@attrs.define
class Pass:
    """One claim of one run by one drive, and what its holder did with it."""

    drive: str
    run: str
    owner: str
    claimed_at: float
    takeover: bool = False
    began_at: float | None = None
    invoked_at: float | None = None
    handler_end: float | None = None
    ended_at: float | None = None
    outcome: str | None = None
    written: bool | None = None
    error: str | None = None
    steps: list[Step] = attrs.field(factory=list)
    memos: list[tuple[float, str]] = attrs.field(factory=list)
    stale_since: float | None = None
    #: When another pass's claim took this pass's lease while it was still open, and by whom.
    taken_over_at: float | None = None
    taken_over_by: str | None = None
    #: The error of a drive call that gave up on this pass (no outcome was written).
    given_up: str | None = None
    row: int = 0

    def end(self, horizon: float) -> float:
        return self.ended_at if self.ended_at is not None else horizon

    def handler_span(self, horizon: float) -> tuple[float, float] | None:
        if self.invoked_at is None:
            return None
        ends = [t for t in (self.handler_end, self.ended_at) if t is not None]
        return self.invoked_at, max(ends) if ends else horizon


@attrs.define
class Lease:
    """A lease as the store saw it: claimed, renewed at step boundaries, released or taken."""

    scope: str
    run: str
    owner: str
    drive: str
    claimed_at: float
    takeover: bool
    renewals: list[tuple[float, float]] = attrs.field(factory=list)  # (at, expires at)
    began_at: float | None = None
    ended_at: float | None = None
    end_reason: str | None = None
    #: A takeover of a BEGUN lease charges the pass before it an attempt: the run's attempts
    #: after the charge, and the commit (when, by which pass) that reset them to 0 afterwards.
    charged: int | None = None
    cleared_at: float | None = None
    cleared_by: str | None = None

    def held_at(self, t: float) -> bool:
        """Whether ``t`` is before the lease was released or taken over."""
        return self.ended_at is None or t <= self.ended_at

    def segments(self, horizon: float) -> list[tuple[float, float, bool]]:
        """(start, end, held) pieces: held up to each expiry, expired-but-unreleased after."""
        stop = self.ended_at if self.ended_at is not None else horizon
        pieces: list[tuple[float, float, bool]] = []
        for index, (at, expiry) in enumerate(self.renewals):
            until = self.renewals[index + 1][0] if index + 1 < len(self.renewals) else stop
            until = min(until, stop)
            if at >= until and index + 1 < len(self.renewals):
                continue
            held_end = min(expiry, until)
            _extend(pieces, at, max(at, held_end), True)
            if expiry < until:
                _extend(pieces, expiry, until, False)
        return pieces


def _extend(pieces: list[tuple[float, float, bool]], start: float, end: float, held: bool) -> None:
    if pieces and pieces[-1][2] == held and pieces[-1][1] >= start:
        pieces[-1] = (pieces[-1][0], max(end, pieces[-1][1]), held)
    else:
        pieces.append((start, end, held))


@attrs.frozen
class Mark:
    """A point (or a stretch from ``since``) on a drive lane or a scope lane."""

    lane: str
    t: float
    kind: str
    title: str
    since: float | None = None
    owner: str | None = None


@attrs.frozen
class Effect:
    scope: str
    run: str
    t: float
    key: str
    copy: int  # 1 for the first row with this key, 2 for a duplicate, ...
    #: Why it landed late (a stale pass's, or after the scenario returned), or None.
    late: str | None = None
    #: The scope call that wrote it, as (link, seq).
    call: tuple[str, int] | None = None


@attrs.define
class ServiceCall:
    """One call to a service: sent by a pass, run (or refused, or lost) at the service, and what
    its caller learnt of it. Times are virtual ms; None: it did not happen."""

    service: str
    op: str  # "bank.pay"
    drive: str
    seq: int
    run: str
    sent_at: float
    step: str | None = None
    timeout_ms: float | None = None
    #: The pass (lease owner) that sent it, when the trace shows one open.
    owner: str | None = None
    ran_at: float | None = None
    #: What it was at the service: "effect", "read", "repeat" (an idempotency key answered it
    #: with the first result), "refused" (not now) or "declined" (an answer: no); None while it
    #: has not run.
    kind: str | None = None
    refused: str | None = None
    replied_at: float | None = None
    timed_out_at: float | None = None
    #: The caller gave it up at once (a late request) while it was still on the wire.
    abandoned_at: float | None = None
    #: A reply that came after the caller had given up.
    late_at: float | None = None
    dropped: str | None = None  # the leg lost: "request" or "reply"
    dropped_at: float | None = None
    #: Its reply reached a drive that had been killed.
    fenced_at: float | None = None
    #: Why its effect landed late (a stale pass's, or after the scenario returned), or None.
    late_effect: str | None = None
    #: Its arguments as compact JSON: an effect is a copy of another only when it was the same
    #: call (the same operation, with the same arguments, in the same run).
    args: str = ""
    #: Which landing of the same call's effect this was (its run, operation and arguments): 1
    #: the first, 2 the same work again; 0 for a call that made no effect.
    copy: int = 0
    #: What crossed the wire, as the trace holds it: the arguments sent (a JSON value), the
    #: idempotency key the caller gave, and what the operation returned (``returned`` False: it
    #: returned nothing, for it was refused, declined or never ran).
    sent: object = None
    key: str | None = None
    result: object = None
    returned: bool = False

    @property
    def ran(self) -> bool:
        """It ran at the service (a refusal did not run)."""
        return self.kind in ("effect", "read", "repeat")

    @property
    def doubted_at(self) -> float | None:
        """When the caller was told it did not know (a ``ServiceTimeout``), or None."""
        if self.timed_out_at is not None:
            return self.timed_out_at
        if self.abandoned_at is not None:
            return self.abandoned_at
        if self.dropped is not None and self.timeout_ms is None:
            return self.dropped_at  # a lost connection, told at once
        return None

    @property
    def ambiguous(self) -> bool:
        """It ran, and its caller saw a timeout instead of its answer: an ambiguous outcome."""
        return self.ran and self.doubted_at is not None and self.fenced_at is None

    @property
    def answered_at(self) -> float | None:
        """When the caller stopped waiting for it: its reply, its doubt or its kill."""
        for t in (self.replied_at, self.doubted_at, self.fenced_at):
            if t is not None:
                return t
        return None


@attrs.frozen
class Running:
    """What was still running at the world's end."""

    passes: tuple[tuple[str, str], ...]  # (drive, run)
    ticks: tuple[str, ...]  # drives whose drive call was still going
    calls: int  # service calls on the wire
    requests: int = 0  # scope requests their callers gave up on, still on the wire


@attrs.frozen
class WorldEnd:
    """The world's end: the scenario returned (``world.closing``) with what was still running,
    then everything stopped by itself (``world.quiet``) or the grace ran out (``world.cut``)."""

    closing_at: float
    grace_ms: float
    running: Running
    ended_at: float | None = None
    how: str | None = None  # "quiet" | "cut"; None when nothing was running at the close
    cut: Running | None = None  # what the grace cut off


@attrs.frozen
class Overlap:
    run: str
    start: float
    end: float
    owners: tuple[str, str]
    drives: tuple[str, str]


@attrs.define
class Timeline:
    """Everything the picture shows, in virtual milliseconds."""

    start: float = 0.0
    end: float = 0.0
    events: int = 0
    drives: list[str] = attrs.field(factory=list)
    scopes: list[str] = attrs.field(factory=list)
    runs: dict[str, list[str]] = attrs.field(factory=dict)  # scope -> runs, first seen first
    passes: list[Pass] = attrs.field(factory=list)
    leases: list[Lease] = attrs.field(factory=list)
    marks: list[Mark] = attrs.field(factory=list)
    effects: list[Effect] = attrs.field(factory=list)
    #: The services the world called, first called first, and each one's operations.
    services: dict[str, list[str]] = attrs.field(factory=dict)
    calls: list[ServiceCall] = attrs.field(factory=list)
    world_end: WorldEnd | None = None
    #: Each service's state when the world ended (``world.end``'s ``services``), by name; empty
    #: for a world without services, or a trace written before the world's end recorded them.
    service_states: dict[str, object] = attrs.field(factory=dict)
    overlaps: list[Overlap] = attrs.field(factory=list)
    clock: StoreClockFit | None = None
    notes: list[str] = attrs.field(factory=list)
    busy: set[float] = attrs.field(factory=set)  # when something other than polling happened
    flagged: set[str] = attrs.field(factory=set)  # runs a check found something about

    def instants(self) -> list[float]:
        """Every instant the axis must keep uncut."""
        points = {self.start, self.end, *self.busy}
        for lease in self.leases:
            points.update(expiry for _, expiry in lease.renewals if lease.held_at(expiry))
        for mark in self.marks:
            if mark.kind not in ("tick", "skip"):
                points.add(mark.t)
                if mark.since is not None:
                    points.add(mark.since)
        return sorted(p for p in points if self.start <= p <= self.end)


def find_overlaps(passes: list[Pass], horizon: float) -> list[Overlap]:
    """Pairs of owners of one run whose handler spans overlap in time."""
    by_run: dict[str, list[tuple[float, float, Pass]]] = {}
    for found in passes:
        span = found.handler_span(horizon)
        if span is not None:
            by_run.setdefault(found.run, []).append((span[0], span[1], found))
    overlaps: list[Overlap] = []
    for run, spans in by_run.items():
        spans.sort(key=lambda item: (item[0], item[1]))
        for index, (_, end, first) in enumerate(spans):
            for other_start, other_end, other in spans[index + 1 :]:
                if other_start >= end:
                    break
                if other.owner != first.owner and min(end, other_end) > other_start:
                    overlaps.append(
                        Overlap(
                            run,
                            other_start,
                            min(end, other_end),
                            (first.owner, other.owner),
                            (first.drive, other.drive),
                        )
                    )
    overlaps.sort(key=lambda o: (o.start, o.run))
    return overlaps


def visible_lanes(model: Timeline) -> tuple[list[str], list[str], list[str]]:
    """The drives, scopes and services drawn, and a note about the ones left out."""
    drives, scopes = model.drives[:MAX_LANES], model.scopes[:MAX_LANES]
    services = list(model.services)[:MAX_LANES]
    hidden = (
        len(model.drives) - len(drives)
        + len(model.scopes) - len(scopes)
        + len(model.services) - len(services)
    )  # fmt: skip
    if hidden:
        model.notes.append(f"{hidden} more lanes not drawn (at most {MAX_LANES} of each kind)")
    return drives, scopes, services


def operations_shown(model: Timeline, service: str) -> list[str]:
    """The rows of a service lane: its operations, first called first, capped."""
    return model.services.get(service, [])[:MAX_RUN_ROWS]


def runs_shown(model: Timeline, scope: str) -> list[str]:
    """Runs with a double run first, then runs a check flagged, then the rest in order of first
    appearance, capped."""
    runs = model.runs.get(scope, [])
    doubled = {o.run for o in model.overlaps}
    ordered = sorted(
        runs, key=lambda r: 0 if r in doubled else 1 if r in model.flagged else 2
    )  # sorted is stable: first appearance within each group
    return ordered[:MAX_RUN_ROWS]
