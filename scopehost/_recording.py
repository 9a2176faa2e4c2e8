"""What drives and handlers did, told from THEIR side, for the oracle: in a world, and on a real
host that records its history (``HistoryRecorder``).

The kernel's own events say what the kernel decided; to check those decisions the oracle needs to
know, independently, what it was asked: which jobs a drive registered with which policy and lease,
what each drive call's budget was, what each start was handed, and what each handler did — the steps
it asked for (with their own retry policies), the step bodies that actually ran and how they ended,
the counts it added, the door refusals it saw, and what it returned or threw. ``RecordingJobDriver``
writes those to the trace as ``job.register``, ``drive.call``, ``start.call``/``start.result`` and
``hx.*`` events (docs/trace-format.md); it changes nothing the kernel sees.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
from collections.abc import Awaitable, Callable, Generator
from contextlib import AbstractContextManager
from typing import Any

from driver import (
    KEEP_CURSOR,
    SYSTEM_DOOR_WAIT,
    JobDriver,
    JobDriveReport,
    JobHandler,
    JobPassResult,
    JobRegistration,
    JobRun,
    RetryPolicy,
    StartJobRunInput,
)

from ._describe import describe
from ._link import Link

Record = Callable[[str, dict[str, Any]], None]
#: What an event says of an exception a handler or a step body raised, beyond its message.
Raised = Callable[[BaseException], dict[str, Any]]
#: The context a step body runs in (a world names the step of the service calls made in it).
InStep = Callable[[str], AbstractContextManager[object]]


def raised_type(err: BaseException) -> dict[str, Any]:
    """``error_type``: the least a record says of what was raised."""
    return {"error_type": type(err).__name__}


def no_step_context(name: str) -> AbstractContextManager[object]:
    return contextlib.nullcontext()


def error_text(err: BaseException) -> str:
    """How a record spells an error: its message, or its type's name when it has none."""
    return str(err) or type(err).__name__


def queue_safe(value: Any, depth: int = 0) -> bool:
    """The spec's queue-safety rule, re-stated: only JSON's own shapes, no NaN, str keys."""
    if value is None or isinstance(value, str | bool):
        return True
    if type(value) is int:
        return True
    if type(value) is float:
        return math.isfinite(value)
    if depth > 500:
        return False
    if type(value) is list:
        return all(queue_safe(item, depth + 1) for item in value)
    if type(value) is dict:
        return all(isinstance(k, str) and queue_safe(v, depth + 1) for k, v in value.items())
    return False


def json_value(value: Any) -> dict[str, Any]:
    """``{"value": ...}`` for a queue-safe value, else ``{"unsafe": "<type>"}``."""
    if queue_safe(value):
        try:
            json.dumps(value, allow_nan=False)
            return {"value": value}
        except (TypeError, ValueError, RecursionError):
            pass
    return {"unsafe": type(value).__name__}


class _RecordingContext:
    """The pass context as the handler sees it, recording each request on its way through."""

    def __init__(
        self,
        ctx: Any,
        record: Record,
        drive: str,
        *,
        returns: bool = False,
        raised: Raised = raised_type,
        in_step: InStep = no_step_context,
    ) -> None:
        self._ctx = ctx
        self._record = record
        self._drive = drive
        self._returns = returns
        self.raised = raised
        self._in_step = in_step
        self.door_error: BaseException | None = None

    def _emit(self, event: str, **fields: Any) -> None:
        self._record(event, {"drive": self._drive, "run": self._ctx.run.id, **fields})

    def __getattr__(self, name: str) -> Any:
        # Everything the handler reads and does not need recorded (run, payload, cursor,
        # counters) is the real context's.
        return getattr(self._ctx, name)

    def count(self, name: str, by: float = 1) -> None:
        self._ctx.count(name, by)
        self._emit("hx.count", name=name, by=by)

    async def scope(self) -> Any:
        try:
            door = await self._ctx.scope()
        except Exception as err:
            if getattr(err, "reason", None) == SYSTEM_DOOR_WAIT:
                self.door_error = err
            self._emit("hx.door", refused=error_text(err))
            raise
        return door

    def step(
        self, name: str, fn: Callable[[], Any], retry: RetryPolicy | None = None
    ) -> Awaitable[Any]:
        """The kernel's step call, made now as the handler made it: the kernel checks its
        arguments here and remembers a call left un-awaited (the pass then fails, and ``hx.end``
        names the step). ``hx.step`` is written when the step is awaited, where it starts."""
        retry_text = describe(retry)

        async def body() -> Any:
            self._emit("hx.fn", step=name)
            try:
                with self._in_step(name):
                    value = fn()
                    if inspect.isawaitable(value):
                        value = await value
            except Exception as err:
                self._emit(
                    "hx.fn.end",
                    step=name,
                    error=error_text(err),
                    door=err is self.door_error,
                    **self.raised(err),
                )
                raise
            self._emit("hx.fn.end", step=name, error=None, door=False, **json_value(value))
            return value

        try:
            call = self._ctx.step(name, body, retry)
        except Exception:
            # Refused as it was called (its name, body or policy): traced as the call it was.
            self._emit("hx.step", step=name, retry=retry_text)
            raise
        return _RecordedStep(self, name, retry_text, call)


