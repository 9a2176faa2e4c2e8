"""How long other scopes wait on one scope's big operation: ``python -m bench.bench_stall [RUNS]``.

One scope imports a dump of RUNS runs (200 000 by default), exports it again, and stores a run
whose payload is a list of 5 000 000 numbers, while a second scope is called in a loop (``list``,
one call after another). Printed: each big operation's own time, and the longest the light scope
went without a reply while it ran, once with heavy operations in a worker thread (the host as it
is) and once with them inline in the event loop (as before). Wall clock, in-memory host.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial

import attrs
import trio

import scopehost._actor
from driver import JobRunFilter, JobRunKey, JobRunRow
from driver._json import dumps
from scopehost import JobRunDump, ScopeHost, open_scope_host

STARTED = "2026-10-04T12:00:00.000Z"


def _dump(runs: int) -> JobRunDump:
    key = JobRunKey("mod", "walk", "i")
    template = attrs.evolve(
        JobRunRow.fresh("0", key, payload="{}", at=STARTED),
        status="done",
        ended_at=STARTED,
    )
    rows = tuple(
        attrs.evolve(template, id=f"{index:026d}", instance=str(index)) for index in range(runs)
    )
    return JobRunDump(scope_id="big", runs=rows, steps=())


async def _longest_wait(
    host: ScopeHost, work: Callable[[], Awaitable[object]]
) -> tuple[float, float]:
    """(the work's own seconds, the longest gap between two replies of the light scope)."""
    light = host.stub("light")
    await light.list(JobRunFilter())
    longest = 0.0
    done = False

    async def ping() -> None:
        nonlocal longest
        last = time.monotonic()
        while not done:
            await light.list(JobRunFilter())
            await trio.sleep(0)
            now = time.monotonic()
            longest = max(longest, now - last)
            last = now

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ping)
        await trio.sleep(0.05)
        started = time.monotonic()
        await work()
        took = time.monotonic() - started
        done = True
    return took, longest


async def _measure(runs: int) -> list[tuple[str, float, float]]:
    dump = _dump(runs)
    payload = dumps(list(range(5_000_000)))
    big_row = JobRunRow.fresh(
        "01BIGPAYLOAD", JobRunKey("mod", "walk", "p"), payload=payload, at=STARTED
    )
    figures = []
    async with open_scope_host() as host:
        big = host.stub("big")
        await big.list(JobRunFilter())
        for name, work in (
            (f"import {runs} runs", partial(big.import_dump, dump, "big")),
            (f"export {runs} runs", big.export_dump),
            ("store a 5M-element payload", partial(big.start_or_join, big_row.key, big_row)),
        ):
            took, longest = await _longest_wait(host, work)
            figures.append((name, took, longest))
    return figures


def main(runs: int) -> None:
    results = {}
    for mode in ("thread", "inline"):
        if mode == "inline":
            # As before this change: every operation inline in the event loop.
            setattr(scopehost._actor, "runs_on_the_wall_clock", lambda: False)  # noqa: B010
        results[mode] = trio.run(_measure, runs)
    print(f"{'operation':<28} {'took':>7} {'light scope waited (thread / inline)':>40}")
    for (name, took, threaded), (_, _, inline) in zip(
        results["thread"], results["inline"], strict=True
    ):
        print(f"{name:<28} {took:>6.2f}s {threaded * 1000:>18.0f} ms / {inline * 1000:>8.0f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
