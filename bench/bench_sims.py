"""How fast the simulator runs worlds: seeds per second, the same per 1 000 bare Trio round trips,
scheduler batches per store call, and how a sweep scales with processes.

Run as ``python -m bench.bench_sims [SEEDS]``. Each world is a whole ``trio.run`` under a
``VirtualClock``, with its trace kept and its checks run, as ``python -m sims sweep`` runs it.
Rates are CPU time of this process (``time.process_time``), and each world figure is also given
per 1 000 bare Trio request/reply round trips measured right before and after it (see
``bench/_rounds.py``): the ratio is what to compare between runs and machines.
"""

from __future__ import annotations

import argparse
import time

from sims import simulate, sweep
from sims.oracle._oracle import Oracle

from ._rounds import bare_round_trips_per_s, counting_rounds, rounds_per_call

DEFAULT_SEEDS = 200


def world_rate(scenario: str, seeds: int) -> tuple[float, float]:
    """(worlds per CPU second, simulated RPCs per CPU second) for ``seeds`` worlds."""
    rpcs = 0
    started = time.process_time()
    for seed in range(seeds):
        rpcs += simulate(scenario, seed).facts.count("rpc.exec")
    elapsed = time.process_time() - started
    return seeds / elapsed, rpcs / elapsed


def oracle_share(scenario: str, seeds: int) -> float:
    """The oracle's share of a world's time: the worlds' time (the oracle runs live in it), then
    the oracle alone over the same traces, in one run."""
    traces = []
    started = time.process_time()
    for seed in range(seeds):
        traces.append(simulate(scenario, seed).outcome.trace.events)
    worlds = time.process_time() - started
    started = time.process_time()
    for events in traces:
        oracle = Oracle(lambda check, run, t, text: None)
        for event in events:
            oracle.observe(event)
    alone = time.process_time() - started
    return alone / worlds


def batches_per_rpc(scenario: str, seeds: int = 20) -> float:
    """Scheduler batches per simulated RPC over whole worlds (ticks, sleeps and all)."""

    def worlds() -> int:
        return sum(simulate(scenario, seed).facts.count("rpc.exec") for seed in range(seeds))

    rpcs, rounds = counting_rounds(worlds)
    return float(rounds.batches / rpcs)


def sweep_seconds(scenario: str, seeds: int, jobs: int) -> float:
    started = time.perf_counter()
    report = sweep(scenario, range(seeds), jobs=jobs)
    assert not report.failing, "\n".join(report.lines())
    return time.perf_counter() - started


def main(seeds: int = DEFAULT_SEEDS) -> None:
    world_rate("late-begin", 5)  # warm imports and caches
    rates: dict[str, float] = {}
    for legs, ms in (("1 ms each leg", 1.0), ("no latency", 0.0)):
        batches, idle = rounds_per_call(request_ms=ms, reply_ms=ms)
        print(f"plain store call, {legs:<14} {batches:.2f} batches, {idle:.2f} idle rounds")
    print(f"worlds per figure: {seeds}, one process, CPU time")
    for scenario in ("late-begin", "random"):
        before = bare_round_trips_per_s()
        worlds, rpcs = world_rate(scenario, seeds)
        after = bare_round_trips_per_s()
        per_1000 = 1000 * worlds / ((before + after) / 2)
        rates[scenario] = worlds
        print(
            f"{scenario:<12} {worlds:>7.1f} seeds/s  {rpcs:>8,.0f} RPCs/s  "
            f"{per_1000:.3f} worlds per 1 000 bare round trips  "
            f"{batches_per_rpc(scenario):.2f} batches per RPC"
        )
    for scenario in ("late-begin", "random"):
        share = oracle_share(scenario, seeds)
        print(
            f"{scenario:<12} the oracle is {share:.0%} of a world's time: without it, the "
            f"{rates[scenario]:.1f} seeds/s above would be {rates[scenario] / (1 - share):.1f}"
        )
    one = sweep_seconds("random", seeds, jobs=1)
    two = sweep_seconds("random", seeds, jobs=2)
    print(f"sweep random --seeds 0..{seeds - 1}: {one:.1f} s with 1 job, {two:.1f} s with 2 jobs")
    print(f"speed-up at 2 jobs: {one / two:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.bench_sims", description=__doc__)
    parser.add_argument(
        "seeds", nargs="?", type=int, default=DEFAULT_SEEDS, help="worlds per figure"
    )
    seeds = parser.parse_args().seeds
    if seeds < 1:
        parser.error(f"seeds {seeds}: pass a whole number of worlds, 1 or more")
    main(seeds)
