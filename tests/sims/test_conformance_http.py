"""The kit against HTTP servers that misbehave: every one ends in a FAILED line that names what the
server did and the seed, never a hang or a traceback.

Each server is real (a socket on 127.0.0.1, served by a thread the test starts) and does one wrong
thing on purpose. The kit's deadline is the one place real time is right, so the tests that need
it make it a fraction of a second; every other server answers at once. A server that trickles
stops by itself after a few seconds, so a kit that did not cut it off fails its test instead of
hanging the suite.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sims.cli._main import main
from sims.conformance import (
    CommandTarget,
    ConformanceReport,
    ReferenceStore,
    TargetFailed,
    UrlTarget,
    replay_history,
    run_conformance,
)

#: How long a trickling server keeps it up before it gives up by itself (a kit that was not cut
#: off at its deadline then fails its test on the time it took, instead of hanging).
TRICKLE_FOR = 3.0
#: The kit's deadline in the tests that need one.
DEADLINE = 0.3

Handler = Callable[[socket.socket, threading.Event], None]


class Server:
    """A TCP server on 127.0.0.1 whose every connection ``handler`` serves, in its own thread."""

    def __init__(self, handler: Handler) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._handler = handler
        self.stop = threading.Event()
        self.connections = 0
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/wire"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, connection: socket.socket) -> None:
        # An OSError is the kit hanging up on the server: what it is for.
        with connection, contextlib.suppress(OSError):
            self._handler(connection, self.stop)

    def close(self) -> None:
        self.stop.set()
        self._accepting.join()
        for thread in self._threads:
            thread.join()
        self._listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], Server]]:
    started: list[Server] = []

    def start(handler: Handler) -> Server:
        server = Server(handler)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def read_request(connection: socket.socket) -> bytes | None:
    """One HTTP request's body (None when the client closed the connection)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(65536)
    return body


def response(body: bytes, head: str = "HTTP/1.1 200 OK") -> bytes:
    return f"{head}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def trickling(sent_first: bytes) -> Handler:
    """A server that reads the request, sends ``sent_first``, then one more byte every 20 ms."""

    def handler(connection: socket.socket, stop: threading.Event) -> None:
        read_request(connection)
        connection.sendall(sent_first)
        ends = time.monotonic() + TRICKLE_FOR
        while not stop.wait(0.02) and time.monotonic() < ends:
            connection.sendall(b"X")

    return handler


def _run(url: str, **options: Any) -> ConformanceReport:
    """Three histories against the URL (seed 7), the target closed afterwards."""
    target = UrlTarget(url, **options)
    try:
        return run_conformance(target, examples=3, seed=7)
    finally:
        target.close()


def _failed(report_lines: list[str], seed: int) -> str:
    """The reason of a FAILED report, after checking that the report names the seed."""
    first, second = report_lines[:2]
    assert first.startswith("conformance: FAILED — ")
    assert second == (
        "conformance: before that, compared 0 histories, 0 operations, both tables compared "
        f"after each; seed {seed} (--seed {seed} repeats it)"
    )
    return first.removeprefix("conformance: FAILED — ")


