"""A trace as a picture: a self-contained HTML page with an SVG timeline, or a few lines of text.

Theory of operation. A trace is read once into a model (:class:`Timeline`) and the model is drawn
twice, as SVG and as text, against the same piecewise-linear time scale.

- **Lanes.** One lane per drive and one per scope. A drive lane holds the drive's PASSES (one per
  lease owner: a thin line from the claim to the handler's invocation, then a bar from the
  invocation to the handler's end or the outcome, with its steps inside) and a strip above them
  for what happened to the drive itself: faults, late replies, dropped legs. A scope lane is the
  store's view, one row per run: which owner holds the run's lease, where it BEGAN, its effects.
- **The store's clock.** A lease lives by the store's clock, not the drive's, so its bar is placed
  by it: ``rpc.exec`` events pair virtual time with the store's time, a least-squares line maps
  one to the other (the store's clock may be skewed and may drift), and a lease's expiry (store
  time) becomes a point on the virtual axis through it. A lease starts at its claim, is renewed by
  each held step boundary, and ends at its release or at the next owner's claim; the stretch after
  its expiry that nobody released yet is hatched, because that is where a takeover may happen.
- **Double runs.** Two owners of one run whose handler spans overlap are the at-least-once window
  the spec allows (a late BEGIN reply, a pause between steps). They get a red band across every
  lane. A pass whose handler started after its lease had been taken over is drawn STALE (dashed).
- **Cut gaps.** Simulated worlds idle for long stretches between short bursts; a linear axis would
  squeeze each burst into a few pixels. Gaps with no event longer than a twentieth of the trace
  are cut to a narrow hatched band labelled with their length. Every instant that matters (an
  expiry, the end of a delay) is kept on the axis, so a cut only ever removes idle time.
- **Big traces.** Shapes of one kind closer than a pixel (or a character) are merged into one with
  a count in its hover title, so the size of the output tracks the picture, not the trace; the
  page says when it did so. Rows are capped (runs per scope, passes per drive) and the page says
  what it left out.

Rendering is a pure function of the trace: same trace, same bytes.
"""

from __future__ import annotations

import bisect
import html
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs

from driver import JOB_LEASE_ENTRY_MARGIN, iso_from_ms, parse_iso_ms

from ._trace import Trace

#: Lease length assumed for "late reply" before any claim says what the lease is.
_DEFAULT_LEASE_MS = 1_000.0
#: Rows drawn per scope (one per run) and per drive (passes that overlap in one drive).
MAX_RUN_ROWS = 12
MAX_PASS_ROWS = 4
#: Lanes drawn per kind; a world with more is summarised in a note.
MAX_LANES = 16
#: Double-run bands that get a text label (every band is drawn; labels would pile up).
MAX_OVERLAP_LABELS = 8
#: Polling finds nothing most of the time; it must not keep an idle stretch from being cut.
_POLLING_EVENTS = frozenset({"drive.tick", "drive.skip", "drive.report"})
_POLLING_OPS = frozenset({"due_keys", "list"})
_REFUSALS = frozenset(
    {"claim.lost", "begin.refused", "admission.miss", "takeover.exhausted", "step.lost"}
)


# -- the model ------------------------------------------------------------------------------------


def short(ident: str) -> str:
    """The tail of an id: ULIDs minted close together share their head (the timestamp)."""
    return "…" + ident[-6:] if len(ident) > 8 else ident


@attrs.frozen
class StoreClock:
    """``store_ms = origin_ms + rate * t``, fitted to the (t, store_at) pairs of executions."""

    origin_ms: float
    rate: float = 1.0

    def to_store(self, t: float) -> float:
        return self.origin_ms + self.rate * t

    def to_virtual(self, store_ms: float) -> float:
        return (store_ms - self.origin_ms) / self.rate

    @classmethod
    def fit(cls, pairs: list[tuple[float, float]]) -> StoreClock | None:
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
    overlaps: list[Overlap] = attrs.field(factory=list)
    clock: StoreClock | None = None
    notes: list[str] = attrs.field(factory=list)
    busy: set[float] = attrs.field(factory=set)  # when something other than polling happened

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


def _fields(event: dict[str, Any], *names: str) -> str:
    parts = [f"{name}={event[name]}" for name in names if event.get(name) is not None]
    return ", ".join(parts)


