"""Targets: the store the kit holds against the reference, reached over the wire.

- ``COMMAND``: a process the kit starts; one request per line on its stdin, one reply per line on
  its stdout, in order (newline-delimited JSON).
- ``URL``: an HTTP server; each request is POSTed to the URL as a JSON body, the reply is the JSON
  body of the response. One keep-alive connection, loopback or anywhere the user points it.
- ``workerd``: the repository's own JavaScript worker (``conformance/workerd/``), one SQLite-backed
  Durable Object per scope, run by workerd from the pinned npm packages on loopback. The kit
  installs them with ``npm ci`` when they are missing, starts workerd on a free port with a fresh
  folder for the objects' databases, and stops it afterwards.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import IO, Any, Final, Protocol

from ._wire import WIRE_VERSION, ReferenceStore, Reply, Request, encode

#: The repository's workerd target: the worker, its configuration and its pinned npm packages.
WORKERD_FOLDER: Final = Path(__file__).resolve().parents[2] / "conformance" / "workerd"


class TargetFailed(Exception):
    """The target stopped answering on the wire (it crashed, hung up, or replied with non-JSON)."""


#: The most a target may take to send one whole reply, in seconds (not per read: a target that
#: trickles a byte at a time must not hold the kit for ever).
REPLY_DEADLINE: Final = 30.0
#: The longest reply the kit reads. The reference's replies are kilobytes; this is far past any.
REPLY_MAX_BYTES: Final = 64 * 1024 * 1024
#: The deepest nesting a reply may have. The reference's replies nest five levels (reply, tables,
#: runs, row); the comparison walks replies recursively and must not run out of stack.
REPLY_MAX_DEPTH: Final = 64


def _depth_past(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` levels (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


class Target(Protocol):
    """A store the kit can send wire requests to."""

    @property
    def name(self) -> str: ...

    def call(self, request: Request) -> Reply: ...

    def close(self) -> None: ...


class LocalTarget:
    """A store in this process (a ``ReferenceStore``, possibly over a planted bug)."""

    def __init__(self, store: ReferenceStore, *, name: str = "local") -> None:
        self._store = store
        self.name = name

    def call(self, request: Request) -> Reply:
        # Through JSON both ways, as any other target is reached, so nothing Python-only leaks.
        reply = self._store.call(json.loads(encode(request)))
        decoded: Reply = json.loads(encode(reply))
        return decoded

    def close(self) -> None:
        self._store.close()


def _reply_of(text: str, source: str) -> Reply:
    try:
        reply = json.loads(text)
    except ValueError as error:
        raise TargetFailed(
            f"{source} replied with something that is not JSON: {text[:200]!r}"
        ) from (error)
    except RecursionError:
        raise TargetFailed(
            f"{source} replied with JSON nested too deep to read (a wire reply nests at most "
            f"{REPLY_MAX_DEPTH} levels): {text[:200]!r}"
        ) from None
    if _depth_past(reply, REPLY_MAX_DEPTH):
        raise TargetFailed(
            f"{source} replied with JSON nested deeper than {REPLY_MAX_DEPTH} levels, which no "
            f"wire reply does: {text[:200]!r}"
        )
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise TargetFailed(f"{source} replied {text[:200]!r}, which is not a wire reply")
    return reply


class CommandTarget:
    """A process speaking the wire on stdin and stdout, one JSON line each way.

    Replies are read from the raw pipe with a deadline for the whole reply (``timeout`` seconds)
    and a size cap (``max_bytes``), so an adapter that hangs, trickles or floods fails the run
    with a message instead of hanging the kit."""

    def __init__(
        self,
        command: str,
        *,
        timeout: float = REPLY_DEADLINE,
        max_bytes: int = REPLY_MAX_BYTES,
    ) -> None:
        argv = shlex.split(command)
        if not argv:
            raise ValueError("the target command is empty; pass the command that serves the wire")
        self.name = command
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._pending = b""
        # Held open for the process's life, closed in close(): not a with-block's lifetime.
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        try:
            self._process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
            )
        except OSError as error:
            self._stderr.close()
            raise ValueError(f"cannot start the target command {command!r}: {error}") from error
        stdin, stdout = self._process.stdin, self._process.stdout
        # Both were asked for as pipes.
        assert stdin is not None
        assert stdout is not None
        self._in: IO[bytes] = stdin
        self._out = stdout.fileno()

    def _died(self, what: str) -> TargetFailed:
        try:
            code: int | None = self._process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        self._stderr.seek(0)
        tail = self._stderr.read()[-2000:].strip()
        status = "is still running" if code is None else f"exited with code {code}"
        return TargetFailed(
            f"the target command {self.name!r} {what}; it {status}"
            + (f"; its stderr ends:\n{tail}" if tail else "")
        )

    def _line(self) -> bytes:
        deadline = time.monotonic() + self._timeout
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                raise self._died(f"did not reply within {self._timeout:g} s")
            chunk = os.read(self._out, 1 << 16)
            if not chunk:
                raise self._died("closed its output before replying")
            self._pending += chunk
            if len(self._pending) > self._max_bytes and b"\n" not in self._pending:
                raise self._died(
                    f"replied more than {self._max_bytes} bytes without ending the line"
                )
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def call(self, request: Request) -> Reply:
        try:
            self._in.write((encode(request) + "\n").encode("utf-8"))
            self._in.flush()
        except OSError as error:
            raise self._died(f"stopped reading requests ({error})") from error
        line = self._line()
        source = f"the target command {self.name!r}"
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as error:
            raise TargetFailed(f"{source} replied with a line that is not UTF-8") from error
        return _reply_of(text, source)

    def close(self) -> None:
        # Closing its stdin is the adapter's signal to finish; one that does not is killed.
        with contextlib.suppress(OSError):
            self._in.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()


class _NoDelay(http.client.HTTPConnection):
    # Small requests answered at once: without TCP_NODELAY, Nagle's algorithm and delayed ACKs
    # hold each round trip for milliseconds, which is most of the kit's time against a server.
    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _NoDelayTls(http.client.HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class UrlTarget:
    """An HTTP server speaking the wire: each request POSTed as JSON, the reply read back."""

    def __init__(
        self, url: str, *, timeout: float = REPLY_DEADLINE, max_bytes: int = REPLY_MAX_BYTES
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the target URL {url!r} is not http://HOST[:PORT][/PATH]")
        self.name = url
        self._timeout = timeout
        self._max_bytes = max_bytes
        connection = _NoDelayTls if parts.scheme == "https" else _NoDelay
        self._connection = connection(parts.hostname, parts.port, timeout=timeout)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def call(self, request: Request) -> Reply:
        body = encode(request).encode("utf-8")
        headers = {"content-type": "application/json"}
        for attempt in (1, 2):
            try:
                deadline = time.monotonic() + self._timeout
                self._connection.request("POST", self._path, body=body, headers=headers)
                response = self._connection.getresponse()
                text = self._read(response, deadline).decode("utf-8", errors="replace")
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A keep-alive connection the server closed between requests: reconnect once.
                # Only before any byte of a reply arrived, so the request cannot have run twice
                # in a way the kit would not see (the tables are compared after every request).
                self._connection.close()
                if attempt == 2:
                    raise
            except TimeoutError:
                self._connection.close()
                raise TargetFailed(
                    f"the target {self.name} did not reply within {self._timeout:g} s"
                ) from None
            except OSError as error:
                raise TargetFailed(f"the target {self.name} cannot be reached: {error}") from error
        return _reply_of(text, f"the target {self.name}")

    def _read(self, response: http.client.HTTPResponse, deadline: float) -> bytes:
        """The response's body, read whole by ``deadline`` and no longer than the cap."""
        body = b""
        while True:
            left = deadline - time.monotonic()
            sock = self._connection.sock
            if left <= 0:
                raise TimeoutError
            if sock is not None:
                sock.settimeout(left)
            chunk = response.read1(1 << 16)
            body += chunk
            if not chunk or response.length == 0:
                # read() at the end marks the response finished, so the keep-alive connection
                # takes the next request.
                return body + response.read()
            if len(body) > self._max_bytes:
                self._connection.close()
                raise TargetFailed(
                    f"the target {self.name} replied more than {self._max_bytes} bytes"
                )

    def close(self) -> None:
        self._connection.close()


