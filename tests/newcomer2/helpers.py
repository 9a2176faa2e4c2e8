"""Shared helpers: the simulator's commands run as a user runs them, from this folder; the
real host left in each state (``inflight``, a fixture, re-exported by ``conftest.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def sims(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m sims ARGS`` with this venv's python, from this folder."""
    return subprocess.run(
        [sys.executable, "-m", "sims", *args],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def leave(state: str, data: Path, *extra: str) -> str:
    """Release 1 on the real host, left in ``state`` (inflight.py); its summary line."""
    done = subprocess.run(
        [sys.executable, str(HERE / "inflight.py"), state, str(data), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def leave_killed(data: Path, *extra: str) -> None:
    """Release 1 on the real host, SIGKILLed while p3's transfer is at the bank."""
    data.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, str(HERE / "inflight.py"), "killed", str(data), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not (data / "at-the-bank").exists():
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the killed state never reached the bank"
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
        if process.stderr:
            process.stderr.close()


@pytest.fixture(scope="session")
def inflight(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The data folders release 1 left on the real host, by state."""
    root = tmp_path_factory.mktemp("inflight")
    folders = {}
    for state in ("committed", "timeout", "unavailable"):
        folders[state] = root / state
        leave(state, folders[state])
    folders["killed"] = root / "killed"
    leave_killed(folders["killed"])
    return folders
