"""One caller's wire to the scopes: latency on each leg, interception hooks, and faults.

A call crosses two legs. The REQUEST leg waits its delay, then the request hooks run, then the
drop-request rules; only then does the operation reach the scope's queue. The operation runs (one
message, one transaction, the store's clock read inside). Then the REPLY leg: the reply hooks run,
the drop-reply rules, the reply delay, and the caller gets the value.

Everything a hook does happens in the CALLING task, never in the network task: a hook that holds a
reply while a whole rival drive runs must not stop the delivery of the rival's own messages.

A leg nobody needs to see costs no scheduler round of the caller's. A hook may come with ``wants``,
a plain function that says which calls it must see; when no hook wants a leg, the leg is carried
by whichever task ends it: the network task hands a request straight to the scope's queue once its
delay is over, and the actor starts the reply leg the moment the operation ran. The caller then
sleeps once, from sending to being answered: four scheduler batches for a call with latency on
both legs (network, actor, network, caller), two without (actor, caller). Every decision is the
same one the caller would make, in the same order (hooks' ``wants``, then the drop rules, then the
delay draw), at the same virtual time.

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
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import attrs
import trio

from driver import STORE_PORT_OPERATIONS

from ._errors import HostClosed, ReplyDropped, RequestAbandoned, RequestDropped, host_closed
from ._network import Timed, withdraw

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
#: Which calls a hook must see (asked after the leg's delay, in whichever task carries the leg).
RequestWants: TypeAlias = Callable[[LinkCall], bool]
ReplyWants: TypeAlias = Callable[[LinkCall, LinkOutcome], bool]
#: A leg's delay in ms: a constant, per operation (key "*" for the rest), or drawn per call.
LegDelay: TypeAlias = float | Mapping[str, float] | Callable[[LinkCall, random.Random], float]


@attrs.define
class _DropRule:
    match: Callable[[LinkCall], bool]
    times: int


def _all_calls(call: LinkCall) -> bool:
    return True


#: A tuple, not ``int | float``: a union written in the call is built anew each time it runs,
#: and these checks run on every leg.
_NUMBERS = (int, float)


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
        self.request_ms = request_ms  # checked by the property's setter, as is reply_ms
        self.reply_ms = reply_ms
        # A fixed seed rather than the global source: a delay drawn here must replay.
        self.rng = rng if rng is not None else random.Random(0)
        self._seq = 0
        self._request_hooks: list[tuple[RequestHook, RequestWants | None]] = []
        self._reply_hooks: list[tuple[ReplyHook, ReplyWants | None]] = []
        self._request_drops: list[_DropRule] = []
        self._reply_drops: list[_DropRule] = []

    def __repr__(self) -> str:
        return f"Link(name={self.name!r})"

    # A leg's delay is checked whenever it is set, at construction or later: a bad one would
    # otherwise surface only at the first call (a str as "'str' object is not callable"), and an
    # infinite one would hold every call forever.

    @property
    def request_ms(self) -> LegDelay:
        """The request leg's delay (see ``LegDelay``)."""
        return self._request_ms

    @request_ms.setter
    def request_ms(self, leg: LegDelay) -> None:
        self._request_ms = check_leg_delay(leg, "request_ms")

    @property
    def reply_ms(self) -> LegDelay:
        """The reply leg's delay (see ``LegDelay``)."""
        return self._reply_ms

    @reply_ms.setter
    def reply_ms(self, leg: LegDelay) -> None:
        self._reply_ms = check_leg_delay(leg, "reply_ms")

    def add_request_hook(self, hook: RequestHook, *, wants: RequestWants | None = None) -> None:
        """Run ``hook`` after each request's delay, before it executes; "drop" drops it.

        With ``wants``, only on the calls it accepts. ``wants`` is asked once per call, for every
        hook before any hook runs, possibly in the network task: it must not block."""
        self._request_hooks.append((hook, wants))

    def add_reply_hook(self, hook: ReplyHook, *, wants: ReplyWants | None = None) -> None:
        """Run ``hook`` after each operation executed, before its reply leg; "drop" drops it.

        With ``wants``, only on the calls it accepts (asked once per call, possibly in the
        actor's task, the moment the operation ran: it must not block)."""
        self._reply_hooks.append((hook, wants))

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
        """The delay of one leg of ``call``: ``leg`` is this link's ``request_ms`` or
        ``reply_ms``."""
        if isinstance(leg, _NUMBERS):
            return float(leg)  # a constant was checked when it was set; this runs every leg
        if isinstance(leg, Mapping):
            # Checked when set; looked at again here, as the mapping may have changed since.
            unknown = _unknown_delay_key(leg)
            if unknown is not None:
                side = "request_ms" if leg is self._request_ms else "reply_ms"
                raise _unknown_delay_key_error(f"link {self.name!r}: {side}", unknown)
            delay = leg.get(call.operation, leg.get("*", 0.0))
        else:
            delay = leg(call, self.rng)
        if _too_long(delay):
            raise _too_long_error(
                f"link {self.name!r} drew a delay of {delay!r} ms for {call.operation!r}"
            )
        if not _is_delay(delay):
            raise ValueError(
                f"link {self.name!r} drew a delay of {delay!r} ms for {call.operation!r}; "
                "a leg's delay must be a finite number >= 0"
            )
        return float(delay)

    async def call(
        self, host: ScopeHost, scope_id: str, operation: str, args: tuple[Any, ...]
    ) -> Any:
        """Carry one operation to ``scope_id`` and its answer back, across both legs."""
        if host.closed:
            raise host_closed(scope_id, operation)
        self._seq += 1
        call = LinkCall(self.name, self._seq, scope_id, operation, args)
        host.observe_rpc("rpc.send", call, None)
        flight = _Flight(self, host, call)
        delay = self.delay_ms(self.request_ms, call)
        if delay == 0:
            flight.arrive()
        else:
            flight.timed = host.network.after(
                delay / 1000.0, flight.arrive_off_the_wire, wakes=True
            )
        step = await flight.next_step()
        if isinstance(step, list):
            # Some hooks want this request: they run here, in the calling task.
            verdict = await _request_verdict(step, call)
            if verdict is None and _take(self._request_drops, call):
                verdict = "drop"
            if isinstance(verdict, DeliverLate):
                host.observe_rpc("rpc.abandon", call, None)
                host.start_soon(self._deliver_late, host, call, self._late_ms(verdict.ms, call))
                raise RequestAbandoned(
                    f"request {operation} #{call.seq} on link {self.name!r} to scope "
                    f"{scope_id!r} was abandoned by its caller: the wire may still deliver it "
                    "and the operation run"
                )
            if verdict is None:
                flight.submit()
            step = await flight.next_step() if verdict is None else _REQUEST_DROPPED
        if step is _REQUEST_DROPPED:
            host.observe_rpc("rpc.drop", call, None)
            raise RequestDropped(
                f"request {operation} #{call.seq} on link {self.name!r} to scope {scope_id!r} "
                "was dropped: the operation did not run"
            )
        if isinstance(step, BaseException):
            raise step
        outcome = flight.outcome
        assert outcome is not None
        if isinstance(step, tuple):
            # Some hooks want this reply: they run here, then the reply leg's delay.
            dropped = await _reply_verdict(step, call, outcome) or _take(self._reply_drops, call)
            try:
                await host.network.sleep_ms(self.delay_ms(self.reply_ms, call))
            except HostClosed:
                raise HostClosed(
                    f"reply to {operation} #{call.seq} on link {self.name!r} from scope "
                    f"{scope_id!r} was on the wire when the scope host closed: the operation ran "
                    f"at {outcome.executed_at}"
                ) from None
        else:
            dropped = step is _REPLY_DROPPED
        if dropped:
            host.observe_rpc("rpc.drop", call, outcome, flight.described)
            raise ReplyDropped(
                f"reply to {operation} #{call.seq} on link {self.name!r} from scope {scope_id!r} "
                f"was dropped: the operation ran at {outcome.executed_at}"
            )
        host.observe_rpc("rpc.deliver", call, outcome, flight.described)
        return outcome.unwrap()

    async def _deliver_late(self, host: ScopeHost, call: LinkCall, ms: float) -> None:
        """The abandoned request's own way to the scope: it runs there, and nobody hears back."""
        try:
            await host.network.sleep_ms(ms)
        except HostClosed:
            return  # the host closed while the request was in flight: it never arrived
        host.observe_rpc("rpc.late", call, None)
        if host.closed:
            return  # it arrived as the host closed: it never reached the scope

        def ran(outcome: LinkOutcome) -> None:
            # In the actor's task, as it ran: the trace keeps the store's order.
            host.observe_rpc("rpc.exec", call, outcome)
            host.observe_rpc("rpc.drop", call, outcome)

        host.submit(call.scope_id, call.operation, call.args, ran)

    def _late_ms(self, ms: float, call: LinkCall) -> float:
        if not _is_delay(ms):
            raise ValueError(
                f"link {self.name!r} was told to deliver {call.operation!r} #{call.seq} {ms!r} ms "
                "late; a late delivery's delay must be a finite number >= 0"
            )
        return float(ms)