class _Builder:
    """Reads the trace once, in order, into a :class:`Timeline`."""

    def __init__(self) -> None:
        self.model = Timeline()
        self.instants: list[float] = []
        self.sends: dict[tuple[str, int], dict[str, Any]] = {}
        self.executed: dict[tuple[str, int], float] = {}
        self.store_pairs: list[tuple[float, float]] = []
        self.passes: dict[str, Pass] = {}
        self.leases: dict[tuple[str, str], list[Lease]] = {}
        self.run_scope: dict[str, str] = {}
        self.effect_keys: dict[str, int] = {}
        self.lease_ms = _DEFAULT_LEASE_MS
        self.expiries: list[tuple[Lease, float, float]] = []  # (lease, at, store expiry ms)
        self.handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "rpc.send": self.on_send,
            "rpc.exec": self.on_exec,
            "rpc.deliver": self.on_deliver,
            "rpc.drop": self.on_drop,
            "claim.won": self.on_claim_won,
            "begin.ok": self.on_begin_ok,
            "handler.invoke": self.on_invoke,
            "handler.end": self.on_handler_end,
            "step.run": self.on_step_run,
            "step.end": self.on_step_end,
            "step.memo": self.on_memo,
            "pass.outcome": self.on_outcome,
            "fault.delay": self.on_delay,
            "fault.pause": self.on_pause,
            "fault.crash": self.on_crash,
            "fault.evict": self.on_evict,
            "drive.tick": self.on_tick,
            "drive.skip": self.on_skip,
            "world.start": self.on_start,
            "world.note": self.on_note,
        }

    def build(self, events: list[dict[str, Any]]) -> Timeline:
        model = self.model
        model.events = len(events)
        if events:
            model.start = min(0.0, float(events[0]["t"]))
            model.end = max(float(event["t"]) for event in events)
        for event in events:
            name = event["ev"]
            if name not in _POLLING_EVENTS and event.get("op") not in _POLLING_OPS:
                model.busy.add(float(event["t"]))
            if "drive" in event and name != "world.start":
                self.drive(str(event["drive"]))
            handler = self.handlers.get(name)
            if handler is not None:
                handler(event)
            elif name in _REFUSALS:
                self.refusal(event)
        self.finish()
        return model

    # -- lanes ----------------------------------------------------------------------------------

    def drive(self, name: str) -> None:
        if name not in self.model.drives:
            self.model.drives.append(name)

    def scope_of(self, run: str, scope: str) -> None:
        if run in self.run_scope:
            return
        self.run_scope[run] = scope
        if scope not in self.model.runs:
            self.model.scopes.append(scope)
            self.model.runs[scope] = []
        self.model.runs[scope].append(run)

    def mark(self, lane: str, event: dict[str, Any], kind: str, title: str, **extra: Any) -> None:
        self.model.marks.append(Mark(lane, float(event["t"]), kind, title, **extra))

    # -- the wire and the store's view ---------------------------------------------------------

    def on_send(self, event: dict[str, Any]) -> None:
        self.sends[(event["link"], event["seq"])] = event
        if event["op"] == "claim":
            args = event.get("args") or []
            if len(args) >= 3 and isinstance(args[2], int | float):
                self.lease_ms = float(args[2])
            if args:
                self.scope_of(str(args[0]), str(event["scope"]))

    def on_exec(self, event: dict[str, Any]) -> None:
        key = (event["link"], event["seq"])
        t = float(event["t"])
        self.executed[key] = t
        store_at = event.get("store_at")
        if isinstance(store_at, str):
            self.store_pairs.append((t, float(parse_iso_ms(store_at))))
        if "error" in event:
            return
        args = (self.sends.get(key) or {}).get("args") or []
        op, result, scope = event["op"], event.get("result"), str(event["scope"])
        if op == "start_or_join" and isinstance(result, dict) and "id" in result:
            self.scope_of(str(result["id"]), scope)
        elif op == "claim" and isinstance(result, dict) and len(args) >= 2:
            self.claimed(event, scope, str(args[0]), str(args[1]), result)
        elif op == "begin" and result is True and len(args) >= 2:
            lease = self.lease(scope, str(args[0]), str(args[1]))
            if lease is not None:
                lease.began_at = t
        elif op in ("begin_step", "record_step") and len(args) >= 4:
            held = result.get("held") if isinstance(result, dict) else result
            owner, lease_ms = (args[2], args[3]) if op == "begin_step" else (args[6], args[7])
            lease = self.lease(scope, str(args[0]), str(owner))
            if held is True and lease is not None and isinstance(store_at, str):
                self.renew(lease, t, parse_iso_ms(store_at) + float(lease_ms))
        elif op in ("patch", "commit_pass", "miss") and len(args) >= 3:
            owner = args[1] if op == "miss" else args[2]
            lease = self.lease(scope, str(args[0]), str(owner))
            if lease is not None and result not in (None, False) and lease.ended_at is None:
                lease.ended_at, lease.end_reason = t, "missed" if op == "miss" else "released"
        elif op == "invoke" and len(args) >= 2 and args[0] == "record":
            self.effect(event, scope, args[1])

    def claimed(
        self, event: dict[str, Any], scope: str, run: str, owner: str, result: dict[str, Any]
    ) -> None:
        t = float(event["t"])
        self.scope_of(run, scope)
        leases = self.leases.setdefault((scope, run), [])
        if leases and leases[-1].ended_at is None:
            leases[-1].ended_at, leases[-1].end_reason = t, "taken over"
        lease = Lease(scope, run, owner, str(event["link"]), t, bool(result.get("takeover")))
        leases.append(lease)
        self.model.leases.append(lease)
        row = result.get("run") or {}
        expiry = row.get("next_attempt_at")
        if isinstance(expiry, str):
            self.renew(lease, t, parse_iso_ms(expiry))

    def lease(self, scope: str, run: str, owner: str) -> Lease | None:
        for lease in reversed(self.leases.get((scope, run), [])):
            if lease.owner == owner:
                return lease
        return None

    def renew(self, lease: Lease, t: float, expiry_ms: float) -> None:
        # The expiry is store time; it becomes virtual time once the whole clock is fitted.
        self.expiries.append((lease, t, expiry_ms))

    def effect(self, event: dict[str, Any], scope: str, spec: Any) -> None:
        if not isinstance(spec, dict) or spec.get("kind") != "effect":
            return
        key = str(spec.get("key"))
        run = key.split("/", 1)[0]
        if run not in self.run_scope:
            run = self.open_run(str(event["link"])) or run
        self.effect_keys[key] = self.effect_keys.get(key, 0) + 1
        self.model.effects.append(Effect(scope, run, float(event["t"]), key, self.effect_keys[key]))

    def open_run(self, drive: str) -> str | None:
        for found in reversed(self.model.passes):
            if found.drive == drive and found.ended_at is None:
                return found.run
        return None

    def on_deliver(self, event: dict[str, Any]) -> None:
        key = (event["link"], event["seq"])
        self.sends.pop(key, None)
        executed = self.executed.pop(key, None)
        transit = float(event["t"]) - executed if executed is not None else 0.0
        # Late = longer than the BEGIN margin: the wait that can turn a claim into a miss, or a
        # BEGIN into a pass that starts after its lease is gone.
        if executed is not None and transit > self.lease_ms * JOB_LEASE_ENTRY_MARGIN:
            title = f"late reply: {event['op']} #{event['seq']} took {transit:.1f} ms to come back"
            self.mark(str(event["link"]), event, "late", title, since=executed)

    def on_drop(self, event: dict[str, Any]) -> None:
        key = (event["link"], event["seq"])
        self.sends.pop(key, None)
        self.executed.pop(key, None)
        leg = event.get("leg", "?")
        ran = "it ran" if leg == "reply" else "it never ran"
        title = f"dropped {leg}: {event['op']} #{event['seq']} ({ran})"
        self.mark(str(event["link"]), event, "drop", title)

    # -- passes -----------------------------------------------------------------------------------

    def on_claim_won(self, event: dict[str, Any]) -> None:
        found = Pass(
            str(event["drive"]),
            str(event["run"]),
            str(event["owner"]),
            float(event["t"]),
            takeover=bool(event.get("takeover")),
        )
        self.passes[found.owner] = found
        self.model.passes.append(found)

    def pass_of(self, event: dict[str, Any]) -> Pass | None:
        return self.passes.get(str(event.get("owner")))

    def on_begin_ok(self, event: dict[str, Any]) -> None:
        found = self.pass_of(event)
        if found is not None:
            found.began_at = float(event["t"])

    def on_invoke(self, event: dict[str, Any]) -> None:
        found = self.pass_of(event)
        if found is not None:
            found.invoked_at = float(event["t"])

    def on_handler_end(self, event: dict[str, Any]) -> None:
        found = self.pass_of(event)
        if found is not None:
            found.handler_end, found.error = float(event["t"]), event.get("error")

    def on_step_run(self, event: dict[str, Any]) -> None:
        found = self.pass_of(event)
        if found is not None:
            step = Step(str(event["step"]), int(event.get("attempt") or 1), float(event["t"]))
            found.steps.append(step)

    def on_step_end(self, event: dict[str, Any]) -> None:
        found = self.pass_of(event)
        if found is None or not found.steps:
            return
        step = found.steps[-1]
        step.end, step.error, step.recorded = float(event["t"]), event.get("error"), None
        step.recorded = bool(event.get("recorded"))
        if not step.recorded:
            title = f"step {step.name} not recorded ({_fields(event, 'error') or 'lease lost'})"
            self.mark(found.drive, event, "refusal", title, owner=found.owner)

    def on_memo(self, event: dict[str, Any]) -> None:
        found = self.pass_of(event)
        if found is not None:
            found.memos.append((float(event["t"]), str(event["step"])))

    def on_outcome(self, event: dict[str, Any]) -> None:
        found = self.pass_of(event)
        if found is not None:
            found.ended_at, found.outcome = float(event["t"]), str(event.get("status"))
            found.written = event.get("written")
        if event.get("status") == "superseded" or event.get("written") is False:
            title = f"outcome refused: {_fields(event, 'status', 'written', 'error')}"
            self.mark(str(event["drive"]), event, "refusal", title, owner=event.get("owner"))

    def refusal(self, event: dict[str, Any]) -> None:
        name = str(event["ev"])
        details = _fields(event, "step", "waited_ms", "misses", "failed", "attempts")
        title = f"{name} run {short(str(event.get('run')))}" + (f": {details}" if details else "")
        found = self.pass_of(event)
        if found is not None and name in ("begin.refused", "admission.miss", "claim.lost"):
            found.ended_at = float(event["t"])
            found.outcome = found.outcome or name
        self.mark(str(event["drive"]), event, "refusal", title, owner=event.get("owner"))

    # -- faults and the world ---------------------------------------------------------------------

    def on_delay(self, event: dict[str, Any]) -> None:
        ms = float(event.get("ms") or 0.0)
        title = f"delay: {event['op']} #{event['seq']} {event['leg']} held {ms:.1f} ms"
        t = float(event["t"])
        self.model.marks.append(Mark(str(event["drive"]), t + ms, "delay", title, since=t))

    def on_pause(self, event: dict[str, Any]) -> None:
        ms = float(event.get("ms") or 0.0)
        t = float(event["t"])
        title = f"pause: the drive stopped {ms:.1f} ms ({_fields(event, 'where', 'nth')})"
        self.model.marks.append(Mark(str(event["drive"]), t + ms, "pause", title, since=t))

    def on_crash(self, event: dict[str, Any]) -> None:
        drive, t = str(event["drive"]), float(event["t"])
        down = float(event.get("down_ms") or 0.0)
        title = f"crash: {drive} killed (working={event.get('working')}), down {down:.1f} ms"
        self.model.marks.append(Mark(drive, t, "crash", title))
        if down > 0:
            self.model.marks.append(Mark(drive, t + down, "down", f"{drive} down", since=t))
        for found in self.passes.values():
            if found.drive == drive and found.ended_at is None:
                found.ended_at, found.outcome = t, found.outcome or "killed"
                if found.steps and found.steps[-1].end is None:
                    found.steps[-1].end = t

    def on_evict(self, event: dict[str, Any]) -> None:
        title = f"eviction of {event['scope']} (actor live: {event.get('live')})"
        self.mark(str(event["scope"]), event, "evict", title)

    def on_tick(self, event: dict[str, Any]) -> None:
        self.mark(str(event["drive"]), event, "tick", f"{event['drive']} drives {event['scope']}")

    def on_skip(self, event: dict[str, Any]) -> None:
        self.mark(str(event["drive"]), event, "skip", f"{event['drive']} is down: tick skipped")

    def on_start(self, event: dict[str, Any]) -> None:
        scope, run = str(event["scope"]), str(event["run"])
        self.scope_of(run, scope)
        self.mark(scope, event, "start", f"run {run} started by {event['drive']}", owner=run)

    def on_note(self, event: dict[str, Any]) -> None:
        self.mark("", event, "note", str(event.get("text")))

    # -- after the last event ---------------------------------------------------------------------

    def finish(self) -> None:
        model = self.model
        model.clock = StoreClock.fit(self.store_pairs)
        clock = model.clock or StoreClock(0.0)
        for lease, at, expiry_ms in self.expiries:
            lease.renewals.append((at, clock.to_virtual(expiry_ms)))
        # A lease nobody released outlives the last event: show where it would expire.
        last = model.end
        for lease in model.leases:
            for _, expiry in lease.renewals:
                if lease.ended_at is None:
                    model.end = max(model.end, min(expiry, last + self.lease_ms))
        for mark in model.marks:
            model.end = max(model.end, mark.t)
        self.stale_passes()
        model.overlaps = find_overlaps(model.passes, model.end)

    def stale_passes(self) -> None:
        """A pass whose handler started after the store gave its lease to another owner."""
        for found in self.model.passes:
            scope = self.run_scope.get(found.run)
            lease = self.lease(scope, found.run, found.owner) if scope else None
            if (
                lease is not None
                and lease.end_reason == "taken over"
                and lease.ended_at is not None
                and found.invoked_at is not None
                and found.invoked_at >= lease.ended_at
            ):
                found.stale_since = lease.ended_at


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


