"""How fast the simulator runs worlds: seeds per second, simulated RPCs per second, and how a sweep
scales with processes.

Run as ``python -m bench.bench_sims [SEEDS]``. Each world is a whole ``trio.run`` under a
``MockClock``, with its trace kept and its checks run, exactly as ``python -m sims sweep`` runs it.
"""

from __future__ import annotations

import sys
import time

from sims import simulate, sweep
from sims._oracle import Oracle

DEFAULT_SEEDS = 200


def world_rate(scenario: str, seeds: int) -> tuple[float, float]:
    """(worlds per second, simulated RPCs per second) for ``seeds`` worlds in this process."""
    rpcs = 0
    started = time.perf_counter()
    for seed in range(seeds):
        rpcs += simulate(scenario, seed).facts.count("rpc.exec")
    elapsed = time.perf_counter() - started
    return seeds / elapsed, rpcs / elapsed


def oracle_share(scenario: str, seeds: int) -> tuple[float, float]:
    """(the oracle's share of a world's time, worlds per second without it), measured in one run:
    the worlds' time (the oracle runs live in it), then the oracle alone over the same traces."""
    traces = []
    started = time.perf_counter()
    for seed in range(seeds):
        traces.append(simulate(scenario, seed).outcome.trace.events)
    worlds = time.perf_counter() - started
    started = time.perf_counter()
    for events in traces:
        oracle = Oracle(lambda check, run, t, text: None)
        for event in events:
            oracle.observe(event)
    alone = time.perf_counter() - started
    return alone / worlds, seeds / (worlds - alone)


def sweep_seconds(scenario: str, seeds: int, jobs: int) -> float:
    started = time.perf_counter()
    report = sweep(scenario, range(seeds), jobs=jobs)
    assert not report.failing, "\n".join(report.lines())
    return time.perf_counter() - started


def main(seeds: int = DEFAULT_SEEDS) -> None:
    world_rate("late-begin", 5)  # warm imports and caches
    print(f"worlds per figure: {seeds}, one process")
    for scenario in ("late-begin", "random"):
        worlds, rpcs = world_rate(scenario, seeds)
        print(f"{scenario:<12} {worlds:>8.1f} seeds/s   {rpcs:>10,.0f} simulated RPCs/s")
    for scenario in ("late-begin", "random"):
        share, without = oracle_share(scenario, seeds)
        print(
            f"{scenario:<12} the oracle is {share:.0%} of a world's time "
            f"({without:.1f} seeds/s without it)"
        )
    one = sweep_seconds("random", seeds, jobs=1)
    two = sweep_seconds("random", seeds, jobs=2)
    print(f"sweep random --seeds 0..{seeds - 1}: {one:.1f} s with 1 job, {two:.1f} s with 2 jobs")
    print(f"speed-up at 2 jobs: {one / two:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SEEDS)