def _is_delay(value: object) -> bool:
    """Whether ``value`` is a delay a leg can wait: a finite number of ms >= 0 (not a bool), and
    one a float holds, as the wire waits it in seconds of Trio's (float) clock."""
    return (
        not isinstance(value, bool)
        and isinstance(value, _NUMBERS)
        # Compared, not converted: an int of any size compares exactly, and NaN fails.
        and 0 <= value <= _LONGEST_DELAY_MS
    )


#: The longest delay a leg takes: the largest float (an int past it cannot be waited).
_LONGEST_DELAY_MS: Final = sys.float_info.max

#: The longest latency a link's leg may be given (its ``request_ms``, ``reply_ms``, a mapping's
#: value or a drawn one): a day. A latency past it is no network's, and would hold every call, and
#: the drive making it, for ages of the world's time.
LONGEST_LATENCY_MS: Final = 86_400_000


def _too_long(value: object) -> bool:
    """Whether ``value`` is a delay, but past :data:`LONGEST_LATENCY_MS`."""
    return _is_delay(value) and value > LONGEST_LATENCY_MS  # type: ignore[operator]


def _too_long_error(said: str) -> ValueError:
    """``said`` names the value (``request_ms=1e+300``); the rest says the bound and the remedy."""
    return ValueError(
        f"{said}; a leg's latency is at most {LONGEST_LATENCY_MS} ms (a day), past which no call "
        "comes back: give a latency from 0 to 86400000 ms (a fault plan's DelayLeg or HoldLeg is "
        "how a world holds one call up for longer)"
    )