def build_timeline(trace: Trace) -> Timeline:
    """The model of ``trace`` that both renderings draw."""
    return _Builder().build(trace.events)


# -- the time scale -------------------------------------------------------------------------------


@attrs.frozen
class Piece:
    """A stretch of time and where it is drawn; ``cut`` pieces are idle gaps at a fixed width."""

    t0: float
    t1: float
    x0: float
    x1: float
    cut: bool


@attrs.define
class Scale:
    pieces: list[Piece]
    starts: list[float] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.starts = [piece.t0 for piece in self.pieces]

    def x(self, t: float) -> float:
        index = max(0, bisect.bisect_right(self.starts, t) - 1)
        piece = self.pieces[index]
        if piece.t1 <= piece.t0:
            return (piece.x0 + piece.x1) / 2
        share = min(max((t - piece.t0) / (piece.t1 - piece.t0), 0.0), 1.0)
        return piece.x0 + share * (piece.x1 - piece.x0)

    @property
    def cuts(self) -> list[Piece]:
        return [piece for piece in self.pieces if piece.cut]


def build_scale(
    instants: list[float],
    start: float,
    end: float,
    *,
    left: float,
    width: float,
    cut_width: float,
    min_width: float,
    max_cuts: int,
) -> Scale:
    """Cut the longest idle gaps (at most ``max_cuts``, each longer than 1/20 of the trace) and
    share the width among the rest in proportion to their length."""
    end = max(end, start + 1.0)
    threshold = (end - start) / 20
    gaps = [(b - a, a, b) for a, b in itertools.pairwise(instants) if b - a > threshold]
    gaps.sort(key=lambda gap: (-gap[0], gap[1]))
    cuts = sorted((a, b) for _, a, b in gaps[:max_cuts])
    kept: list[tuple[float, float]] = []
    cursor = start
    for a, b in cuts:
        kept.append((cursor, a))
        cursor = b
    kept.append((cursor, end))
    room = width - cut_width * len(cuts)
    floor = min(min_width, room / len(kept))
    spare = max(room - floor * len(kept), 0.0)
    total = math.fsum(b - a for a, b in kept) or 1.0
    pieces: list[Piece] = []
    x = left
    for index, (a, b) in enumerate(kept):
        grown = floor + spare * (b - a) / total
        pieces.append(Piece(a, b, x, x + grown, False))
        x += grown
        if index < len(cuts):
            pieces.append(Piece(cuts[index][0], cuts[index][1], x, x + cut_width, True))
            x += cut_width
    return Scale(pieces)


def _nice_step(ms_per_unit: float) -> float:
    """The smallest 1-2-5 step at least ``ms_per_unit`` long."""
    if ms_per_unit <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(ms_per_unit))
    for factor in (1.0, 2.0, 5.0, 10.0):
        if factor * power >= ms_per_unit:
            return factor * power
    return 10.0 * power


def ticks(scale: Scale, *, spacing: float) -> Iterator[tuple[float, bool]]:
    """(t, starts a piece) per axis tick: 1-2-5 steps in each kept piece, and each piece's start."""
    for piece in scale.pieces:
        if piece.cut:
            continue
        yield piece.t0, True
        span = piece.t1 - piece.t0
        if span <= 0:
            continue
        step = _nice_step(span * spacing / max(piece.x1 - piece.x0, 1e-9))
        t = math.floor(piece.t0 / step + 1) * step
        while t < piece.t1:
            yield t, False
            t += step


def fmt_ms(t: float) -> str:
    """Virtual time as a label: whole milliseconds, thousands separated by thin spaces."""
    if abs(t - round(t)) < 1e-6:
        return f"{round(t):,}".replace(",", "\u2009")
    return f"{t:,.1f}".replace(",", "\u2009")


def fmt_store(ms: float) -> str:
    """Store time as a label: the clock part of its ISO form."""
    return iso_from_ms(ms)[11:23]


# -- merging shapes closer than a pixel -----------------------------------------------------------


@attrs.define
class Shape:
    """A drawn stretch (or point, ``t0 == t1``) with its hover text; ``count`` > 1 once merged."""

    t0: float
    t1: float
    key: str
    title: str
    count: int = 1
    last_title: str = ""


def merge_shapes(shapes: Iterable[Shape], scale: Scale, *, within: float) -> list[Shape]:
    """Merge neighbours of one key that would be drawn less than ``within`` apart."""
    merged: list[Shape] = []
    for shape in sorted(shapes, key=lambda s: (s.key, s.t0, s.t1)):
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.key == shape.key
            and (scale.x(shape.t0) - scale.x(last.t1) < within)
        ):
            last.t1 = max(last.t1, shape.t1)
            last.count += 1
            last.last_title = shape.title
        else:
            merged.append(attrs.evolve(shape))
    return merged


def merged_title(shape: Shape) -> str:
    if shape.count == 1:
        return shape.title
    return f"{shape.count} merged: {shape.title} … {shape.last_title}"


# -- SVG -----------------------------------------------------------------------------------------

