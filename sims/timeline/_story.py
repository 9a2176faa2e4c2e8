"""The story of a world in words: one line per thing that mattered, in the order it happened.

A line may say what became of something later (a service call's line says whether its caller ever
learnt its answer): the story is told from the whole trace, read once into the timeline's model,
so that it and the picture say the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._numbers import ms, plural
from .._trace import Trace
from ..oracle._report import short
from ._calls import (
    STORY_CHARS,
    call_sentence,
    is_service_op,
    kind_words,
    shorten_ids,
    value_words,
    wire_words,
)
from ._holds import released_words
from ._model import Effect, ServiceCall, Timeline
from ._reader import build_timeline
from ._world_end import closing_words, cut_words

Teller = Callable[[dict[str, Any]], str | None]


def _pass(e: dict[str, Any]) -> str:
    return f"pass {short(e['owner'])} of run {short(e['run'])}"


def _claim(e: dict[str, Any]) -> str:
    if e["takeover"]:
        return (
            f"takes over run {short(e['run'])} from an expired BEGUN lease: the dead pass is "
            f"charged an attempt (attempts now {e['attempts']}; a commit resets attempts to 0, "
            f"so a run that later commits ends with 0); new pass {short(e['owner'])}"
        )
    return f"claims run {short(e['run'])} for pass {short(e['owner'])}"


def _miss(e: dict[str, Any]) -> str:
    misses = "?" if e["misses"] is None else e["misses"]
    tail = " — the run FAILS: its lease is too short here" if e["failed"] else ""
    return (
        f"admission miss {misses} of 10 on run {short(e['run'])}: the claim's answer took "
        f"{ms(e['waited_ms'])} ms, too little of the lease left to begin{tail}"
    )


def _outcome(e: dict[str, Any]) -> str:
    error = f": {e['error']}" if e.get("error") else ""
    # A pass that failed and will be tried again is said to have failed, not just to end.
    why = " — the pass FAILED; the run is tried again when due" if e["status"] == "retrying" else ""
    written = "" if e["written"] else " (nothing written)"
    cleared = (
        f"; the commit resets attempts to 0, clearing what {plural(e['cleared'], 'takeover')} "
        "charged"
        if e.get("cleared")
        else ""
    )
    return f"{_pass(e)} ends {e['status']}{written}{why}{cleared}{error}"


def _given_up(e: dict[str, Any]) -> str | None:
    """A drive call that ended with a pass of it still open gave up on that pass."""
    told = []
    for owner, run, error, begun in e.get("given_up") or ():
        lease = (
            "its BEGUN lease stays until it expires; the drive that then takes the run over "
            "charges this pass an attempt"
            if begun
            else "its lease (never begun) stays until it expires; then any drive may claim the "
            "run, at no attempt"
        )
        told.append(
            f"gives up on pass {short(owner)} of run {short(run)} ({error}): no outcome is "
            f"written; {lease}"
        )
    return "; ".join(told) or None


def _step_end(e: dict[str, Any]) -> str | None:
    if e["error"] is None:
        return None
    recorded = "recorded" if e["recorded"] else "NOT recorded"
    return f"step {e['step']} failed ({recorded}): {e['error']}"


def _exec(e: dict[str, Any]) -> str | None:
    if e["op"] == "begin" and e.get("result") is True:
        return f"the store writes BEGIN at {e['store_at']}: the pass has begun"
    return None


def _call(e: dict[str, Any]) -> str:
    """A call as a fault plan names it: the drive's nth call of an operation; an invoke named by
    the door operation it ran, ``provider_cancel_sub (invoke call 3)``."""
    called = f"{e['op']} call {e['nth']}" if "nth" in e else f"{e['op']} #{e['seq']}"
    return f"{e['door']} ({called})" if e.get("door") else called


def _callback(e: dict[str, Any]) -> str:
    tried = "" if e.get("try") in (None, 1) else f", delivery {e['try']}"
    return f"{e['service']}'s callback {e['cb']} to {e['endpoint']}{tried}"


def _provider_words(e: dict[str, Any], value: Callable[[object], str]) -> str:
    """What a provider's own behaviour did to a call at its service (``svc.exec``): a read that
    lagged and missed a write, a batch taken in part, a refusal's retry-after; and the fault
    that made it so, when one did. ``value`` writes a value (cut, or whole)."""
    told = []
    fault = f" (a {e['fault']} fault)" if e.get("fault") else ""
    stale = e.get("stale")
    if isinstance(stale, dict):
        told.append(
            f"a read {ms(e['lag_ms'])} ms behind{fault} MISSED "
            f"{plural(stale['missed'], 'write')} (read fresh, it answers "
            f"{value(stale['fresh'])})"
        )
    batch = e.get("batch")
    if isinstance(batch, dict):
        told.append(f"the service took {batch['taken']} of its {batch['of']} items{fault}")
    if e.get("retry_after_ms") is not None:
        told.append(f"retry after {ms(e['retry_after_ms'])} ms")
    return "".join(f"; {words}" for words in told)


def _drop(e: dict[str, Any]) -> str:
    what = "it did not run" if e["leg"] == "request" else "it had run"
    if is_service_op(e["op"]):
        what += f" at {str(e['op']).split('.')[0]}; its caller sees a timeout"
    return f"fault: the {e['leg']} of {_call(e)} was dropped ({what})"


#: What a held leg waits for another drive to do (the HoldLeg's ``until``), in words.
_UNTIL = {
    "takeover": "takes a run over",
    "step": "records a step",
    "effect": "makes an effect (through the scope's door, or at a service)",
    "commit": "commits a pass",
    "tick": "starts a drive call",
}


def _hold(e: dict[str, Any]) -> str:
    until = _UNTIL.get(e["until"], e["until"])
    return (
        f"fault: the {e['leg']} of {_call(e)} is held until another drive {until} (at most "
        f"{ms(e['max_ms'])} ms)"
    )


def _release(e: dict[str, Any]) -> str:
    return f"the held {e['leg']} of {_call(e)} is {released_words(e, short)}"


def _after(e: dict[str, Any], whose: str) -> str:
    """Where a fault that strikes after a call struck (CrashAfter, EvictAfter)."""
    if "after" not in e:
        return ""
    called = f"{e['after']} call {e['nth']}"
    if e.get("door"):
        called = f"{e['door']} ({called})"
    where = f"at {str(e['after']).split('.')[0]}" if is_service_op(e["after"]) else "in the scope"
    return f" right after {whose} {called} ran {where}, before its reply left"


def _deploying(e: dict[str, Any]) -> str:
    """A rolling deploy begins: which drives restart, in what order, how far apart."""
    apart = f", {ms(e['every_ms'])} ms apart" if e["every_ms"] and len(e["drives"]) > 1 else ""
    return (
        f"fault: the deploy of version {e['version']} begins{_after(e, 'its')}: "
        f"{', '.join(e['drives']) or 'no drive'} restart{'s' if len(e['drives']) == 1 else ''} "
        f"on it, in that order{apart}"
    )


def _late(e: dict[str, Any]) -> str:
    given_up = f"fault: the caller gives up on {_call(e)}; the wire "
    service = is_service_op(e["op"])
    doubt = (
        " — its caller sees a timeout at once: an AMBIGUOUS outcome if it runs" if service else ""
    )
    if e["arrives"]:
        return f"{given_up}delivers it {ms(e['ms'])} ms later anyway{doubt}"
    # Due after the world's end: said so, or the story would tell of a run that never happened.
    where = str(e["op"]).split(".")[0] if service else "the scope"
    return (
        f"{given_up}was to deliver it {ms(e['ms'])} ms later, but the world ended first: it "
        f"never reached {where}"
    )


def _timed_out(e: dict[str, Any], call: ServiceCall | None) -> str:
    """A caller's timeout ran out: what it cannot know, and what the trace knows."""
    head = f"its {e['op']} for run {short(e['run'])} times out: it cannot know whether it ran"
    if call is None:
        return head
    if call.ran and call.ran_at is not None:
        when = "it had run" if call.ran_at <= float(e["t"]) else "it runs later"
        return (
            f"{head} ({when}, at {ms(call.ran_at)} ms: {kind_words(call)}) — an AMBIGUOUS outcome"
        )
    if call.kind == "refused":
        return f"{head} (it was refused, so it did not run)"
    return f"{head} (it never ran)"


