"""What a world costs on files: the same worlds in memory and on SQLite files, alternating.

Run as ``python -m bench.bench_on_files [SEEDS] [ROUNDS]``. Each round runs seeds 0 to SEEDS - 1
of a scenario in memory, then the same worlds with ``WorldSetup(on_files=True)`` (a fresh
temporary folder per world, its scopes in WAL files, the output gate on and syncing inline, the
folder removed after), in one process. Wall time counts the syncs, which wait on the disk; CPU
time (``time.process_time``) counts what the process itself does. The ratios within a round are
what to compare between runs and machines. The traces of ``late-begin`` are checked to be the
same bytes; a ``random`` world on files does more than in memory (its operators and the power
touch its files: ``world.files``), so its worlds are checked to hold every rule.
"""

from __future__ import annotations

import argparse
import statistics
import time

import attrs

from sims import SCENARIOS, run_world

DEFAULT_SEEDS = 20
DEFAULT_ROUNDS = 3


def worlds(scenario: str, seeds: int, *, on_files: bool) -> tuple[float, float, list[str]]:
    """(wall seconds, CPU seconds, trace digests) of ``seeds`` worlds of ``scenario``, each
    checked to hold every rule."""
    found = SCENARIOS[scenario]
    digests = []
    wall, cpu = time.perf_counter(), time.process_time()
    for seed in range(seeds):
        setup = attrs.evolve(found.setup(seed), on_files=on_files)
        outcome = run_world(seed, setup, found.drive)
        assert outcome.report.ok, f"{scenario} seed {seed}: {outcome.report.verdict()}"
        digests.append(outcome.trace.digest())
    return time.perf_counter() - wall, time.process_time() - cpu, digests


def main(seeds: int = DEFAULT_SEEDS, rounds: int = DEFAULT_ROUNDS) -> None:
    worlds("late-begin", 2, on_files=True)  # warm imports and caches
    print(f"ms per world, {seeds} worlds a figure: in memory / on files (ratio)")
    for scenario in ("late-begin", "random"):
        walls, cpus = [], []
        for number in range(1, rounds + 1):
            memory_wall, memory_cpu, memory = worlds(scenario, seeds, on_files=False)
            files_wall, files_cpu, files = worlds(scenario, seeds, on_files=True)
            if scenario == "late-begin":
                assert files == memory, f"{scenario}: a world on files wrote another trace"
            walls.append(files_wall / memory_wall)
            cpus.append(files_cpu / memory_cpu)
            print(
                f"{scenario:<11} round {number}: wall {1000 * memory_wall / seeds:7.1f} / "
                f"{1000 * files_wall / seeds:7.1f} ({walls[-1]:5.2f})  "
                f"CPU {1000 * memory_cpu / seeds:7.1f} / {1000 * files_cpu / seeds:7.1f} "
                f"({cpus[-1]:5.2f})"
            )
        print(
            f"{scenario:<11} median ratio: wall {statistics.median(walls):.2f}, "
            f"CPU {statistics.median(cpus):.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.bench_on_files", description=__doc__)
    parser.add_argument(
        "seeds", nargs="?", type=int, default=DEFAULT_SEEDS, help="worlds per figure"
    )
    parser.add_argument("rounds", nargs="?", type=int, default=DEFAULT_ROUNDS, help="rounds")
    arguments = parser.parse_args()
    if arguments.seeds < 1 or arguments.rounds < 1:
        parser.error("seeds and rounds: pass whole numbers, 1 or more")
    main(arguments.seeds, arguments.rounds)