class _RecordedStep:
    """A step call the handler made, told to the trace when it is awaited (``hx.step``, then
    ``hx.got`` with what it handed back); never awaited, the kernel fails its pass."""

    __slots__ = ("_call", "_ctx", "_name", "_retry")

    def __init__(self, ctx: _RecordingContext, name: str, retry: Any, call: Awaitable[Any]) -> None:
        self._ctx = ctx
        self._name = name
        self._retry = retry
        self._call = call

    def __await__(self) -> Generator[Any, None, Any]:
        # The kernel's own refusal of a second await comes first, before anything is traced.
        running = self._call.__await__()
        self._ctx._emit("hx.step", step=self._name, retry=self._retry)
        value = yield from running
        if self._ctx._returns:
            # What the handler got back, memo or fresh: a memo must hand back the value its
            # body returned, not the JSON text the ledger keeps (trace format 4).
            self._ctx._emit("hx.got", step=self._name, **json_value(value))
        return value


def recorded_handler(
    handler: JobHandler,
    record: Record,
    drive: str,
    *,
    returns: bool = False,
    raised: Raised = raised_type,
    in_step: InStep = no_step_context,
) -> JobHandler:
    """``handler``, telling the trace what it asked of its pass and how it ended; with
    ``returns``, also what each ``step()`` handed back to it."""

    async def wrapped(ctx: Any) -> Any:
        proxy = _RecordingContext(
            ctx, record, drive, returns=returns, raised=raised, in_step=in_step
        )
        try:
            result: Any = handler(proxy)
            if inspect.isawaitable(result):
                result = await result
        except Exception as err:
            door = err is proxy.door_error
            # An error in the door's words ("not now") that the door did not throw: the job's
            # own, which fails the pass (the host defers by identity, never by shape).
            looks = not door and getattr(err, "reason", None) == SYSTEM_DOOR_WAIT
            proxy._emit(
                "hx.end",
                raised=error_text(err),
                door=door,
                **({"looks_like_door": True} if looks else {}),
                **_unawaited(ctx),
                **raised(err),
            )
            raise
        proxy._emit("hx.end", **_result_fields(result), **_unawaited(ctx))
        return result

    return wrapped


def _unawaited(ctx: Any) -> dict[str, Any]:
    """``unawaited``: the steps the handler called and never awaited, as the kernel keeps them
    (it fails the pass for them); nothing when there are none, so other traces are unchanged."""
    names = [call.name for call in getattr(ctx, "unawaited", ())]
    return {"unawaited": names} if names else {}


def _result_fields(result: Any) -> dict[str, Any]:
    if result is None:
        return {"keep": True, "done": False}
    if not isinstance(result, JobPassResult):
        return {"bad": type(result).__name__}
    if result.cursor is KEEP_CURSOR:
        return {"keep": True, "done": bool(result.done)}
    cursor = json_value(result.cursor)
    if "unsafe" in cursor:
        return {"cursor_unsafe": cursor["unsafe"], "done": bool(result.done)}
    return {"cursor": cursor["value"], "done": bool(result.done)}