def _late_reply(e: dict[str, Any], call: ServiceCall | None) -> str:
    what = f" ({kind_words(call)})" if call is not None else ""
    return (
        f"the reply to its {e['op']} for run {short(e['run'])}{what} arrives after it gave up: "
        "it reaches no one — an AMBIGUOUS outcome"
    )


def _late_effect(effect: Effect) -> str:
    late = shorten_ids(effect.late or "", short)
    return (
        f"a LATE EFFECT: the scope's record of {shorten_ids(effect.key, short)} is written at "
        f"{ms(effect.t)} ms: {late}"
    )


def _start_failed(e: dict[str, Any]) -> str:
    """A start that failed on the wire: the scenario's, tried again or given up, or a repeated
    one (which its caller leaves at that)."""
    failed = f"the start on {e['scope']} fails ({e['error']}): it may have run, or may still run"
    if "repeat" in e:
        return f"{failed}; the caller of start {e['repeat']} leaves it at that"
    if "again_ms" in e:
        again = ms(e["again_ms"])
        return f"{failed}; try {e['try']} of {e['tries']}, it starts again in {again} ms"
    return f"{failed}; that was try {e['try']} of {e['tries']}: the scenario's start raises"


def _raised(e: dict[str, Any]) -> str | None:
    """A handler or a step body that raised, with the exception's type and the user's line;
    told for exceptions of the user's own code (the outside world's are told by their call)."""
    text = e.get("raised") if e["ev"] == "hx.end" else e.get("error")
    if text is None or e.get("outside", True):
        return None
    who = f"the body of step {e['step']}" if e["ev"] == "hx.fn.end" else "the handler"
    where = f" at {e['where']}" if e.get("where") else ""
    return f"{who} of run {short(e['run'])} RAISED {e['error_type']}{where}: {text}"


