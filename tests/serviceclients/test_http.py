"""The HTTP adapter against a real HTTP server on localhost: every outcome of the port, from what
the server did (see ``serviceclients/_http.py``'s table)."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from driver import (
    ServiceCall,
    ServiceDeclined,
    ServiceTimedOut,
    ServiceUnavailable,
    service_call,
)
from serviceclients import HttpServices, retry_after_ms

#: What the test server does with a request to a path: status, headers, body (bytes), or a
#: callable that takes the handler and acts on the socket itself.
Behaviour = tuple[int, dict[str, str], bytes] | Callable[[http.server.BaseHTTPRequestHandler], None]


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    behaviours: dict[str, Behaviour]
    seen: list[tuple[str, dict[str, str], Any]]
    release: threading.Event


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"null")
        self.server.seen.append((self.path, dict(self.headers), body))
        behaviour = self.server.behaviours[self.path]
        if callable(behaviour):
            behaviour(self)
            return
        status, headers, content = behaviour
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.behaviours, httpd.seen, httpd.release = {}, [], threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def charge(
    *, key: str | None = "o-1/charge", timeout_ms: float | None = 2_000, operation: str = "charge"
) -> ServiceCall:
    return service_call("01RUN", "card", operation, {"cents": 500}, timeout_ms, key)


def answer(status: int, body: Any = None, **headers: str) -> Behaviour:
    content = b"" if body is None else json.dumps(body).encode()
    return status, {"Content-Type": "application/json", **headers}, content


async def test_a_2xx_returns_its_json_and_the_request_carries_the_args_and_the_key(
    server: _Server,
) -> None:
    server.behaviours["/charge"] = answer(200, {"id": "ch-1"})
    async with HttpServices({"card": url(server)}) as card:
        assert await card.call(charge()) == {"id": "ch-1"}
    path, headers, body = server.seen[0]
    assert (path, body, headers["Idempotency-Key"]) == ("/charge", {"cents": 500}, "o-1/charge")


async def test_an_empty_2xx_is_none_and_a_call_without_a_key_sends_no_key(
    server: _Server,
) -> None:
    server.behaviours["/charge"] = answer(204)
    async with HttpServices({"card": url(server)}) as card:
        assert await card.call(charge(key=None)) is None
    assert "Idempotency-Key" not in server.seen[0][1]


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (402, {"code": "card_declined"}, "card_declined"),
        (422, {"error": "bad_zip"}, "bad_zip"),
        (404, None, "404"),
        (301, None, "301"),
    ],
)
async def test_a_4xx_is_a_decline_with_the_service_code(
    server: _Server, status: int, body: Any, code: str
) -> None:
    server.behaviours["/charge"] = answer(status, body)
    async with HttpServices({"card": url(server)}) as card:
        with pytest.raises(ServiceDeclined) as declined:
            await card.call(charge())
    assert (declined.value.code, declined.value.service, declined.value.operation) == (
        code,
        "card",
        "charge",
    )


@pytest.mark.parametrize("status", [408, 409, 425, 429, 503])
async def test_not_now_statuses_are_unavailable_with_the_retry_after(
    server: _Server, status: int
) -> None:
    server.behaviours["/charge"] = answer(status, None, **{"Retry-After": "2"})
    async with HttpServices({"card": url(server)}) as card:
        with pytest.raises(ServiceUnavailable) as refused:
            await card.call(charge())
    assert refused.value.retry_after_ms == 2_000


@pytest.mark.parametrize("status", [500, 502, 504])
async def test_a_5xx_may_have_run(server: _Server, status: int) -> None:
    server.behaviours["/charge"] = answer(status)
    async with HttpServices({"card": url(server)}) as card:
        with pytest.raises(ServiceTimedOut, match="may have run"):
            await card.call(charge())


async def test_a_2xx_whose_body_is_not_json_may_have_run(server: _Server) -> None:
    server.behaviours["/charge"] = (200, {}, b"<html>ok</html>")
    async with HttpServices({"card": url(server)}) as card:
        with pytest.raises(ServiceTimedOut, match="not JSON"):
            await card.call(charge())


async def test_a_refused_connection_never_left() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with HttpServices({"card": f"http://127.0.0.1:{port}"}) as card:
        with pytest.raises(ServiceUnavailable, match="did not run"):
            await card.call(charge())


async def test_no_answer_within_the_timeout_may_have_run(server: _Server) -> None:
    server.behaviours["/charge"] = lambda handler: handler.server.release.wait(10)  # type: ignore[attr-defined]
    async with HttpServices({"card": url(server)}) as card:
        with pytest.raises(ServiceTimedOut, match="no answer within 50 ms"):
            await card.call(charge(timeout_ms=50))


async def test_a_connection_dropped_after_the_request_may_have_run(server: _Server) -> None:
    def drop(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)

    server.behaviours["/charge"] = drop
    async with HttpServices({"card": url(server)}) as card:
        with pytest.raises(ServiceTimedOut, match="connection broke"):
            await card.call(charge())


def test_retry_after_reads_seconds_and_dates() -> None:
    assert retry_after_ms("1.5") == 1_500
    assert retry_after_ms("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10_000
    assert retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0
    assert retry_after_ms(None) is None
    assert retry_after_ms("soon") is None


def test_bad_endpoints_are_refused_where_they_are_given() -> None:
    with pytest.raises(ValueError, match="give a dict of service names to base URLs"):
        HttpServices({})
    with pytest.raises(ValueError, match=r"'card' is at 'card\.internal'; give an http://"):
        HttpServices({"card": "card.internal"})