#: The operations a scope's stub carries over a link (the store port's, a module's ``invoke``,
#: and the scope's own calls): the names a delay mapping may key, with ``*`` for the rest.
LINK_OPERATIONS: Final = frozenset(
    (*STORE_PORT_OPERATIONS, "invoke", "shred_subject", "export_dump", "import_dump")
)
_DELAY_KEYS: Final = LINK_OPERATIONS | {"*"}


def check_leg_delay(leg: LegDelay, name: str) -> LegDelay:
    """``leg``, refused unless it is a delay (a finite number >= 0), a mapping of operation names
    to delays, or a function drawing one per call (whose draws ``Link.delay_ms`` checks)."""
    if isinstance(leg, Mapping):
        for operation, value in leg.items():
            if isinstance(operation, str) and _too_long(value):
                raise _too_long_error(f"{name}[{operation!r}]={value!r}")
            if not isinstance(operation, str) or not _is_delay(value):
                raise ValueError(
                    f"{name}[{operation!r}]={value!r}; a mapping's keys are operation names "
                    "('*' for the rest) and its values finite numbers of ms >= 0"
                )
        unknown = _unknown_delay_key(leg)
        if unknown is not None:
            raise _unknown_delay_key_error(name, unknown)
        return leg
    if _too_long(leg):
        raise _too_long_error(f"{name}={leg!r}")
    if _is_delay(leg) or callable(leg):
        return leg
    raise ValueError(
        f"{name}={leg!r}; pass a leg's delay as a finite number of ms >= 0, a mapping of operation "
        "names to such numbers ('*' for the rest), or a function of (call, rng) that draws one"
    )


def _unknown_delay_key(leg: Mapping[str, float]) -> str | None:
    """A key of ``leg`` that names no operation (the first by repr), or None.

    A misspelt operation ("clam") would never be looked up: its calls would take the "*" delay
    (or none), and the world would run without the latency it was given, saying nothing."""
    unknown = leg.keys() - _DELAY_KEYS
    return min(unknown, key=repr) if unknown else None


def _unknown_delay_key_error(name: str, key: str) -> ValueError:
    return ValueError(
        f"{name}[{key!r}]: no operation crosses a link by that name; a mapping's keys are "
        f"among {', '.join(sorted(LINK_OPERATIONS))}, and '*' for the rest"
    )


#: What ends a leg for the caller, besides a list (request hooks to run) or a tuple (reply hooks).
_REQUEST_DROPPED = "request dropped"
_REPLY_DROPPED = "reply dropped"
_REPLY_DELIVERED = "reply delivered"

