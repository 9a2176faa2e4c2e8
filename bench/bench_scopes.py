"""A host holding many scopes: ``python -m bench.bench_scopes [SCOPES]``.

* What a call to an already-open scope costs with 10 scopes open and with SCOPES (10 000 by
  default) open, in one run: the ratio is what holding many scopes adds to each call.
* Memory per idle scope: the growth of the process (resident set, which includes each in-memory
  SQLite database, and the Python heap alone, by ``tracemalloc``) while SCOPES idle scopes are
  opened, divided by SCOPES.
* A directory host touching SCOPES scope files under ``max_open_scopes=64``: the most open at
  once and the time per touch.
"""

from __future__ import annotations

import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import trio
import trio.testing

from driver import JobRunFilter
from scopehost import StoreClock, open_scope_host


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def call_cost(open_scopes: int, calls: int = 5_000) -> float:
    """CPU seconds per ``list`` call to one open scope while ``open_scopes`` are open."""

    async def main() -> float:
        async with open_scope_host(clock=StoreClock()) as host:
            for index in range(open_scopes):
                await host.stub(f"s{index}").list(JobRunFilter())
            stub = host.stub("s0")
            started = time.process_time()
            for _ in range(calls):
                await stub.list(JobRunFilter())
            return (time.process_time() - started) / calls

    cost: float = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return cost


def memory_per_idle_scope(scopes: int) -> tuple[float, float]:
    """(resident bytes, Python heap bytes) per idle in-memory scope."""

    async def main() -> tuple[float, float]:
        async with open_scope_host(clock=StoreClock()) as host:
            await host.stub("warm").list(JobRunFilter())
            tracemalloc.start()
            rss = _rss_bytes()
            heap = tracemalloc.get_traced_memory()[0]
            for index in range(scopes):
                await host.stub(f"s{index}").list(JobRunFilter())
            grown = (_rss_bytes() - rss) / scopes, (tracemalloc.get_traced_memory()[0] - heap)
            tracemalloc.stop()
            return grown[0], grown[1] / scopes

    result: tuple[float, float] = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return result


def directory_touches(scopes: int, max_open: int = 64) -> tuple[int, float]:
    """(most scopes open at once, CPU seconds per touch) through one directory host."""

    async def main(directory: str) -> tuple[int, float]:
        most = 0
        async with open_scope_host(directory, clock=StoreClock(), max_open_scopes=max_open) as host:
            started = time.process_time()
            for index in range(scopes):
                await host.stub(f"s{index}").list(JobRunFilter())
                most = max(most, host.open_scopes)
            return most, (time.process_time() - started) / scopes

    fast = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=fast if fast.is_dir() else None) as directory:
        result: tuple[int, float] = trio.run(
            main, directory, clock=trio.testing.MockClock(autojump_threshold=0)
        )
    return result


def main(scopes: int = 10_000) -> None:
    call_cost(10, calls=500)  # warm
    few, many = call_cost(10), call_cost(scopes)
    print(f"call to an open scope, 10 open:{few * 1e6:>10.1f} µs")
    print(f"call to an open scope, {scopes:,} open:{many * 1e6:>7.1f} µs   {many / few:.2f}x")
    rss, heap = memory_per_idle_scope(scopes)
    print(
        f"memory per idle in-memory scope: {rss / 1024:.1f} KiB resident, "
        f"{heap / 1024:.1f} KiB heap"
    )
    most, per_touch = directory_touches(scopes)
    print(
        f"directory host, {scopes:,} scopes touched under max_open_scopes=64: at most {most} open, "
        f"{per_touch * 1e3:.2f} ms per touch (new scope file each)"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
