"""How much faster ``explore --jobs N`` searches than ``--jobs 1``, on the project's examples, and
that it gives the same answers.

Run as ``python -m bench.bench_explore [WORLDS] [JOBS]`` (defaults 1000 and 2). Each example
scenario is searched with a world budget of WORLDS, once in this process and once on JOBS worker
processes, back to back, several rounds, and the two reports are compared line by line (timings
aside): they must be the same. The figures are wall-clock seconds of the search (no fresh-process
check of a finding, which both would do alike), and the speed-up is their ratio within one run.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from pathlib import Path

from sims import find_scenario, load_file, search

EXAMPLES = Path(__file__).parents[1] / "examples"
_TIMING = re.compile(r" in [0-9.]+ s of (?:CPU|wall-clock time on \d+ processes)")


def _scenarios() -> list[str]:
    return [
        f"{path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}:{name}"
        for path in sorted(EXAMPLES.glob("*.py"))
        for name in load_file(path)
    ]


def _searched(scenario: str, worlds: int, jobs: int) -> tuple[float, list[str], int]:
    started = time.perf_counter()
    report = search(
        find_scenario(scenario).ref,
        max_worlds=worlds,
        max_seconds=None,
        fresh_process=False,
        jobs=jobs,
    )
    seconds = time.perf_counter() - started
    return seconds, [_TIMING.sub(" in T", line) for line in report.lines()], report.worlds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("worlds", nargs="?", type=int, default=1000)
    parser.add_argument("jobs", nargs="?", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    print(f"cores: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")
    header = f"{arguments.jobs} jobs"
    print(f"{'scenario':<52} {'worlds':>6} {'1 job':>7} {header:>7} {'speed-up':>8}")
    totals = {1: 0.0, arguments.jobs: 0.0}
    for scenario in _scenarios():
        times: dict[int, list[float]] = {1: [], arguments.jobs: []}
        answers: dict[int, list[str]] = {}
        ran = 0
        for _ in range(arguments.rounds):
            for jobs in (1, arguments.jobs):
                seconds, lines, ran = _searched(scenario, arguments.worlds, jobs)
                times[jobs].append(seconds)
                if answers.setdefault(jobs, lines) != lines:
                    raise AssertionError(f"{scenario}: two runs with {jobs} jobs differ")
        if answers[1] != answers[arguments.jobs]:
            raise AssertionError(f"{scenario}: --jobs {arguments.jobs} answered otherwise")
        one, many = (statistics.median(times[j]) for j in (1, arguments.jobs))
        totals[1] += one
        totals[arguments.jobs] += many
        print(f"{scenario:<52} {ran:>6} {one:>6.2f}s {many:>6.2f}s {one / many:>7.2f}×")
    one, many = totals[1], totals[arguments.jobs]
    print(f"{'all, medians summed':<52} {'':>6} {one:>6.2f}s {many:>6.2f}s {one / many:>7.2f}×")
    print("every report was the same with 1 job and with", arguments.jobs)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
