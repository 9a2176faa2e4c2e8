"""A headless Chromium driven over the DevTools protocol on a pipe, for the timeline page's test.

The pipe (``--remote-debugging-pipe``: Chromium reads commands on fd 3 and writes replies on fd 4,
each message JSON ended by a NUL byte) needs no port, no websocket library and no network. Reads
wait at most :data:`STALL_S` for Chromium to say anything; that is a guard against a hung browser,
not a timed assertion.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path
from types import TracebackType
from typing import Any

#: How long a read may wait for the browser before the test gives up on it.
STALL_S = 60.0

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)


def chromium_path() -> str | None:
    """Debian's ``chromium``, or ``None`` when it is not installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found is not None:
            return found
    return None


def _above_4(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 5)
    os.close(fd)
    return moved


class BrowserError(Exception):
    pass


class Browser:
    """One Chromium process; :meth:`open` gives a :class:`Tab` on a file."""

    def __init__(self, executable: str) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="timeline-chromium-")
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        # Above 4, so that placing one on fd 3 cannot close the other before it moves to fd 4.
        to_child_r, from_child_w = _above_4(to_child_r), _above_4(from_child_w)
        # The child's fd 3 is its command pipe and fd 4 its reply pipe.
        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile.name}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=lambda: (os.dup2(to_child_r, 3), os.dup2(from_child_w, 4), None)[-1],
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=STALL_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self.to_child, self.from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.profile.cleanup()

    def read(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.from_child], [], [], STALL_S)
            if not ready:
                raise BrowserError(f"chromium said nothing for {STALL_S:g} s")
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed its DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        decoded: dict[str, Any] = json.loads(message)
        return decoded

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self.to_child, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.read()
            if reply.get("id") == ident:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        for index, event in enumerate(self.events):
            if event.get("method") == method and event.get("sessionId") == session:
                return self.events.pop(index)
        while True:
            event = self.read()
            if event.get("method") == method and event.get("sessionId") == session:
                return event
            self.events.append(event)

    def open(self, path: Path, *, width: int = 1500, height: int = 1000) -> Tab:
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        tab = Tab(self, session)
        tab.send("Page.enable")
        tab.send("Runtime.enable")
        tab.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        tab.send("Page.navigate", url=path.resolve().as_uri())
        self.wait_for("Page.loadEventFired", session)
        return tab


class Tab:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.send(method, self.session, **params)

    def eval(self, expression: str) -> Any:
        """The JSON value of ``expression`` evaluated in the page."""
        reply = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression[:60]}…: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def errors(self) -> list[str]:
        """What the page's scripts threw, and what they logged as errors, so far."""
        found = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            if event.get("method") == "Runtime.exceptionThrown":
                found.append(str(event["params"]["exceptionDetails"]))
            elif (
                event.get("method") == "Runtime.consoleAPICalled"
                and event["params"].get("type") == "error"
            ):
                found.append(str(event["params"].get("args")))
        return found

    def screenshot(self, *, clip: dict[str, float] | None = None) -> bytes:
        """A PNG of the whole page, or of ``clip`` (page coordinates: x, y, width, height)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": True}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        data = self.send("Page.captureScreenshot", **params)
        return base64.b64decode(data["data"])

    def mouse(self, kind: str, x: float, y: float, **more: Any) -> None:
        self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, **more)

    def settle(self) -> None:
        """Wait until the page has drawn twice: the zoom redraws in an animation frame."""
        self.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def png_pixels(png: bytes) -> list[list[tuple[int, int, int]]]:
    """The RGB rows of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    position, compressed = 8, b""
    width = height = channels = 0
    while position < len(png):
        length = int.from_bytes(png[position : position + 4], "big")
        kind = png[position + 4 : position + 8]
        chunk = png[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            if depth != 8 or interlace != 0 or color not in (2, 6):
                raise ValueError(f"unsupported PNG: depth {depth}, colour {color}")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            compressed += chunk
    raw = zlib.decompress(compressed)
    stride = width * channels
    previous = bytearray(stride)
    rows: list[list[tuple[int, int, int]]] = []
    for index in range(height):
        start = index * (stride + 1)
        kind_of_filter, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind_of_filter == 1:
                line[i] = (line[i] + left) & 255
            elif kind_of_filter == 2:
                line[i] = (line[i] + up) & 255
            elif kind_of_filter == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind_of_filter == 4:
                guess = left + up - corner
                pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
                nearest = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + nearest) & 255
        rows.append([(line[i], line[i + 1], line[i + 2]) for i in range(0, stride, channels)])
        previous = line
    return rows
