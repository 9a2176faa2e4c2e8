"""The spec's opening example, timed: ``python -m bench.bench_walk [SEED]``.

Runs the ``walk-100k`` world: 100 000 objects, 100 per pass, one step per object writing an effect
row through ``ctx.scope()``, through evictions, a deploy, transient upstream failures and lost
step records, with every invariant checked live. It prints the wall time and passes per second.
"""

from __future__ import annotations

import sys
import time

from sims import simulate


def main(seed: int = 1) -> int:
    started, cpu_started = time.perf_counter(), time.process_time()
    simulation = simulate("walk-100k", seed)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    facts = simulation.facts
    run = facts.only_run()
    effects = simulation.outcome.effects["scope-1"]
    passes = facts.count("handler.invoke")
    print(f"objects           {run.counters.get('walked', 0):,.0f} walked, run {run.status}")
    print(f"passes            {passes:,}")
    print(f"simulated RPCs    {facts.count('rpc.exec'):,}")
    print(f"effects twice     {sum(1 for n in effects.values() if n > 1)} (each explained)")
    print(f"violations        {len(simulation.report.violations)}")
    print(f"wall time         {wall:.1f} s")
    print(f"CPU time          {cpu:.1f} s (what the machine's other load does not add to)")
    print(f"passes/sec        {passes / wall:.1f}")
    print(f"objects/sec       {len(effects) / wall:,.0f}")
    return 0 if simulation.ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
