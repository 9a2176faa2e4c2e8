"""What the CPU allowance costs a world that ends in time.

Run as ``python -m bench.bench_watchdog [WORLDS]`` (default 300). It runs
``examples/double_charge.py:charge-once`` WORLDS times with the default allowance and WORLDS times
with none (``WorldSetup(cpu_allowance_s=None)``), alternating in rounds, and prints the CPU time
of each and their ratio, within one run.
"""

from __future__ import annotations

import argparse
import time

import attrs

from sims import find_scenario, run_world

ROUNDS = 5


def _worlds(count: int, allowance: float | None) -> float:
    found = find_scenario("examples/double_charge.py:charge-once")
    started = time.process_time()
    for seed in range(count):
        setup = attrs.evolve(found.setup(seed), cpu_allowance_s=allowance, trace=False)
        run_world(seed, setup, found.drive, settles=found.settles)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("worlds", nargs="?", type=int, default=300)
    count = parser.parse_args().worlds
    _worlds(20, None)  # warm up
    watched, bare = 0.0, 0.0
    for _ in range(ROUNDS):
        watched += _worlds(count, 60.0)
        bare += _worlds(count, None)
    n = count * ROUNDS
    print(f"{n} worlds each: with the allowance {watched / n * 1e3:.3f} ms of CPU a world,")
    print(f"without {bare / n * 1e3:.3f} ms; ratio {watched / bare:.3f}")


if __name__ == "__main__":
    main()
