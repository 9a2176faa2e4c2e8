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
import json
import os
import select
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Final, Protocol

from ._http import UrlTarget
from ._replies import (
    REPLY_DEADLINE,
    REPLY_MAX_BYTES,
    REPLY_MAX_DEPTH,
    TargetFailed,
    escaped_lines,
    quoted,
    reply_of,
)
from ._wire import WIRE_VERSION, ReferenceStore, Reply, Request, encode

__all__ = [
    "REPLY_DEADLINE",
    "REPLY_MAX_BYTES",
    "REPLY_MAX_DEPTH",
    "WORKERD_FOLDER",
    "CommandTarget",
    "LocalTarget",
    "Target",
    "TargetFailed",
    "UrlTarget",
    "WorkerdTarget",
    "open_target",
    "workerd_binary",
]

#: The repository's workerd target: the worker, its configuration and its pinned npm packages.
WORKERD_FOLDER: Final = Path(__file__).resolve().parents[2] / "conformance" / "workerd"


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


class CommandTarget:
    """A process speaking the wire on stdin and stdout, one JSON line each way.

    Each exchange (the request written, the reply read) has a deadline (``timeout`` seconds) and
    the reply a size cap (``max_bytes``), so an adapter that stops reading, hangs, trickles or
    floods fails the run with a message instead of hanging the kit."""

    def __init__(
        self,
        command: str,
        *,
        timeout: float = REPLY_DEADLINE,
        max_bytes: int = REPLY_MAX_BYTES,
    ) -> None:
        try:
            argv = shlex.split(command)
        except ValueError as error:
            # shlex's own words ("No closing quotation") name neither the target nor the remedy.
            raise ValueError(
                f"the target command {command!r} cannot be split into words as a shell would "
                f"({error}); close its quotes, or escape a lone quote with a backslash"
            ) from None
        if not argv:
            raise ValueError("the target command is empty; pass the command that serves the wire")
        self.name = command
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._pending = b""
        # Held open for the process's life, closed in close(): not a with-block's lifetime.
        self._stderr = tempfile.TemporaryFile(mode="w+", errors="replace")  # noqa: SIM115
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
        # Written without blocking: an adapter that stops reading its stdin fills the pipe, and a
        # blocking write would then wait for ever.
        os.set_blocking(stdin.fileno(), False)
        self._out = stdout.fileno()

    def _died(self, what: str, *, exited: bool = True) -> TargetFailed:
        """The failure, with the adapter's exit code and the end of its stderr. ``exited``: the
        adapter closed a pipe, so it is likely ending (waited for briefly); else only looked at."""
        code = self._process.poll()
        if code is None and exited:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self._process.wait(timeout=2)
        self._stderr.seek(0)
        tail = escaped_lines(self._stderr.read()[-2000:].strip())
        status = "is still running" if code is None else f"exited with code {code}"
        return TargetFailed(
            f"the target command {self.name!r} {what}; it {status}"
            + (f"; its stderr ends:\n{tail}" if tail else "")
        )

    def _late(self) -> TargetFailed:
        return self._died(f"did not reply within {self._timeout:g} s", exited=False)

    def _send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [self._in], [], left)[1]:
                raise self._late()
            try:
                written = os.write(self._in.fileno(), view)
            except BlockingIOError:
                continue
            except OSError as error:
                raise self._died(f"stopped reading requests ({error.strerror})") from error
            view = view[written:]

    def _line(self, deadline: float) -> bytes:
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                raise self._late()
            chunk = os.read(self._out, 1 << 16)
            if not chunk:
                raise self._died("closed its output before replying")
            self._pending += chunk
            if len(self._pending) > self._max_bytes and b"\n" not in self._pending:
                raise self._died(
                    f"replied more than {self._max_bytes} bytes without ending the line",
                    exited=False,
                )
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def call(self, request: Request) -> Reply:
        deadline = time.monotonic() + self._timeout
        self._send((encode(request) + "\n").encode("utf-8"), deadline)
        line = self._line(deadline)
        source = f"the target command {self.name!r}"
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise TargetFailed(
                f"{source} replied with a line that is not UTF-8: {quoted(line)}"
            ) from None
        return reply_of(text, source)

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
        self._log = tempfile.TemporaryFile(mode="w+", errors="replace")  # noqa: SIM115 (closed in close())
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
        try:
            hello = self.call({"wire": WIRE_VERSION, "op": "hello"})
        except BaseException:
            self.close()
            raise
        result = hello.get("result")
        if not isinstance(result, dict) or result.get("wire") != WIRE_VERSION:
            self.close()
            raise TargetFailed(f"workerd answered hello with {quoted(json.dumps(hello))}")

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
            f"its log:\n{escaped_lines(self._log.read()[-3000:])}"
        )

    def call(self, request: Request) -> Reply:
        try:
            return self._url.call(request)
        except TargetFailed as error:
            self._log.seek(0)
            tail = escaped_lines(self._log.read()[-3000:])
            raise TargetFailed(f"{error}; workerd's log ends:\n{tail}") from error

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
