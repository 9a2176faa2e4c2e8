"""A service's own work: what it does later, on its own (a capture, a settlement, a key forgotten).

An operation schedules it with :func:`sims.later` (:mod:`._provider`). Each piece is traced when
it is scheduled (``svc.later``) and when it runs (``svc.own``, with ``effect`` as a call's), in a
task of the world's own. An outage holds it (``svc.own.held``) until the service is up again, as
a provider's own jobs wait out its downtime. The world's end waits for every piece, however far
off (``Services.finish`` waits for ``OwnWork.pending``; the virtual clock jumps), so that a check
sees what the service did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._outstanding import Outstanding
from ._provider import OwnWork as Work

if TYPE_CHECKING:
    from ._services import Services

#: The most pieces of its own work the services of one world may schedule: a service whose work
#: schedules itself again forever (a settlement every day) would keep the world from ending.
OWN_WORK_MAX = 10_000


class OwnWork:
    """The services' own work in one world: scheduled, waiting for its time, run."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.scheduled = 0
        #: Pieces scheduled and not yet run: the world's end waits for them.
        self.pending = Outstanding()
        #: When each piece not yet run falls due, by its number.
        self._due: dict[int, float] = {}

    def due_before(self, at_ms: float) -> bool:
        """Whether a piece not yet run falls due before ``at_ms``."""
        return any(due < at_ms for due in self._due.values())

    def schedule(self, service: str, by: str, after_ms: float, name: str, work: Work) -> None:
        """Run ``work`` on ``service``'s state ``after_ms`` from now; ``by`` scheduled it."""
        world = self.services.world
        self.scheduled += 1
        if self.scheduled > OWN_WORK_MAX:
            raise ValueError(
                f"{by} scheduled {service}'s own work {name!r}, its services' "
                f"{OWN_WORK_MAX + 1}th piece of own work in this world: work that schedules "
                "itself again forever keeps the world from ending; stop it (a settlement every "
                "day: only while there is something to settle)"
            )
        number = self.scheduled
        due_ms = world.now_ms() + after_ms
        world.trace.record(
            "svc.later",
            {"service": service, "work": name, "n": number, "due_ms": due_ms, "by": by},
        )
        self.pending.begin()
        self._due[number] = due_ms
        world.nursery.start_soon(self._run, service, number, name, work, due_ms)

    async def _run(self, service: str, number: int, name: str, work: Work, due_ms: float) -> None:
        world = self.services.world
        try:
            await world.sleep_until_ms(due_ms)
            while (outage := self.services.outage_at(service, world.now_ms())) is not None:
                world.fired.add(outage)
                world.trace.record(
                    "svc.own.held",
                    {"service": service, "work": name, "n": number, "until_ms": outage.to_ms},
                )
                await world.sleep_until_ms(outage.to_ms)
            self.services.run_own(service, number, name, work)
        finally:
            self._due.pop(number, None)
            self.pending.end()


def own_fields(service: str, number: int, name: str) -> dict[str, Any]:
    """What ``svc.own`` says of a piece of own work, besides what it did."""
    return {"service": service, "work": name, "n": number}
