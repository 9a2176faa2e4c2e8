"""The kit survives any target, and the reference server any input: a target that trickles,
floods, nests deep or answers differently each time ends in a report, never a hang or a traceback.

The targets here are tiny scripts that misbehave on purpose. The deadlines they meet are made
short (a fraction of a second) by the test; none of them ever answers in time, so no outcome
depends on how fast the machine is.
"""

from __future__ import annotations

import io
import json
import shlex
import socket
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from sims.conformance import (
    CommandTarget,
    LocalTarget,
    ReferenceStore,
    TargetFailed,
    UrlTarget,
    replay_history,
    run_conformance,
    serve_lines,
)

HELLO = '{"ok":true,"result":{"wire":1,"store":"hostile"}}'


def _script(body: str) -> str:
    """A COMMAND target: answers hello, then does ``body`` with the next request."""
    source = (
        "import select, sys, time\n"
        "sys.stdin.readline()\n"
        f"sys.stdout.write({HELLO!r} + '\\n'); sys.stdout.flush()\n"
        "sys.stdin.readline()\n"
        f"{body}\n"
    )
    return f"{sys.executable} -c {shlex.quote(source)}"


#: Waits until the kit closes stdin, so the process ends with the kit and never lingers.
_UNTIL_CLOSED = "sys.stdin.read()"


def test_a_target_that_trickles_fails_at_the_whole_reply_deadline() -> None:
    # A byte every 50 ms never leaves a read waiting long: only a deadline for the whole reply
    # stops it.
    trickle = (
        "while not select.select([sys.stdin], [], [], 0.05)[0]:\n"
        "    sys.stdout.write(' '); sys.stdout.flush()"
    )
    target = CommandTarget(_script(trickle), timeout=0.5)
    report = run_conformance(target, examples=3, seed=1)
    target.close()
    assert report.failure is not None
    assert "did not reply within 0.5 s" in report.failure


def test_a_target_that_floods_fails_at_the_size_cap() -> None:
    flood = f"sys.stdout.write('x' * 50_000); sys.stdout.flush(); {_UNTIL_CLOSED}"
    target = CommandTarget(_script(flood), max_bytes=10_000)
    report = run_conformance(target, examples=3, seed=1)
    target.close()
    assert report.failure is not None
    assert "replied more than 10000 bytes without ending the line" in report.failure


def test_a_reply_nested_deep_fails_the_run_with_a_report() -> None:
    deep = (
        "sys.stdout.write('{\"ok\":true,\"result\":' + '[' * 100_000 + ']' * 100_000 + '}\\n'); "
        f"sys.stdout.flush(); {_UNTIL_CLOSED}"
    )
    report = run_conformance(_script(deep), examples=3, seed=1)
    assert report.failure is not None
    assert "nested too deep to read" in report.failure
    shallow_but_deep = (
        "sys.stdout.write('{\"ok\":true,\"result\":' + '[' * 100 + ']' * 100 + '}\\n'); "
        f"sys.stdout.flush(); {_UNTIL_CLOSED}"
    )
    report = run_conformance(_script(shallow_but_deep), examples=3, seed=1)
    assert report.failure is not None
    assert "nested deeper than 64 levels" in report.failure


@pytest.fixture
def trickling_server() -> Iterator[str]:
    """An HTTP server that answers with headers, then a body one byte every 50 ms."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not stop.wait(0.05):
                try:
                    connection.sendall(b" ")
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/"
    stop.set()
    thread.join()
    server.close()


def test_a_url_target_that_trickles_fails_at_the_whole_reply_deadline(
    trickling_server: str,
) -> None:
    target = UrlTarget(trickling_server, timeout=0.5)
    with pytest.raises(TargetFailed, match=r"did not reply within 0\.5 s$"):
        target.call({"wire": 1, "op": "hello"})
    target.close()


class _OnceWrong(LocalTarget):
    """The reference, but one answer (the first with tables after the 40th call) is wrong: a
    difference that never comes back."""

    def __init__(self, store: ReferenceStore, *, name: str) -> None:
        super().__init__(store, name=name)
        self.calls = 0
        self.wrong = False

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        reply = super().call(request)
        self.calls += 1
        if self.calls >= 40 and not self.wrong and reply.get("tables", {}).get("runs"):
            self.wrong = True
            reply["tables"]["runs"] = []
        return reply


def test_a_difference_that_does_not_reproduce_is_reported_with_both_answers() -> None:
    report = run_conformance(_OnceWrong(ReferenceStore(), name="once-wrong"), examples=100, seed=1)
    assert report.difference is not None
    assert report.flaky
    printed = "\n".join(report.lines())
    assert "it did not reproduce" in printed
    assert "the reference answered: " in printed
    assert "the target answered:    " in printed


def test_the_reference_server_answers_every_line_and_never_dies() -> None:
    deep_args = {"id": json.loads("[" * 40 + "]" * 40), "owner": "o1", "lease_ms": 1}
    claim = {"wire": 1, "op": "claim", "scope": "a", "now": "x", "args": deep_args}
    lines = "\n".join(
        ["[" * 200_000 + "]" * 200_000, json.dumps(claim), '{"wire": 1, "op": "hello"}']
    )
    out = io.StringIO()
    serve_lines(ReferenceStore(), io.StringIO(lines + "\n"), out)
    too_deep, nested, hello = (json.loads(line) for line in out.getvalue().splitlines())
    assert too_deep == {
        "ok": False,
        "error": {"code": "bad_request", "message": "the line nests deeper than 32 levels"},
    }
    assert nested["error"]["message"] == "the request nests deeper than 32 levels"
    assert hello["ok"] is True


class _AlwaysStarts(LocalTarget):
    """A target that answers every start with success, whatever it was asked."""

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if request.get("op") == "start_or_join":
            return {"ok": True, "result": request["args"]["row"]}
        return super().call(request)


def test_the_surrogate_allowance_covers_only_a_refusal_for_the_surrogate() -> None:
    row = {
        "id": "r01", "module_id": "m1", "job": "walk", "instance": "default",
        "payload": '{"n":"\ud800"}', "subject_id": None, "status": "running", "cursor": None,
        "counters": "{}", "attempts": 0, "last_error": None,
        "started_at": "2026-10-04T12:00:00.000Z", "updated_at": "2026-10-04T12:00:00.000Z",
        "next_attempt_at": None, "ended_at": None, "lease_owner": None,
        "lease_began_at": None, "admission_misses": None,
    }  # fmt: skip
    key = {"module_id": "m1", "job": "walk", "instance": "default"}
    start = {"op": "start_or_join", "scope": "a", "args": {"key": key, "row": row}}
    # Refused for the surrogate: the allowance.
    good_time = replay_history(
        [{**start, "now": "2026-10-04T12:00:00.000Z"}], target=_AlwaysStarts(ReferenceStore())
    )
    assert good_time.ok
    assert dict(good_time.allowed) == {"lone-surrogate": 1}
    # Refused for its time, which has nothing to do with the surrogate: a difference.
    bad_time = replay_history([{**start, "now": "noon"}], target=_AlwaysStarts(ReferenceStore()))
    assert bad_time.difference is not None
    assert bad_time.difference.detail.startswith("the reference refused (validation_failed: ")
