"""The command line at its edges: a findings folder that cannot hold a finding, a killed parent
of worker processes, a scheduler address that is no Dask scheduler, numbers past every range, and
an output file on a full disk. Each used to end in a traceback, a hang or leftover processes."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sims.cli._arguments import UsageError
from sims.cli._main import main
from sims.cli._output import writing
from sims.runners import _dask
from sims.search._explore import search

EXAMPLES = Path(__file__).parents[2] / "examples"
WORLD = f"{EXAMPLES / 'double_charge.py'}:double-charge"
HUGE = "99999999999999999999999"
SEED_RANGE = "seeds are whole numbers from 0 to 18446744073709551615 (2**64 - 1)"


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("error: ")
    assert "Traceback" not in err
    return err.removeprefix("error: ").removesuffix("\n")


# -- a findings folder that cannot hold the finding ------------------------------------------------


def test_a_finding_is_shown_when_the_findings_folder_is_a_file(tmp_path: Path) -> None:
    # As root, a folder without write permission takes files all the same: a file where the
    # folder should be fails for everyone. The default folder, .sims/findings of where it runs.
    (tmp_path / ".sims").mkdir()
    (tmp_path / ".sims" / "findings").write_text("not a folder\n")
    env = {key: value for key, value in os.environ.items() if key != "SIMS_FINDINGS"}
    proc = subprocess.run(
        [sys.executable, "-m", "sims", "explore", WORLD, "--examples", "120"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "charged the card 2 times" in proc.stdout
    assert "\nas a command:\n  python -m sims run " in proc.stdout
    assert (
        "not remembered: .sims/findings cannot hold findings (.sims/findings is a file, not a "
        "folder); make it a folder you can write to, name another with SIMS_FINDINGS=FOLDER, or "
        "explore with --no-remember"
    ) in proc.stdout.splitlines()


def test_a_finding_is_shown_when_a_folder_above_the_findings_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "kept").write_text("")
    folder = tmp_path / "kept" / "findings"
    report = search(WORLD, max_worlds=120, max_seconds=None, fresh_process=False, findings=folder)
    assert report.found is not None
    assert report.remembered is None
    assert list(report.lines())[-1] == (
        f"not remembered: {folder} cannot hold findings ({tmp_path / 'kept'} is a file, not a "
        "folder); make it a folder you can write to, name another with SIMS_FINDINGS=FOLDER, or "
        "explore with --no-remember"
    )


# -- worker processes end with their parent -------------------------------------------------------


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _ended(pid: int) -> bool:
    """Gone, or a zombie no one has reaped yet (this container's first process may not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _states(pids: list[int]) -> str:
    """Each process's state and parent, as /proc says: what a failure needs to be understood."""
    said = []
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except FileNotFoundError:
            fields = ["gone", "-"]
        said.append(f"{pid}: {fields[0]}, parent {fields[1]}")
    return "; ".join(said)


def _wait_until(done: Callable[[], bool], *, within_s: float, what: str) -> None:
    # Real processes start and end in real time; this waits on them, it does not time anything.
    deadline = time.monotonic() + within_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} after {within_s} s")
        time.sleep(0.05)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["KILL", "TERM"])
@pytest.mark.parametrize(
    "command",
    [
        ["sweep", "late-claim", "--seeds", "0..20000", "--jobs", "2"],
        ["explore", "late-claim", "--examples", "100000", "--jobs", "2", "--no-remember"],
    ],
    ids=["sweep", "explore"],
)
def test_worker_processes_end_with_their_parent(
    command: list[str], signum: signal.Signals, tmp_path: Path
) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-m", "sims", *command],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until(
            lambda: len(_children(parent.pid)) >= 2 or parent.poll() is not None,
            within_s=60,
            what="no two worker processes",
        )
        workers = _children(parent.pid)
        assert parent.poll() is None, f"the command ended (exit {parent.returncode}) first"
        parent.send_signal(signum)
        assert parent.wait(timeout=10) == -signum
        _wait_until(
            lambda: all(_ended(worker) for worker in workers),
            within_s=10,
            what=f"worker processes {workers} still run ({_states(workers)})",
        )
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


