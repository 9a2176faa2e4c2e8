"""Reading a trace into the timeline's model, once and in order.

The store's clock is fitted after the last event: a lease's expiry is store time, and it becomes a
point on the virtual axis only once every ``rpc.exec`` has paired the two clocks. Calls to the
world's services are read by :mod:`._calls`, the world's end by :mod:`._world_end`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from driver import parse_iso_ms

from .._numbers import ms
from .._trace import Trace
from ..oracle._spec import LEASE_ENTRY_MARGIN
from ._calls import CallReader, is_service_op
from ._holds import released_words
from ._model import (
    Effect,
    Lease,
    Mark,
    Pass,
    Step,
    StoreClockFit,
    Timeline,
    find_overlaps,
    short,
)
from ._world_end import read_world_end

#: Lease length assumed for "late reply" before any claim says what the lease is.
_DEFAULT_LEASE_MS = 1_000.0
#: Polling finds nothing most of the time; it must not keep an idle stretch from being cut.
_POLLING_EVENTS = frozenset({"drive.tick", "drive.skip", "drive.report"})
_POLLING_OPS = frozenset({"due_keys", "list"})
_REFUSALS = frozenset(
    {"claim.lost", "begin.refused", "admission.miss", "takeover.exhausted", "step.lost"}
)


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
        #: The latest pass of each (drive, run), and of each drive as (drive, None).
        self.latest: dict[tuple[str, str | None], Pass] = {}
        self.leases: dict[tuple[str, str], list[Lease]] = {}
        self.run_scope: dict[str, str] = {}
        self.effect_keys: dict[str, int] = {}
        self.lease_ms = _DEFAULT_LEASE_MS
        self.expiries: list[tuple[Lease, float, float]] = []  # (lease, at, store expiry ms)
        #: Late requests not delivered (yet), by (drive, seq): their marks' places, their events.
        self.undelivered: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}
        #: Held legs not released (yet), by (drive, seq, leg): when and how they were held.
        self.held: dict[tuple[str, int, str], dict[str, Any]] = {}
        #: Late BEGIN replies, titled once the store's clock is fitted: (mark index, event,
        #: the lease BEGIN was for, how long the reply took).
        self.late_begins: list[tuple[int, dict[str, Any], Lease, float]] = []
        #: The door operation each ``invoke`` ran (its args' first element), by (link, seq).
        self.doors: dict[tuple[str, int], str] = {}
        #: The pass that sent each ``invoke``, by (link, seq): whose effect it wrote.
        self.senders: dict[tuple[str, int], str | None] = {}
        #: When the scenario returned (``world.closing``): an effect after it landed late.
        self.closing_at: float | None = None
        self.calls = CallReader(self.owner_of, self.late_effect, self.model.marks.append)
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
            "fault.late": self.on_late_request,
            "rpc.late": self.on_late_arrival,
            "fault.crash": self.on_crash,
            "fault.evict": self.on_evict,
            "fault.hold": self.on_hold,
            "fault.release": self.on_release,
            "fault.fence": self.on_fence,
            "drive.report": self.on_report,
            "drive.tick": self.on_tick,
            "drive.skip": self.on_skip,
            "world.start": self.on_start,
            "world.note": self.on_note,
            "world.closing": self.on_world_end,
            "world.quiet": self.on_world_end,
            "world.cut": self.on_world_end,
            "world.end": self.on_end,
        }
        for name in ("send", "reply", "timeout", "abandon", "late", "drop"):
            self.handlers[f"svc.{name}"] = self.calls.read
        self.handlers["svc.exec"] = self.on_service_exec

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
        if event["op"] == "invoke":
            self.sent_invoke(event)
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
        elif op == "invoke" and len(args) >= 2 and args[0] == "record_once" and result is True:
            self.effect(event, scope, args[1])  # a record_once that found its key wrote nothing

    def claimed(
        self, event: dict[str, Any], scope: str, run: str, owner: str, result: dict[str, Any]
    ) -> None:
        t = float(event["t"])
        self.scope_of(run, scope)
        leases = self.leases.setdefault((scope, run), [])
        if leases and leases[-1].ended_at is None:
            leases[-1].ended_at, leases[-1].end_reason = t, "taken over"
            # The pass that held it may still be running (or about to start, stale): it is
            # closed by its own outcome later, and marked here where it lost its lease.
            before = self.passes.get(leases[-1].owner)
            if before is not None and before.ended_at is None:
                before.taken_over_at = t
                before.taken_over_by = f"{event['link']} pass {short(owner)}"
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

    def sent_invoke(self, event: dict[str, Any]) -> None:
        """Remember the door operation an ``invoke`` runs, and the pass that sent it."""
        where = (str(event["link"]), int(event["seq"]))
        args = event.get("args") or []
        if args and isinstance(args[0], str):
            self.doors[where] = args[0]
        spec = args[1] if len(args) >= 2 and isinstance(args[1], dict) else {}
        run = str(spec.get("key") or "").split("/", 1)[0]
        self.senders[where] = self.owner_of(where[0], run) or self.open_owner(where[0])

    def effect(self, event: dict[str, Any], scope: str, spec: Any) -> None:
        if not isinstance(spec, dict) or spec.get("kind") != "effect":
            return
        key = str(spec.get("key"))
        run = key.split("/", 1)[0]
        if run not in self.run_scope:
            run = self.open_run(str(event["link"])) or run
        self.effect_keys[key] = self.effect_keys.get(key, 0) + 1
        t, where = float(event["t"]), (str(event["link"]), int(event["seq"]))
        late = self.late_effect(self.senders.pop(where, None), run, t)
        self.model.effects.append(
            Effect(scope, run, t, key, self.effect_keys[key], late=late, call=where)
        )

    def owner_of(self, drive: str, run: str) -> str | None:
        """The latest pass of ``drive`` on ``run``: the one open, when one is."""
        found = self.latest.get((drive, run))
        return None if found is None else found.owner

    def open_owner(self, drive: str) -> str | None:
        """The latest pass of ``drive``, if it is still open."""
        found = self.latest.get((drive, None))
        return found.owner if found is not None and found.ended_at is None else None

    def late_effect(self, owner: str | None, run: str, t: float) -> str | None:
        """Why an effect of ``owner``'s landing at ``t`` is late: its pass had lost its lease to
        another's claim, or the scenario had returned. None: it is not."""
        leases = self.leases.get((self.run_scope.get(run, ""), run), [])
        for index, lease in enumerate(leases):
            if (
                owner is not None
                and lease.owner == owner
                and lease.end_reason == "taken over"
                and lease.ended_at is not None
                and lease.ended_at <= t
            ):
                taker = leases[index + 1] if index + 1 < len(leases) else None
                who = f"{taker.drive}'s pass {taker.owner}" if taker else "another pass"
                return (
                    f"its pass {owner} had lost its lease of run {run} to {who}, which claimed "
                    f"it at {ms(lease.ended_at)} ms"
                )
        if self.closing_at is not None and t >= self.closing_at:
            return (
                f"it landed after the scenario returned, at {ms(self.closing_at)} ms, while the "
                "world waited for what was still running"
            )
        return None

    def open_run(self, drive: str) -> str | None:
        for found in reversed(self.model.passes):
            if found.drive == drive and found.ended_at is None:
                return found.run
        return None

    def on_deliver(self, event: dict[str, Any]) -> None:
        key = (event["link"], event["seq"])
        sent = self.sends.pop(key, None) or {}
        executed = self.executed.pop(key, None)
        transit = float(event["t"]) - executed if executed is not None else 0.0
        # Drawn when the reply took a quarter of the lease or more (the BEGIN margin's size),
        # and said in the words of what it held up: only a claim's wait meets the margin.
        if executed is None or transit <= self.lease_ms * LEASE_ENTRY_MARGIN:
            return
        op, args = str(event["op"]), sent.get("args") or []
        lane = str(event["link"])
        door = self.doors.get(key)
        if op == "claim":
            self.mark(lane, event, "late", self.late_claim(event, sent, transit), since=executed)
        elif op == "begin" and len(args) >= 2:
            scope = str(event["scope"])
            lease = self.lease(scope, str(args[0]), str(args[1]))
            title = f"late BEGIN reply: begin #{event['seq']} took {transit:.1f} ms to come back"
            if lease is not None:
                self.late_begins.append((len(self.model.marks), event, lease, transit))
            self.mark(lane, event, "late", title, since=executed)
        else:
            title = _slow_reply(event, args, transit, door)
            self.mark(lane, event, "slow", title, since=executed)

    def late_claim(self, event: dict[str, Any], sent: dict[str, Any], transit: float) -> str:
        args = sent.get("args") or []
        lease_ms = float(args[2]) if len(args) >= 3 and isinstance(args[2], int | float) else 0.0
        margin = lease_ms * LEASE_ENTRY_MARGIN
        waited = float(event["t"]) - float(sent.get("t", event["t"]))
        left = lease_ms - waited
        then = (
            "too little: the drive does not BEGIN, it counts an admission miss"
            if left <= margin
            else "enough: the drive goes on to BEGIN"
        )
        return (
            f"late claim reply: claim #{event['seq']} took {transit:.1f} ms to come back (the "
            f"round trip {waited:.1f} ms of the {lease_ms:.0f} ms lease); BEGIN needs more than "
            f"the margin, {margin:.1f} ms, left: about {left:.1f} ms were, {then}"
        )

    def on_drop(self, event: dict[str, Any]) -> None:
        key = (event["link"], event["seq"])
        self.sends.pop(key, None)
        self.executed.pop(key, None)
        leg = event.get("leg", "?")
        ran = "it ran" if leg == "reply" else "it never ran"
        title = f"dropped {leg}: {self.called(event)} ({ran})"
        self.mark(str(event["link"]), event, "drop", title)

    # -- passes -----------------------------------------------------------------------------------

    def on_claim_won(self, event: dict[str, Any]) -> None:
        run = str(event["run"])
        scope = self.run_scope.get(run)
        lease = self.lease(scope, run, str(event["owner"])) if scope is not None else None
        if lease is not None and event.get("takeover") and isinstance(event.get("attempts"), int):
            lease.charged = int(event["attempts"])
        found = Pass(
            str(event["drive"]),
            str(event["run"]),
            str(event["owner"]),
            float(event["t"]),
            takeover=bool(event.get("takeover")),
        )
        self.passes[found.owner] = found
        self.latest[(found.drive, found.run)] = self.latest[(found.drive, None)] = found
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
            found.error = found.error or event.get("error")
        if event.get("status") in ("advanced", "completed") and event.get("written"):
            # A commit resets the run's attempts to 0: the charge of any takeover before it is
            # cleared, which is why a run taken over and then committed ends with attempts 0.
            scope = self.run_scope.get(str(event["run"]))
            for lease in self.leases.get((scope or "", str(event["run"])), []):
                if lease.charged and lease.cleared_at is None:
                    lease.cleared_at = float(event["t"])
                    lease.cleared_by = f"{event['drive']} pass {short(str(event['owner']))}"
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

    def called(self, event: dict[str, Any], op: str = "op") -> str:
        """A call an event names, by its operation and number: ``bank.pay #6``, or an invoke by
        the door operation it ran, ``provider_cancel_sub (invoke #7)``."""
        name, seq = str(event.get(op)), event.get("seq")
        where = (str(event.get("drive") or event.get("link")), seq)
        door = self.doors.get(where) if name == "invoke" else None  # type: ignore[arg-type]
        return f"{door} (invoke #{seq})" if door else f"{name} #{seq}"

    def on_delay(self, event: dict[str, Any]) -> None:
        held = float(event.get("ms") or 0.0)
        title = f"delay: {self.called(event)} {event['leg']} held {held:.1f} ms"
        t = float(event["t"])
        self.model.marks.append(Mark(str(event["drive"]), t + held, "delay", title, since=t))

    def on_pause(self, event: dict[str, Any]) -> None:
        stopped = float(event.get("ms") or 0.0)
        t = float(event["t"])
        title = f"pause: the drive stopped {stopped:.1f} ms ({_fields(event, 'where', 'nth')})"
        self.model.marks.append(Mark(str(event["drive"]), t + stopped, "pause", title, since=t))

    def on_late_request(self, event: dict[str, Any]) -> None:
        # The drive gives up on the request at once; the wire still delivers it ``ms`` later,
        # unless the world ends first (see finish).
        later = float(event.get("ms") or 0.0)
        t = float(event["t"])
        event = {**event, "door": self.doors.get((str(event["drive"]), int(event["seq"])))}
        title = f"{_late_request(event)}; the wire delivered it {later:.1f} ms later anyway"
        self.undelivered[(str(event["drive"]), int(event["seq"]))] = (len(self.model.marks), event)
        self.model.marks.append(
            Mark(str(event["drive"]), t + later, "late-request", title, since=t)
        )

    def on_service_exec(self, event: dict[str, Any]) -> None:
        if not isinstance(event.get("seq"), int):
            return  # not a drive's call (a service's own work, say): no call of ours to read
        # A request its caller gave up on has arrived: its late stretch ends here.
        self.undelivered.pop((str(event.get("drive")), int(event["seq"])), None)
        self.calls.read(event)

    def on_late_arrival(self, event: dict[str, Any]) -> None:
        self.undelivered.pop((str(event["link"]), int(event["seq"])), None)
        title = (
            f"an abandoned {self.called(event)} from {event['link']} reached {event['scope']} "
            "late, and ran there"
        )
        self.mark(str(event["scope"]), event, "late-arrival", title)

    def on_crash(self, event: dict[str, Any]) -> None:
        drive, t = str(event["drive"]), float(event["t"])
        down = float(event.get("down_ms") or 0.0)
        title = (
            f"deploy of {event['deploy']}: {drive} stopped (working={event.get('working')}) and "
            f"back on it after {down:.1f} ms"
            if "deploy" in event
            else f"crash: {drive} killed{_after(event, door=self.door_after(event))} "
            f"(working={event.get('working')}), down {down:.1f} ms"
        )
        self.model.marks.append(Mark(drive, t, "crash", title))
        if down > 0:
            self.model.marks.append(Mark(drive, t + down, "down", f"{drive} down", since=t))
        for found in self.passes.values():
            if found.drive == drive and found.ended_at is None:
                found.ended_at, found.outcome = t, found.outcome or "killed"
                if found.steps and found.steps[-1].end is None:
                    found.steps[-1].end = t

    def on_evict(self, event: dict[str, Any]) -> None:
        by = f" {event['drive']}'s" if "after" in event else ""
        after = _after(event, by, door=self.door_after(event))
        title = f"eviction of {event['scope']}{after} (actor live: {event.get('live')})"
        self.mark(str(event["scope"]), event, "evict", title)

    def door_after(self, event: dict[str, Any]) -> str | None:
        """The door operation of the invoke a fault struck right after, if it was one."""
        if event.get("after") != "invoke":
            return None
        return self.doors.get((str(event["drive"]), int(event.get("seq") or 0)))

    def on_hold(self, event: dict[str, Any]) -> None:
        door = self.doors.get((str(event["drive"]), int(event["seq"])))
        event = {**event, "door": door} if event.get("op") == "invoke" and door else event
        self.held[(str(event["drive"]), int(event["seq"]), str(event["leg"]))] = event

    def on_release(self, event: dict[str, Any]) -> None:
        held = self.held.pop((str(event["drive"]), int(event["seq"]), str(event["leg"])), None)
        if held is None:
            return
        t = float(event["t"])
        why = str(event.get("why"))
        until = _UNTIL.get(str(held.get("until")), "did what it waited for")
        reason = (
            f"released at its max_ms, after {float(held.get('max_ms') or 0.0):.1f} ms, its "
            f"longest: no other drive {until} before"
            if why == "max_ms"
            else released_words(event, short)
        )
        title = f"{_held(held)}; {reason} ({t - float(held['t']):.1f} ms held)"
        self.model.marks.append(
            Mark(str(event["drive"]), t, "delay", title, since=float(held["t"]))
        )

    def on_fence(self, event: dict[str, Any]) -> None:
        op = event.get("op")
        if event.get("leg") == "request":
            title = f"killed: its {op} call never left it (the process is gone)"
        else:
            where = f"at {str(op).split('.')[0]}" if is_service_op(op) else "in the scope"
            title = (
                f"killed: the reply to its {self.called(event)} reached a process that is gone "
                f"(the call had run {where})"
            )
            if is_service_op(op):
                self.calls.read(event)
        self.mark(str(event["drive"]), event, "fence", title)

    def on_report(self, event: dict[str, Any]) -> None:
        """A drive call ends: a pass of it still open was given up (a transport error)."""
        errors = {
            str(entry.get("run_id")): str(entry.get("error"))
            for entry in (event.get("report") or {}).get("errors") or []
            if isinstance(entry, dict)
        }
        drive, t = str(event["drive"]), float(event["t"])
        for found in self.passes.values():
            if found.drive == drive and found.ended_at is None:
                found.ended_at = t
                found.given_up = errors.get(found.run, "no outcome")
                if found.steps and found.steps[-1].end is None:
                    found.steps[-1].end = t

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

    def on_world_end(self, event: dict[str, Any]) -> None:
        if event["ev"] == "world.closing":
            self.closing_at = float(event["t"])
        self.model.world_end = read_world_end(event, self.model.world_end)

    def on_end(self, event: dict[str, Any]) -> None:
        states = event.get("services")
        if isinstance(states, dict):
            self.model.service_states = {str(name): state for name, state in states.items()}

    # -- after the last event ---------------------------------------------------------------------

    def finish(self) -> None:
        model = self.model
        model.clock = StoreClockFit.fit(self.store_pairs)
        clock = model.clock or StoreClockFit(0.0)
        for lease, at, expiry_ms in self.expiries:
            lease.renewals.append((at, clock.to_virtual(expiry_ms)))
        # A lease nobody released outlives the last event: show where it would expire.
        last = model.end
        for lease in model.leases:
            for _, expiry in lease.renewals:
                if lease.ended_at is None:
                    model.end = max(model.end, min(expiry, last + self.lease_ms))
        # A late request due after the world ended never arrived: its stretch stops at the end,
        # and says so, rather than claim a delivery and stretch the axis out to it.
        for index, event in self.undelivered.values():
            where = f"the service {str(event['op']).split('.')[0]}"
            title = (
                f"{_late_request(event)}; the wire was to deliver it "
                f"{float(event.get('ms') or 0.0):.1f} ms later, but the world ended first: it "
                f"never reached {where if is_service_op(event['op']) else 'the scope'}"
            )
            model.marks[index] = Mark(
                str(event["drive"]), last, "late-request", title, since=float(event["t"])
            )
        # So does a delay or a pause the world ended (or cut) before it was over.
        for index, mark in enumerate(model.marks):
            if mark.kind in ("delay", "pause") and mark.since is not None and mark.t > last:
                left = mark.t - last
                title = f"{mark.title}; the world ended first, {left:.1f} ms before it was over"
                model.marks[index] = attrs.evolve(mark, t=max(last, mark.since), title=title)
        for held in self.held.values():
            title = f"{_held(held)}; never released: the world ended first"
            model.marks.append(
                Mark(str(held["drive"]), max(last, float(held["t"])), "delay", title,
                     since=float(held["t"]))
            )  # fmt: skip
        for index, event, lease, transit in self.late_begins:
            model.marks[index] = attrs.evolve(
                model.marks[index], title=_late_begin(event, lease, transit)
            )
        self.calls.finish()
        model.services, model.calls = self.calls.services, self.calls.calls
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


