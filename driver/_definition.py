"""One definition of a job, registered the same way on a real drive and in a simulated world."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from ._errors import ValidationFailed
from ._start import name_errors
from ._values import JobHandler, RetryPolicy


def _names(services: Iterable[str]) -> tuple[str, ...]:
    if isinstance(services, str):
        return (services,)  # one name, not its letters
    return tuple(services)


@attrs.frozen
class JobDefinition:
    """A job: its key (``module_id``, ``job``), its ``handler``, its policies, and the services
    its handler calls (by name: a drive whose service port lacks one refuses the job where it is
    registered, and a world that does not declare one refuses it as it is added).

    ``JobDriver.register(definition)`` and ``World.register(definition)`` take the same value:
    the code that ships is the code the simulator explores."""

    module_id: str
    job: str
    handler: JobHandler
    retry: RetryPolicy | None = attrs.field(default=None, kw_only=True)
    lease_ms: int | None = attrs.field(default=None, kw_only=True)
    deadline_ms: int | None = attrs.field(default=None, kw_only=True)
    services: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=_names)

    def __attrs_post_init__(self) -> None:
        errors = name_errors(self.module_id, "module_id") + name_errors(self.job, "job")
        if errors:
            raise ValidationFailed(errors)
        if not callable(self.handler):
            raise ValidationFailed.at(
                "handler", f"is {self.handler!r}; give async def handler(ctx) -> JobPassResult"
            )
        for name in self.services:
            if not isinstance(name, str) or not name:
                raise ValidationFailed.at(
                    "services", f"names {name!r}; give the services' names, such as ('card',)"
                )