_Step: TypeAlias = str | list[RequestHook] | tuple[ReplyHook, ...] | BaseException


class _Flight:
    """One call in flight: what carries its legs while the caller sleeps, and wakes it once."""

    __slots__ = (
        "_gone",
        "_parked",
        "_step",
        "_task",
        "call",
        "described",
        "host",
        "link",
        "outcome",
        "timed",
    )

    def __init__(self, link: Link, host: ScopeHost, call: LinkCall) -> None:
        self.link = link
        self.host = host
        self.call = call
        self.outcome: LinkOutcome | None = None
        #: The outcome as the observer was told it at execution, shared by the reply's event.
        self.described: Any = None
        #: The network entry carrying a leg, withdrawn if the caller gives up meanwhile.
        self.timed: Timed | None = None
        self._task = trio.lowlevel.current_task()
        self._step: _Step | None = None
        self._parked = False
        self._gone = False

    async def next_step(self) -> _Step:
        """Sleep until a leg ends (unless it already has); what the caller does next."""
        if self._step is None:
            self._parked = True
            await trio.lowlevel.wait_task_rescheduled(self._abort)
        step = self._step
        assert step is not None
        self._step = None
        return step

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        # The caller gave up (cancelled): a request still on the wire never arrives; one the
        # scope already holds still runs, and its reply goes nowhere.
        self._parked = False
        self._gone = True
        if self.timed is not None:
            withdraw(self.timed)
        return trio.lowlevel.Abort.SUCCEEDED

    def _wake(self, step: _Step) -> None:
        self.timed = None
        self._step = step
        if self._parked:
            self._parked = False
            trio.lowlevel.reschedule(self._task)

    def arrive_off_the_wire(self) -> None:
        """:meth:`arrive`, run by the network when the request's delay ended: no task is in the
        middle of anything, so an idle scope may serve it at once."""
        self.arrive(at_once=True)

    def arrive(self, *, at_once: bool = False) -> None:
        """The request's delay is over: hooks, then drop rules, then the scope's queue."""
        self.timed = None
        if self.host.closed:
            # Run by the network as its host closed: no hook may hold the caller any longer.
            call = self.call
            self._wake(
                HostClosed(
                    f"request {call.operation} #{call.seq} on link {call.link!r} to scope "
                    f"{call.scope_id!r} was on the wire when the scope host closed: the "
                    "operation did not run"
                )
            )
            return
        try:
            wanting = [
                hook
                for hook, wants in self.link._request_hooks
                if wants is None or wants(self.call)
            ]
            if wanting:
                self._wake(wanting)
            elif _take(self.link._request_drops, self.call):
                self._wake(_REQUEST_DROPPED)
            else:
                self.submit(at_once=at_once)
        except Exception as error:
            self._wake(error)

    def submit(self, *, at_once: bool = False) -> None:
        call = self.call
        host = self.host
        if host.closed:
            self._wake(host_closed(call.scope_id, call.operation))
            return
        host.submit(call.scope_id, call.operation, call.args, self.replied, at_once=at_once)

    def replied(self, outcome: LinkOutcome) -> None:
        """The operation ran (called in the actor's task): the reply leg starts now."""
        self.outcome = outcome
        try:
            self.described = self.host.observe_rpc("rpc.exec", self.call, outcome)
            if self._gone:
                return
            link = self.link
            wanting = tuple(
                hook
                for hook, wants in link._reply_hooks
                if wants is None or wants(self.call, outcome)
            )
            if wanting:
                self._wake(wanting)
                return
            step = _REPLY_DROPPED if _take(link._reply_drops, self.call) else _REPLY_DELIVERED
            delay = link.delay_ms(link.reply_ms, self.call)
        except Exception as error:
            self._wake(error)
            return
        if delay == 0:
            self._wake(step)
        else:
            self.timed = self.host.network.after(
                delay / 1000.0, lambda: self._wake(step), wakes=True
            )


async def _request_verdict(hooks: list[RequestHook], call: LinkCall) -> RequestVerdict:
    for hook in hooks:
        verdict = await hook(call)
        if verdict is not None:
            return verdict
    return None


async def _reply_verdict(
    hooks: tuple[ReplyHook, ...], call: LinkCall, outcome: LinkOutcome
) -> bool:
    for hook in hooks:
        if await hook(call, outcome) == "drop":
            return True
    return False


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
