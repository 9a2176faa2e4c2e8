"""The service port over HTTP, with httpx on Trio.

Each service is an endpoint: ``HttpServices({"card": "http://card.internal"})`` sends a call of
``card.charge`` as ``POST http://card.internal/charge`` with the arguments as its JSON body, the
call's idempotency key as the ``Idempotency-Key`` header, and the call's timeout as a deadline on
the whole exchange. What comes back is mapped to the port's outcomes by one rule: did the request
reach the service, and did its answer reach us?

- 2xx: the JSON body (None when empty);
- no connection (refused, DNS, a connect timeout, no free connection in the pool):
  ``ServiceUnavailable``, as the request never left;
- 408, 409, 425, 429, 503: ``ServiceUnavailable``, with ``retry_after_ms`` from ``Retry-After``;
- the deadline passed, or the connection broke after the request was sent: ``ServiceTimedOut``,
  as it may have run;
- 500, 502, 504 and every other 5xx: ``ServiceTimedOut``, as the service failed part-way;
- a 2xx whose body is not JSON: ``ServiceTimedOut``, as it ran but the answer cannot be read;
- any other 4xx (400, 402, 403, 404, 422, ...) and a 3xx (redirects are not followed):
  ``ServiceDeclined``, its ``code`` the body's ``code`` or ``error`` field, else the status.

The simulation cannot see what a real client does inside: its connection pool (a call can wait
for a free connection, counted in its deadline here), retries the client library makes on its own
(httpx makes none unless told; a transport with ``retries=`` retries connects only, which cannot
have run), redirects (not followed: a redirect is a 3xx, declined), and keep-alive connections a
server closed while idle (httpx reconnects before sending).
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from typing import Any

import httpx
import trio

from driver import (
    ServiceCall,
    ServiceDeclined,
    ServiceTimedOut,
    ServiceUnavailable,
    loads,
)

#: Statuses that say "not now": the request was not acted on, and may be sent again.
_NOT_NOW = frozenset({408, 409, 425, 429, 503})
#: The deadline of a call that names none (the port's calls should name theirs).
DEFAULT_TIMEOUT_MS = 30_000.0


class HttpServices:
    """The service port over HTTP endpoints, one base URL per service.

    A call of ``SERVICE.OPERATION`` is ``POST {base}/{OPERATION}`` with the arguments as its JSON
    body and the call's key as the ``Idempotency-Key`` header, bounded as a whole by the call's
    ``timeout_ms``. A 2xx answers with its JSON body; no connection, or 408, 409, 425, 429 and
    503, is ``ServiceUnavailable`` (with ``Retry-After``); the deadline, a connection broken after
    sending, a 5xx or an unreadable 2xx is ``ServiceTimedOut``; any other 4xx (and a 3xx: no
    redirect is followed) is ``ServiceDeclined``, its code the body's ``code`` or ``error``.

    ``client`` is an ``httpx.AsyncClient`` of your own (its transport, TLS, auth headers and pool
    limits); without one, a client is made and closed with ``aclose()`` (or ``async with``)."""

    def __init__(
        self,
        endpoints: Mapping[str, str],
        *,
        client: httpx.AsyncClient | None = None,
        default_timeout_ms: float = DEFAULT_TIMEOUT_MS,
    ) -> None:
        if not isinstance(endpoints, Mapping) or not endpoints:
            raise ValueError(
                f"HttpServices({endpoints!r}): give a dict of service names to base URLs, "
                "such as {'card': 'http://127.0.0.1:8001'}"
            )
        for service, url in endpoints.items():
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError(
                    f"HttpServices: service {service!r} is at {url!r}; give an http:// or "
                    "https:// base URL"
                )
        self._endpoints = {name: url.rstrip("/") for name, url in endpoints.items()}
        self._own_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()
        self._default_timeout_ms = default_timeout_ms

    def __repr__(self) -> str:
        return f"HttpServices({self._endpoints!r})"

    async def __aenter__(self) -> HttpServices:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client, when this made it."""
        if self._own_client:
            await self._client.aclose()

    def provides(self, service: str) -> bool:
        return service in self._endpoints

    async def call(self, call: ServiceCall) -> Any:
        base = self._endpoints.get(call.service)
        if base is None:
            raise ServiceUnavailable(
                f"{call.name}: no endpoint for service {call.service!r} (these have one: "
                f"{', '.join(self._endpoints)})",
                service=call.service,
                operation=call.operation,
            )
        timeout_ms = call.timeout_ms if call.timeout_ms is not None else self._default_timeout_ms
        headers = {} if call.idempotency_key is None else {"Idempotency-Key": call.idempotency_key}
        try:
            with trio.fail_after(timeout_ms / 1000.0):
                response = await self._client.post(
                    f"{base}/{call.operation}",
                    json=dict(call.args),
                    headers=headers,
                    timeout=timeout_ms / 1000.0,
                )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as error:
            raise _unavailable(call, f"could not reach {base} ({_said(error)})") from error
        except (trio.TooSlowError, httpx.TimeoutException) as error:
            raise _timed_out(call, f"no answer within {timeout_ms:g} ms") from error
        except httpx.TransportError as error:
            raise _timed_out(call, f"the connection broke ({_said(error)})") from error
        return _answer(call, response)


def _answer(call: ServiceCall, response: httpx.Response) -> Any:
    status = response.status_code
    if 200 <= status < 300:
        if not response.content:
            return None
        try:
            return loads(response.text)
        except ValueError as error:
            raise _timed_out(
                call, f"answered {status} with a body that is not JSON ({error})"
            ) from None
    if status in _NOT_NOW:
        raise ServiceUnavailable(
            f"{call.name} was refused for now ({status} {response.reason_phrase})",
            service=call.service,
            operation=call.operation,
            retry_after_ms=retry_after_ms(response.headers.get("Retry-After")),
        )
    if status >= 500:
        raise _timed_out(call, f"failed part-way ({status} {response.reason_phrase})")
    code = _code(response)
    raise ServiceDeclined(
        f"{call.name} was declined ({status} {response.reason_phrase}: {code})",
        service=call.service,
        operation=call.operation,
        code=code,
    )


def retry_after_ms(header: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` in ms: a number of seconds, or an HTTP date; None when absent or unreadable
    (a date in the past is 0)."""
    if header is None:
        return None
    text = header.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds * 1000.0)


def _code(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        for field in ("code", "error"):
            if isinstance(body.get(field), str) and body[field]:
                return str(body[field])
    return str(response.status_code)


def _unavailable(call: ServiceCall, what: str) -> ServiceUnavailable:
    return ServiceUnavailable(
        f"{call.name}: {what}; it did not run", service=call.service, operation=call.operation
    )


def _timed_out(call: ServiceCall, what: str) -> ServiceTimedOut:
    return ServiceTimedOut(
        f"{call.name}: {what}; it may have run, or may still run",
        service=call.service,
        operation=call.operation,
    )


def _said(error: Exception) -> str:
    return str(error) or type(error).__name__
