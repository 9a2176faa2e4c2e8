"""Hostile inputs chosen from README.md and docs/ alone, without reading the implementation.

Each test is one input against a door (the store's and the driver's public calls), the command
line or the conformance kit. An input the project answers as the docs say is asserted as seen: a
clear one-line error that names the value and the remedy, or it works, and nothing is lost. An
input it does not is marked `xfail(strict=True)` and asserts what the docs promise.
"""

from __future__ import annotations

import http.server
import json
import math
import os
import pwd
import random
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

import sims
from driver import (
    JobDriver,
    JobPassContext,
    JobPassResult,
    JobRunFilter,
    JobRunKey,
    JobRunRow,
    RetryPolicy,
    StartJobRunInput,
    ValidationFailed,
)
from scopehost import (
    JobRunDump,
    Link,
    ScopeFileForeign,
    ScopeHost,
    ScopeUnavailable,
    StoreClock,
    open_scope_host,
)

NOW = "2026-10-04T12:00:00.000Z"
PWNED = "HOSTILE-INPUT-RAN"


# ---------------------------------------------------------------------------------------------
# helpers


def sims_cli(*args: str, cwd: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """`python -m sims ARGS...` in a fresh process, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "sims", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The whole of stderr, which must be exactly one line starting with `error:`."""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def late_begin_trace(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The lines of a genuine `run late-begin --seed 3 --trace` trace, to tamper with."""
    folder = tmp_path_factory.mktemp("trace")
    proc = sims_cli("run", "late-begin", "--seed", "3", "--trace", "t.jsonl", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return (folder / "t.jsonl").read_text().splitlines()


def tampered(lines: list[str], path: Path, edit: Callable[[dict[str, object]], None]) -> Path:
    begin = json.loads(lines[0])
    assert begin["ev"] == "world.begin"
    edit(begin)
    first = json.dumps(begin, sort_keys=True, separators=(",", ":"))
    path.write_text("\n".join([first, *lines[1:]]) + "\n")
    return path


async def done_handler(ctx: JobPassContext) -> JobPassResult:
    return JobPassResult(cursor=None, done=True)


def start_row(**changes: object) -> JobRunRow:
    fields: dict[str, object] = {
        "id": "01J00000000000000000000000",
        "module_id": "m",
        "job": "j",
        "instance": "default",
        "payload": "null",
        "subject_id": None,
        "status": "running",
        "cursor": None,
        "counters": "{}",
        "attempts": 0,
        "last_error": None,
        "started_at": NOW,
        "updated_at": NOW,
        "next_attempt_at": None,
        "ended_at": None,
    }
    fields.update(changes)
    return JobRunRow(**fields)  # type: ignore[arg-type]


KEY = JobRunKey(module_id="m", job="j", instance="default")


# ---------------------------------------------------------------------------------------------
# the command line: seeds, plans, output paths


def test_cli_negative_seed_is_one_line(tmp_path: Path) -> None:
    proc = sims_cli("run", "late-begin", "--seed", "-1", cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_error(proc) == "error: seed '-1' is negative; seeds are whole numbers >= 0"


def test_cli_backwards_seed_range_is_one_line(tmp_path: Path) -> None:
    proc = sims_cli("sweep", "late-begin", "--seeds", "5..1", cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "error: seeds '5..1' run backwards; write the smaller number first"
    )


def test_cli_sweep_past_a_million_seeds_is_refused_before_running(tmp_path: Path) -> None:
    proc = sims_cli("sweep", "late-begin", "--seeds", "0..1000000", cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "more than 1,000,000 seeds" in line
    assert "--seeds 0..999999, then 1000000..1999999" in line
    assert proc.stdout == ""


def test_cli_plan_of_100000_minus_signs_is_one_line(tmp_path: Path) -> None:
    plan = (
        "FaultPlan((DelayLeg(drive='cron', operation='begin', nth=1, leg='reply', ms="
        + "-" * 100_000
        + "5),))"
    )
    proc = sims_cli("run", "late-begin", "--plan", plan, cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "(100,081 characters) nests too deeply to be read" in line
    assert len(line) < 400


def test_cli_plan_that_is_code_is_refused_and_never_runs(tmp_path: Path) -> None:
    plan = f"__import__('os').system('echo {PWNED}')"
    proc = sims_cli("run", "late-begin", "--plan", plan, cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "calls something other than CrashAfter" in line
    assert PWNED not in proc.stdout


def test_cli_plan_with_a_1000_digit_delay_is_one_line(tmp_path: Path) -> None:
    plan = (
        "FaultPlan((DelayLeg(drive='cron', operation='begin', nth=1, leg='reply', ms="
        + "9" * 1000
        + "),))"
    )
    proc = sims_cli("run", "late-begin", "--plan", plan, cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.endswith(
        "cannot strike: ms=an int of 1000 digits, more than a float holds; "
        "give a finite number of ms >= 0"
    )


def test_cli_trace_into_a_missing_folder_is_refused_before_the_world(tmp_path: Path) -> None:
    proc = sims_cli("run", "late-begin", "--trace", "nowhere/t.jsonl", cwd=tmp_path)
    assert proc.returncode == 2
    assert "does not exist; create it first" in one_line_error(proc)
    assert proc.stdout == ""


# ---------------------------------------------------------------------------------------------
# replay: tampered traces


def test_replay_trace_with_a_null_seed_is_one_line(
    tmp_path: Path, late_begin_trace: list[str]
) -> None:
    trace = tampered(late_begin_trace, tmp_path / "t.jsonl", lambda b: b.update(seed=None))
    proc = sims_cli("replay", trace.name, cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "error: t.jsonl records its seed as None, which is not a seed (a whole number >= 0); "
        "write traces with run --trace"
    )


def test_replay_trace_whose_store_name_is_code_offers_no_code(
    tmp_path: Path, late_begin_trace: list[str]
) -> None:
    code = f"__import__('os').system('echo {PWNED}')"
    trace = tampered(late_begin_trace, tmp_path / "t.jsonl", lambda b: b.update(mutant=code))
    proc = sims_cli("replay", trace.name, cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "not a plain Python name" in line
    assert "database=STORE" in line
    assert f"database={code}" not in line
    assert PWNED not in proc.stdout


def test_replay_truncated_trace_says_where_it_is_cut(
    tmp_path: Path, late_begin_trace: list[str]
) -> None:
    whole = "\n".join(late_begin_trace) + "\n"
    (tmp_path / "cut.jsonl").write_text(whole[:5000])
    proc = sims_cli("replay", "cut.jsonl", cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith("error: cut.jsonl is not a trace (JSON lines): its last line, line ")
    assert line.endswith("is cut off; write traces with run --trace")


def test_replay_trace_whose_begin_has_no_time_names_the_line(
    tmp_path: Path, late_begin_trace: list[str]
) -> None:
    # It used to replay, print its verdict, then die with KeyError: 't' checking the trace again.
    trace = tampered(late_begin_trace, tmp_path / "t.jsonl", lambda b: b.__delitem__("t"))
    proc = sims_cli("replay", trace.name, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert one_line_error(proc) == (
        "error: t.jsonl is not a trace: line 1 is a world.begin event without its time ('t'); "
        "write traces with run --trace"
    )


def test_replay_trace_with_an_event_whose_time_is_text_names_the_line(
    tmp_path: Path, late_begin_trace: list[str]
) -> None:
    second = json.loads(late_begin_trace[1])
    second["t"] = "soon"
    lines = [late_begin_trace[0], json.dumps(second), *late_begin_trace[2:]]
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    proc = sims_cli("replay", "t.jsonl", cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        f"error: t.jsonl is not a trace: line 2 is a {second['ev']} event whose time ('t') is "
        "'soon', not a number of ms >= 0; write traces with run --trace"
    )


def test_replay_binary_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bin.jsonl").write_bytes(
        bytes(random.Random(7).randrange(256) for _ in range(3000))
    )
    proc = sims_cli("replay", "bin.jsonl", cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "error: bin.jsonl is not a trace (JSON lines); write traces with run --trace"
    )


def test_replay_trace_nested_100000_deep_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "deep.jsonl").write_text("[" * 100_000 + "\n")
    proc = sims_cli("replay", "deep.jsonl", cwd=tmp_path)
    assert proc.returncode == 2
    assert "is not a trace" in one_line_error(proc)


def test_replay_trace_whose_plan_is_not_text_is_refused(
    tmp_path: Path, late_begin_trace: list[str]
) -> None:
    trace = tampered(late_begin_trace, tmp_path / "t.jsonl", lambda b: b.update(plan=[1, 2]))
    proc = sims_cli("replay", trace.name, cwd=tmp_path)
    assert proc.returncode == 2
    assert "not a plan's text" in one_line_error(proc)


def test_replay_trace_whose_overridden_plan_is_not_text_is_refused(
    tmp_path: Path, late_begin_trace: list[str]
) -> None:
    trace = tampered(
        late_begin_trace,
        tmp_path / "t.jsonl",
        lambda b: b.update(plan=[1, 2], plan_overridden=True),
    )
    proc = sims_cli("replay", trace.name, cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "error: t.jsonl records its plan as [1, 2], which is not a plan's text; "
        "write traces with run --trace"
    )


# ---------------------------------------------------------------------------------------------
# hostile world files


def test_world_file_that_raises_at_import_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "raises.py").write_text('raise RuntimeError("boom at import")\n')
    proc = sims_cli("list", "raises.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "error: raises.py failed to load (line 1): RuntimeError: boom at import; fix the file "
        "and try again (python raises.py shows the whole traceback)"
    )


def test_world_whose_expect_returns_junk_is_named(tmp_path: Path) -> None:
    (tmp_path / "junk.py").write_text(
        "from sims import scenario\n"
        '@scenario("junk", expect=lambda sim: 42)\n'
        "async def junk(world):\n"
        "    return None\n"
    )
    proc = sims_cli("run", "junk.py:junk", cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "expect <lambda> (junk.py:2) returned 42 (of type int)" in line
    assert "a list (or any iterable) of strings" in line


def test_world_that_raises_in_a_sweep_is_each_seeds_finding(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text(
        "from sims import scenario\n"
        '@scenario("boom")\n'
        "async def boom(world):\n"
        '    raise ValueError("world exploded")\n'
    )
    proc = sims_cli("sweep", "boom.py:boom", "--seeds", "0..2", cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "the world raised in 3 of 3 seeds (3 × world-raised), so no check ran" in proc.stdout
    assert "violations: 3 × world-raised (the world raised) in 3 seeds" in proc.stdout


def test_world_that_calls_sys_exit_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bye.py").write_text(
        "import sys\n"
        "from sims import scenario\n"
        '@scenario("bye")\n'
        "async def bye(world):\n"
        "    sys.exit(0)\n"
    )
    proc = sims_cli("run", "bye.py:bye", cwd=tmp_path)
    assert proc.returncode == 2
    assert "bye.py:5" in one_line_error(proc)


def test_world_that_raises_keyboard_interrupt_is_one_line(tmp_path: Path) -> None:
    # Raised by the world's own line, not by a Ctrl-C: the world's error, as any other.
    (tmp_path / "ki.py").write_text(
        "from sims import scenario\n"
        '@scenario("ki")\n'
        "async def ki(world):\n"
        "    raise KeyboardInterrupt\n"
    )
    proc = sims_cli("run", "ki.py:ki", cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "error: scenario ki.py:ki raised at ki.py:4 with seed 1: KeyboardInterrupt: "
    )


# ---------------------------------------------------------------------------------------------
# the Python API of the simulator


def test_check_worlds_with_no_seeds_names_the_argument() -> None:
    with pytest.raises(ValueError, match="seeds"):
        sims.check_worlds("late-begin", seeds=None)  # type: ignore[arg-type]


def test_simulate_with_a_null_seed_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^seed=None is not a whole number; seeds are whole"):
        sims.simulate("late-begin", None)  # type: ignore[arg-type]


def test_plan_from_bytes_says_a_plan_is_text() -> None:
    with pytest.raises((TypeError, ValueError), match=r"\btext\b|\bstr\b"):
        sims.plan_from_text(b"bytes")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# the conformance kit: COMMAND targets


def test_kit_target_that_exits_at_once_fails_with_the_seed(tmp_path: Path) -> None:
    proc = sims_cli(
        "conformance", "--target", "false", "--examples", "3", "--seed", "1", cwd=tmp_path
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    # Whether the kit meets the closed pipe or the closed output first is a race; both are told.
    assert re.match(
        r"conformance: FAILED — the target command 'false' (stopped reading requests "
        r"\(Broken pipe\)|closed its output before replying); it exited with code 1\n",
        proc.stdout,
    ), proc.stdout
    assert "seed 1 (--seed 1 repeats it)" in proc.stdout


def test_kit_target_that_echoes_requests_fails_with_the_reason(tmp_path: Path) -> None:
    proc = sims_cli(
        "conformance", "--target", "cat", "--examples", "3", "--seed", "1", cwd=tmp_path
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "which is not a wire reply: its ok is not true or false" in proc.stdout


def test_kit_zero_examples_is_a_usage_error(tmp_path: Path) -> None:
    proc = sims_cli(
        "conformance", "--target", "python -m sims.conformance", "--examples", "0", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert one_line_error(proc) == "error: --examples is 0; run at least 1 history"


def test_kit_target_with_an_unclosed_quote_names_the_target(tmp_path: Path) -> None:
    proc = sims_cli(
        "conformance", "--target", 'python -c "unterminated', "--examples", "1", cwd=tmp_path
    )
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "unterminated" in line
    assert "target" in line


# ---------------------------------------------------------------------------------------------
# the conformance kit: URL targets served on 127.0.0.1


@contextmanager
def _serve(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    if data:
                        answer(conn)
                except OSError:
                    pass

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/"
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def _reply(head: bytes, body: bytes = b"") -> Callable[[socket.socket], None]:
    def answer(conn: socket.socket) -> None:
        conn.sendall(head + body)

    return answer


def _hang_up(conn: socket.socket) -> None:
    return None


KIT_SERVERS: dict[str, tuple[Callable[[socket.socket], None], str]] = {
    "redirect": (
        _reply(b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n"),
        "answered HTTP 302 'Found', not 200: a redirect to 'http://127.0.0.1:1/', which the kit "
        "does not follow; point --target at the URL that serves the wire",
    ),
    "hang-up": (_hang_up, "closed the connection without replying"),
    "not-http": (
        _reply(b"\x00\xff garbage not http\r\n\r\n"),
        "answered with something that is not HTTP/1.1 (BadStatusLine:",
    ),
    "nested": (
        _reply(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", b"[" * 100_000),
        "replied with JSON nested too deep to read (a wire reply nests at most 64 levels)",
    ),
    "escape": (
        _reply(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", b"\x1b[2Jhello"),
        "replied with something that is not JSON: '\\x1b[2Jhello'",
    ),
}


@pytest.mark.parametrize("kind", sorted(KIT_SERVERS))
def test_kit_misbehaving_http_target_is_a_failed_line(tmp_path: Path, kind: str) -> None:
    answer, reason = KIT_SERVERS[kind]
    with _serve(answer) as url:
        proc = sims_cli(
            "conformance", "--target", url, "--examples", "2", "--seed", "1", cwd=tmp_path
        )
        assert proc.returncode == 1, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        assert proc.stdout.startswith(f"conformance: FAILED — the target {url} ")
        assert reason in proc.stdout
        assert "seed 1 (--seed 1 repeats it)" in proc.stdout
        assert "\x1b" not in proc.stdout


# ---------------------------------------------------------------------------------------------
# the driver's doors


async def _refused_by_drive(call: Callable[[ScopeHost, JobDriver], Awaitable[object]]) -> str:
    async with open_scope_host(clock=StoreClock(), rng=random.Random(1)) as host:
        drive = JobDriver(host, name="cron")
        drive.register_job("m", "j", done_handler, lease_ms=1000)
        with pytest.raises(ValidationFailed) as caught:
            await call(host, drive)
        message = str(caught.value)
        assert await drive.job_runs("t") == []
        return message


async def test_payload_one_byte_past_its_cap_is_refused(autojump_clock: trio.abc.Clock) -> None:
    message = await _refused_by_drive(
        lambda host, d: d.start_job_run(
            "t", StartJobRunInput(module_id="m", job="j", payload="x" * 1_000_001)
        ),
    )
    assert message.startswith(
        "payload is 1000003 bytes of UTF-8, more than the 1000000 a payload's JSON may take"
    )


async def test_payload_nested_200_deep_is_refused(autojump_clock: trio.abc.Clock) -> None:
    deep: object = []
    for _ in range(199):
        deep = [deep]
    message = await _refused_by_drive(
        lambda host, d: d.start_job_run(
            "t", StartJobRunInput(module_id="m", job="j", payload=deep)
        ),
    )
    assert message.endswith(
        "nests lists and objects more than 128 levels deep, more than a run's JSON carries — "
        "flatten it"
    )


async def test_payload_with_nan_is_refused(autojump_clock: trio.abc.Clock) -> None:
    message = await _refused_by_drive(
        lambda host, d: d.start_job_run(
            "t", StartJobRunInput(module_id="m", job="j", payload={"x": math.nan})
        ),
    )
    assert message.startswith("payload.x is nan, which JSON cannot carry")


async def test_module_id_with_a_lone_surrogate_is_refused(autojump_clock: trio.abc.Clock) -> None:
    message = await _refused_by_drive(
        lambda host, d: d.start_job_run("t", StartJobRunInput(module_id="m\ud800", job="j")),
    )
    assert message == (
        "module_id holds a lone surrogate ('\\ud800' at index 1), which UTF-8 cannot carry — "
        "decode the text properly before passing it"
    )


async def test_scope_id_that_climbs_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    async with open_scope_host(tmp_path, rng=random.Random(1)) as host:
        with pytest.raises(ValidationFailed) as caught:
            await host.stub("../escape").invoke("items", {})
    assert str(caught.value) == (
        "scope_id is '../escape'; a scope id is 1 to 128 letters, digits, '.', '_', ':' or '-', "
        "not starting with '.'"
    )
    assert not (tmp_path.parent / "escape.sqlite3").exists()


async def test_operator_read_limit_of_401_digits_is_refused(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with open_scope_host(clock=StoreClock(), rng=random.Random(1)) as host:
        drive = JobDriver(host, name="cron")
        with pytest.raises(ValidationFailed) as caught:
            await drive.job_runs("t", JobRunFilter(limit=10**400))
    assert str(caught.value) == (
        "filter.limit is an int of 401 digits, past any number JSON carries; pass a limit of up "
        "to 500 rows, or None for the default"
    )


async def test_register_lease_below_the_minimum_is_refused(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with open_scope_host(clock=StoreClock(), rng=random.Random(1)) as host:
        drive = JobDriver(host, name="cron")
        with pytest.raises(ValidationFailed) as caught:
            drive.register_job("m", "j", done_handler, lease_ms=99)
    assert str(caught.value) == (
        "lease_ms is 99; a job's lease must be an integer from 100 to 31536000000 ms (a year), "
        "or None for the default"
    )


async def test_register_retry_delay_of_401_digits_is_refused(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with open_scope_host(clock=StoreClock(), rng=random.Random(1)) as host:
        drive = JobDriver(host, name="cron")
        with pytest.raises(ValidationFailed, match=r"^retry\.base_delay_ms is 1000"):
            drive.register_job("m", "j", done_handler, retry=RetryPolicy(base_delay_ms=10**400))


@pytest.mark.parametrize(
    ("leg", "said"),
    [
        (1e300, "request_ms=1e+300"),
        (86_400_001, "request_ms=86400001"),
        ({"claim": 5, "*": 1e300}, "request_ms['*']=1e+300"),
    ],
)
def test_link_latency_past_a_day_is_refused(leg: object, said: str) -> None:
    # A latency of 1e300 ms used to be accepted, and every call over the link waited for ever.
    with pytest.raises(ValueError, match=r"latency is at most") as caught:
        Link(request_ms=leg)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"{said}; a leg's latency is at most 86400000 ms (a day), past which no call comes back: "
        "give a latency from 0 to 86400000 ms (a fault plan's DelayLeg or HoldLeg is how a world "
        "holds one call up for longer)"
    )


async def test_link_drawing_a_latency_past_a_day_is_refused(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with open_scope_host(clock=StoreClock(), rng=random.Random(1)) as host:
        link = Link(name="slow", reply_ms=lambda call, rng: 1e300)
        with pytest.raises(ValueError, match=r"latency is at most") as caught:
            await host.stub("t", link=link).invoke("items", {})
    assert str(caught.value).startswith(
        "link 'slow' drew a delay of 1e+300 ms for 'invoke'; a leg's latency is at most 86400000 "
        "ms (a day)"
    )
    assert trio.current_time() < 60  # refused, not waited for


def test_link_latency_of_401_digits_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^request_ms=1000") as caught:
        Link(request_ms=10**400)
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------------------------------------
# the store's doors


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"attempts": -5},
            "row.attempts is -5; attempts counts consecutive failed passes, a whole number of 0 "
            "or more",
        ),
        (
            {"attempts": 2**63},
            "row.attempts is 9223372036854775808, more than 9223372036854775807, the largest "
            "integer SQLite holds; attempts counts consecutive failed passes, a whole number of 0 "
            "or more",
        ),
        (
            {"ended_at": NOW},
            "row.ended_at is '2026-10-04T12:00:00.000Z'; start_or_join inserts a live run, which "
            "has not ended — leave ended_at None",
        ),
        (
            {"lease_owner": "o", "next_attempt_at": "2028-09-03T12:00:00.000Z"},
            "row.next_attempt_at is '2028-09-03T12:00:00.000Z', a lease ending more than "
            "31536000000 ms (a year, the longest lease) past the store's now; no claim writes "
            "that lease — write an expiry within a year of now, or leave lease_owner None",
        ),
        (
            {"started_at": "10000-01-01T00:00:00.000Z"},
            "row.started_at is '10000-01-01T00:00:00.000Z'; store times are ISO-8601 UTC with "
            "milliseconds and Z, like '2026-10-04T12:00:00.000Z'",
        ),
    ],
)
async def test_start_or_join_refuses_a_forbidden_row(
    autojump_clock: trio.abc.Clock, changes: dict[str, object], expected: str
) -> None:
    async with open_scope_host(clock=StoreClock(), rng=random.Random(1)) as host:
        stub = host.stub("t")
        with pytest.raises(ValidationFailed) as caught:
            await stub.start_or_join(KEY, start_row(**changes))
        assert (await stub.export_dump()).runs == ()
    assert str(caught.value) == expected


async def test_patch_given_a_dict_is_refused(autojump_clock: trio.abc.Clock) -> None:
    # It used to fail inside the store with AttributeError: 'dict' object has no attribute.
    async with open_scope_host(clock=StoreClock(), rng=random.Random(1)) as host:
        stub = host.stub("t")
        await stub.start_or_join(KEY, start_row())
        for call in (stub.patch, stub.commit_pass):
            with pytest.raises(ValidationFailed) as caught:
                await call(start_row().id, {"status": "done"}, None)  # type: ignore[arg-type]
            assert str(caught.value) == (
                "patch is {'status': 'done'}, a dict; pass a driver.JobRunPatch, which names "
                "every column a pass writes (JobRunPatch(status=..., cursor=..., counters=..., "
                "attempts=..., last_error=..., updated_at=..., next_attempt_at=..., "
                "ended_at=...))"
            )
        [run] = (await stub.export_dump()).runs
    assert run.status == "running"


async def test_due_keys_past_sqlites_integers_is_refused(autojump_clock: trio.abc.Clock) -> None:
    async with open_scope_host(clock=StoreClock(), rng=random.Random(1)) as host:
        with pytest.raises(ValidationFailed, match=r"^max is 9223372036854775808, more than"):
            await host.stub("t").due_keys(NOW, 2**63)


async def test_begin_margin_of_1e300_is_refused(autojump_clock: trio.abc.Clock) -> None:
    async with open_scope_host(clock=StoreClock(), rng=random.Random(1)) as host:
        with pytest.raises(ValidationFailed) as caught:
            await host.stub("t").begin("x", "o", 1e300)
    assert str(caught.value) == (
        "margin_ms is 1e+300; the BEGIN margin is at most 31536000000 ms (a year, the longest "
        "lease), as no lease could run longer past now"
    )


async def test_import_with_one_bad_row_writes_nothing(autojump_clock: trio.abc.Clock) -> None:
    async with open_scope_host(clock=StoreClock(), rng=random.Random(1)) as host:
        stub = host.stub("t")
        await stub.start_or_join(KEY, start_row())
        doc = json.loads((await stub.export_dump()).to_json())
        first = doc["runs"][0]
        other = dict(first, id="01J00000000000000000000002", instance="eu")
        bad = dict(first, id="01J00000000000000000000001", status="paused")
        doc["runs"] = [other, first, bad]
        with pytest.raises(ValidationFailed) as caught:
            await stub.import_dump(JobRunDump.from_json(json.dumps(doc)), source="t")
        after = await stub.export_dump()
    assert str(caught.value) == (
        "dump.runs.2.status is 'paused', not one of 'running', 'done', 'failed' "
        "(run '01J00000000000000000000001')"
    )
    assert [run.id for run in after.runs] == ["01J00000000000000000000000"]


def test_dump_nested_100000_deep_is_refused() -> None:
    with pytest.raises(ValidationFailed, match=r"^dump "):
        JobRunDump.from_json("[" * 100_000)


def test_empty_dump_object_is_quoted_as_given() -> None:
    with pytest.raises(ValidationFailed) as caught:
        JobRunDump.from_json("{}")
    assert str(caught.value).startswith("dump is {}")


# ---------------------------------------------------------------------------------------------
# a directory host given files that are not the project's


async def test_host_on_a_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist; create it or pass None"):
        async with open_scope_host(tmp_path / "missing"):
            pass


def _as_a_user_permissions_bind(answer: Callable[[], str]) -> tuple[str, str]:
    """``answer()``, and the user it ran as: in a child process as the user nobody when the tests
    run as root (whom no permission bit stops), else here, as this process's own user."""
    if os.geteuid() != 0:
        return answer(), pwd.getpwuid(os.geteuid()).pw_name
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("the tests run as root, and there is no user nobody to run the call as")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only the answer and the exit, nothing of pytest's
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            said = answer()
        except BaseException as error:
            said, code = f"the child raised {error!r}", 1
        os.write(write, said.encode())
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, said
    return said, "nobody"


def _refusal_of(folder: Path, scope: str) -> str:
    async def call() -> str:
        async with open_scope_host(folder, rng=random.Random(1)) as host:
            try:
                await host.stub(scope).invoke("record", {"kind": "k", "key": "b"})
            except ScopeUnavailable as error:
                return str(error)
        return "it wrote"

    return trio.run(call)


@pytest.fixture
def read_only_folder() -> Iterator[Path]:
    """A host's folder holding scope 't', that no one but root may write (its parents open to
    every user, so that only the write is refused)."""
    parent = Path(tempfile.mkdtemp())
    parent.chmod(0o755)
    folder = parent / "scopes"
    folder.mkdir()

    async def first() -> None:
        async with open_scope_host(folder, rng=random.Random(1)) as host:
            await host.stub("t").invoke("record", {"kind": "k", "key": "a"})

    trio.run(first)
    for path in folder.iterdir():
        path.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)
        shutil.rmtree(parent)


@pytest.mark.parametrize("scope", ["t", "new"])
def test_a_folder_the_host_may_not_write_is_named_with_the_remedy(
    read_only_folder: Path, scope: str
) -> None:
    # SQLite said only "attempt to write a readonly database" (a scope the folder holds) or
    # "unable to open database file" (a new one), with nothing on the folder or its permissions.
    before = (read_only_folder / "t.sqlite3").read_bytes()
    said, user = _as_a_user_permissions_bind(lambda: _refusal_of(read_only_folder, scope))
    assert said == (
        f"invoke did not run: scope {scope!r} cannot write its database: the host's folder "
        f"{read_only_folder} is not writable by this process (user {user}), and the host writes "
        "each scope's file, its write-ahead log and its list of scopes in its folder; give that "
        "user the right to write there (chmod, chown), or open the host on a folder it may write"
    )
    assert (read_only_folder / "t.sqlite3").read_bytes() == before


async def test_scope_file_that_is_not_sqlite_is_refused_and_kept(tmp_path: Path) -> None:
    garbage = b"this is not sqlite at all" * 100
    (tmp_path / "t3.sqlite3").write_bytes(garbage)
    async with open_scope_host(tmp_path, rng=random.Random(1)) as host:
        with pytest.raises(ScopeUnavailable) as caught:
            await host.stub("t3").invoke("record", {"kind": "k", "key": "a"})
    assert str(caught.value) == (
        f"invoke on scope 't3' did not run: its database file {tmp_path / 't3.sqlite3'} would "
        "not open (DatabaseError: file is not a database)"
    )
    assert (tmp_path / "t3.sqlite3").read_bytes() == garbage


async def test_someone_elses_database_at_a_scope_path_is_refused(tmp_path: Path) -> None:
    async with open_scope_host(tmp_path, rng=random.Random(1)) as host:
        await host.stub("t1").invoke("items", {})
    other = tmp_path / "t2.sqlite3"
    conn = sqlite3.connect(other)
    with conn:
        conn.execute("create table precious(x)")
        conn.execute("insert into precious values ('keep me')")
    conn.close()
    async with open_scope_host(tmp_path, rng=random.Random(1)) as host:
        with pytest.raises(ScopeFileForeign) as caught:
            await host.stub("t2").invoke("record", {"kind": "k", "key": "a"})
    assert str(caught.value) == (
        f"invoke did not run: scope 't2': its database file {other} is not a scope's: it "
        "holds tables of its own ('precious') and records no scope; nothing was read or written "
        "— move that file out of the host's directory, and scope 't2' starts in a file of its own"
    )
    conn = sqlite3.connect(other)
    tables = [name for (name,) in conn.execute("select name from sqlite_master")]
    rows = conn.execute("select x from precious").fetchall()
    conn.close()
    assert rows == [("keep me",)]
    assert tables == ["precious"]


async def test_an_empty_file_at_a_scope_path_is_the_scopes_own(tmp_path: Path) -> None:
    (tmp_path / "t4.sqlite3").write_bytes(b"")
    async with open_scope_host(tmp_path, rng=random.Random(1)) as host:
        await host.stub("t4").invoke("record", {"kind": "k", "key": "a", "data": "x"})
    async with open_scope_host(tmp_path, rng=random.Random(2)) as host:
        items = await host.stub("t4").invoke("items", {})
    assert isinstance(items, list)
    assert [(i["kind"], i["key"], i["data"]) for i in items] == [("k", "a", "x")]


async def test_nul_and_bidi_text_survive_a_reopened_directory_host(tmp_path: Path) -> None:
    async with open_scope_host(tmp_path, rng=random.Random(1)) as host:
        drive = JobDriver(host, name="cron")
        await drive.start_job_run("t", StartJobRunInput(module_id="m\x00x", job="j"))
        await drive.start_job_run(
            "t", StartJobRunInput(module_id="m", job="j", instance="\u202eevil", payload="a\x00b")
        )
        await host.stub("t").invoke("record", {"kind": "k\x00z", "key": "a\x00b", "data": "x\x00y"})
    async with open_scope_host(tmp_path, rng=random.Random(2)) as host:
        rows = await JobDriver(host, name="cron").job_runs("t")
        items = await host.stub("t").invoke("items", {})
    assert sorted((r.module_id, r.instance, r.payload) for r in rows) == [
        ("m", "\u202eevil", "a\x00b"),
        ("m\x00x", "default", None),
    ]
    assert isinstance(items, list)
    assert [(i["kind"], i["key"], i["data"]) for i in items] == [("k\x00z", "a\x00b", "x\x00y")]


def test_replay_trace_whose_scenario_holds_a_terminal_escape_shows_it_as_data(
    tmp_path: Path, late_begin_trace: list[str]
) -> None:
    trace = tampered(
        late_begin_trace, tmp_path / "t.jsonl", lambda b: b.update(scenario="late-begin\x1b[2J")
    )
    proc = sims_cli("replay", trace.name, cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith("error: no scenario 'late-begin\\x1b[2J'; the scenarios are: ")
    assert "\x1b" not in proc.stderr + proc.stdout


def test_explore_negative_time_budget_is_one_line(tmp_path: Path) -> None:
    proc = sims_cli("explore", "late-begin", "--budget=-5s", cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "error: --budget '-5s': give a number of worlds (300) or of seconds (60s)"
    )


@contextmanager
def _http10_relay() -> Iterator[str]:
    """An HTTP/1.0 server (http.server's default: one request a connection, then it closes)
    whose every reply is the reference adapter's, `python -m sims.conformance`, for the body."""
    adapter = subprocess.Popen(
        [sys.executable, "-m", "sims.conformance"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert adapter.stdin is not None
    assert adapter.stdout is not None
    pipe_in, pipe_out = adapter.stdin, adapter.stdout

    class Relay(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            pipe_in.write(body.strip() + b"\n")
            pipe_in.flush()
            reply = pipe_out.readline()
            self.send_response(200)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        adapter.kill()
        adapter.wait()
        pipe_in.close()
        pipe_out.close()


def test_kit_http10_target_is_compared_as_any_other(tmp_path: Path) -> None:
    # docs/conformance.md: an HTTP/1.0 reply is read as an HTTP/1.1 one (its body is the reply,
    # its connection is opened again for the next request); a store that is right passes.
    with _http10_relay() as url:
        proc = sims_cli(
            "conformance", "--target", url, "--examples", "2", "--seed", "1", cwd=tmp_path
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"conformance: {url} agreed with the reference: " in proc.stdout


SPINNING_WORLD = """
import time
from sims import DriveSpec, JobPassContext, JobPassResult, World, scenario

async def spin_handler(ctx: JobPassContext) -> JobPassResult:
    end = time.monotonic() + 8  # bounded: spins 8 s of wall time without awaiting
    while time.monotonic() < end:
        pass
    return JobPassResult(done=True)

@scenario("spin")
async def spin(world: World) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "j", spin_handler)
    await world.start("cron", "scope-1", "m", "j")
    world.every("cron", "scope-1", every_ms=1_000, first_ms=0, until_ms=5_000)
    await world.settle(("scope-1",), horizon_ms=5_000, poll_ms=500)
"""


def test_explore_budget_holds_against_a_spinning_handler(tmp_path: Path) -> None:
    # The world's own allowance is 60 s; the search's budget of 1 s stops it all the same, and
    # a search that could not even end its clean world is no clean result (exit 1).
    (tmp_path / "spin.py").write_text(SPINNING_WORLD)
    try:
        proc = sims_cli("explore", "spin.py:spin", "--budget", "1s", cwd=tmp_path, timeout=6)
    except subprocess.TimeoutExpired:
        pytest.fail("explore --budget 1s still ran after 6 s")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nothing was searched: the clean world did not end within the budget" in proc.stdout
    assert "the search's time budget ran out while a world ran" in proc.stdout
    assert "spin_handler" in proc.stdout
    assert "Traceback" not in proc.stderr


SLEEPING_WORLD = """
import time
from sims import DriveSpec, JobPassContext, JobPassResult, World, scenario

async def naps(ctx: JobPassContext) -> JobPassResult:
    time.sleep(30)  # bounded: 30 s of real time, which the world's clock cannot see
    return JobPassResult(done=True)

@scenario("naps")
async def naps_world(world: World) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "j", naps)
    await world.start("cron", "scope-1", "m", "j")
    world.every("cron", "scope-1", every_ms=1_000, first_ms=0, until_ms=5_000)
    await world.settle(("scope-1",), horizon_ms=5_000, poll_ms=500)
"""


def test_explore_budget_holds_against_a_handler_that_sleeps_in_real_time(tmp_path: Path) -> None:
    # A sleep uses no CPU: neither the world's allowance (60 s of CPU) nor the budget of 1 s (of
    # CPU) saw it, and explore hung for as long as its worlds slept. Its world runs in a worker
    # process, ended once the world has been blocked for what was left of the budget.
    (tmp_path / "naps.py").write_text(SLEEPING_WORLD)
    try:
        proc = sims_cli("explore", "naps.py:naps", "--budget", "1s", cwd=tmp_path, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("explore --budget 1s still ran after 15 s")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[1:] == [
        "  world 1 was blocked in real time (not on the world's clock) for more than 1.0 s in the "
        "handler naps() of job 'j', at naps.py:6 in naps(): a handler, step body or service must "
        "not sleep or block on real time; use trio.sleep",
        "  run it again: python -m sims run naps.py:naps --seed 1",
    ]
    assert "Traceback" not in proc.stderr
