"""The URL target: the wire over HTTP/1.1, one keep-alive connection, one deadline per reply.

``http.client`` reads a response through a file over its socket, and a socket's timeout bounds
one read, not the reply: a server that sends its status line and then a byte of its headers every
few seconds never lets a read time out, and would hold the kit for ever. Here every read of that
file, and every send, is given only what is left of one deadline set when the request starts, so
the request, the status line, the headers and the body together take at most the deadline.

Whatever a server does is a ``TargetFailed`` that says what it did, never a traceback: it hangs
up, resets, sends what is not HTTP, a body cut short, a status other than 200 (a redirect too: the
kit follows none, since the wire is served at the URL it was given), or more than the size cap.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
import urllib.parse
from typing import Any, Final

from ._replies import REPLY_DEADLINE, REPLY_MAX_BYTES, TargetFailed, quoted, reply_of
from ._wire import Reply, Request, encode

#: How much of a response other than 200 the kit reads, to quote its start in the report.
_QUOTED_BODY: Final = 300


class _Deadline:
    """When the reply in progress must have arrived, on ``time.monotonic``'s clock."""

    def __init__(self) -> None:
        self.at = 0.0

    def left(self) -> float:
        """The seconds left; a ``TimeoutError`` once there are none."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left


class _HeldSocket:
    """A connected socket (plain or TLS) as ``http.client`` uses it, its every read and send held
    to the deadline.

    As with a socket's own ``makefile``, the socket closes when both it and every reader made of
    it are closed: ``http.client`` closes the connection's socket as soon as a response says the
    server will close, and leaves the response to read the rest."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock = sock
        self._deadline = deadline
        self._readers = 0
        self._closed = False

    def makefile(self, mode: str) -> io.BufferedReader:
        assert mode == "rb", mode  # http.client reads responses only
        self._readers += 1
        return io.BufferedReader(_HeldReader(self))

    def recv_into(self, buffer: Any) -> int:
        self._sock.settimeout(self._deadline.left())
        return self._sock.recv_into(buffer)

    def sendall(self, data: Any) -> None:
        # A send's timeout bounds the whole sendall, so a server that stops reading is held too.
        self._sock.settimeout(self._deadline.left())
        self._sock.sendall(data)

    def reader_closed(self) -> None:
        self._readers -= 1
        if self._closed and not self._readers:
            self._sock.close()

    def close(self) -> None:
        self._closed = True
        if not self._readers:
            self._sock.close()


class _HeldReader(io.RawIOBase):
    """A response's bytes, each read given what is left of the deadline (so no trickle of bytes
    outlasts it)."""

    def __init__(self, sock: _HeldSocket) -> None:
        super().__init__()
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self._sock.reader_closed()
        super().close()


class _Connection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int | None, deadline: _Deadline) -> None:
        super().__init__(host, port)
        self._deadline = deadline

    def connect(self) -> None:
        # http.client turns TCP_NODELAY on: small requests are answered at once, instead of
        # Nagle's algorithm and delayed ACKs holding each round trip for milliseconds.
        self.timeout = self._deadline.left()
        super().connect()
        self.sock = _HeldSocket(self.sock, self._deadline)


class _TlsConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int | None, deadline: _Deadline) -> None:
        super().__init__(host, port)
        self._deadline = deadline

    def connect(self) -> None:
        self.timeout = self._deadline.left()
        super().connect()
        self.sock = _HeldSocket(self.sock, self._deadline)


