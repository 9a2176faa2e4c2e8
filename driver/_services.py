"""The service port: how a handler calls a system outside its store, the same in every world.

A job exists to change something outside its store (a card provider, a mailer, a CRM). A handler
or a step body calls one through its pass's context, ``await ctx.call_service(SERVICE, OPERATION,
args, timeout_ms=..., idempotency_key=...)``, and the drive hands the call to its
:class:`ServicePort`. Production gives the drive a port over its real clients
(``serviceclients.HttpServices``, ``serviceclients.InProcessServices``, or one of its own); a
simulated world gives it the world's services. The handler is the same code in both, and imports
only this.

A call ends in one of four ways, and each is a different answer for the job:

- a result (JSON);
- :class:`ServiceTimedOut`: no answer came in time, or the connection was lost after the request
  left. The operation MAY HAVE RUN, or may still run: a client's timeout says nothing about the
  provider. Ask it (a lookup by the idempotency key), or repeat the call with the same key;
- :class:`ServiceUnavailable`: refused unrun, for now (an outage, a rate limit, an overloaded
  provider), with the provider's ``retry_after_ms`` when it gave one. Safe to try again later;
- :class:`ServiceDeclined`: an answer, not a failure. The provider looked at the request and said
  no (a card declined, an address refused): it did not run and will not if asked again.

Taking an outage for a decline gives up on orders a retry would have paid; taking a decline for an
outage retries what will never pass; taking a timeout for either pays twice. So they are three
exceptions, under one base, :class:`ServiceError`, for code that truly treats them alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final, Protocol

import attrs

from ._errors import ValidationFailed
from ._json import dumps, loads

#: A service's and an operation's name: one word (a fault plan names a call SERVICE.OPERATION).
_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
#: The longest idempotency key a call may carry (what payment providers accept).
IDEMPOTENCY_KEY_MAX: Final = 255


class ServiceError(Exception):
    """A service call that did not return a result; see its three kinds."""

    def __init__(self, message: str, *, service: str = "", operation: str = "") -> None:
        super().__init__(message)
        self.service = service
        self.operation = operation


class ServiceTimedOut(ServiceError):
    """No answer came within the call's timeout, or the connection was lost after the request
    left: the operation may have run, or may still run."""


class ServiceUnavailable(ServiceError):
    """The service refused the request unrun, for now (an outage, a rate limit): safe to try
    again, after ``retry_after_ms`` when the service said how long (None: it did not say)."""

    def __init__(
        self,
        message: str,
        *,
        service: str = "",
        operation: str = "",
        retry_after_ms: float | None = None,
    ) -> None:
        super().__init__(message, service=service, operation=operation)
        self.retry_after_ms = retry_after_ms


class ServiceDeclined(ServiceError):
    """The service answered no: a permanent, business refusal (a card declined). It did not run,
    and will not if asked again. ``code`` is the service's own reason, when it gave one."""

    def __init__(
        self, message: str, *, service: str = "", operation: str = "", code: str | None = None
    ) -> None:
        super().__init__(message, service=service, operation=operation)
        self.code = code


@attrs.frozen
class ServiceCall:
    """One call, as a handler made it: checked, its arguments a JSON copy."""

    service: str
    operation: str
    args: Mapping[str, Any]
    timeout_ms: float | None
    idempotency_key: str | None
    #: The run whose pass made the call.
    run_id: str

    @property
    def name(self) -> str:
        """``SERVICE.OPERATION``: how traces, fault plans and messages name the call."""
        return f"{self.service}.{self.operation}"


class ServicePort(Protocol):
    """What a drive hands a handler's service calls to."""

    def provides(self, service: str) -> bool:
        """Whether this port reaches ``service`` (a job names the services it uses, and a drive
        refuses it where it is registered when its port lacks one)."""
        ...

    async def call(self, call: ServiceCall) -> Any:
        """Run ``call`` and return its result (JSON), or raise ``ServiceTimedOut``,
        ``ServiceUnavailable`` or ``ServiceDeclined``."""
        ...


def service_call(
    run_id: str,
    service: object,
    operation: object,
    args: object,
    timeout_ms: object,
    idempotency_key: object,
) -> ServiceCall:
    """A handler's call, checked where it is made: a bad value is refused naming the value and
    the remedy, before anything leaves."""
    for what, name in (("service", service), ("operation", operation)):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValidationFailed.at(
                f"call_service.{what}",
                f"is {name!r}; name it with one word of letters, digits, '_' or '-'",
            )
    assert isinstance(service, str)
    assert isinstance(operation, str)
    where = f"call_service({service!r}, {operation!r})"
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise ValidationFailed.at(
            f"{where}.args", f"is {args!r}; give a dict of JSON-safe arguments, or None"
        )
    try:
        copied = loads(dumps(dict(args)))
    except (TypeError, ValueError) as error:
        raise ValidationFailed.at(
            f"{where}.args", f"is not JSON-safe ({error}): a service call carries JSON"
        ) from None
    if timeout_ms is not None and not (
        isinstance(timeout_ms, int | float)
        and not isinstance(timeout_ms, bool)
        and math.isfinite(timeout_ms)
        and 0 < timeout_ms <= 86_400_000
    ):
        raise ValidationFailed.at(
            f"{where}.timeout_ms",
            f"is {timeout_ms!r}; give a number of ms above 0 and at most a day, or None",
        )
    if idempotency_key is not None and not (
        isinstance(idempotency_key, str) and 0 < len(idempotency_key) <= IDEMPOTENCY_KEY_MAX
    ):
        raise ValidationFailed.at(
            f"{where}.idempotency_key",
            f"is {idempotency_key!r}; give a non-empty str of at most {IDEMPOTENCY_KEY_MAX} "
            "characters that names the effect, such as f'{order}/charge' (a key a repeat of the "
            "call builds the same way), or None",
        )
    return ServiceCall(
        service=service,
        operation=operation,
        args=copied,
        timeout_ms=None if timeout_ms is None else float(timeout_ms),
        idempotency_key=idempotency_key,
        run_id=run_id,
    )