@pytest.mark.parametrize(
    "sent_first",
    [b"", b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"],
    ids=["status line", "headers", "body"],
)
def test_one_deadline_covers_the_whole_reply(
    serve: Callable[[Handler], Server], sent_first: bytes
) -> None:
    # A byte every 20 ms never leaves one read waiting long: only a deadline for the whole reply,
    # status line and headers included, stops it.
    server = serve(trickling(sent_first))
    began = time.monotonic()
    report = _run(server.url, timeout=DEADLINE)
    took = time.monotonic() - began
    assert _failed(report.lines(), 7) == f"the target {server.url} did not reply within 0.3 s"
    assert took < DEADLINE + 1.0


def _wire_server(*, hang_up_from: int | None = None, close_each: bool = False) -> Handler:
    """The reference served over HTTP. ``hang_up_from``: from that request on (counted over all
    connections, from 1), read the request and hang up without a reply. ``close_each``: close
    each connection after one reply, as a server with a short keep-alive does."""
    served = [0]
    stores: list[ReferenceStore] = []
    lock = threading.Lock()
    # The store's SQLite connections belong to the thread that made them, and each connection
    # is served by a thread of its own: every call goes to the one thread that owns the store.
    owner = concurrent.futures.ThreadPoolExecutor(max_workers=1)

    def call(body: bytes) -> Any:
        if not stores:
            stores.append(ReferenceStore())
        return stores[0].call(json.loads(body))

    def handler(connection: socket.socket, stop: threading.Event) -> None:
        while (body := read_request(connection)) is not None:
            with lock:
                served[0] += 1
                if hang_up_from is not None and served[0] >= hang_up_from:
                    return
            reply = owner.submit(call, body).result()
            connection.sendall(response(json.dumps(reply).encode()))
            if close_each:
                return

    return handler


def test_a_server_that_closes_each_connection_after_a_reply_is_reconnected_to(
    serve: Callable[[Handler], Server],
) -> None:
    # A keep-alive connection closed between requests is no failure: the kit connects again.
    server = serve(_wire_server(close_each=True))
    report = _run(server.url)
    assert report.ok, report.lines()
    assert server.connections > 3


def test_a_server_that_reads_a_request_and_hangs_up_is_a_failed_line(
    serve: Callable[[Handler], Server], capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(_wire_server(hang_up_from=1))
    assert main(["conformance", "--target", server.url, "--examples", "3", "--seed", "7"]) == 1
    out = capsys.readouterr().out
    reason = _failed(out.splitlines(), 7)
    assert reason == f"the target {server.url} closed the connection without replying"
    # On a new connection a hang-up is not a keep-alive that timed out: it is not sent again.
    assert server.connections == 1


def test_a_hang_up_on_a_kept_alive_connection_is_tried_once_more_then_failed(
    serve: Callable[[Handler], Server],
) -> None:
    # hello is answered; the next request is read and hung up on, on the connection hello used
    # and on the new one the kit opens for it.
    server = serve(_wire_server(hang_up_from=2))
    report = _run(server.url)
    assert report.failure == f"the target {server.url} closed the connection without replying"
    assert report.histories == 1
    assert report.operations == 0
    assert server.connections == 2


def _answering(reply: bytes) -> Handler:
    def handler(connection: socket.socket, stop: threading.Event) -> None:
        read_request(connection)
        connection.sendall(reply)
        stop.wait(TRICKLE_FOR)  # held open: only the reply says what the server did

    return handler


def test_a_redirect_is_a_failed_line_that_names_where_it_points(
    serve: Callable[[Handler], Server], capsys: pytest.CaptureFixture[str]
) -> None:
    redirect = b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/elsewhere\r\n"
    server = serve(_answering(redirect + b"Content-Length: 0\r\n\r\n"))
    assert main(["conformance", "--target", server.url, "--examples", "3", "--seed", "7"]) == 1
    captured = capsys.readouterr()
    assert captured.err == ""
    assert _failed(captured.out.splitlines(), 7) == (
        f"the target {server.url} answered HTTP 302 'Found', not 200: a redirect to "
        "'http://127.0.0.1:1/elsewhere', which the kit does not follow; point --target at the "
        "URL that serves the wire"
    )


@pytest.mark.parametrize(
    ("head", "body", "said"),
    [
        ("HTTP/1.1 500 Internal Server Error", b"boom", "500 'Internal Server Error'"),
        ("HTTP/1.1 404 Not Found", b"", "404 'Not Found'"),
        # A refusal is a 200 too: a JSON reply under another status is still not a reply.
        ("HTTP/1.1 400 Bad Request", b'{"ok":true,"result":{"wire":1}}', "400 'Bad Request'"),
        ("HTTP/1.1 204 No Content", b"", "204 'No Content'"),
        ("HTTP/1.1 301 Moved Permanently", b"", "301 'Moved Permanently'"),
    ],
)
def test_any_status_other_than_200_is_a_failed_line(
    serve: Callable[[Handler], Server], head: str, body: bytes, said: str
) -> None:
    server = serve(_answering(response(body, head)))
    reason = _failed(_run(server.url).lines(), 7)
    assert reason.startswith(f"the target {server.url} answered HTTP {said}, not 200")
    if body:
        assert f", with a body that begins {body!r}; " in reason
    assert "not JSON" not in reason


@pytest.mark.parametrize(
    ("sent", "reason"),
    [
        (
            b"SSH-2.0-OpenSSH_9.6\r\n",
            "answered with something that is not HTTP/1.1 (BadStatusLine: "
            "'SSH-2.0-OpenSSH_9.6\\r\\n')",
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n",
            "answered with something that is not HTTP/1.1 (LineTooLong: "
            "'got more than 65536 bytes when reading header line')",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 10,
            "closed the connection before its reply was whole",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "closed the connection before its reply was whole",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n",
            "announced a reply of 1000000000 bytes, more than the 1000 a reply may take",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n" + b" " * 4096,
            "replied more than 1000 bytes, more than the 1000 a reply may take",
        ),
        (response(b""), "replied with something that is not JSON: ''"),
        (
            response(b'{"ok":false,"error":"boom"}'),
            'replied \'{"ok":false,"error":"boom"}\', which is not a wire reply: it refuses '
            "without an error object",
        ),
    ],
    ids=[
        "not HTTP",
        "header too long",
        "body cut short",
        "bad chunk",
        "announced too long",
        "too long",
        "empty 200",
        "error not an object",
    ],
)
def test_a_reply_that_is_not_one_is_a_failed_line(
    serve: Callable[[Handler], Server], sent: bytes, reason: str
) -> None:
    # The server hangs up after what it sent (so a body cut short is one).
    def handler(connection: socket.socket, stop: threading.Event) -> None:
        read_request(connection)
        connection.sendall(sent)

    server = serve(handler)
    report = _run(server.url, max_bytes=1000)
    assert _failed(report.lines(), 7) == f"the target {server.url} {reason}"


def test_what_a_server_says_is_shown_as_data(serve: Callable[[Handler], Server]) -> None:
    # A reason phrase and a body that would clear the screen and retitle the terminal.
    head = "HTTP/1.1 500 \x1b[2J\x1b]0;owned\x07"
    server = serve(_answering(response(b"\x1b[31mred\x9b", head)))
    report = _run(server.url)
    reason = _failed(report.lines(), 7)
    assert reason.startswith(
        f"the target {server.url} answered HTTP 500 '\\x1b[2J\\x1b]0;owned\\x07', not 200, with "
        "a body that begins b'\\x1b[31mred\\x9b'; "
    )
    assert all(line.isprintable() for line in report.lines())


def test_a_server_that_is_not_there_is_a_failed_line() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    listener.close()
    report = _run(url)
    assert _failed(report.lines(), 7).startswith(f"the target {url} cannot be reached: ")


def test_a_url_whose_port_is_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "http://127.0.0.1:99999/"
    assert main(["conformance", "--target", url, "--examples", "3"]) == 2
    assert capsys.readouterr().err == (
        f"error: the target URL {url!r} has a port that is not 0 to 65535\n"
    )


def test_a_command_that_stops_reading_its_requests_fails_at_the_deadline() -> None:
    # It answers hello, then reads nothing more: a request longer than the pipe holds would wait
    # for ever to be written. It ends by itself after a while, so a kit that waited fails here.
    source = (
        "import sys, time\n"
        "sys.stdin.readline()\n"
        'sys.stdout.write(\'{"ok":true,"result":{"wire":1,"store":"deaf"}}\\n\')\n'
        "sys.stdout.flush()\n"
        f"time.sleep({TRICKLE_FOR})\n"
    )
    target = CommandTarget(f"{sys.executable} -c {shlex.quote(source)}", timeout=DEADLINE)
    key = {"module_id": "m1", "job": "walk", "instance": "default"}
    row: dict[str, Any] = {
        "id": "r01", **key, "payload": json.dumps({"pad": "x" * 1_000_000}), "subject_id": None,
        "status": "running", "cursor": None, "counters": "{}", "attempts": 0,
        "last_error": None, "started_at": "2026-10-04T12:00:00.000Z",
        "updated_at": "2026-10-04T12:00:00.000Z", "next_attempt_at": None, "ended_at": None,
        "lease_owner": None, "lease_began_at": None, "admission_misses": None,
    }  # fmt: skip
    start = {
        "op": "start_or_join",
        "scope": "a",
        "now": "2026-10-04T12:00:00.000Z",
        "args": {"key": key, "row": row},
    }
    began = time.monotonic()
    report = replay_history([start], target=target)
    took = time.monotonic() - began
    target._process.kill()  # the test's own process: nothing to wait for
    target.close()
    assert report.failure == (
        f"the target command {target.name!r} did not reply within 0.3 s; it is still running"
    )
    assert took < DEADLINE + 1.0


def test_a_target_failing_is_raised_as_target_failed_by_the_target_itself(
    serve: Callable[[Handler], Server],
) -> None:
    # For a caller of UrlTarget of its own (WorkerdTarget is one): never an http.client error.
    server = serve(_wire_server(hang_up_from=1))
    target = UrlTarget(server.url)
    with pytest.raises(TargetFailed, match=r"closed the connection without replying$"):
        target.call({"wire": 1, "op": "hello"})
    target.close()