_TELLERS: dict[str, Teller] = {
    "hx.end": _raised,
    "hx.fn.end": _raised,
    "world.start": lambda e: (
        f"starts run {short(e['run'])} on {e['scope']}"
        + (f", for run {short(e['by'])} (its handler's ctx.start_run)" if "by" in e else "")
        + (f" (start {e['repeat']} sent again)" if "repeat" in e else "")
        + (f", from {e['callback']}" if "callback" in e else "")
    ),
    "world.start.failed": _start_failed,
    "fault.repeat": lambda e: (
        f"fault: the caller of {_call(e)} sends that start again, {ms(e['after_ms'])} ms later "
        "(a second click, a client that never saw the answer)"
    ),
    "world.note": lambda e: str(e["text"]),
    "claim.won": _claim,
    "claim.lost": lambda e: f"loses the claim of run {short(e['run'])} (another drive holds it)",
    "admission.miss": _miss,
    "begin.ok": lambda e: f"BEGIN of {_pass(e)} is acknowledged",
    "begin.refused": lambda e: f"BEGIN of {_pass(e)} is refused by the store",
    "takeover.exhausted": lambda e: (
        f"that takeover spent the last attempt: run {short(e['run'])} fails without invoking "
        "the handler"
    ),
    "handler.invoke": lambda e: f"runs the handler: {_pass(e)}",
    "step.memo": lambda e: f"step {e['step']}: memo hit, not run again",
    "step.run": lambda e: f"step {e['step']} runs (attempt {e['attempt']})",
    "step.end": _step_end,
    "step.lost": lambda e: f"step {e['step']}: the lease is gone — {_pass(e)} stops here",
    "pass.outcome": _outcome,
    "fault.delay": lambda e: f"fault: the {e['leg']} of {_call(e)} is held {ms(e['ms'])} ms",
    "fault.drop": _drop,
    "fault.late": _late,
    "rpc.abandon": lambda e: f"gives up on {_call(e)} (a transport error): it may still run",
    "rpc.late": lambda e: (
        f"the abandoned {_call(e)} reaches scope {e['scope']} late, and runs there"
    ),
    "world.unfired": lambda e: (
        f"{plural(len(e['faults']), 'fault')} of the plan never fired: {'; '.join(e['faults'])}"
    ),
    "fault.pause": lambda e: f"fault: stops for {ms(e['ms'])} ms ({e['where']} {e['nth']})",
    "fault.crash": lambda e: (
        f"stops for the deploy of {e['deploy']}; back in {ms(e['down_ms'])} ms"
        if "deploy" in e
        else f"fault: killed{_after(e, 'its')}; back in {ms(e['down_ms'])} ms"
    ),
    "fault.deploying": _deploying,
    "fault.deploy": lambda e: (
        f"restarts on version {e['version']} of the jobs (it ran "
        f"{e['was'] or 'the scenario' + chr(39) + 's own'})"
    ),
    "fault.hold": _hold,
    "fault.release": _release,
    "drive.report": _given_up,
    "fault.fence": lambda e: (
        f"killed: its {e['op']} never left it (the process is gone)"
        if e["leg"] == "request"
        else f"killed: the reply to its {e['op']} #{e['seq']} reached a process that is gone"
    ),
    "fault.evict": lambda e: f"fault: scope {e['scope']} evicted{_after(e, 'its')}",
    "rpc.drop": _drop,
    "rpc.exec": _exec,
    "svc.drop": _drop,
    "svc.later": lambda e: (
        f"{e['by']} schedules {e['service']}'s own {e['work']} for {ms(e['due_ms'])} ms"
    ),
    "svc.own": lambda e: (
        f"{e['service']}'s own {e['work']} runs"
        + (": an effect of the service's own" if e["effect"] else ", changing nothing")
    ),
    "svc.own.held": lambda e: (
        f"{e['service']}'s own {e['work']} fell due while it is down: held until "
        f"{ms(e['until_ms'])} ms"
    ),
    "svc.callback.late": lambda e: (
        f"fault: {_callback(e)} is held {ms(e['ms'])} ms on its way (it may arrive after those "
        "sent behind it)"
    ),
    "svc.callback.ran": lambda e: f"{_callback(e)} ran at its endpoint",
    "svc.callback.failed": lambda e: f"{_callback(e)} failed at its endpoint: {e['error']}",
    "svc.callback.refused": lambda e: (
        f"{_callback(e)} refused: drive {e['drive']} is down; the service sends it again"
    ),
    "svc.callback.drop": lambda e: (
        f"fault: the {e['leg']} of {_callback(e)} was dropped ("
        + ("the endpoint never saw it" if e["leg"] == "request" else "the endpoint ran")
        + "; the service sends it again)"
    ),
    "svc.callback.repeat": lambda e: (
        f"fault: {e['service']} sends callback {e['cb']} to {e['endpoint']} again"
    ),
    "svc.callback.abandoned": lambda e: (
        f"{e['service']} gives callback {e['cb']} to {e['endpoint']} up after "
        f"{plural(e['tries'], 'delivery', 'deliveries')}"
    ),
    "svc.warn": lambda e: f"warning: {e['text']} ({e['where']})",
    "world.quiet": lambda e: "what was still running has stopped by itself: the world ends",
}


