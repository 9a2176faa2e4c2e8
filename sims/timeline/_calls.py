"""Calls to the world's services, read from the ``svc.*`` events and told in words.

A call is sent by a pass (``svc.send``), runs whole at the service, or is refused there
(``svc.exec``), and its caller then learns its answer (``svc.reply``) or does not: its timeout runs
out (``svc.timeout``), a leg is lost (``svc.drop``), it gave the request up while the wire still
carried it (``svc.abandon``), or the reply comes after it gave up (``svc.late``). A call that RAN
while its caller was told it did not know is an AMBIGUOUS outcome: the operation happened, and the
code that asked for it cannot tell. The page, the text and the story say each call in the words
made here, so they never disagree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import attrs

from .._numbers import ms
from ._model import Mark, ServiceCall, short

#: How a run or pass id is shortened: the story and the page each have their own spelling.
Shorten = Callable[[str], str]

#: A ULID (a run's, a pass's), to be shortened where it appears inside a recorded text.
_ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")


def is_service_op(op: object) -> bool:
    """Whether ``op`` names a service's operation ("bank.pay"): a scope's never has a dot."""
    return isinstance(op, str) and "." in op


def shorten_ids(text: str, short: Shorten) -> str:
    return _ULID.sub(lambda found: short(found.group(0)), text)


#: What a call was at the service, in a few words (the page's labels, the text's notes).
KIND_LABELS = {
    "effect": "effect",
    "read": "read",
    "repeat": "repeat (idempotency key)",
    "refused": "refused",
    "declined": "declined (an answer)",
    None: "never ran",
}


def kind_words(call: ServiceCall) -> str:
    """What the call was at the service, in a sentence's words."""
    if call.kind == "effect" and call.copy > 1:
        return (
            f"an effect, copy {call.copy} of this {call.op} call (the same arguments, in the same "
            "run): the same work landed again"
        )
    if call.kind == "effect":
        return "an effect"
    if call.kind == "read":
        return "no effect (it changed nothing at the service)"
    if call.kind == "repeat":
        return (
            "a repeat, answered by its idempotency key with the first result (it did not run again)"
        )
    if call.kind == "refused":
        return f"refused ({call.refused}): it did not run"
    if call.kind == "declined":
        return f"DECLINED ({call.refused}): an answer; it did not run, and will not if asked again"
    return "it never ran"


def fate_words(call: ServiceCall) -> str:
    """What the caller learnt of the call, and when; empty for a plain answer."""
    timeout = f"{ms(call.timeout_ms)} ms " if call.timeout_ms is not None else ""
    if call.dropped == "request":
        then = (
            f", so the caller saw a timeout at {ms(call.timed_out_at)} ms"
            if call.timed_out_at is not None
            else ", so the caller saw a timeout at once (a lost connection)"
        )
        return f"its request was lost on the way: it never ran{then}"
    parts = []
    if call.dropped == "reply":
        parts.append(
            f"its reply was lost, so the caller saw a timeout at {ms(call.timed_out_at)} ms"
            if call.timed_out_at is not None
            else "its reply was lost, so the caller saw a timeout at once (a lost connection)"
        )
    elif call.abandoned_at is not None:
        parts.append(
            f"the caller had given it up at {ms(call.abandoned_at)} ms (a late request) and saw "
            "a timeout; the wire delivered it anyway"
        )
    elif call.timed_out_at is not None:
        if call.ran_at is not None and call.ran_at > call.timed_out_at:
            parts.append(
                f"it arrived after the caller's {timeout}timeout had run out at "
                f"{ms(call.timed_out_at)} ms"
            )
        else:
            parts.append(
                f"the caller's {timeout}timeout ran out at {ms(call.timed_out_at)} ms, before its "
                "reply came"
            )
    if call.late_at is not None:
        parts.append(f"its reply came at {ms(call.late_at)} ms, after the caller had given up")
    if call.fenced_at is not None:
        parts.append(f"its reply reached a killed drive at {ms(call.fenced_at)} ms")
    if call.ran_at is None and not parts:
        parts.append(f"it had not reached {call.service} when the world ended")
    elif call.ran_at is None:
        parts.append(f"it never reached {call.service} before the world ended")
    elif not parts and call.replied_at is None:
        parts.append("no reply had come when the world ended")
    return "; ".join(parts)


#: What an ambiguous call is, said after it.
AMBIGUOUS = " — an AMBIGUOUS outcome: it ran, and its caller does not know it did"


def call_sentence(call: ServiceCall, short: Shorten) -> str:
    """The call in one sentence: who called what, where it ran, what it was, what the caller
    learnt, whether that is ambiguous, and whether its effect landed late."""
    head = f"{call.drive}'s {call.op} for run {short(call.run)}"
    fate = fate_words(call)
    if call.ran_at is None:
        return f"{head}, sent at {ms(call.sent_at)} ms, never ran: {fate}"
    if call.kind in ("refused", "declined"):
        text = f"{head} reached {call.service} at {ms(call.ran_at)} ms: {kind_words(call)}"
    else:
        text = f"{head} ran at {ms(call.ran_at)} ms: {kind_words(call)}"
    if fate:
        text += f"; {fate}"
    if call.ambiguous:
        text += AMBIGUOUS
    if call.late_effect is not None:
        text += f" — a LATE EFFECT: {shorten_ids(call.late_effect, short)}"
    return text


