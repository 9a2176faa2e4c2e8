"""What measuring the user's code costs a search's world, as ratios inside one run.

Run as ``python -m bench.bench_user_code [WORLDS] [ROUNDS] [--uninstrumented]`` (defaults 40
and 3). For each
scenario, the same WORLDS worlds (seeds 1..WORLDS, the clean plan) are run three ways, one after
another for each world so that the machine's load falls on all three alike:

- ``simulate``: a plain simulation, what ``python -m sims run`` does;
- ``measured``: the same simulation with the user's code measured (:mod:`sims.search._user_code`:
  the probes' lists cleared before, read after), nothing else;
- ``world``: a search's world as a worker runs it (``run_world``: measured, and reduced to its
  features, struck calls and calls made).

The figures are the CPU seconds per world, each the median of ROUNDS rounds, and the ratios of
``measured`` and ``world`` to ``simulate``.

The user's files are compiled with their probes as they load (:mod:`sims.scenarios._instrument`),
so ``simulate`` runs them too: ``--uninstrumented`` loads them without, to compare the
``simulate`` column of two runs (the probes' own cost, which one run cannot interleave).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from sims import find_scenario, simulate
from sims.faults._plan import NO_FAULTS
from sims.scenarios import _instrument
from sims.scenarios._registry import ScenarioRef
from sims.search._jobs import WorldJob, run_world
from sims.search._user_code import measuring

EXAMPLES = Path(__file__).parents[1] / "examples"
SCENARIOS = (
    f"{EXAMPLES / 'payment_provider.py'}:pay-once",
    f"{EXAMPLES / 'shop' / 'world.py'}:order-fixed",
)


def _ways(ref: ScenarioRef) -> dict[str, Callable[[int], object]]:
    def plain(seed: int) -> object:
        return simulate(ref, seed, keep_trace=True)

    def measured(seed: int) -> object:
        with measuring(ref):
            return simulate(ref, seed, keep_trace=True)

    def world(seed: int) -> object:
        return run_world(WorldJob(ref, seed, None, NO_FAULTS))

    return {"simulate": plain, "measured": measured, "world": world}


def _round(ref: ScenarioRef, worlds: int) -> dict[str, float]:
    ways = _ways(ref)
    spent = dict.fromkeys(ways, 0.0)
    for seed in range(1, worlds + 1):
        for name, way in ways.items():
            started = time.process_time()
            way(seed)
            spent[name] += time.process_time() - started
    return {name: seconds / worlds for name, seconds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("worlds", nargs="?", type=int, default=40)
    parser.add_argument("rounds", nargs="?", type=int, default=3)
    parser.add_argument("--uninstrumented", action="store_true")
    arguments = parser.parse_args()
    if arguments.uninstrumented:  # no file is the user's: each is compiled as Python compiles it
        _instrument.is_users = lambda path: False
    print(f"cores: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")
    print(
        f"{'scenario':<34} {'simulate':>9} {'measured':>9} {'world':>9} "
        f"{'measured/simulate':>18} {'world/simulate':>15}"
    )
    for scenario in SCENARIOS:
        ref = find_scenario(scenario).ref
        _round(ref, 2)  # warm: the files loaded, the meter made
        rounds = [_round(ref, arguments.worlds) for _ in range(arguments.rounds)]
        median = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
        shown = f"{Path(ref.path or '').relative_to(EXAMPLES)}:{ref.name}"
        print(
            f"{shown:<34} {median['simulate'] * 1000:>7.1f}ms {median['measured'] * 1000:>7.1f}ms "
            f"{median['world'] * 1000:>7.1f}ms {median['measured'] / median['simulate']:>18.2f} "
            f"{median['world'] / median['simulate']:>15.2f}"
        )


if __name__ == "__main__":
    main()
