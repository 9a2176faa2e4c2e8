"""The output gate's cost: ``python -m bench.bench_gate [SECONDS]``.

Commits per second of a directory host with 1, 16 and 256 callers, each recording effect rows in a
loop for SECONDS (2 by default) of wall time, with the output gate on (each reply waits for a sync
of its scope's log, one sync per batch of commits) and off (``durable=False``: replies at commit,
``synchronous=NORMAL`` alone). The callers share one scope, then spread over 16 scopes. The ratio
printed is the gate's commits per second over those without it, measured in the same run; the
syncs per batch show how many commits one sync covered. The disk the temporary directory lives on
decides the absolute figures (a sync to a RAM-backed directory costs next to nothing).
"""

from __future__ import annotations

import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import trio

from scopehost import open_scope_host


async def _commits_per_second(
    directory: Path, *, callers: int, scopes: int, durable: bool, seconds: float
) -> tuple[float, float]:
    """(commits per second, commits per sync) over ``seconds`` of wall time."""
    commits = 0
    async with open_scope_host(directory, durable=durable) as host:
        stubs = [host.stub(f"s{index}") for index in range(scopes)]
        for stub in stubs:  # opened (and created) before the clock starts
            await stub.invoke("record", {"kind": "warm"})
        syncs_before = host.gate.file_syncs if host.gate is not None else 0
        deadline = time.monotonic() + seconds

        async def caller(index: int) -> None:
            nonlocal commits
            stub = stubs[index % scopes]
            while time.monotonic() < deadline:
                await stub.invoke("record", {"kind": "bench", "key": str(index)})
                commits += 1

        started = time.monotonic()
        async with trio.open_nursery() as nursery:
            for index in range(callers):
                nursery.start_soon(caller, index)
        elapsed = time.monotonic() - started
        syncs = (host.gate.file_syncs if host.gate is not None else 0) - syncs_before
    return commits / elapsed, (commits / syncs if syncs else float("nan"))


def main(seconds: float) -> None:
    print(f"commits per second over {seconds:g} s each (directory host, wall clock)")
    print(
        f"{'callers':>8} {'scopes':>7} {'gate off':>10} {'gate on':>10} {'ratio':>6} "
        f"{'commits/sync':>13}"
    )
    for scopes in (1, 16):
        for callers in (1, 16, 256):
            if callers < scopes:
                continue
            figures = {}
            for durable in (False, True):
                with tempfile.TemporaryDirectory(dir=Path.cwd()) as directory:
                    figures[durable] = trio.run(
                        partial(
                            _commits_per_second,
                            Path(directory),
                            callers=callers,
                            scopes=scopes,
                            durable=durable,
                            seconds=seconds,
                        )
                    )
            off, on = figures[False][0], figures[True][0]
            print(
                f"{callers:>8} {scopes:>7} {off:>10.0f} {on:>10.0f} {on / off:>6.2f} "
                f"{figures[True][1]:>13.1f}"
            )


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