#: What a held leg waits for another drive to do (the HoldLeg's ``until``), in words.
_UNTIL = {
    "takeover": "took a run over",
    "step": "recorded a step",
    "effect": "made an effect (through the scope's door, or at a service)",
    "commit": "committed a pass",
    "tick": "started a drive call",
}


def _held(event: dict[str, Any]) -> str:
    call = f"{event['op']} call {event.get('nth')} (#{event['seq']})"
    if event.get("door"):
        call = f"{event['door']} (invoke call {event.get('nth')}, #{event['seq']})"
    return (
        f"held {event['leg']}: {call} held until another drive "
        f"{_UNTIL.get(str(event.get('until')), str(event.get('until')))}"
    )


def _after(event: dict[str, Any], by: str = " its", *, door: str | None = None) -> str:
    """Where a fault that strikes after a call struck (CrashAfter, EvictAfter)."""
    if "after" not in event:
        return ""
    op = event["after"]
    call = f"{op} call {event.get('nth')} (#{event.get('seq')})"
    if door:
        call = f"{door} (invoke call {event.get('nth')}, #{event.get('seq')})"
    where = f"at {str(op).split('.')[0]}" if is_service_op(op) else "in the scope"
    return f" right after{by} {call} ran {where}, before its reply left"


def _late_begin(event: dict[str, Any], lease: Lease, transit: float) -> str:
    t = float(event["t"])
    expiries = [expiry for at, expiry in lease.renewals if at <= t]
    head = f"late BEGIN reply: begin #{event['seq']} took {transit:.1f} ms to come back"
    if not expiries:
        return head
    left = expiries[-1] - t
    if left > 0:
        return f"{head}; the handler starts with about {left:.1f} ms of its lease left"
    return (
        f"{head}; the handler starts {-left:.1f} ms after its lease expired (at "
        f"{expiries[-1]:.1f} ms): another drive may have taken the run over meanwhile"
    )


def _slow_reply(
    event: dict[str, Any], args: list[Any], transit: float, door: str | None = None
) -> str:
    op, seq = event["op"], event["seq"]
    called = f"{door} (invoke #{seq})" if door else f"{op} #{seq}"
    head = f"slow reply: {called} took {transit:.1f} ms to come back"
    lease_at = {"begin_step": 3, "record_step": 7}.get(str(op))
    if lease_at is not None and len(args) > lease_at and isinstance(args[lease_at], int | float):
        left = float(args[lease_at]) - transit
        return (
            f"{head} (step {args[1]}): the lease this step boundary renewed had about "
            f"{left:.1f} ms left when the pass heard back (no BEGIN margin applies here)"
        )
    return head


def _late_request(event: dict[str, Any]) -> str:
    if event.get("door"):
        return (
            f"late request: {event['drive']} gave up on {event['door']} (invoke call "
            f"{event.get('nth')})"
        )
    return f"late request: {event['drive']} gave up on {event['op']} #{event.get('nth')}"


def build_timeline(trace: Trace) -> Timeline:
    """The model of ``trace`` that both renderings draw."""
    return _Builder().build(trace.events)