_PALETTE = ("#3b6fd1", "#d9822b", "#2e9e6a", "#8e5bc4", "#c2407e", "#2a9fb5", "#8a7a2a", "#6b6b6b")
_REFUSAL = "#d62728"
_WIDTH = 1400
_LEFT = 170
_RIGHT = 24
_ROW = 20
_STRIP = 16
_LANE_GAP = 8


def _num(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _attrs(values: dict[str, Any]) -> str:
    parts = []
    for name, value in values.items():
        if value is None:
            continue
        shown = _num(value) if isinstance(value, float) else str(value)
        parts.append(f'{name.rstrip("_").replace("_", "-")}="{html.escape(shown)}"')
    return " ".join(parts)


def _title(text: str) -> str:
    if len(text) > 400:
        text = text[:399] + "…"
    return f"<title>{html.escape(text)}</title>"


class _Svg:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, tag: str, title: str | None = None, text: str | None = None, **a: Any) -> None:
        inner = (_title(title) if title else "") + (html.escape(text) if text else "")
        self.parts.append(
            f"<{tag} {_attrs(a)}>{inner}</{tag}>" if inner else f"<{tag} {_attrs(a)}/>"
        )

    def raw(self, text: str) -> None:
        self.parts.append(text)


@attrs.frozen
class _Row:
    """One drawn row: its lane key, what it shows, and its vertical place."""

    lane: str
    kind: str  # "strip" | "pass" | "run"
    index: int
    y: float
    height: float


@attrs.define
class _Layout:
    rows: dict[tuple[str, str, int], _Row] = attrs.field(factory=dict)
    lanes: list[tuple[str, str, float, float]] = attrs.field(factory=list)  # kind, name, y, h
    height: float = 0.0


def _visible(model: Timeline) -> tuple[list[str], list[str]]:
    drives, scopes = model.drives[:MAX_LANES], model.scopes[:MAX_LANES]
    hidden = len(model.drives) - len(drives) + len(model.scopes) - len(scopes)
    if hidden:
        model.notes.append(f"{hidden} more lanes not drawn (at most {MAX_LANES} of each kind)")
    return drives, scopes


def _runs_shown(model: Timeline, scope: str) -> list[str]:
    """Runs with a double run first, then in order of first appearance, capped."""
    runs = model.runs.get(scope, [])
    doubled = {o.run for o in model.overlaps}
    ordered = [r for r in runs if r in doubled] + [r for r in runs if r not in doubled]
    return ordered[:MAX_RUN_ROWS]


def pack_passes(model: Timeline) -> None:
    """Give each pass a row in its drive's lane so that passes of one drive never overlap."""
    ends: dict[str, list[float]] = {}
    crowded: set[str] = set()
    for found in sorted(model.passes, key=lambda p: (p.drive, p.claimed_at, p.owner)):
        rows = ends.setdefault(found.drive, [])
        free = [i for i, end in enumerate(rows) if end <= found.claimed_at]
        if free:
            found.row = free[0]
        elif len(rows) < MAX_PASS_ROWS:
            found.row = len(rows)
            rows.append(0.0)
        else:
            found.row = MAX_PASS_ROWS - 1
            crowded.add(found.drive)
        rows[found.row] = max(rows[found.row], found.end(model.end))
    for drive in sorted(crowded):
        model.notes.append(f"{drive}: more than {MAX_PASS_ROWS} passes at once; extra stacked")


def _layout(model: Timeline, top: float) -> _Layout:
    layout = _Layout()
    drives, scopes = _visible(model)
    rows_per_drive: dict[str, int] = {}
    for found in model.passes:
        rows_per_drive[found.drive] = max(rows_per_drive.get(found.drive, 1), found.row + 1)
    y = top
    for drive in drives:
        start = y
        layout.rows[("drive", drive, -1)] = _Row(drive, "strip", -1, y, _STRIP)
        y += _STRIP
        for index in range(rows_per_drive.get(drive, 1)):
            layout.rows[("drive", drive, index)] = _Row(drive, "pass", index, y, _ROW)
            y += _ROW
        layout.lanes.append(("drive", drive, start, y - start))
        y += _LANE_GAP
    for scope in scopes:
        start = y
        layout.rows[("scope", scope, -1)] = _Row(scope, "strip", -1, y, _STRIP)
        y += _STRIP
        runs = _runs_shown(model, scope) or [""]
        for index, run in enumerate(runs):
            layout.rows[("scope", scope, index)] = _Row(run, "run", index, y, _ROW)
            y += _ROW
        hidden = len(model.runs.get(scope, [])) - len(runs)
        if hidden > 0:
            model.notes.append(f"{scope}: {hidden} more runs not drawn (at most {MAX_RUN_ROWS})")
        layout.lanes.append(("scope", scope, start, y - start))
        y += _LANE_GAP
    layout.height = y
    return layout


