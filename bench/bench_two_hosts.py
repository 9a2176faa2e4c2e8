"""Two host processes on one folder, killed part-way: how many acknowledged starts are lost.

``python -m bench.bench_two_hosts [SECONDS] [ROUNDS]``:

Two processes each open a scope host (the output gate on) on one temporary folder and start runs
on the same three scopes, printing each start as it is acknowledged; after SECONDS (20 by
default) both are killed with SIGKILL. A fresh host then opens the folder and counts the
acknowledged starts it does not find. ROUNDS rounds (1 by default). The writers are
``tests/scopehost/two_hosts.py``, which the suite's test runs for a few hundred starts.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _collect(process: subprocess.Popen[str], acks: list[str]) -> None:
    assert process.stdout is not None
    acks.extend(line.strip() for line in process.stdout)


def one_round(seconds: float) -> tuple[int, int, int, int]:
    """(starts acknowledged by each writer, lost, folders refused as changed)."""
    with tempfile.TemporaryDirectory(dir=REPO) as name:
        folder = Path(name)
        writers = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.scopehost.two_hosts", "write", name, label],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for label in ("a", "b")
        ]
        acks: list[list[str]] = [[], []]
        readers = [
            threading.Thread(target=_collect, args=(process, found))
            for process, found in zip(writers, acks, strict=True)
        ]
        for thread in readers:
            thread.start()
        time.sleep(seconds)
        for process in writers:
            process.send_signal(signal.SIGKILL)
        for process, thread in zip(writers, readers, strict=True):
            process.wait()
            thread.join()
            assert process.stdout is not None
            process.stdout.close()
        ids = folder / "acknowledged.txt"
        ids.write_text("\n".join(acks[0] + acks[1]))
        counted = subprocess.run(
            [sys.executable, "-m", "tests.scopehost.two_hosts", "count", name, str(ids)],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        changed = len(list(folder.glob("*-changed")))
        return len(acks[0]), len(acks[1]), int(counted.stdout), changed


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    print("round  acknowledged a  acknowledged b  lost  scopes refused as changed")
    for index in range(1, rounds + 1):
        first, second, lost, changed = one_round(seconds)
        print(f"{index:5}  {first:14}  {second:14}  {lost:4}  {changed:25}")


if __name__ == "__main__":
    main()
