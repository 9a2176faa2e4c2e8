"""Two host processes serving the same scopes from one directory, killed part-way, lose nothing
they acknowledged: neither takes the other's commits or checkpoints for a change, and neither
drops the locks that tell SQLite the other is there (see ``scopehost._descriptors``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

#: How many acknowledged starts each writer must have printed before both are killed.
ACKS = 150
REPO = Path(__file__).resolve().parents[2]


def writer(folder: Path, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.scopehost.two_hosts", "write", str(folder), name],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_acks(process: subprocess.Popen[str], acks: list[str], enough: threading.Event) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        acks.append(line.strip())
        if len(acks) >= ACKS:
            enough.set()
    enough.set()  # it ended: the test says how


def test_two_host_processes_on_one_folder_killed_part_way_lose_no_acknowledged_write(
    tmp_path: Path,
) -> None:
    writers = [writer(tmp_path, name) for name in ("a", "b")]
    acks: list[list[str]] = [[], []]
    ready = [threading.Event(), threading.Event()]
    readers = [
        threading.Thread(target=read_acks, args=(process, found, event), daemon=True)
        for process, found, event in zip(writers, acks, ready, strict=True)
    ]
    try:
        for thread in readers:
            thread.start()
        for event in ready:
            assert event.wait(timeout=120), "a writer acknowledged too few starts in 120 s"
    finally:
        for process in writers:
            process.send_signal(signal.SIGKILL)
        for process in writers:
            process.wait(timeout=30)
    for thread in readers:
        thread.join(timeout=30)
    for process, found in zip(writers, acks, strict=True):
        assert process.stdout is not None
        assert process.stderr is not None
        errors = process.stderr.read()
        process.stdout.close()
        process.stderr.close()
        assert process.returncode == -signal.SIGKILL, errors
        assert len(found) >= ACKS, errors
    ids = tmp_path / "acknowledged.txt"
    ids.write_text("\n".join(acks[0] + acks[1]))
    counted = subprocess.run(
        [sys.executable, "-m", "tests.scopehost.two_hosts", "count", str(tmp_path), str(ids)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert counted.stdout.strip() == "0", counted.stdout + counted.stderr
    assert not list(tmp_path.glob("*-changed"))
