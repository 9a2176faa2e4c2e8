"""What crossed the wire: a world's service calls and its services' final states, read back from
its trace for a check of yours.

A call is several events, matched by the drive that sent it and its number there (``drive``,
``seq``): ``svc.send`` (its arguments), ``svc.exec`` (what the service did: a result, a refusal, a
decline, whether it changed the service, whether its idempotency key answered it), then what its
caller learnt (``svc.reply``, ``svc.timeout``, ``svc.abandon``, ``svc.late``, ``svc.drop``, a
``fault.fence`` of its reply). :func:`service_calls` joins them into one
:class:`ServiceCallRecord` per call, so that a check reads "what was charged, with which key, and
did the caller learn it" without a join of its own. :func:`service_states` reads what each service
held when the world ended (``world.end``'s ``services``).

It reads only the trace; an event it does not know (a ``svc.*`` event a later version writes) is
passed over, not refused, so a check written today reads tomorrow's traces.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from .._trace import Trace

#: What became of a call, one short word each, in the order they are decided (the first that
#: holds is the call's :attr:`ServiceCallRecord.outcome`):
OUTCOMES = {
    "refused": "the service refused it unrun (an outage, a transient refusal, ServiceUnavailable)",
    "declined": "the service declined it (ServiceDeclined): an answer; it did not run",
    "request lost": "its request leg was dropped: it never ran",
    "never arrived": "its request had not reached the service when the world ended",
    "fenced": "it ran, and its reply reached a drive that had been killed",
    "reply lost": "it ran, and its reply leg was dropped: its caller saw a timeout",
    "given up": "its caller gave the request up at once (a LateRequest); it ran when it arrived",
    "timed out": "it ran, and its caller's timeout ran out before the reply came",
    "replied": "it ran, and its reply reached its caller",
    "reply too late": "it ran, and its reply came after its caller had stopped waiting",
    "no reply": "it ran, and no reply had come when the world ended",
}

#: The outcomes in which a call ran and its caller was told it did not know.
_AMBIGUOUS = frozenset({"timed out", "reply lost", "given up"})


@attrs.frozen
class ServiceCallRecord:
    """One call to one of the world's services, joined from its ``svc.*`` events.

    Times are the world's virtual ms. ``ran_ms`` is when the operation ran at the service (None:
    it never ran: refused, declined, lost or still on the wire); ``arrived_ms`` when the request
    reached the service, refused or not. ``replied_ms`` is when its reply (a result, a refusal or
    a decline) reached the caller; None when none did. ``result`` is what the operation returned
    (for a ``repeat``, the first result, which its idempotency key answered with); None when it
    returned nothing or did not run. ``outcome`` is one of :data:`OUTCOMES`."""

    service: str
    operation: str  # "charge": the operation's own name; ``op`` is "card.charge"
    args: Any
    key: str | None
    result: Any
    effect: bool
    outcome: str
    drive: str
    seq: int
    run: str
    step: str | None
    sent_ms: float
    ran_ms: float | None
    replied_ms: float | None
    repeat: bool
    arrived_ms: float | None = None
    timeout_ms: float | None = None
    #: Why the service refused or declined it, in its words; None when it did neither.
    refused: str | None = None
    #: A decline's code (``ServiceDeclined(code=...)``), when it gave one.
    code: str | None = None
    #: The pass (its lease owner) whose handler sent it, when the trace shows one.
    owner: str | None = None
    #: A provider's own behaviour (``svc.exec``): the lag a lagging read read with; ``stale``,
    #: when its answer missed a write (``missed``: how many, ``fresh``: what a fresh read
    #: answers); ``batch`` (``taken``, ``of``) when the service took part of its items; and a
    #: refusal's ``retry_after_ms``.
    lag_ms: float | None = None
    stale: Any = None
    batch: Any = None
    retry_after_ms: float | None = None

    @property
    def op(self) -> str:
        """``SERVICE.OPERATION``, as the trace, a fault plan and an effect's key name it."""
        return f"{self.service}.{self.operation}"

    @property
    def ran(self) -> bool:
        """The operation ran at the service (a repeat its key answered counts: it was answered)."""
        return self.ran_ms is not None

    @property
    def ambiguous(self) -> bool:
        """An AMBIGUOUS outcome: it ran, and its caller was told it did not know (a
        ``ServiceTimedOut``: its timeout ran out, its reply was lost, or it gave the request up),
        as the timeline and the story call it. A retry or a fallback may do it again."""
        return self.outcome in _AMBIGUOUS