ORPHANED_WORKER = """
import multiprocessing, os, time
from sims.runners._lifeline import end_with_parent

def work(parent):
    end_with_parent(parent, kernel=False)  # the watch of platforms without prctl
    time.sleep(60)

if __name__ == "__main__":
    worker = multiprocessing.get_context("fork").Process(target=work, args=(os.getpid(),))
    worker.start()
    print(worker.pid, flush=True)
    time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_a_worker_without_the_kernels_signal_ends_with_its_parent_all_the_same() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHANED_WORKER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        parent.kill()
        parent.wait(timeout=10)
        _wait_until(lambda: _ended(worker), within_s=10, what=f"worker {worker} still runs")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


# -- a scheduler address that is no Dask scheduler ------------------------------------------------


@contextmanager
def _server(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A server on loopback that calls ``answer`` on each connection it accepts, and holds it."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)  # so that it notices it is done: close() wakes no accept()
    done = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(connection)
            answer(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        thread.join(timeout=10)
        listener.close()
        for connection in held:
            connection.close()


def _silent(connection: socket.socket) -> None:
    pass


def _http(connection: socket.socket) -> None:
    connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


COMMANDS = [["sweep", "random", "--seeds", "0..1"], ["explore", "random", "--examples", "5"]]
REMEDY = (
    "give the address `dask scheduler` prints (port 8786 unless told otherwise; 8787 is its "
    "dashboard's, which speaks HTTP)"
)


def test_the_schedulers_answer_is_waited_for_a_few_seconds() -> None:
    assert _dask.ANSWER_TIMEOUT_S == 5.0


@pytest.mark.parametrize("command", COMMANDS, ids=["sweep", "explore"])
def test_a_scheduler_address_that_never_answers_is_one_line(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_dask, "ANSWER_TIMEOUT_S", 0.2)
    with _server(_silent) as address:
        started = time.monotonic()
        assert main([*command, "--scheduler", address]) == 2
    assert time.monotonic() - started < 5
    assert one_line_error(capsys) == (
        f"the server at {address} accepted the connection but sent no Dask handshake within "
        f"0.2 s (a scheduler sends one at once); {REMEDY}"
    )


@pytest.mark.parametrize("command", COMMANDS, ids=["sweep", "explore"])
def test_a_scheduler_address_that_answers_http_is_one_line(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with _server(_http) as address:
        assert main([*command, "--scheduler", address]) == 2
    assert one_line_error(capsys) == (
        f"the server at {address} answered, but not as a Dask scheduler (it began "
        f"b'HTTP/1.1', not with a handshake's length); {REMEDY}"
    )


def _hang_up(connection: socket.socket) -> None:
    connection.sendall(b"\x3a\x00")  # two bytes of the eight of a length, then nothing
    connection.close()


def test_a_scheduler_address_that_hangs_up_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with _server(_hang_up) as address:
        assert main(["sweep", "random", "--seeds", "0", "--scheduler", address]) == 2
    assert one_line_error(capsys) == (
        f"the server at {address} closed the connection before it sent a Dask handshake; {REMEDY}"
    )


# -- numbers past every range ---------------------------------------------------------------------

WORLDS_RANGE = "give 1 to 1,000,000,000, or a time budget (--budget 60s)"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["explore", "late-begin", "--examples", HUGE],
            f"--examples {HUGE} is more worlds than a search runs; {WORLDS_RANGE}",
        ),
        (
            ["explore", "late-begin", "--examples", "1000000001"],
            f"--examples 1000000001 is more worlds than a search runs; {WORLDS_RANGE}",
        ),
        (
            ["explore", "late-begin", "--budget", HUGE],
            f"--budget '{HUGE}' is more worlds than a search runs; {WORLDS_RANGE}",
        ),
        (
            ["explore", "late-begin", "--budget", "9" * 5000],
            "--budget '99999999999999999999'… (5,000 characters) is more worlds than a search "
            f"runs; {WORLDS_RANGE}",
        ),
        (
            ["explore", "late-begin", "--budget", "1e400s"],
            "--budget '1e400s' is more seconds than a number holds (it reads as infinite); give a "
            "finite number of seconds > 0 (60s), or of worlds from 1 to 1,000,000,000 (300)",
        ),
        (
            ["explore", "late-begin", "--jobs", HUGE],
            f"--jobs {HUGE} is more worker processes than this starts; give 1 to 256, or run on a "
            "Dask cluster with --scheduler",
        ),
        (
            ["sweep", "late-begin", "--seeds", "0..1", "--jobs", "257"],
            "--jobs 257 is more worker processes than this starts; give 1 to 256, or run on a "
            "Dask cluster with --scheduler",
        ),
        (
            ["explore", "late-begin", "--seed", HUGE],
            f"seed '{HUGE}' goes past the largest seed; {SEED_RANGE}",
        ),
        (
            ["run", "late-begin", "--seed", "18446744073709551616"],
            f"seed '18446744073709551616' goes past the largest seed; {SEED_RANGE}",
        ),
        (
            ["run", "late-begin", "--seed", "9" * 5000],
            f"seed '99999999999999999999'… (5,000 characters) goes past the largest seed; "
            f"{SEED_RANGE}",
        ),
        (
            ["sweep", "late-begin", "--seeds", f"0..{HUGE}"],
            f"seeds '0..{HUGE}' go past the largest seed; {SEED_RANGE}",
        ),
    ],
)
def test_a_number_past_its_range_is_one_line_that_names_the_range(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert one_line_error(capsys) == message
    assert capsys.readouterr().out == ""


def test_a_count_of_thousands_of_digits_is_argparses_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["explore", "late-begin", "--examples", "9" * 5000])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(
        "error: argument --examples: '99999999999999999999'… (5,000 characters) is past any "
        "count; write a whole number of fewer digits\n"
    )
    assert "Traceback" not in err


def test_the_largest_seed_is_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "late-claim", "--seed", "18446744073709551615", "--story-lines", "0"]) == 0
    assert "replay with: python -m sims run late-claim --seed 18446744073709551615" in (
        capsys.readouterr().out
    )


def test_a_trace_whose_seed_is_past_the_largest_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"ev":"world.begin","scenario":"late-begin","seed":18446744073709551616,"t":0}\n'
    )
    assert main(["replay", str(trace)]) == 2
    assert one_line_error(capsys) == (
        f"{trace} records its seed as 18446744073709551616, past the largest seed (seeds are "
        "whole numbers from 0 to 18446744073709551615, 2**64 - 1); write traces with run --trace"
    )


# -- an output file on a full disk ---------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("option", ["--trace", "--timeline"])
def test_an_output_on_a_full_disk_is_one_line(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "late-begin", option, "/dev/full"]) == 2
    assert one_line_error(capsys) == (
        f"{option} /dev/full: the write failed (No space left on device); what reached it is "
        "cut short; free some space or name another file, and run it again"
    )


def _write_until_the_disk_is_full(path: Path) -> None:
    path.write_text('{"ev":"world.begin"}\n{"ev":"rpc.se')
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_file_cut_short_by_a_full_disk_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with pytest.raises(UsageError) as caught, writing(path, "--trace"):
        _write_until_the_disk_is_full(path)
    assert str(caught.value) == (
        f"--trace {path}: the write failed (No space left on device); the cut file was removed; "
        "free some space or name another file, and run it again"
    )
    assert not path.exists()