class _Teller:
    """Tells the events that need the whole trace: a service call (what became of it, and what
    crossed the wire), a late effect, the world's end (and what the services held then).

    ``chars`` is how much of a value a line shows (None: whole); ``cut`` says whether a line
    told so far showed less than a whole value."""

    def __init__(self, model: Timeline, chars: int | None) -> None:
        self.model = model
        self.chars = chars
        self.cut = False
        self.calls = {(call.drive, call.seq): call for call in model.calls}
        self.late = {effect.call: effect for effect in model.effects if effect.late is not None}

    def wire(self, call: ServiceCall) -> str:
        told = wire_words(call, self.chars)
        self.cut = self.cut or told != wire_words(call, None)
        return told

    def value(self, value: object) -> str:
        """``value`` as a line shows it: cut to ``chars`` (noted), or whole."""
        told = value_words(value, self.chars)
        self.cut = self.cut or told != value_words(value, None)
        return told

    def states(self, event: dict[str, Any]) -> str | None:
        """The services' states at the world's end (``world.end``), when it recorded them."""
        states = event.get("services")
        if not isinstance(states, dict) or not states:
            return None
        told = [f"{name} {self.value(state)}" for name, state in states.items()]
        return f"the services at the world's end: {'; '.join(told)}"

    def tell(self, event: dict[str, Any]) -> str | None:
        name = event["ev"]
        call = self.calls.get((event.get("drive"), event.get("seq")))  # type: ignore[arg-type]
        if name == "svc.exec" and call is not None:
            provider = _provider_words(event, self.value)
            return f"{call_sentence(call, short)}{provider}; {self.wire(call)}"
        if name == "svc.callback":
            return (
                f"{event['by']} calls back {event['endpoint']} (callback {event['cb']}): "
                f"{self.value(event['payload'])}"
            )
        if name == "svc.send" and call is not None and call.ran_at is None:
            # A call that never reached its service has no svc.exec to be told at: it is told
            # where it was sent, with what became of it.
            return f"{call_sentence(call, short)}; {self.wire(call)}"
        if name == "world.end":
            return self.states(event)
        if name == "svc.timeout":
            return _timed_out(event, call)
        if name == "svc.late":
            return _late_reply(event, call)
        if name == "rpc.exec" and event.get("op") == "invoke":
            effect = self.late.get((event.get("link"), event.get("seq")))  # type: ignore[arg-type]
            return _late_effect(effect) if effect is not None else None
        end = self.model.world_end
        if name == "world.closing" and end is not None:
            return closing_words(end, short)
        if name == "world.cut" and end is not None:
            return cut_words(end, short)
        teller = _TELLERS.get(name)
        return teller(event) if teller is not None else None


