"""One caller's wire to the scopes: latency on each leg, interception hooks, and faults.

A call crosses two legs. The REQUEST leg waits its delay, then the request hooks run, then the
drop-request rules; only then does the operation reach the scope's queue. The operation runs (one
message, one transaction, the store's clock read inside). Then the REPLY leg: the reply hooks run,
the drop-reply rules, the reply delay, and the caller gets the value.

Everything a hook does happens in the CALLING task, never in the network task: a hook that holds a
reply while a whole rival drive runs must not stop the delivery of the rival's own messages.

What each fault means is the point of modelling it. A dropped request did not run. A dropped reply
DID run and committed; the caller only learns that something went wrong. A reply held by a hook is
late, and the write it reports was made when it executed, not when the caller heard of it. An
ABANDONED request (a request hook answered ``DeliverLate``) is the at-least-once wire of a real RPC
stack: the caller gives up on it at once and gets ``RequestAbandoned``, not knowing whether it ran,
while the wire still carries it; it reaches the scope ``ms`` later and runs there, in a task of the
host's own, and its reply goes nowhere. A stale owner's write can so arrive during a later pass.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs

from ._errors import ReplyDropped, RequestAbandoned, RequestDropped, ScopeHostError

if TYPE_CHECKING:
    from ._host import ScopeHost


@attrs.frozen
class LinkCall:
    """One call on a link, as hooks, rules and delay functions see it."""

    link: str
    seq: int
    scope_id: str
    operation: str
    args: tuple[Any, ...]


@attrs.frozen
class LinkOutcome:
    """What the scope answered: a value or an error, and the store's time as it executed."""

    value: Any
    error: BaseException | None
    executed_at: str

    def unwrap(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


@attrs.frozen
class DeliverLate:
    """A request hook's verdict: the caller gives up on this request now, and the wire delivers it
    to the scope ``ms`` later all the same (where it runs; its reply goes nowhere)."""

    ms: float


#: What a hook may say: drop this leg, or (None) let it go on.
Verdict: TypeAlias = Literal["drop"] | None
#: What a request hook may say: as ``Verdict``, or abandon the request and deliver it late.
RequestVerdict: TypeAlias = Verdict | DeliverLate
RequestHook: TypeAlias = Callable[[LinkCall], Awaitable[RequestVerdict]]
ReplyHook: TypeAlias = Callable[[LinkCall, LinkOutcome], Awaitable[Verdict]]
#: A leg's delay in ms: a constant, per operation (key "*" for the rest), or drawn per call.
LegDelay: TypeAlias = float | Mapping[str, float] | Callable[[LinkCall, random.Random], float]


@attrs.define
class _DropRule:
    match: Callable[[LinkCall], bool]
    times: int


def _all_calls(call: LinkCall) -> bool:
    return True


class Link:
    """One caller's connection to scopes. Latency per leg; hooks and faults added at any time."""

    def __init__(
        self,
        *,
        name: str = "link",
        request_ms: LegDelay = 0.0,
        reply_ms: LegDelay = 0.0,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self.request_ms = request_ms
        self.reply_ms = reply_ms
        # A fixed seed rather than the global source: a delay drawn here must replay.
        self.rng = rng if rng is not None else random.Random(0)
        self._seq = 0
        self._request_hooks: list[RequestHook] = []
        self._reply_hooks: list[ReplyHook] = []
        self._request_drops: list[_DropRule] = []
        self._reply_drops: list[_DropRule] = []

    def __repr__(self) -> str:
        return f"Link(name={self.name!r})"

    def add_request_hook(self, hook: RequestHook) -> None:
        """Run ``hook`` after each request's delay, before it executes; "drop" drops it."""
        self._request_hooks.append(hook)

    def add_reply_hook(self, hook: ReplyHook) -> None:
        """Run ``hook`` after each operation executed, before its reply leg; "drop" drops it."""
        self._reply_hooks.append(hook)

    def drop_requests(
        self, match: Callable[[LinkCall], bool] = _all_calls, *, times: int = 1
    ) -> None:
        """Drop the next ``times`` requests ``match`` accepts: those operations never run."""
        self._request_drops.append(_DropRule(match, _positive("times", times)))

    def drop_replies(
        self, match: Callable[[LinkCall], bool] = _all_calls, *, times: int = 1
    ) -> None:
        """Drop the next ``times`` replies ``match`` accepts: those operations ran."""
        self._reply_drops.append(_DropRule(match, _positive("times", times)))

    def delay_ms(self, leg: LegDelay, call: LinkCall) -> float:
        if isinstance(leg, int | float):
            delay = float(leg)
        elif isinstance(leg, Mapping):
            delay = float(leg.get(call.operation, leg.get("*", 0.0)))
        else:
            delay = float(leg(call, self.rng))
        if not delay >= 0:
            raise ValueError(
                f"link {self.name!r} drew a delay of {delay!r} ms for {call.operation!r}; "
                "a leg's delay must be a number >= 0"
            )
        return delay

    async def call(
        self, host: ScopeHost, scope_id: str, operation: str, args: tuple[Any, ...]
    ) -> Any:
        """Carry one operation to ``scope_id`` and its answer back, across both legs."""
        self._seq += 1
        call = LinkCall(self.name, self._seq, scope_id, operation, args)
        observe = host.observe_rpc
        observe("rpc.send", call, None)
        await host.network.sleep_ms(self.delay_ms(self.request_ms, call))
        verdict = await self._request_verdict(call)
        if isinstance(verdict, DeliverLate):
            observe("rpc.abandon", call, None)
            host.start_soon(self._deliver_late, host, call, self._late_ms(verdict.ms, call))
            raise RequestAbandoned(
                f"request {operation} #{call.seq} on link {self.name!r} to scope {scope_id!r} "
                "was abandoned by its caller: the wire may still deliver it and the operation run"
            )
        if verdict == "drop":
            observe("rpc.drop", call, None)
            raise RequestDropped(
                f"request {operation} #{call.seq} on link {self.name!r} to scope {scope_id!r} "
                "was dropped: the operation did not run"
            )
        outcome = await host.execute(
            scope_id, operation, args, on_settle=lambda outcome: observe("rpc.exec", call, outcome)
        )
        dropped = await self._reply_verdict(call, outcome)
        await host.network.sleep_ms(self.delay_ms(self.reply_ms, call))
        if dropped:
            observe("rpc.drop", call, outcome)
            raise ReplyDropped(
                f"reply to {operation} #{call.seq} on link {self.name!r} from scope {scope_id!r} "
                f"was dropped: the operation ran at {outcome.executed_at}"
            )
        observe("rpc.deliver", call, outcome)
        return outcome.unwrap()

    async def _deliver_late(self, host: ScopeHost, call: LinkCall, ms: float) -> None:
        """The abandoned request's own way to the scope: it runs there, and nobody hears back."""
        await host.network.sleep_ms(ms)
        host.observe_rpc("rpc.late", call, None)
        try:
            outcome = await host.execute(
                call.scope_id,
                call.operation,
                call.args,
                on_settle=lambda outcome: host.observe_rpc("rpc.exec", call, outcome),
            )
        except ScopeHostError:
            return  # the host closed while the request was in flight: it never arrived
        host.observe_rpc("rpc.drop", call, outcome)

    def _late_ms(self, ms: float, call: LinkCall) -> float:
        if not ms >= 0:
            raise ValueError(
                f"link {self.name!r} was told to deliver {call.operation!r} #{call.seq} {ms!r} ms "
                "late; a late delivery's delay must be a number >= 0"
            )
        return float(ms)

    async def _request_verdict(self, call: LinkCall) -> RequestVerdict:
        for hook in list(self._request_hooks):
            verdict = await hook(call)
            if verdict is not None:
                return verdict
        return "drop" if _take(self._request_drops, call) else None

    async def _reply_verdict(self, call: LinkCall, outcome: LinkOutcome) -> bool:
        for hook in list(self._reply_hooks):
            if await hook(call, outcome) == "drop":
                return True
        return _take(self._reply_drops, call)


def _take(rules: list[_DropRule], call: LinkCall) -> bool:
    for rule in rules:
        if rule.match(call):
            rule.times -= 1
            if rule.times == 0:
                rules.remove(rule)
            return True
    return False


def _positive(name: str, value: int) -> int:
    if type(value) is not int or value < 1:
        raise ValueError(f"{name}={value!r}; pass a whole number >= 1")
    return value
