"""The output gate's price on a realistic load.

``python -m bench.bench_gate_load [SECONDS] [ROUNDS]``:

1,000 callers over 50 scopes (20 to a scope) of a directory host under the wall clock, each walking
runs through the store operations of a pass, one run after another, for SECONDS (3 by default) of
wall time: ``start_or_join`` a run, ``claim`` it, ``begin``, ``begin_step``, ``record_step``, and
``commit_pass`` it done (six calls, every one a write). Printed: runs completed per second with the
gate on (replies wait for a sync of their scope's log) and off (``durable=False``), each round
measuring both in this one process (ROUNDS rounds, 3 by default, the order alternating), their
ratio, the event loop's own CPU time per run and the share of the wall time it was busy, and for
the gate the writes one sync of a scope file covered and the files one batch synced. Then one
caller on one scope, recording effect rows, each call a turn of its own: writes per second and the
event loop's own time per write, gate off and on. The temporary directory lives on the disk the
working directory is on.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import trio

from driver import JobRunKey, JobRunPatch, JobRunRow
from scopehost import ScopeStub, open_scope_host

CALLERS = 1_000
SCOPES = 50
LEASE_MS = 60_000


async def _one_run(stub: ScopeStub, now: str, run_id: str, owner: str) -> None:
    """One run's life through the store, as a drive's start and pass make it."""
    row = JobRunRow.fresh(run_id, JobRunKey("bench", "walk", run_id), payload="{}", at=now)
    await stub.start_or_join(row.key, row)
    assert await stub.claim(run_id, owner, LEASE_MS) is not None
    assert await stub.begin(run_id, owner, 0)
    assert (await stub.begin_step(run_id, "fetch", owner, LEASE_MS)).held
    assert await stub.record_step(run_id, "fetch", '{"ok":true}', 0, None, now, owner, LEASE_MS)
    done = JobRunPatch("done", None, "{}", 0, None, now, None, now)
    assert await stub.commit_pass(run_id, done, owner)


async def _runs_per_second(directory: Path, *, durable: bool, seconds: float) -> dict[str, float]:
    runs = 0
    async with open_scope_host(directory, durable=durable) as host:
        stubs = [host.stub(f"s{index:02}") for index in range(SCOPES)]
        for stub in stubs:  # every scope file created and open before the clock starts
            await stub.invoke("record", {"kind": "warm"})
        gate = host.gate
        syncs, batches = (gate.file_syncs, gate.batches) if gate is not None else (0, 0)
        deadline = time.monotonic() + seconds

        async def caller(index: int) -> None:
            nonlocal runs
            stub = stubs[index % SCOPES]
            owner = f"01JOWNER{index:018d}"
            count = 0
            while time.monotonic() < deadline:
                count += 1
                await _one_run(stub, host.clock.now(), f"01JRUN{index:06d}{count:014d}", owner)
                runs += 1

        started, cpu = time.monotonic(), time.thread_time()
        async with trio.open_nursery() as nursery:
            for index in range(CALLERS):
                nursery.start_soon(caller, index)
        elapsed, cpu = time.monotonic() - started, time.thread_time() - cpu
        if gate is not None:
            syncs, batches = gate.file_syncs - syncs, gate.batches - batches
    writes = runs * 6
    return {
        "runs/s": runs / elapsed,
        "loop µs/run": 1e6 * cpu / max(runs, 1),
        "loop busy": cpu / elapsed,
        "writes/sync": writes / syncs if syncs else float("nan"),
        "syncs/batch": syncs / batches if batches else float("nan"),
    }


async def _lone_caller(directory: Path, *, durable: bool, seconds: float) -> dict[str, float]:
    """One caller recording effect rows on one scope: every call is a turn of its own."""
    async with open_scope_host(directory, durable=durable) as host:
        stub = host.stub("s00")
        await stub.invoke("record", {"kind": "warm"})
        writes, started, cpu = 0, time.monotonic(), time.thread_time()
        while time.monotonic() < started + seconds:
            await stub.invoke("record", {"kind": "bench", "key": str(writes)})
            writes += 1
        elapsed, cpu = time.monotonic() - started, time.thread_time() - cpu
    return {"writes/s": writes / elapsed, "loop µs/write": 1e6 * cpu / writes}


def _measure(durable: bool, seconds: float, *, lone: bool = False) -> dict[str, float]:
    load = _lone_caller if lone else _runs_per_second
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as directory:
        result: dict[str, float] = trio.run(
            partial(load, Path(directory), durable=durable, seconds=seconds)
        )
        return result


def main(seconds: float, rounds: int) -> None:
    print(
        f"{CALLERS} callers over {SCOPES} scopes, a run's six store writes in a loop, "
        f"{seconds:g} s per figure (directory host, wall clock)"
    )
    print(
        f"{'round':>5} {'gate off':>9} {'gate on':>9} {'ratio':>6} {'loop µs/run off':>16} "
        f"{'on':>5} {'loop busy off':>14} {'on':>5} {'writes/sync':>12} {'syncs/batch':>12}"
    )
    ratios = []
    for index in range(rounds):
        order = (False, True) if index % 2 == 0 else (True, False)
        figures = {durable: _measure(durable, seconds) for durable in order}
        off, on = figures[False], figures[True]
        ratio = on["runs/s"] / off["runs/s"]
        ratios.append(ratio)
        print(
            f"{index + 1:>5} {off['runs/s']:>9.0f} {on['runs/s']:>9.0f} {ratio:>6.2f} "
            f"{off['loop µs/run']:>16.0f} {on['loop µs/run']:>5.0f} "
            f"{off['loop busy']:>14.0%} {on['loop busy']:>5.0%} "
            f"{on['writes/sync']:>12.1f} {on['syncs/batch']:>12.1f}"
        )
    print(f"median ratio, gate on / gate off: {statistics.median(ratios):.2f}")
    lone = {durable: _measure(durable, seconds, lone=True) for durable in (False, True)}
    print(
        f"one caller on one scope: {lone[False]['writes/s']:.0f} writes/s gate off, "
        f"{lone[True]['writes/s']:.0f} on; the loop's own time per write "
        f"{lone[False]['loop µs/write']:.1f} µs off, {lone[True]['loop µs/write']:.1f} µs on"
    )


if __name__ == "__main__":
    main(
        float(sys.argv[1]) if len(sys.argv) > 1 else 3.0,
        int(sys.argv[2]) if len(sys.argv) > 2 else 3,
    )