def story_lines(
    events: Iterable[dict[str, Any]], *, limit: int = 200, whole_values: bool = False
) -> Iterator[str]:
    """``t  who  what`` lines; after ``limit`` of them, one line saying how many were left out.

    A service call's arguments and result, and the services' states at the world's end, are
    written as compact JSON cut to ``STORY_CHARS`` characters ("…" where cut), or whole with
    ``whole_values``; when a line cut one, a last line says how to see them whole."""
    told = left = 0
    events = list(events)
    teller = _Teller(build_timeline(Trace(events=events)), None if whole_values else STORY_CHARS)
    # A late request is told when its caller gives up on it; whether the wire delivered it before
    # the world ended is known only from a later rpc.late (svc.exec, for a service), looked up here.
    arrived = {(e.get("link"), e.get("seq")) for e in events if e["ev"] == "rpc.late"}
    arrived |= {(call.drive, call.seq) for call in teller.calls.values() if call.ran_at is not None}
    # A drop the plan made is told once, by its fault.drop event, numbered as the plan numbers it.
    planned: set[tuple[Any, Any, Any]] = set()
    # A call a fault struck is named as the plan names it (the drive's nth call of the
    # operation) in every line about it, not by the link's own sequence number.
    nths: dict[tuple[Any, Any], int] = {}
    # The door operation each invoke ran (its args' first element), by (link, seq).
    doors: dict[tuple[Any, Any], str] = {}
    passes = _Passes()
    for event in events:
        name = event["ev"]
        event = passes.read(event)
        where = (event.get("drive") or event.get("link"), event.get("seq"))
        if name == "rpc.send" and event.get("op") == "invoke":
            args = event.get("args") or []
            if args and isinstance(args[0], str):
                doors[where] = args[0]
        if name.startswith("fault.") and "nth" in event and "seq" in event:
            nths[(event["drive"], event["seq"])] = event["nth"]
        elif name.startswith(("rpc.", "svc.")) and "nth" not in event:
            nth = nths.get(where)
            if nth is not None:
                event = {**event, "nth": nth}
        if "invoke" in (event.get("op"), event.get("after")) and where in doors:
            event = {**event, "door": doors[where]}
        if name == "fault.late":
            event = {**event, "arrives": (event["drive"], event["seq"]) in arrived}
        if name == "fault.drop":
            planned.add((event["drive"], event["seq"], event["leg"]))
        elif name in ("rpc.drop", "svc.drop") and (*where, event["leg"]) in planned:
            continue
        cut = teller.cut
        text = teller.tell(event)
        if text is None:
            continue
        if told >= limit:
            teller.cut = cut  # a value in a line left out is not one the reader saw cut
            left += 1
            continue
        told += 1
        who = event.get("drive") or event.get("link") or ("world" if "scope" in event else "")
        who = who or ("world" if name.startswith("world.") else "")
        who = who or str(event.get("service") or "")  # a service's own work, its callbacks
        yield f"{event['t']:>10.3f} ms  {who:<8} {text}"
    if left:
        # The flag that shows the rest is run's --story-lines (a test failure prints that run
        # command too); the trace holds the events, as JSON, not these lines.
        more = "1 more line" if left == 1 else f"{left} more lines"
        yield (
            f"{'':>13}  … {more} (run with --story-lines {told + left} to see the whole story; "
            "--trace FILE writes its events as JSON lines)"
        )
    if teller.cut:
        # The story is for reading, so a long value is cut; the flag shows it all, and
        # sims.service_calls / sims.service_states read it from the trace for a check.
        yield (
            f'{"":>13}  … values longer than {STORY_CHARS} characters are cut where "…" '
            "ends them (run with --whole-values to see them whole)"
        )


