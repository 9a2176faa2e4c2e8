"""The simulator's cost in machine instructions: a figure a shared machine cannot disturb.

Run as ``python -m bench.bench_instructions [--seeds N] [--against DIR]``. Needs ``valgrind``
(Debian: ``apt-get install valgrind``). Each figure runs a fresh interpreter under
``valgrind --tool=cachegrind --cache-sim=no``, which counts the instructions the process executed.
A world's count is the count of a process that ran N worlds less that of one that ran none, over N
(imports, warm-up and interpreter start cancel out). Other processes' load does not change the
count, so two trees compare to within a percent; ``bench_sims`` gives the same ratio in CPU time.

``--against DIR`` measures another checkout of this repository too (for example an older commit
added with ``git worktree add DIR COMMIT``), with this interpreter and these packages, and prints
each ratio. A world is the same world in both only if the scenario did not change between them;
the RPCs per world say whether it did.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: What the child process runs: ``WORLDS`` worlds of ``SCENARIO`` from the tree at ``TREE`` (after
#: three to warm up), or ``ROUND_TRIPS`` bare Trio request/reply round trips; it prints the RPCs.
_CHILD = """
import math, os, sys
sys.path.insert(0, os.environ["TREE"])
import trio
if os.environ.get("ROUND_TRIPS"):
    async def main():
        requests, serve = trio.open_memory_channel(math.inf)
        replies, answers = trio.open_memory_channel(math.inf)
        async def server():
            async for request in serve:
                replies.send_nowait(request)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server)
            for index in range(int(os.environ["ROUND_TRIPS"])):
                requests.send_nowait(index)
                await answers.receive()
            nursery.cancel_scope.cancel()
    trio.run(main)
    print(0)
else:
    from sims import simulate
    scenario = os.environ["SCENARIO"]
    for seed in range(3):
        simulate(scenario, seed)
    worlds = int(os.environ["WORLDS"])
    print(sum(simulate(scenario, seed).facts.count("rpc.exec") for seed in range(worlds)))
"""

_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def instructions(tree: Path, **env: str) -> tuple[int, int]:
    """(instructions the child executed, RPCs it reported)."""
    done = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-c",
            _CHILD,
        ],
        env={**os.environ, "PYTHONHASHSEED": "0", "TREE": str(tree), **env},
        capture_output=True,
        text=True,
        check=False,
    )
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the measured process failed in {tree}:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", "")), int(done.stdout.split()[-1])


def per_world(tree: Path, scenario: str, seeds: int) -> tuple[float, float]:
    """(instructions per world, RPCs per world) over ``seeds`` worlds."""
    base, _ = instructions(tree, SCENARIO=scenario, WORLDS="0")
    total, rpcs = instructions(tree, SCENARIO=scenario, WORLDS=str(seeds))
    return (total - base) / seeds, rpcs / seeds


def per_round_trip(tree: Path, trips: int = 20_000) -> float:
    base, _ = instructions(tree, ROUND_TRIPS="1")
    total, _ = instructions(tree, ROUND_TRIPS=str(trips + 1))
    return (total - base) / trips


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_instructions")
    parser.add_argument("--seeds", type=int, default=10, help="worlds per figure (default 10)")
    parser.add_argument("--against", type=Path, help="another checkout to measure and compare")
    options = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed; on Debian: apt-get install valgrind")
    if options.seeds < 1:
        raise SystemExit(f"--seeds {options.seeds}: pass a whole number of worlds, 1 or more")
    here = Path(__file__).resolve().parent.parent
    trees = [here] + ([options.against.resolve()] if options.against else [])
    trip = per_round_trip(here)
    print(f"bare Trio round trip: {trip / 1000:,.1f} k instructions")
    print("every figure below is in instructions, the round trips too (bench_sims counts CPU time)")
    print(f"worlds per figure: {options.seeds}, seeds 0..{options.seeds - 1}")
    for scenario in ("late-begin", "random"):
        figures = [per_world(tree, scenario, options.seeds) for tree in trees]
        for tree, (cost, rpcs) in zip(trees, figures, strict=True):
            name = "this tree" if tree == here else str(tree)
            print(
                f"{scenario:<11} {name:<12} {cost / 1e6:7.2f} M instructions per world  "
                f"{rpcs:6.1f} RPCs per world  {cost / rpcs / 1000:6.0f} k per RPC  "
                f"{1000 * trip / cost:.3f} worlds per 1 000 bare round trips"
            )
        if len(figures) == 2:
            (ours, our_rpcs), (theirs, their_rpcs) = figures
            print(
                f"{scenario:<11} speed against {options.against}: {theirs / ours:.2f}x per world, "
                f"{(theirs / their_rpcs) / (ours / our_rpcs):.2f}x per RPC"
            )


if __name__ == "__main__":
    main()