class _Page:
    """Draws a :class:`Timeline` as SVG."""

    def __init__(self, model: Timeline, title: str) -> None:
        self.model = model
        self.title = title
        self.svg = _Svg()
        self.merged = 0
        pack_passes(model)
        self.colors = {d: _PALETTE[i % len(_PALETTE)] for i, d in enumerate(model.drives)}
        self.scale = build_scale(
            model.instants(),
            model.start,
            model.end,
            left=_LEFT,
            width=_WIDTH - _LEFT - _RIGHT,
            cut_width=18,
            min_width=8,
            max_cuts=(_WIDTH - _LEFT - _RIGHT) // 40,
        )
        self.top = 110.0
        self.layout = _layout(model, self.top + 8)
        self.run_rows = {
            (row.lane, key[1]): row for key, row in self.layout.rows.items() if row.kind == "run"
        }

    def x(self, t: float) -> float:
        return self.scale.x(t)

    def color(self, drive: str) -> str:
        return self.colors.get(drive, "#777777")

    def merge(self, shapes: list[Shape], within: float) -> list[Shape]:
        merged = merge_shapes(shapes, self.scale, within=within)
        self.merged += len(shapes) - len(merged)
        return merged

    # -- the frame --------------------------------------------------------------------------------

    def draw(self) -> str:
        bottom = self.layout.height
        self.frame(bottom)
        self.drive_lanes()
        self.scope_lanes()
        self.overlaps(bottom)
        self.world_notes()
        legend_y = self.store_axis(bottom) + 18
        end = self.legend(legend_y)
        end = self.notes(end + 10)
        height = end + 12
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_num(height)}" '
            f'viewBox="0 0 {_WIDTH} {_num(height)}" font-family="sans-serif" font-size="11">'
        )
        defs = (
            "<defs>"
            '<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/>'
            '<line x1="0" y1="0" x2="0" y2="6" stroke="#888888" stroke-width="2"/></pattern>'
            '<pattern id="cut" width="4" height="4" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(-45)"><rect width="4" height="4" fill="#f3f3f3"/>'
            '<line x1="0" y1="0" x2="0" y2="4" stroke="#d8d8d8" stroke-width="1.5"/></pattern>'
            "</defs>"
        )
        return head + defs + "".join(self.svg.parts) + "</svg>"

    def frame(self, bottom: float) -> None:
        svg, model = self.svg, self.model
        svg.add("rect", x=0, y=0, width=_WIDTH, height="100%", fill="#ffffff")
        svg.add("text", text=self.title, x=12, y=24, font_size=18, font_weight="bold")
        summary = (
            f"{model.events} events · {fmt_ms(model.end - model.start)} ms of virtual time · "
            f"{len(model.drives)} drives · {len(model.scopes)} scopes · "
            f"{sum(len(r) for r in model.runs.values())} runs · "
            f"{len(model.overlaps)} double runs"
        )
        svg.add("text", text=summary, x=12, y=44, fill="#444444")
        if model.clock is not None:
            clock = (
                f"store clock: {fmt_store(model.clock.to_store(0.0))} at t=0, "
                f"rate {model.clock.rate:.4f}; leases are placed by it"
            )
            svg.add("text", text=clock, x=12, y=60, fill="#666666")
        for kind, name, y, h in self.layout.lanes:
            fill = "#f7f9fc" if kind == "drive" else "#f8f6f0"
            svg.add("rect", x=4, y=y - 2, width=_WIDTH - 8, height=h + 4, fill=fill)
            label = name if name.startswith(kind) else f"{kind} {name}"
            svg.add("text", text=label, x=10, y=y + 12, font_weight="bold")
        last = -math.inf
        for piece in self.scale.cuts:
            svg.add(
                "rect",
                title=f"idle {fmt_ms(piece.t1 - piece.t0)} ms cut: {fmt_ms(piece.t0)}–"
                f"{fmt_ms(piece.t1)} ms",
                x=piece.x0,
                y=self.top,
                width=piece.x1 - piece.x0,
                height=bottom - self.top,
                fill="url(#cut)",
            )
            if piece.x0 - last < 44:
                continue
            last = piece.x0
            svg.add(
                "text",
                text=f"≈{_short_ms(piece.t1 - piece.t0)}",
                x=(piece.x0 + piece.x1) / 2,
                y=self.top - 2,
                font_size=9,
                fill="#888888",
                text_anchor="middle",
            )
        self.time_axis(bottom)

    def time_axis(self, bottom: float) -> None:
        svg = self.svg
        svg.add("text", text="virtual ms", x=10, y=self.top - 14, fill="#666666")
        last = -math.inf
        for t, first in ticks(self.scale, spacing=90):
            x = self.x(t)
            svg.add("line", x1=x, y1=self.top - 6, x2=x, y2=bottom, stroke="#e4e4e4")
            if x - last >= 56 or (first and x - last >= 30):
                svg.add(
                    "text", text=fmt_ms(t), x=x, y=self.top - 14, text_anchor="middle", font_size=10
                )
                last = x

    def store_axis(self, bottom: float) -> float:
        clock = self.model.clock
        if clock is None:
            return bottom
        svg = self.svg
        svg.add("text", text="store clock", x=10, y=bottom + 16, fill="#666666")
        last = -math.inf
        for t, _ in ticks(self.scale, spacing=90):
            x = self.x(t)
            if x - last >= 80:
                label = fmt_store(clock.to_store(t))
                anchor = "end" if x > _WIDTH - _RIGHT - 40 else "middle"
                svg.add("text", text=label, x=x, y=bottom + 16, text_anchor=anchor, font_size=10)
                svg.add("line", x1=x, y1=bottom, x2=x, y2=bottom + 5, stroke="#999999")
                last = x
        return bottom + 20

    # -- drives -----------------------------------------------------------------------------------

    def drive_lanes(self) -> None:
        rows = self.layout.rows
        shown = {name for kind, name, _, _ in self.layout.lanes if kind == "drive"}
        passes_by_owner: dict[str, Pass] = {}
        for found in self.model.passes:
            passes_by_owner[found.owner] = found
            if found.drive in shown:
                self.draw_pass(found, rows[("drive", found.drive, found.row)])
        marks: list[tuple[_Row, Mark]] = []
        for mark in self.model.marks:
            if mark.lane not in shown or mark.kind in ("evict", "start", "note"):
                continue
            owner = passes_by_owner.get(mark.owner or "")
            row = rows[("drive", mark.lane, owner.row if owner is not None else -1)]
            marks.append((row, mark))
        self.draw_marks(marks)

    def draw_pass(self, found: Pass, row: _Row) -> None:
        svg, horizon = self.svg, self.model.end
        color = self.color(found.drive)
        mid = row.y + row.height / 2
        end = found.end(horizon)
        title = pass_title(found, horizon)
        handler = found.handler_span(horizon)
        admission_end = handler[0] if handler is not None else end
        x0, x1 = self.x(found.claimed_at), self.x(admission_end)
        svg.add(
            "rect",
            title=title,
            x=x0,
            y=mid - 1.5,
            width=max(x1 - x0, 1.0),
            height=3,
            fill=color,
            opacity=0.55,
        )
        if found.began_at is not None:
            bx = self.x(found.began_at)
            svg.add("line", x1=bx, y1=mid - 7, x2=bx, y2=mid + 7, stroke="#111111", stroke_width=2)
        if handler is None:
            return
        hx0, hx1 = self.x(handler[0]), self.x(handler[1])
        stale = found.stale_since is not None
        svg.add(
            "rect",
            title=title,
            x=hx0,
            y=mid - 7,
            width=max(hx1 - hx0, 2.0),
            height=14,
            fill=color,
            fill_opacity=0.35,
            stroke=_REFUSAL if stale else color,
            stroke_width=1.5 if stale else 1,
            stroke_dasharray="4 2" if stale else None,
            rx=2,
        )
        self.draw_steps(found, mid)
        label = f"{short(found.run)} · {short(found.owner)}" + (" · stale" if stale else "")
        if hx1 - hx0 > 7 * len(label):
            svg.add("text", text=label, x=hx0 + 4, y=mid + 4, font_size=10, fill="#222222")

    def draw_steps(self, found: Pass, mid: float) -> None:
        horizon = found.end(self.model.end)
        shapes = [
            Shape(
                step.start,
                step.end if step.end is not None else horizon,
                "error" if step.error else "ok",
                f"step {step.name} attempt {step.attempt}: {fmt_ms(step.start)}–"
                f"{fmt_ms(step.end) if step.end is not None else '?'} ms"
                + (f", error {step.error}" if step.error else "")
                + ("" if step.recorded is not False else ", NOT recorded"),
            )
            for step in found.steps
        ]
        for shape in self.merge(shapes, 1.0):
            x0, x1 = self.x(shape.t0), self.x(shape.t1)
            fill = _REFUSAL if shape.key == "error" else self.color(found.drive)
            self.svg.add(
                "rect",
                title=merged_title(shape),
                x=x0,
                y=mid - 4,
                width=max(x1 - x0, 1.5),
                height=8,
                fill=fill,
                stroke="#ffffff",
                stroke_width=0.5,
            )
        memos = [Shape(t, t, "memo", f"memo hit: step {name}") for t, name in found.memos]
        for shape in self.merge(memos, 2.0):
            self.diamond(self.x(shape.t0), mid, 4, "#ffffff", merged_title(shape), stroke="#111111")

    def draw_marks(self, marks: list[tuple[_Row, Mark]]) -> None:
        spans = [(row, mark) for row, mark in marks if mark.since is not None]
        for row, mark in spans:
            self.draw_span_mark(row, mark)
        points: dict[tuple[str, int], list[Shape]] = {}
        rows: dict[tuple[str, int], _Row] = {}
        for row, mark in marks:
            if mark.since is None or mark.kind == "late":
                key = (row.lane, row.index)
                rows[key] = row
                points.setdefault(key, []).append(Shape(mark.t, mark.t, mark.kind, mark.title))
        for key, shapes in points.items():
            row = rows[key]
            for shape in self.merge(shapes, 2.0):
                self.point_mark(row, shape)

    def draw_span_mark(self, row: _Row, mark: Mark) -> None:
        assert mark.since is not None
        x0, x1 = self.x(mark.since), self.x(mark.t)
        y = row.y + row.height / 2 + (3 if mark.kind == "late" else -3)
        color = {"delay": "#e07b00", "pause": "#8e44ad", "late": "#1f77b4", "down": "#555555"}
        stroke = color.get(mark.kind, "#555555")
        if mark.kind == "down":
            self.svg.add(
                "rect",
                title=mark.title,
                x=x0,
                y=row.y + 2,
                width=max(x1 - x0, 1.0),
                height=row.height - 4,
                fill="#555555",
                opacity=0.18,
            )
            return
        dash = "3 2" if mark.kind == "late" else None
        self.svg.add(
            "line",
            title=mark.title,
            x1=x0,
            y1=y,
            x2=max(x1, x0 + 1),
            y2=y,
            stroke=stroke,
            stroke_width=2,
            stroke_dasharray=dash,
        )
        if mark.kind in ("delay", "pause"):
            self.svg.add("circle", title=mark.title, cx=x0, cy=y, r=3, fill=stroke)

    def point_mark(self, row: _Row, shape: Shape) -> None:
        x, y = self.x(shape.t0), row.y + row.height / 2
        if shape.key == "late":
            y += 3
        title = merged_title(shape)
        if shape.key == "refusal":
            self.cross(x, y, 4.5, _REFUSAL, title)
        elif shape.key == "crash":
            self.cross(x, y, 6, "#111111", title, width=3)
        elif shape.key == "drop":
            self.cross(x, y, 4, "#e07b00", title)
        elif shape.key == "late":
            self.svg.add(
                "path",
                title=title,
                d=f"M{_num(x)},{_num(y)} l-7,-4 l0,8 z",
                fill="#1f77b4",
            )
        elif shape.key == "tick":
            self.svg.add("line", title=title, x1=x, y1=row.y + 2, x2=x, y2=row.y + 7, stroke="#999")
        elif shape.key == "skip":
            self.svg.add("circle", title=title, cx=x, cy=y, r=3, fill="none", stroke="#555555")

    def cross(
        self, x: float, y: float, r: float, color: str, title: str, *, width: float = 2
    ) -> None:
        d = f"M{_num(x - r)},{_num(y - r)} L{_num(x + r)},{_num(y + r)} "
        d += f"M{_num(x - r)},{_num(y + r)} L{_num(x + r)},{_num(y - r)}"
        self.svg.add("path", title=title, d=d, stroke=color, stroke_width=width, fill="none")

    def diamond(
        self, x: float, y: float, r: float, fill: str, title: str, *, stroke: str = "none"
    ) -> None:
        d = f"M{_num(x)},{_num(y - r)} L{_num(x + r)},{_num(y)} L{_num(x)},{_num(y + r)} "
        d += f"L{_num(x - r)},{_num(y)} z"
        self.svg.add("path", title=title, d=d, fill=fill, stroke=stroke)

    # -- scopes -----------------------------------------------------------------------------------

    def scope_lanes(self) -> None:
        for lease in self.model.leases:
            row = self.run_rows.get((lease.run, lease.scope))
            if row is not None:
                self.draw_lease(lease, row)
        effects: dict[tuple[str, str], list[Shape]] = {}
        for effect in self.model.effects:
            kind = "duplicate" if effect.copy > 1 else "effect"
            title = f"effect {effect.key} at {fmt_ms(effect.t)} ms" + (
                f" (copy {effect.copy}: the work ran twice)" if effect.copy > 1 else ""
            )
            effects.setdefault((effect.run, effect.scope), []).append(
                Shape(effect.t, effect.t, kind, title)
            )
        for where, shapes in effects.items():
            row = self.run_rows.get(where)
            if row is not None:
                for shape in self.merge(shapes, 2.0):
                    self.draw_effect(row, shape)
        self.scope_marks()

    def draw_lease(self, lease: Lease, row: _Row) -> None:
        svg = self.svg
        color = self.color(lease.drive)
        mid = row.y + row.height / 2
        title = lease_title(lease, self.model.clock)
        for start, end, held in lease.segments(self.model.end):
            x0, x1 = self.x(start), self.x(end)
            svg.add(
                "rect",
                title=title + ("" if held else " — EXPIRED here, not released"),
                x=x0,
                y=mid - 6,
                width=max(x1 - x0, 1.0),
                height=12,
                fill=color if held else "url(#hatch)",
                fill_opacity=0.8 if held else None,
                stroke=color,
                stroke_width=0.8,
                opacity=1.0 if held else 0.6,
            )
        if lease.takeover:
            x = self.x(lease.claimed_at)
            svg.add(
                "path",
                title=f"takeover of a BEGUN lease by {short(lease.owner)} ({lease.drive})",
                d=f"M{_num(x)},{_num(mid - 9)} l4,-5 l-8,0 z",
                fill=_REFUSAL,
            )
        if lease.began_at is not None:
            x = self.x(lease.began_at)
            svg.add(
                "line",
                title=f"BEGIN written for {short(lease.owner)} at {fmt_ms(lease.began_at)} ms",
                x1=x,
                y1=mid - 9,
                x2=x,
                y2=mid + 9,
                stroke="#111111",
                stroke_width=2.5,
            )
        if lease.ended_at is not None and lease.end_reason != "taken over":
            x = self.x(lease.ended_at)
            svg.add("line", x1=x, y1=mid - 6, x2=x, y2=mid + 6, stroke="#111111", stroke_width=1)
        segments = lease.segments(self.model.end)
        if segments:
            x0, x1 = self.x(segments[0][0]), self.x(segments[0][1])
            label = f"{lease.drive} {short(lease.owner)}"
            if x1 - x0 > 6.5 * len(label) + 8:
                svg.add("text", text=label, x=x0 + 4, y=mid + 4, font_size=10, fill="#ffffff")

    def draw_effect(self, row: _Row, shape: Shape) -> None:
        y = row.y + row.height / 2
        duplicate = shape.key == "duplicate"
        self.svg.add(
            "circle",
            title=merged_title(shape),
            cx=self.x(shape.t0),
            cy=y,
            r=4.5 if duplicate else 2.5,
            fill=_REFUSAL if duplicate else "#111111",
            stroke="#ffffff",
            stroke_width=0.8,
        )

    def scope_marks(self) -> None:
        lanes = {name: (y, h) for kind, name, y, h in self.layout.lanes if kind == "scope"}
        for kind, name, _, _ in self.layout.lanes:
            if kind == "scope":
                for index, run in enumerate(_runs_shown(self.model, name)):
                    row = self.layout.rows[("scope", name, index)]
                    self.svg.add("text", text=short(run), x=24, y=row.y + 14, fill="#555555")
        for mark in self.model.marks:
            if mark.lane not in lanes:
                continue
            y, h = lanes[mark.lane]
            x = self.x(mark.t)
            if mark.kind == "evict":
                self.svg.add(
                    "line",
                    title=mark.title,
                    x1=x,
                    y1=y - 2,
                    x2=x,
                    y2=y + h + 2,
                    stroke="#111111",
                    stroke_width=2,
                    stroke_dasharray="5 3",
                )
                self.svg.add("text", text="evicted", x=x + 3, y=y + 9, font_size=9)
            elif mark.kind == "start":
                started = self.run_rows.get((mark.owner or "", mark.lane))
                if started is not None:
                    cy = started.y + started.height / 2
                    self.svg.add(
                        "circle", title=mark.title, cx=x, cy=cy, r=3, fill="none", stroke="#111"
                    )

    # -- what spans lanes -------------------------------------------------------------------------

    def overlaps(self, bottom: float) -> None:
        labelled: list[float] = []
        for index, overlap in enumerate(self.model.overlaps):
            x0, x1 = self.x(overlap.start), self.x(overlap.end)
            if x1 - x0 < 3:
                x0, x1 = (x0 + x1) / 2 - 1.5, (x0 + x1) / 2 + 1.5
            label = f"double run: {short(overlap.run)}"
            title = (
                f"{label} — {overlap.drives[0]} ({short(overlap.owners[0])}) and "
                f"{overlap.drives[1]} ({short(overlap.owners[1])}) both ran the handler "
                f"{fmt_ms(overlap.start)}–{fmt_ms(overlap.end)} ms"
            )
            self.svg.add(
                "rect",
                title=title,
                x=x0,
                y=self.top,
                width=x1 - x0,
                height=bottom - self.top,
                fill=_REFUSAL,
                fill_opacity=0.14,
                stroke=_REFUSAL,
                stroke_width=1,
                class_="double-run",
                data_run=overlap.run,
            )
            if index < MAX_OVERLAP_LABELS and all(abs(x0 - seen) > 120 for seen in labelled):
                labelled.append(x0)
                self.svg.add(
                    "text",
                    text=label,
                    x=x0,
                    y=self.top - 30,
                    fill=_REFUSAL,
                    font_weight="bold",
                    text_anchor="end" if x0 > _WIDTH - 160 else "middle",
                )

    def world_notes(self) -> None:
        for mark in self.model.marks:
            if mark.kind == "note":
                x = self.x(mark.t)
                self.diamond(x, self.top - 4, 4, "#555555", f"note: {mark.title}")

    # -- legend and notes -------------------------------------------------------------------------

    def legend(self, y: float) -> float:
        svg = self.svg
        x = 12.0
        svg.add("text", text="legend", x=x, y=y + 4, font_weight="bold")
        x += 56
        for drive in self.model.drives[:MAX_LANES]:
            svg.add("rect", x=x, y=y - 5, width=14, height=10, fill=self.color(drive))
            svg.add("text", text=drive, x=x + 18, y=y + 4)
            x += 26 + 6.5 * len(drive)
        y += 20
        x = 12.0
        for draw, text in self.legend_items():
            draw(x + 8, y)
            svg.add("text", text=text, x=x + 20, y=y + 4)
            x += 40 + 6.2 * len(text)
            if x > _WIDTH - 200:
                x, y = 12.0, y + 18
        return y + 8

    def legend_items(self) -> list[tuple[Callable[[float, float], None], str]]:
        svg = self.svg

        def bar(fill: str, *, tall: float = 12, **more: Any) -> Callable[[float, float], None]:
            return lambda x, y: svg.add(
                "rect", x=x - 8, y=y - tall / 2, width=16, height=tall, fill=fill, **more
            )

        return [
            (bar("#3b6fd1", fill_opacity=0.8), "lease held (store's clock)"),
            (bar("url(#hatch)", stroke="#3b6fd1"), "lease expired, not released"),
            (
                lambda x, y: svg.add(
                    "line", x1=x, y1=y - 8, x2=x, y2=y + 8, stroke="#111", stroke_width=2.5
                ),
                "BEGIN",
            ),
            (bar("#3b6fd1", fill_opacity=0.35, stroke="#3b6fd1"), "handler (pass)"),
            (bar("#3b6fd1", tall=8), "step"),
            (bar("none", stroke=_REFUSAL, stroke_dasharray="4 2"), "stale pass"),
            (lambda x, y: self.diamond(x, y, 4, "#ffffff", "", stroke="#111"), "memo hit"),
            (lambda x, y: self.cross(x, y, 4.5, _REFUSAL, ""), "refused / lost"),
            (lambda x, y: self.cross(x, y, 6, "#111111", "", width=3), "crash"),
            (
                lambda x, y: svg.add(
                    "line", x1=x - 8, y1=y, x2=x + 8, y2=y, stroke="#e07b00", stroke_width=2
                ),
                "delay",
            ),
            (
                lambda x, y: svg.add(
                    "line", x1=x - 8, y1=y, x2=x + 8, y2=y, stroke="#8e44ad", stroke_width=2
                ),
                "pause",
            ),
            (
                lambda x, y: svg.add(
                    "line",
                    x1=x - 8,
                    y1=y,
                    x2=x + 8,
                    y2=y,
                    stroke="#1f77b4",
                    stroke_width=2,
                    stroke_dasharray="3 2",
                ),
                "late reply",
            ),
            (lambda x, y: self.cross(x, y, 4, "#e07b00", ""), "dropped leg"),
            (lambda x, y: svg.add("circle", cx=x, cy=y, r=2.5, fill="#111"), "effect"),
            (lambda x, y: svg.add("circle", cx=x, cy=y, r=4.5, fill=_REFUSAL), "duplicate effect"),
            (bar(_REFUSAL, fill_opacity=0.14, stroke=_REFUSAL), "double run"),
            (bar("url(#cut)"), "idle gap cut"),
        ]

    def notes(self, y: float) -> float:
        notes = list(self.model.notes)
        if self.scale.cuts:
            notes.append(
                f"{len(self.scale.cuts)} idle gaps cut from the time axis (hatched grey bands)"
            )
        if self.merged:
            notes.append(
                f"aggregated: {self.merged} shapes closer than a pixel were merged into their "
                "neighbours (hover for counts)"
            )
        for note in notes:
            y += 15
            self.svg.add("text", text=note, x=12, y=y, fill="#8a4b00")
        return y