class _Passes:
    """Follows which passes are open, to tell when a drive gives up on one and when a commit
    clears the attempts a takeover charged."""

    def __init__(self) -> None:
        self.open: dict[Any, dict[Any, Any]] = {}  # drive -> {owner: run}
        self.begins: dict[tuple[Any, Any], str] = {}  # (link, seq) -> owner of a BEGIN sent
        self.begun: set[str] = set()  # owners whose BEGIN the store wrote
        self.charged: dict[Any, int] = {}  # run -> takeovers that charged it, not yet cleared

    def read(self, event: dict[str, Any]) -> dict[str, Any]:
        name = event["ev"]
        if name == "rpc.send" and event.get("op") == "begin" and len(event.get("args") or []) > 1:
            self.begins[(event["link"], event["seq"])] = str(event["args"][1])
        elif name == "rpc.exec" and event.get("op") == "begin" and event.get("result") is True:
            owner = self.begins.get((event["link"], event["seq"]))
            if owner is not None:
                self.begun.add(owner)
        elif name == "claim.won":
            self.open.setdefault(event["drive"], {})[event["owner"]] = event["run"]
            if event.get("takeover"):
                self.charged[event["run"]] = self.charged.get(event["run"], 0) + 1
        elif name in ("pass.outcome", "begin.refused", "admission.miss", "claim.lost"):
            self.open.get(event.get("drive"), {}).pop(event.get("owner"), None)
            committed = name == "pass.outcome" and event["status"] in ("advanced", "completed")
            if committed and event["written"] and self.charged.get(event["run"]):
                return {**event, "cleared": self.charged.pop(event["run"])}
        elif name == "fault.crash":
            self.open.pop(event["drive"], None)
        elif name == "drive.report":
            still = self.open.pop(event["drive"], {})
            errors = {
                entry.get("run_id"): entry.get("error")
                for entry in (event.get("report") or {}).get("errors") or []
            }
            given_up = [
                (owner, run, errors.get(run, "no outcome"), owner in self.begun)
                for owner, run in still.items()
            ]
            return {**event, "given_up": given_up}
        return event
