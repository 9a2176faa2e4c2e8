"""The 100 000-object walk, timed: ``python -m bench.bench_walk [OBJECTS] [SEED]``.

Runs the walk of ``bench.walk`` (chunks of 100, one step per object writing an effect row through
``ctx.scope()``, with evictions, a drive restart and transient upstream failures) in virtual time,
checks it against the spec, and prints its wall time and passes per second.
"""

from __future__ import annotations

import sys
import time

import trio
import trio.testing

from bench.walk import WalkResult, check, run_walk


def main(argv: list[str]) -> int:
    objects = int(argv[0]) if argv else 100_000
    seed = int(argv[1]) if len(argv) > 1 else 1
    results: list[WalkResult] = []

    async def walk() -> None:
        results.append(await run_walk(objects, seed=seed))

    started = time.perf_counter()
    trio.run(walk, clock=trio.testing.MockClock(autojump_threshold=0))
    wall = time.perf_counter() - started
    [result] = results
    check(result, objects)
    duplicates = sum(count - 1 for count in result.effects.values() if count > 1)
    print(f"objects        {objects}")
    print(f"passes         {result.passes}")
    print(f"restarts       {result.restarts}")
    print(f"duplicates     {duplicates} (only where a memo was lost)")
    print(f"wall time      {wall:.2f} s")
    print(f"passes/sec     {result.passes / wall:.1f}")
    print(f"objects/sec    {objects / wall:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