class RecordingJobDriver(JobDriver):
    """A ``JobDriver`` whose registrations, calls, starts, handlers and reports are told to
    ``record`` (which is also its observer, for the kernel's own events, unless ``observer`` is
    given). Without ``record``, the host's history (``open_scope_host(record=FOLDER)``). Its calls
    go over a zero-latency link of its own, named as the drive is, unless ``link`` is given.

    ``raised`` says what an event tells of an exception beyond its message (its type by default;
    a world adds where in the user's code, and whose it was); ``in_step`` is the context a step
    body runs in."""

    def __init__(
        self,
        host: Any,
        *,
        record: Record | None = None,
        record_returns: bool = False,
        record_reports: bool = True,
        raised: Raised = raised_type,
        in_step: InStep = no_step_context,
        **options: Any,
    ) -> None:
        if record is None:
            record = getattr(host, "recorder", None)
            if record is None:
                raise ValueError(
                    "RecordingJobDriver(host) on a host that records no history: open the host "
                    "with record=FOLDER, or pass record= (a function of (event, fields))"
                )
        if options.get("link") is None:
            # The oracle tells drives apart by their links: a recording drive gets a
            # zero-latency one of its own, named as it is, rather than the host's shared one.
            options["link"] = Link(name=str(options.get("name", "drive")))
        options.setdefault("observer", record)
        super().__init__(host, **options)
        self._record = record
        #: Whether each ``step()``'s return to the handler is traced (``hx.got``, format 4).
        self.record_returns = record_returns
        self._raised = raised
        self._in_step = in_step
        #: Whether each drive call's report is recorded here (``drive.report``); a world records
        #: it itself, where it knows how the call ended.
        self._record_reports = record_reports

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
        fields = {
            "drive": self.name,
            "module_id": module_id,
            "job": name,
            "retry": describe(retry),
            "lease_ms": lease_ms if lease_ms is None or type(lease_ms) is int else repr(lease_ms),
        }
        if deadline_ms is not None:
            # Said only where there is one, so a world's trace is unchanged: a history with one
            # is not judged (the oracle has no model of a cancelled handler).
            fields["deadline_ms"] = deadline_ms
        try:
            registration = super().register_job(
                module_id,
                name,
                recorded_handler(
                    handler,
                    self._record,
                    self.name,
                    returns=self.record_returns,
                    raised=self._raised,
                    in_step=self._in_step,
                ),
                retry=retry,
                lease_ms=lease_ms,
                deadline_ms=deadline_ms,
            )
        except Exception as err:
            # A refused registration is traced too, so the oracle can hold the lease rule on
            # what was refused as well as on what was accepted.
            self._record("job.register", {**fields, "refused": error_text(err)})
            raise
        self._record("job.register", fields)
        return registration

    async def run_due_jobs(
        self, scope_id: str, *, max_passes: int = 1, limit: int | None = None
    ) -> JobDriveReport:
        self._record(
            "drive.call",
            {"drive": self.name, "scope": scope_id, "max_passes": max_passes, "limit": limit},
        )
        try:
            report = await super().run_due_jobs(scope_id, max_passes=max_passes, limit=limit)
        except Exception as err:
            # The call is over all the same (its due read refused, say): a reader of the history
            # knows the drive's calls never overlapped only if each one's end is written.
            if self._record_reports:
                self._record(
                    "drive.failed",
                    {"drive": self.name, "scope": scope_id, "error": type(err).__name__},
                )
            raise
        if self._record_reports:
            self._record(
                "drive.report", {"drive": self.name, "scope": scope_id, "report": describe(report)}
            )
        return report

    async def start_job_run(self, scope_id: str, input: StartJobRunInput) -> JobRun:
        self._record(
            "start.call",
            {
                "drive": self.name,
                "scope": scope_id,
                "module_id": input.module_id,
                "job": input.job,
                "instance": input.instance,
                "subject": input.subject,
                "payload": json_value(input.payload),
            },
        )
        try:
            run = await super().start_job_run(scope_id, input)
        except Exception as err:
            self._record(
                "start.result",
                {"drive": self.name, "scope": scope_id, "error": f"{type(err).__name__}"},
            )
            raise
        self._record("start.result", {"drive": self.name, "scope": scope_id, "run": run.id})
        return run

    async def _start_for_pass(
        self, scope_id: str, parent: str, scope: str | None, input: StartJobRunInput
    ) -> JobRun:
        # A run a handler started is a run of the world like one the scenario started: the
        # story, the timeline and the checks find it by its ``world.start``.
        run = await super()._start_for_pass(scope_id, parent, scope, input)
        self._record(
            "world.start",
            {
                "drive": self.name,
                "scope": scope_id if scope is None else scope,
                "run": run.id,
                "by": parent,
            },
        )
        return run