def _short_ms(ms: float) -> str:
    if ms >= 60_000:
        return f"{ms / 60_000:.1f} min"
    if ms >= 1_000:
        return f"{ms / 1_000:.1f} s"
    return f"{ms:.0f} ms"


def pass_title(found: Pass, horizon: float) -> str:
    parts = [
        f"pass {found.owner} of run {found.run} on {found.drive}",
        f"claimed {fmt_ms(found.claimed_at)} ms" + (" (takeover)" if found.takeover else ""),
    ]
    if found.began_at is not None:
        parts.append(f"BEGIN acknowledged {fmt_ms(found.began_at)} ms")
    span = found.handler_span(horizon)
    if span is not None:
        parts.append(f"handler {fmt_ms(span[0])}–{fmt_ms(span[1])} ms")
    parts.append(f"{len(found.steps)} steps run, {len(found.memos)} memo hits")
    if found.outcome is not None:
        parts.append(f"outcome {found.outcome} (written: {found.written})")
    if found.error:
        parts.append(f"error: {found.error}")
    if found.stale_since is not None:
        parts.append(
            f"STALE: its lease was taken over at {fmt_ms(found.stale_since)} ms, "
            "before its handler started"
        )
    return "; ".join(parts)


def lease_title(lease: Lease, clock: StoreClock | None) -> str:
    parts = [f"lease of run {lease.run} held by {lease.owner} ({lease.drive})"]
    parts.append(
        f"claimed {fmt_ms(lease.claimed_at)} ms" + (" by takeover" if lease.takeover else "")
    )
    if lease.renewals:
        expiry = lease.renewals[-1][1]
        store = f" (store {fmt_store(clock.to_store(expiry))})" if clock is not None else ""
        parts.append(f"last expiry {fmt_ms(expiry)} ms{store}")
        if len(lease.renewals) > 1:
            parts.append(f"renewed {len(lease.renewals) - 1} times")
    if lease.began_at is not None:
        parts.append(f"BEGIN {fmt_ms(lease.began_at)} ms")
    if lease.ended_at is not None:
        parts.append(f"{lease.end_reason} {fmt_ms(lease.ended_at)} ms")
    return "; ".join(parts)


