"""What a pass reaches beyond its own run: the drive's services, and the start of other runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias

import attrs

from ._services import ServicePort
from ._values import JobRun, StartJobRunInput

#: Starts (or joins) a run for a pass: handed the asking run's id, the scope (None: the pass's
#: own) and what to start.
StartRun: TypeAlias = Callable[[str, str | None, StartJobRunInput], Awaitable[JobRun]]


@attrs.frozen
class PassReach:
    """Handed by the drive to each pass it runs: its service port (None: it has none) and how a
    handler starts other runs (fan-out), through the drive's own link."""

    services: ServicePort | None = None
    start: StartRun | None = None