class UrlTarget:
    """An HTTP server speaking the wire: each request POSTed as JSON, the reply read back.

    ``timeout`` is the deadline for each whole exchange (the request sent, the reply's status,
    headers and body read); ``max_bytes`` caps a reply's body."""

    def __init__(
        self, url: str, *, timeout: float = REPLY_DEADLINE, max_bytes: int = REPLY_MAX_BYTES
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the target URL {url!r} is not http://HOST[:PORT][/PATH]")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"the target URL {url!r} has a port that is not 0 to 65535") from None
        self.name = url
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._deadline = _Deadline()
        connection = _TlsConnection if parts.scheme == "https" else _Connection
        self._connection = connection(parts.hostname, port, self._deadline)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def call(self, request: Request) -> Reply:
        body = encode(request).encode("utf-8")
        self._deadline.at = time.monotonic() + self._timeout
        try:
            text = self._exchange(body, reused=self._connection.sock is not None)
        except TargetFailed:
            self._connection.close()
            raise
        except Exception as error:
            # Whatever the server made http.client raise, the connection's state is unknown.
            self._connection.close()
            failed = self._failure(error)
            if failed is None:
                raise
            raise failed from error
        return reply_of(text, f"the target {self.name}")

    def _exchange(self, body: bytes, *, reused: bool) -> str:
        headers = {"content-type": "application/json"}
        try:
            self._connection.request("POST", self._path, body=body, headers=headers)
            response = self._connection.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
            # A keep-alive connection the server closed between requests: once more on a new
            # one, within the same deadline. Only when no byte of a reply arrived; were the
            # request run twice, the tables compared after it would show it.
            self._connection.close()
            self._connection.request("POST", self._path, body=body, headers=headers)
            response = self._connection.getresponse()
        if response.status != 200:
            raise TargetFailed(self._not_a_reply(response))
        if response.length is not None and response.length > self._max_bytes:
            raise TargetFailed(self._too_long(f"announced a reply of {response.length} bytes"))
        read = response.read(self._max_bytes + 1)
        if len(read) > self._max_bytes:
            raise TargetFailed(self._too_long(f"replied more than {self._max_bytes} bytes"))
        # read() at the end marks the response finished, so the connection takes the next request.
        return (read + response.read()).decode("utf-8", errors="replace")

    def _too_long(self, what: str) -> str:
        return f"the target {self.name} {what}, more than the {self._max_bytes} a reply may take"

    def _not_a_reply(self, response: http.client.HTTPResponse) -> str:
        status = f"HTTP {response.status} {quoted(response.reason)}"
        said = f"the target {self.name} answered {status}, not 200"
        if 300 <= response.status < 400:
            location = response.getheader("location")
            to = "" if location is None else f" to {quoted(location)}"
            return (
                f"{said}: a redirect{to}, which the kit does not follow; point --target at the "
                "URL that serves the wire"
            )
        try:
            start = response.read(_QUOTED_BODY)
        except (OSError, http.client.HTTPException, ValueError):
            start = b""
        body = f", with a body that begins {quoted(start)}" if start else ""
        return (
            f"{said}{body}; a wire reply, a refusal too, is the body of a 200 (the kit POSTs "
            "each request to the URL it was given)"
        )

    def _failure(self, error: Exception) -> TargetFailed | None:
        """What the server did, in words, for an error of the exchange (None: not the server's)."""
        name = f"the target {self.name}"
        if isinstance(error, TimeoutError):
            return TargetFailed(f"{name} did not reply within {self._timeout:g} s")
        if isinstance(error, http.client.RemoteDisconnected):
            return TargetFailed(f"{name} closed the connection without replying")
        if isinstance(error, http.client.IncompleteRead):
            return TargetFailed(f"{name} closed the connection before its reply was whole")
        if isinstance(error, ConnectionResetError | BrokenPipeError):
            return TargetFailed(f"{name} reset the connection ({error.strerror})")
        if isinstance(error, http.client.HTTPException | ValueError):
            # BadStatusLine, LineTooLong, too many headers, a chunk size that is not hex...
            what = f"{type(error).__name__}: {quoted(str(error))}"
            return TargetFailed(f"{name} answered with something that is not HTTP/1.1 ({what})")
        if isinstance(error, OSError):
            return TargetFailed(f"{name} cannot be reached: {error}")
        return None

    def close(self) -> None:
        self._connection.close()
