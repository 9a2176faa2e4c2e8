"""Callbacks: a service calling back into the job's world, as a provider's webhook does.

An operation, or the service's own work, sends one with :func:`sims.call_back` (``ENDPOINT``,
``payload``). The scenario adds the endpoint, the job's own code that receives it, on one of the
world's drives (``World.add_endpoint(NAME, fn, drive=...)``): ``await fn(driver, payload)``, with
the drive's ``JobDriver``, so that it starts a run (``driver.start_job_run``) or reads the scope
through the drive's wire, faults and all. It is the same function a real web handler calls.

A delivery is a message on the world's clock, with two legs of the service's latency each:

- the REQUEST leg carries the callback to the endpoint (lost, or late, under a fault); a drive
  that is down refuses it;
- the endpoint runs; an exception it lets out is a failed delivery (an HTTP 500), said in the trace;
- the REPLY leg carries the endpoint's answer back (lost under a fault: the endpoint ran and the
  service never learns it).

A delivery that failed is sent again ``Service(callback_retries_ms=...)`` later, each retry in
turn, then given up: so a lost reply makes the endpoint run twice, as real webhooks do. Faults
aim at the first delivery of the ``nth`` callback a service sends: ``DropCallback``,
``DelayCallback`` (out of order with those behind it), ``RepeatCallback`` (sent twice).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs
import trio

from ..faults._plan import DelayCallback, DropCallback, Fault, RepeatCallback
from ._fence import living_as, only_kills
from ._outstanding import Outstanding

if TYPE_CHECKING:
    from driver import JobDriver

    from ._services import Service, Services

#: The callback whose endpoint runs in this task, as ``SERVICE's callback N to ENDPOINT``: the
#: runs its endpoint starts are told as started by it.
CURRENT_CALLBACK: ContextVar[str | None] = ContextVar("sims_current_callback", default=None)

#: An endpoint: ``await fn(driver, payload)``, the job's own code that receives a callback.
EndpointFn: TypeAlias = Callable[["JobDriver", Any], Awaitable[object]]


@attrs.frozen
class Endpoint:
    """Where a callback lands: the job's ``fn``, run on ``drive``."""

    name: str
    fn: EndpointFn
    drive: str