def _npm_ci(folder: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ValueError(
            "the workerd target needs npm (Node 20 or later) to install its pinned packages; "
            "install Node.js, or run the kit against another target"
        )
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ValueError(
            f"npm ci in {folder} failed with code {done.returncode}:\n{done.stderr.strip()}"
        )


def _pinned(folder: Path) -> str | None:
    lock = json.loads((folder / "package-lock.json").read_text(encoding="utf-8"))
    version = lock.get("packages", {}).get("node_modules/workerd", {}).get("version")
    return version if isinstance(version, str) else None


def _installed(folder: Path) -> str | None:
    # A checkout whose lock moved on since the last install gets the pinned version again.
    try:
        found = json.loads((folder / "node_modules" / "workerd" / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = found.get("version")
    return version if isinstance(version, str) else None


def workerd_binary(folder: Path = WORKERD_FOLDER) -> Path:
    """The pinned workerd binary, installed with ``npm ci`` first if it is not there yet."""
    if not (folder / "package-lock.json").is_file():
        raise ValueError(
            f"the workerd target's folder {folder} is missing; it ships in the repository, "
            "so run the kit from a checkout of it"
        )
    binary = folder / "node_modules" / ".bin" / "workerd"
    if not binary.exists() or _installed(folder) != _pinned(folder):
        _npm_ci(folder)
    if not binary.exists():
        raise ValueError(f"npm ci in {folder} did not install workerd at {binary}")
    return binary


def _memory_folder() -> str | None:
    # The objects' SQLite files are thrown away after the run: on a memory file system their
    # syncs cost nothing, which is most of what a Durable Object's write costs on a disk.
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


class WorkerdTarget:
    """workerd serving ``conformance/workerd/worker.js`` on a loopback port, for this kit run."""

    name: Final = "workerd"

    def __init__(self, *, folder: Path = WORKERD_FOLDER) -> None:
        binary = workerd_binary(folder)
        self._scopes = tempfile.TemporaryDirectory(prefix="jobrun-workerd-", dir=_memory_folder())
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in close())
        control_read, control_write = os.pipe()
        try:
            self._process = subprocess.Popen(
                [
                    str(binary),
                    "serve",
                    str(folder / "config.capnp"),
                    "--socket-addr",
                    "http=127.0.0.1:0",
                    "--directory-path",
                    f"scopes={self._scopes.name}",
                    f"--control-fd={control_write}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                pass_fds=(control_write,),
            )
        finally:
            os.close(control_write)
        try:
            port = self._listening_port(control_read)
        except BaseException:
            self.close()
            raise
        finally:
            os.close(control_read)
        self._url = UrlTarget(f"http://127.0.0.1:{port}/")
        hello = self._url.call({"wire": WIRE_VERSION, "op": "hello"})
        if hello.get("result", {}).get("wire") != WIRE_VERSION:
            self.close()
            raise TargetFailed(f"workerd answered hello with {hello!r}")

    def _listening_port(self, control_read: int) -> int:
        # workerd writes one JSON line per event on the control fd; "listen" carries the port it
        # bound (we asked for port 0, so no two kit runs can collide on a fixed port).
        with os.fdopen(os.dup(control_read), "r", encoding="utf-8") as control:
            for line in control:
                event: dict[str, Any] = json.loads(line)
                if event.get("event") == "listen" and event.get("socket") == "http":
                    return int(event["port"])
        self._log.seek(0)
        raise TargetFailed(
            f"workerd exited before it listened (code {self._process.wait()}); "
            f"its log:\n{self._log.read()[-3000:]}"
        )

    def call(self, request: Request) -> Reply:
        try:
            return self._url.call(request)
        except TargetFailed as error:
            self._log.seek(0)
            raise TargetFailed(f"{error}; workerd's log ends:\n{self._log.read()[-3000:]}") from (
                error
            )

    def close(self) -> None:
        url = getattr(self, "_url", None)
        if url is not None:
            url.close()
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()
        self._scopes.cleanup()


def open_target(spec: str) -> Target:
    """``workerd``, an ``http(s)://`` URL, or a command line, as ``--target`` takes them."""
    if spec == "workerd":
        return WorkerdTarget()
    if spec.startswith(("http://", "https://")):
        return UrlTarget(spec)
    return CommandTarget(spec)
