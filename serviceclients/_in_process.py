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
                return loads(self._answered[key])
        try:
            with trio.fail_after(_seconds(call.timeout_ms)):
                result = operation(dict(call.args))
                if inspect.isawaitable(result):
                    result = await result
        except trio.TooSlowError:
            raise ServiceTimedOut(
                f"{call.name} gave no answer within {call.timeout_ms:g} ms",
                service=call.service,
                operation=call.operation,
            ) from None
        except (ServiceDeclined, ServiceUnavailable, ServiceTimedOut) as answered:
            _name(answered, call)
            raise
        text = dumps(result)
        if key is not None:
            self._answered[key] = text
        return loads(text)

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


def _seconds(timeout_ms: float | None) -> float:
    return float("inf") if timeout_ms is None else timeout_ms / 1000.0


def _name(error: ServiceError, call: ServiceCall) -> None:
    """An operation's own refusal, named after the call it answered."""
    error.service = error.service or call.service
    error.operation = error.operation or call.operation
