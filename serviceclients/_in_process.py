"""The service port over plain functions in this process."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import trio

from driver import (
    ServiceCall,
    ServiceDeclined,
    ServiceError,
    ServiceTimedOut,
    ServiceUnavailable,
    dumps,
    loads,
)

#: An operation: a function of the call's arguments (plain or async) that returns its result.
InProcessOperation: TypeAlias = Callable[[dict[str, Any]], Any]


class InProcessServices:
    """Each service a mapping of operation names to functions ``fn(args) -> result`` (plain or
    ``async``), called in this process.

    An operation answers no by raising ``ServiceDeclined``, and not now by raising
    ``ServiceUnavailable``; anything else it raises is a bug and goes up as it is. A call with an
    ``idempotency_key`` that repeats one already answered gets the first result again without
    running (``remember_keys=False`` turns that off), as a provider that honours keys does. A
    call's ``timeout_ms`` bounds an ``async`` operation (``ServiceTimedOut``)."""

    def __init__(
        self,
        services: Mapping[str, Mapping[str, InProcessOperation]],
        *,
        remember_keys: bool = True,
    ) -> None:
        if not isinstance(services, Mapping) or not services:
            raise ValueError(
                f"InProcessServices({services!r}): give a dict of service names to dicts of "
                "operation names to functions fn(args) -> result"
            )
        for service, operations in services.items():
            if not isinstance(operations, Mapping) or not all(
                callable(fn) for fn in operations.values()
            ):
                raise ValueError(
                    f"InProcessServices: service {service!r} is {operations!r}; give a dict of "
                    "operation names to functions fn(args) -> result"
                )
            for name, fn in operations.items():
                _check_one_argument(service, name, fn)
        self._services = {name: dict(operations) for name, operations in services.items()}
        self._remember = remember_keys
        self._answered: dict[tuple[str, str, str], Any] = {}

    def __repr__(self) -> str:
        return f"InProcessServices({', '.join(self._services)})"

    def provides(self, service: str) -> bool:
        return service in self._services

    async def call(self, call: ServiceCall) -> Any:
        operation = self._operation(call)
        key = None
        if self._remember and call.idempotency_key is not None:
            key = (call.service, call.operation, call.idempotency_key)
            if key in self._answered:
                return self._answered[key].result(call)
        # The operation runs to its end in a task of its own, as a provider goes on with a
        # request whose caller gave up: its answer is remembered by its key all the same, so a
        # repeat after a timeout is answered, never run again.
        answer = _Answer()
        trio.lowlevel.spawn_system_task(
            answer.run, operation, dict(call.args), name=f"in-process {call.name}"
        )
        with trio.move_on_after(_seconds(call.timeout_ms)):
            await answer.done.wait()
        if not answer.done.is_set():
            if key is not None:
                self._answered[key] = answer  # its result, whenever it comes
            raise ServiceTimedOut(
                f"{call.name} gave no answer within {call.timeout_ms:g} ms; it may have run, or "
                "may still run",
                service=call.service,
                operation=call.operation,
            )
        if key is not None and not isinstance(answer.error, ServiceUnavailable):
            self._answered[key] = answer  # a refusal for now is not an answer to remember
        return answer.result(call)

    def _operation(self, call: ServiceCall) -> InProcessOperation:
        operations = self._services.get(call.service)
        if operations is None:
            raise ServiceUnavailable(
                f"{call.name}: no service {call.service!r} here (these are: "
                f"{', '.join(self._services)})",
                service=call.service,
                operation=call.operation,
            )
        found = operations.get(call.operation)
        if found is None:
            raise ServiceDeclined(
                f"{call.name}: service {call.service!r} has no operation {call.operation!r} "
                f"(its operations: {', '.join(operations)})",
                service=call.service,
                operation=call.operation,
                code="no_such_operation",
            )
        return found


def _check_one_argument(service: str, name: str, fn: InProcessOperation) -> None:
    """An operation here is called ``fn(args)``; a world's is ``fn(state, args)``, and handing one
    over as it is would fail only at its first call."""
    try:
        inspect.signature(fn).bind({})
    except TypeError:
        raise ValueError(
            f"InProcessServices: operation {name!r} of service {service!r} ({fn!r}) cannot be "
            "called with one argument: an operation here is fn(args) -> result (a simulated "
            "world's is fn(state, args)); wrap it, such as functools.partial(fn, state)"
        ) from None
    except ValueError:
        pass  # a builtin without a signature: trusted


class _Answer:
    """An operation's outcome, once it has run: a result (as JSON) or what it raised."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.text: str | None = None
        self.error: BaseException | None = None

    async def run(self, operation: InProcessOperation, args: dict[str, Any]) -> None:
        try:
            result = operation(args)
            if inspect.isawaitable(result):
                result = await result
            self.text = dumps(result)
        except Exception as error:
            self.error = error
        finally:
            self.done.set()

    def result(self, call: ServiceCall | None = None) -> Any:
        """The answer, for the call that made it or a repeat of its key. An answer not come yet
        (a repeat while the first still runs) is, for the repeat, no answer in time either."""
        if not self.done.is_set():
            raise ServiceUnavailable(
                "the first call with this key is still running; try again later",
                service=call.service if call else "",
                operation=call.operation if call else "",
            )
        if self.error is not None:
            if call is not None and isinstance(self.error, ServiceError):
                _name(self.error, call)
            raise self.error
        assert self.text is not None
        return loads(self.text)


def _seconds(timeout_ms: float | None) -> float:
    return float("inf") if timeout_ms is None else timeout_ms / 1000.0


def _name(error: ServiceError, call: ServiceCall) -> None:
    """An operation's own refusal, named after the call it answered."""
    error.service = error.service or call.service
    error.operation = error.operation or call.operation
