"""The recording driver of a world: the host's (``scopehost.RecordingJobDriver``), telling more of
what a handler raised (where in the user's code, and whose it was) and naming the step of each
service call made in a step body."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from driver import JobHandler, JobRegistration, JobRun, RetryPolicy, StartJobRunInput
from scopehost import RecordingJobDriver

from ._callbacks import CURRENT_CALLBACK
from ._raised import raised_fields
from ._services import CURRENT_STEP


@contextmanager
def _naming_the_step(name: str) -> Iterator[None]:
    # A service call made in the body names its step (``svc.send``): the spec's effects check
    # judges an effect by whether its step was recorded.
    token = CURRENT_STEP.set(name)
    try:
        yield
    finally:
        CURRENT_STEP.reset(token)


class WorldJobDriver(RecordingJobDriver):
    """A world's drive: every registration, call, start and handler told to the trace."""

    def __init__(self, host: Any, **options: Any) -> None:
        super().__init__(
            host,
            raised=raised_fields,
            in_step=_naming_the_step,
            # The world records each report itself, with how the drive call ended.
            record_reports=False,
            **options,
        )

    def register_job(
        self,
        module_id: str,
        name: str,
        handler: JobHandler,
        *,
        retry: RetryPolicy | None = None,
        lease_ms: int | None = None,
        deadline_ms: int | None = None,
    ) -> JobRegistration:
        if deadline_ms is not None:
            # The oracle has no model of a cancelled handler: it would call the deadline's failed
            # pass a violation. Said plainly rather than checked wrongly.
            raise ValueError(
                f"deadline_ms={deadline_ms!r}: a simulated world does not model pass deadlines; "
                "register the job without one (test deadlines against a scope host directly)"
            )
        return super().register_job(module_id, name, handler, retry=retry, lease_ms=lease_ms)

    async def start_job_run(self, scope_id: str, input: StartJobRunInput) -> JobRun:
        run = await super().start_job_run(scope_id, input)
        callback = CURRENT_CALLBACK.get()
        if callback is not None:
            # A run a service's callback started, through the endpoint's drive: told as a start
            # of the world's, with the callback that made it, so the story and a verdict about
            # the run say where it came from.
            self._record(
                "world.start",
                {"drive": self.name, "scope": scope_id, "run": run.id, "callback": callback},
            )
        return run