#: How many characters of a value (a call's arguments or result, a service's state) a story
#: line shows: enough to tell one call from the next, not so many that the line is lost in them.
#: ``python -m sims run --whole-values`` shows them whole.
STORY_CHARS = 72
#: How many a hover on the page shows, each value on a line of its own: a tooltip has room for
#: more, but one value must not swell a page whose size follows its picture, not its trace
#: (``_svg.TITLE_LINE_CHARS`` bounds a hover's line).
HOVER_CHARS = 380


def value_words(value: object, limit: int | None) -> str:
    """``value`` as compact JSON (keys sorted, so a trace read from a file tells it the same),
    cut to ``limit`` characters with "…" at the cut; None: whole."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 1)] + "…"


def wire_words(call: ServiceCall, limit: int | None, *, between: str = "; ") -> str:
    """What crossed the wire: ``args {...}, idempotency key "K"; result {...}`` (no result for
    a call that was refused, declined or never ran); ``between`` goes before the result."""
    text = f"args {value_words(call.sent, limit)}"
    if call.key is not None:
        text += f", idempotency key {value_words(call.key, limit)}"
    if call.returned:
        text += f"{between}result {value_words(call.result, limit)}"
    return text


def call_label(call: ServiceCall, short: Shorten) -> str:
    """The call's label on the page: its operation, its caller and what it was."""
    what = KIND_LABELS.get(call.kind, str(call.kind))
    if call.copy > 1:
        what += f" (copy {call.copy})"
    if call.ambiguous:
        what += ", ambiguous"
    if call.late_effect is not None:
        what += ", LATE"
    return f"{call.op} · {call.drive} {short(call.run)} · {what}"


# -- reading ----------------------------------------------------------------------------------


@attrs.define
class CallReader:
    """Reads the ``svc.*`` events, in order, into :class:`ServiceCall` values and marks.

    ``owner_of(drive, run)`` names the pass of ``drive`` open on ``run``; ``late(owner, run,
    t)`` says why an effect landing at ``t`` is late, or None."""

    owner_of: Callable[[str, str], str | None]
    late: Callable[[str | None, str, float], str | None]
    mark: Callable[[Mark], None]
    services: dict[str, list[str]] = attrs.field(factory=dict)
    calls: list[ServiceCall] = attrs.field(factory=list)
    by_seq: dict[tuple[str, int], ServiceCall] = attrs.field(factory=dict)
    #: How many times each ``RUN/SERVICE.OPERATION`` took effect so far.
    landed: dict[str, int] = attrs.field(factory=dict)

    def read(self, event: dict[str, Any]) -> None:
        name = event["ev"]
        if name == "svc.send":
            self.send(event)
            return
        call = self.by_seq.get((str(event.get("drive")), int(event.get("seq") or 0)))
        if call is None:
            return
        t = float(event["t"])
        if name == "svc.exec":
            self.ran(call, event)
        elif name == "svc.reply":
            call.replied_at = t
        elif name == "svc.timeout":
            call.timed_out_at = t
        elif name == "svc.abandon":
            call.abandoned_at = t
        elif name == "svc.late":
            call.late_at = t
        elif name == "svc.drop":
            call.dropped, call.dropped_at = str(event.get("leg")), t
            ran = "it had run at" if call.dropped == "reply" else "it never reached"
            title = f"dropped {call.dropped}: {call.op} #{call.seq} ({ran} {call.service})"
            self.mark(Mark(call.drive, t, "drop", title))
        elif name == "fault.fence":
            call.fenced_at = t

    def send(self, event: dict[str, Any]) -> None:
        op, drive, run = str(event["op"]), str(event["drive"]), str(event.get("run"))
        service = str(event.get("service") or op.split(".", 1)[0])
        step = event.get("step")
        call = ServiceCall(
            service,
            op,
            drive,
            int(event["seq"]),
            run,
            float(event["t"]),
            step=None if step is None else str(step),
            timeout_ms=event.get("timeout_ms"),
            owner=self.owner_of(drive, run),
            args=json.dumps(event.get("args"), sort_keys=True, separators=(",", ":")),
            sent=event.get("args"),
            key=None if event.get("key") is None else str(event["key"]),
        )
        operations = self.services.setdefault(service, [])
        if op not in operations:
            operations.append(op)
        self.calls.append(call)
        self.by_seq[(drive, call.seq)] = call

    def ran(self, call: ServiceCall, event: dict[str, Any]) -> None:
        call.ran_at = t = float(event["t"])
        if event.get("declined"):
            code = f", code {event['code']}" if event.get("code") else ""
            call.kind, call.refused = "declined", f"{event['refused']}{code}"
        elif "refused" in event:
            call.kind, call.refused = "refused", str(event["refused"])
        elif event.get("repeat"):
            call.kind = "repeat"
        else:
            call.kind = "effect" if event.get("effect") is True else "read"
        if call.ran:
            call.result, call.returned = event.get("result"), True
        if call.kind == "effect":
            # A copy is the same call landing again: an operation called with other arguments
            # (a stage after another, a new key after a decline) is other work.
            key = f"{call.run}/{call.op} {call.args}"
            call.copy = self.landed[key] = self.landed.get(key, 0) + 1
            call.late_effect = self.late(call.owner, call.run, t)

    def finish(self) -> None:
        """After the last event: the caller's doubt is marked where it was told."""
        for call in self.calls:
            doubted = call.doubted_at
            if call.ambiguous and doubted is not None:
                self.mark(Mark(call.drive, doubted, "ambiguous", call_sentence(call, short)))
