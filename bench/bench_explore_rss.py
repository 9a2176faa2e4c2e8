"""Whether a long ``explore`` keeps its memory flat: its resident size, sampled as it searches.

Run as ``python -m bench.bench_explore_rss [BUDGET] [EVERY]`` (defaults ``600s`` and 10). It starts
``python -m sims explore examples/double_charge.py:charge-once --budget BUDGET`` as a child process
and reads the child's resident set size (``VmRSS`` in ``/proc``) every EVERY seconds of wall-clock
time until it ends, with the child's CPU time then (its budget is CPU time), and prints each
sample and the growth as a ratio of the figure after its first minute of CPU.
Linux only (it reads ``/proc``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path


def _rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def _cpu_s(pid: int) -> float | None:
    """The child's CPU time (user and system): its budget is CPU seconds, not wall-clock ones."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("budget", nargs="?", default="600s")
    parser.add_argument("every", nargs="?", type=float, default=10.0)
    arguments = parser.parse_args()
    command = [
        sys.executable,
        "-m",
        "sims",
        "explore",
        "examples/double_charge.py:charge-once",
        "--budget",
        arguments.budget,
    ]
    print("$", " ".join(command[1:]), flush=True)
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    started = time.monotonic()
    samples: list[tuple[float, float]] = []
    while child.poll() is None:
        time.sleep(arguments.every)
        rss, cpu = _rss_mb(child.pid), _cpu_s(child.pid)
        if rss is not None and cpu is not None and child.poll() is None:
            elapsed = time.monotonic() - started
            samples.append((cpu, rss))
            print(f"{elapsed:6.0f} s  {cpu:6.1f} s of CPU  {rss:6.1f} MB", flush=True)
    out, _ = child.communicate()
    print(out.strip().splitlines()[0] if out.strip() else "(no report)")
    if samples:
        first = next((rss for cpu, rss in samples if cpu >= 60), samples[0][1])
        peak = max(rss for _, rss in samples)
        print(
            f"first {samples[0][1]:.1f} MB, after 60 s of CPU {first:.1f} MB, "
            f"last {samples[-1][1]:.1f} MB, peak {peak:.1f} MB; "
            f"last / 60 s = {samples[-1][1] / first:.2f}"
        )


if __name__ == "__main__":
    main()