@attrs.define
class _Call:
    """A call as its events come in."""

    send: dict[str, Any]
    owner: str | None
    exec: dict[str, Any] | None = None
    replied_ms: float | None = None
    timed_out: bool = False
    abandoned: bool = False
    late: bool = False
    dropped: str | None = None
    fenced: bool = False

    def record(self) -> ServiceCallRecord:
        send, ran = self.send, self.exec
        op = str(send["op"])
        service, _, operation = op.partition(".")
        service = str(send.get("service") or service)
        refused = ran.get("refused") if ran is not None else None
        declined = ran is not None and bool(ran.get("declined"))
        arrived = float(ran["t"]) if ran is not None else None
        step, key, timeout, code = (
            send.get("step"),
            send.get("key"),
            send.get("timeout_ms"),
            ran.get("code") if ran is not None else None,
        )
        return ServiceCallRecord(
            service=service,
            operation=operation,
            args=send.get("args"),
            key=None if key is None else str(key),
            result=ran.get("result") if ran is not None and refused is None else None,
            effect=ran is not None and ran.get("effect") is True,
            outcome=self.outcome(refused is not None, declined),
            drive=str(send["drive"]),
            seq=int(send["seq"]),
            run=str(send.get("run")),
            step=None if step is None else str(step),
            sent_ms=float(send["t"]),
            ran_ms=arrived if refused is None else None,
            replied_ms=self.replied_ms,
            repeat=ran is not None and bool(ran.get("repeat")),
            arrived_ms=arrived,
            timeout_ms=None if timeout is None else float(timeout),
            refused=None if refused is None else str(refused),
            code=None if code is None else str(code),
            owner=self.owner,
            **_provider_fields(ran),
        )

    def outcome(self, refused: bool, declined: bool) -> str:
        # What the service did decides first (a refusal did not run, whatever its caller saw),
        # then the leg that failed, then what the caller was told: see OUTCOMES.
        if declined:
            return "declined"
        if refused:
            return "refused"
        if self.dropped == "request":
            return "request lost"
        if self.exec is None:
            return "never arrived"
        if self.fenced:
            return "fenced"
        if self.dropped == "reply":
            return "reply lost"
        if self.abandoned:
            return "given up"
        if self.timed_out:
            return "timed out"
        if self.replied_ms is not None:
            return "replied"
        return "reply too late" if self.late else "no reply"


def _events(trace: Trace, what: str) -> Iterable[dict[str, Any]]:
    if not trace.enabled:
        raise ValueError(
            f"{what} reads the trace's events, and this world kept none (WorldSetup(trace=False) "
            "keeps only their counts); keep the trace to read what crossed the wire"
        )
    return trace.events


def service_calls(trace: Trace) -> list[ServiceCallRecord]:
    """Every call to the world's services in ``trace``, in the order they were sent, each joined
    from its events: its arguments and key, what the service did with it and returned, and what
    its caller learnt (its ``outcome``). A trace without services has none."""
    calls: dict[tuple[str, int], _Call] = {}
    passes: dict[tuple[str, str], str] = {}
    for event in _events(trace, "service_calls"):
        name = event["ev"]
        if name == "handler.invoke":
            passes[(str(event.get("drive")), str(event.get("run")))] = str(event.get("owner"))
            continue
        if not (name.startswith("svc.") or name == "fault.fence"):
            continue
        drive, seq = event.get("drive"), event.get("seq")
        if not isinstance(seq, int) or drive is None:
            continue  # a fence of a request that never left, or an event of a later version
        where = (str(drive), seq)
        if name == "svc.send":
            owner = passes.get((str(drive), str(event.get("run"))))
            calls[where] = _Call(event, owner)
            continue
        call = calls.get(where)
        if call is None:
            continue  # a scope call's fence, or an event that names no call of ours
        if name == "svc.exec":
            call.exec = event
        elif name == "svc.reply":
            call.replied_ms = float(event["t"])
        elif name == "svc.timeout":
            call.timed_out = True
        elif name == "svc.abandon":
            call.abandoned = True
        elif name == "svc.late":
            call.late = True
        elif name == "svc.drop":
            call.dropped = str(event.get("leg"))
        elif name == "fault.fence" and event.get("leg") == "reply":
            call.fenced = True
    return [call.record() for call in calls.values()]


def service_states(trace: Trace) -> dict[str, Any]:
    """Each service's state when the world ended, by the service's name, as ``world.end``
    recorded it (a JSON copy): what your outside world holds once every pass and every call on
    the wire has run out. Empty for a world that declares no services."""
    ends = [event for event in _events(trace, "service_states") if event["ev"] == "world.end"]
    if not ends:
        raise ValueError(
            "service_states reads the services' states from the trace's world.end event, and "
            "this trace has none: a world writes it as it ends (a recorded history of a real host "
            "has none; a world that raised never wrote it)"
        )
    states = ends[-1].get("services")
    return dict(states) if isinstance(states, dict) else {}


def _provider_fields(ran: dict[str, Any] | None) -> dict[str, Any]:
    """What a provider's own behaviour added to a call's ``svc.exec``, as the record's fields."""
    if ran is None:
        return {}
    lag, after = ran.get("lag_ms"), ran.get("retry_after_ms")
    return {
        "lag_ms": None if lag is None else float(lag),
        "stale": ran.get("stale"),
        "batch": ran.get("batch"),
        "retry_after_ms": None if after is None else float(after),
    }