_STYLE = (
    "body{margin:0;background:#ffffff;font-family:sans-serif}"
    "svg{display:block}"
    ".double-run:hover{fill-opacity:.3}"
)


def render_html(trace: Trace, *, title: str) -> str:
    """The trace as one self-contained HTML page: an inline SVG timeline, no scripts or assets."""
    svg = _Page(build_timeline(trace), title).draw()
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n"
        f"<body>\n{svg}\n</body></html>\n"
    )


def write_timeline(trace: Trace, path: str | Path, *, title: str) -> None:
    """Write :func:`render_html` of ``trace`` to ``path``."""
    Path(path).write_text(render_html(trace, title=title), encoding="utf-8")


# -- text ---------------------------------------------------------------------------------------

_TEXT_LEGEND = (
    (
        "drives:",
        "- claimed, not begun",
        "= handler",
        "s stale handler",
        "# step",
        "m memo hit",
        "! refused/lost",
        "X crash",
        "_ down",
        "~ delay",
        "p pause",
        "L late reply",
        "D dropped leg",
        ". tick",
    ),
    (
        "scopes:",
        "a,b,.. lease held by that drive",
        "A,B,.. BEGIN",
        ": expired, not released",
        "* effect",
        "2 duplicate effect",
        "E eviction",
    ),
    ("axis:", "/ idle gap cut out", "X (double run line) two handlers of one run at once"),
)