class Callbacks:
    """The callbacks of one world: its endpoints, and the deliveries on the wire."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.world = services.world
        self.endpoints: dict[str, Endpoint] = {}
        self._sent: Counter[str] = Counter()
        #: Deliveries still on the wire, or their endpoint still running: the end waits for them.
        self.in_flight = Outstanding()
        self._faults: dict[tuple[str, int], list[Fault]] = {}
        for fault in self.world.plan.faults:
            if isinstance(fault, DropCallback | DelayCallback | RepeatCallback):
                self._faults.setdefault((fault.service, fault.nth), []).append(fault)

    def add_endpoint(self, name: str, fn: EndpointFn, drive: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"add_endpoint({name!r}, ...): name the endpoint with a non-empty str")
        if not callable(fn):
            raise ValueError(
                f"add_endpoint({name!r}, {fn!r}, ...): give an async function fn(driver, payload), "
                "the job's code that receives the callback"
            )
        if drive not in self.world.drives:
            raise ValueError(
                f"add_endpoint({name!r}, ..., drive={drive!r}): the world has no such drive; add "
                f"it first with world.add_drive(DriveSpec(name={drive!r}))"
            )
        if name in self.endpoints:
            raise ValueError(f"add_endpoint({name!r}, ...): the world has this endpoint already")
        self.endpoints[name] = Endpoint(name, fn, drive)

    def send(self, service: Service, by: str, endpoint: str, payload: Any) -> None:
        """``service`` sends ``payload`` to ``endpoint`` (``by``: what of it sent it)."""
        try:
            sent = json.loads(json.dumps(payload, allow_nan=False))
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{by} called back {endpoint!r} with {payload!r}, which is not JSON-safe "
                f"({error}): a callback carries JSON"
            ) from None
        self._sent[service.name] += 1
        number = self._sent[service.name]
        fields = {"service": service.name, "endpoint": endpoint, "cb": number}
        self.world.trace.record("svc.callback", {**fields, "by": by, "payload": sent})
        faults = self._faults.get((service.name, number), [])
        for fault in faults:
            if isinstance(fault, RepeatCallback):
                self._start(self._again, service, fields, sent, fault)
        self._start(self._deliveries, service, fields, sent, faults)

    def _start(self, task: Callable[..., Awaitable[None]], *args: Any) -> None:
        self.in_flight.begin()

        async def counted() -> None:
            try:
                await task(*args)
            finally:
                self.in_flight.end()
                self.world.quiet_check()

        self.world.nursery.start_soon(counted)

    async def _again(
        self, service: Service, fields: dict[str, Any], payload: Any, fault: RepeatCallback
    ) -> None:
        await self.world.host.sleep_ms(fault.after_ms)
        self.world.fired.add(fault)
        self.world.trace.record("svc.callback.repeat", {**fields, "after_ms": fault.after_ms})
        await self._deliver(service, {**fields, "try": "repeat"}, payload, [])

    async def _deliveries(
        self, service: Service, fields: dict[str, Any], payload: Any, faults: list[Fault]
    ) -> None:
        """The first delivery, then one per retry while they fail, then given up."""
        waits = (0.0, *service.callback_retries_ms)
        for attempt, wait in enumerate(waits, start=1):
            await self.world.host.sleep_ms(wait)
            if await self._deliver(service, {**fields, "try": attempt}, payload, faults):
                return
            faults = []  # the faults strike the first delivery only
        self.world.trace.record("svc.callback.abandoned", {**fields, "tries": len(waits)})

    async def _deliver(
        self, service: Service, fields: dict[str, Any], payload: Any, faults: list[Fault]
    ) -> bool:
        """One delivery: True when the service learnt that the endpoint took it."""
        world, trace = self.world, self.world.trace
        late = sum(f.ms for f in faults if isinstance(f, DelayCallback))
        if late:
            for fault in faults:
                if isinstance(fault, DelayCallback):
                    world.fired.add(fault)
            trace.record("svc.callback.late", {**fields, "ms": late})
        await world.host.sleep_ms(self.services.latency(service) + late)
        if self._dropped(faults, "request", fields):
            return False
        ran = await self._run_endpoint(fields, payload)
        if self._dropped(faults, "reply", fields):
            return False
        await world.host.sleep_ms(self.services.latency(service))
        trace.record("svc.callback.answered", {**fields, "ok": ran})
        return ran

    def _dropped(self, faults: list[Fault], leg: str, fields: dict[str, Any]) -> bool:
        for fault in faults:
            if isinstance(fault, DropCallback) and fault.leg == leg:
                self.world.fired.add(fault)
                self.world.trace.record("svc.callback.drop", {**fields, "leg": leg})
                return True
        return False

    async def _run_endpoint(self, fields: dict[str, Any], payload: Any) -> bool:
        """The endpoint runs on its drive; False when it could not, or failed."""
        world, trace = self.world, self.world.trace
        endpoint = self.endpoints.get(fields["endpoint"])
        if endpoint is None:
            have = ", ".join(self.endpoints) or "none"
            raise ValueError(
                f"service {fields['service']} called back endpoint {fields['endpoint']!r}, which "
                f"the world does not have (its endpoints: {have}); add it with "
                f"world.add_endpoint({fields['endpoint']!r}, fn, drive=...) before the scenario "
                "starts its runs"
            )
        drive = world.drives[endpoint.drive]
        if world.now_ms() < drive.down_until_ms:
            trace.record("svc.callback.refused", {**fields, "drive": drive.name, "why": "down"})
            return False
        trace.record("svc.callback.arrive", {**fields, "drive": drive.name})
        incarnation = drive.incarnation
        work = trio.CancelScope()
        drive._working.append(work)
        error: BaseException | None = None
        told = f"{fields['service']}'s callback {fields['cb']} to {endpoint.name}"
        token = CURRENT_CALLBACK.set(told)
        try:
            with living_as(incarnation), work:
                await endpoint.fn(drive.driver, copy.deepcopy(payload))
        except Exception as raised:
            error = raised
        except BaseException as raised:
            if not (incarnation.killed and only_kills(raised)):
                raise
            error = raised
        finally:
            CURRENT_CALLBACK.reset(token)
            drive._working.remove(work)
            world.quiet_check()
        if incarnation.killed:
            trace.record("svc.callback.failed", {**fields, "error": "the drive was killed"})
            return False
        if error is not None:
            said = f"{type(error).__name__}: {error}"
            trace.record("svc.callback.failed", {**fields, "error": said})
            return False
        trace.record("svc.callback.ran", fields)
        return True