def _pack(items: Iterable[str], width: int, *, sep: str = "  ") -> list[str]:
    """Items joined by ``sep``, wrapped between items (continuations indented) within ``width``."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(sep) + len(item) <= width:
            lines[-1] += sep + item
        else:
            lines.append(item if not lines else "    " + item)
    return lines


class _Canvas:
    """One text row: each cell keeps the highest-priority character painted on it."""

    def __init__(self, cols: int) -> None:
        self.cells = [" "] * cols
        self.ranks = [0] * cols

    def put(self, col: int, char: str, rank: int) -> None:
        if 0 <= col < len(self.cells) and rank >= self.ranks[col]:
            self.cells[col], self.ranks[col] = char, rank

    def span(self, c0: int, c1: int, char: str, rank: int) -> None:
        for col in range(c0, max(c1, c0) + 1):
            self.put(col, char, rank)

    def text(self) -> str:
        return "".join(self.cells)


_MARK_CHARS = {
    "refusal": ("!", 8),
    "crash": ("X", 9),
    "drop": ("D", 7),
    "late": ("L", 7),
    "tick": (".", 1),
    "skip": ("_", 2),
}


class _Text:
    """Draws a :class:`Timeline` as lines of text."""

    def __init__(self, model: Timeline, width: int) -> None:
        self.model = model
        self.width = width
        self.label = max(8, min(18, width // 6))
        self.cols = max(width - self.label - 2, 10)
        self.scale = build_scale(
            model.instants(),
            model.start,
            model.end,
            left=0,
            width=self.cols,
            cut_width=1,
            min_width=1,
            max_cuts=self.cols // 10,
        )
        self.letters = {d: chr(ord("a") + i) if i < 26 else "?" for i, d in enumerate(model.drives)}

    def col(self, t: float) -> int:
        return min(int(self.scale.x(t)), self.cols - 1)

    def line(self, label: str, body: str) -> str:
        name = label if len(label) <= self.label else label[: self.label - 1] + "…"
        return f"{name:<{self.label}}|{body}|"

    def render(self) -> list[str]:
        model = self.model
        drives, scopes = _visible(model)
        head = (
            f"timeline {fmt_ms(model.start)}–{fmt_ms(model.end)} ms, {model.events} events, "
            f"drives: {len(model.drives)}, scopes: {len(model.scopes)}, "
            f"double runs: {len(model.overlaps)}"
        ).replace("\u2009", "")
        lines = [*_pack(head.split(" "), self.width, sep=" "), *self.axis()]
        lines += [self.line(drive, self.drive_row(drive)) for drive in drives]
        for scope in scopes:
            runs = _runs_shown(model, scope) or [""]
            for run in runs:
                label = f"{scope} {short(run)}" if len(runs) > 1 else scope
                lines.append(self.line(label, self.run_row(scope, run)))
        lines.append(self.line("double run", self.overlap_row()))
        letters = [f"{letter}={drive}" for drive, letter in self.letters.items()]
        for items in (*_TEXT_LEGEND, ("drive letters:", *letters) if letters else ()):
            lines += _pack(items, self.width)
        for note in self.notes():
            lines += _pack(f"note: {note}".split(" "), self.width, sep=" ")
        return lines

    def axis(self) -> list[str]:
        ruler, labels = _Canvas(self.cols), [" "] * (self.cols + 12)
        for piece in self.scale.cuts:
            ruler.span(self.col(piece.t0) + 1, int(piece.x1) - 1, "/", 5)
        free = 0
        for t, _ in ticks(self.scale, spacing=12):
            col = self.col(t)
            if ruler.cells[col] == "/":
                continue
            ruler.put(col, "+", 3)
            label = fmt_ms(t).replace("\u2009", "")
            if col >= free and col + len(label) <= self.cols:
                labels[col : col + len(label)] = list(label)
                free = col + len(label) + 1
        for col, cell in enumerate(ruler.cells):
            if cell == " ":
                ruler.put(col, "-", 0)
        return [
            self.line("virtual ms", "".join(labels[: self.cols])),
            self.line("", ruler.text()),
        ]

    def drive_row(self, drive: str) -> str:
        canvas, horizon = _Canvas(self.cols), self.model.end
        for found in self.model.passes:
            if found.drive != drive:
                continue
            span = found.handler_span(horizon)
            admission_end = span[0] if span is not None else found.end(horizon)
            canvas.span(self.col(found.claimed_at), self.col(admission_end), "-", 3)
            if span is not None:
                char = "s" if found.stale_since is not None else "="
                canvas.span(self.col(span[0]), self.col(span[1]), char, 4)
            for step in found.steps:
                end = step.end if step.end is not None else found.end(horizon)
                canvas.span(self.col(step.start), self.col(end), "#", 5)
            for t, _ in found.memos:
                canvas.put(self.col(t), "m", 6)
        for mark in self.model.marks:
            if mark.lane != drive:
                continue
            if mark.kind in ("delay", "pause") and mark.since is not None:
                char = "~" if mark.kind == "delay" else "p"
                canvas.span(self.col(mark.since), self.col(mark.t), char, 2)
                canvas.put(self.col(mark.since), char, 7)
            elif mark.kind == "down" and mark.since is not None:
                canvas.span(self.col(mark.since), self.col(mark.t), "_", 2)
            elif mark.kind in _MARK_CHARS:
                char, rank = _MARK_CHARS[mark.kind]
                canvas.put(self.col(mark.t), char, rank)
        return canvas.text()

    def run_row(self, scope: str, run: str) -> str:
        canvas, horizon = _Canvas(self.cols), self.model.end
        for lease in self.model.leases:
            if lease.scope != scope or lease.run != run:
                continue
            letter = self.letters.get(lease.drive, "?")
            for start, end, held in lease.segments(horizon):
                c0, c1 = self.col(start), self.col(end)
                canvas.span(c0 + (0 if held else 1), c1, letter if held else ":", 3 if held else 2)
            if lease.began_at is not None:
                canvas.put(self.col(lease.began_at), letter.upper(), 6)
        for effect in self.model.effects:
            if effect.scope == scope and effect.run == run:
                canvas.put(
                    self.col(effect.t), "2" if effect.copy > 1 else "*", 7 if effect.copy > 1 else 5
                )
        for mark in self.model.marks:
            if mark.lane == scope and mark.kind == "evict":
                canvas.put(self.col(mark.t), "E", 8)
        return canvas.text()

    def overlap_row(self) -> str:
        canvas = _Canvas(self.cols)
        for overlap in self.model.overlaps:
            canvas.span(self.col(overlap.start), self.col(overlap.end), "X", 1)
        return canvas.text()

    def notes(self) -> list[str]:
        notes = list(self.model.notes)
        for overlap in self.model.overlaps[:MAX_OVERLAP_LABELS]:
            notes.append(
                f"double run: {short(overlap.run)} by {overlap.drives[0]} and {overlap.drives[1]}, "
                f"{fmt_ms(overlap.start)}–{fmt_ms(overlap.end)} ms"
            )
        hidden = len(self.model.overlaps) - MAX_OVERLAP_LABELS
        if hidden > 0:
            notes.append(f"{hidden} more double runs")
        for found in self.model.passes:
            if found.stale_since is not None:
                notes.append(
                    f"stale pass: {short(found.owner)} on {found.drive} began its handler after "
                    f"its lease of {short(found.run)} was taken over at "
                    f"{fmt_ms(found.stale_since)} ms"
                )
        if self.scale.cuts:
            notes.append(f"{len(self.scale.cuts)} idle gaps cut from the axis ('/')")
        return [note.replace("\u2009", "") for note in notes]


def render_terminal(trace: Trace, *, width: int = 100) -> str:
    """The trace as text: an axis, one line per drive and per (scope, run) row, then the legend."""
    return "\n".join(_Text(build_timeline(trace), width).render()) + "\n"
