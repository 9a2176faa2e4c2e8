"""What recording a host's history costs: writes per second with the output gate on.

``python -m bench.bench_record [RUNS] [ROUNDS]``:

One directory host with the output gate on (every reply waits until its write is synced, as in
production), two drives working RUNS runs (200 by default) of a job with three steps, four passes
at a time each: every step and every commit is a write to the store. Once with the history
recorded (``open_scope_host(record=...)`` and ``RecordingJobDriver``s), once without (plain
``JobDriver``s), alternating, ROUNDS rounds (5 by default), in this one process. Printed: writes per
second each way, their ratio, the CPU each write took (all threads: less shaken by other
processes on a shared machine than the rate) and its ratio, and the history's bytes per write.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from driver import JobDriver, JobPassResult, StartJobRunInput
from scopehost import RecordingJobDriver, open_scope_host

SCOPE = "bench"
STEPS = ("reserve", "charge", "receipt")
#: Each pass writes its steps and its commit.
WRITES_PER_RUN = len(STEPS) + 1
#: How many runs a drive call takes on: one, as `examples/shop/serve.py`'s drives do (with more,
#: the gate's syncs are shared by more writes, and recording's CPU weighs more; see README.md).
LIMIT = 1


async def _handler(ctx: Any) -> JobPassResult:
    for name in STEPS:
        await ctx.step(name, lambda: {"ok": True})
    return JobPassResult(done=True)


async def _work(folder: Path, runs: int, record: bool) -> tuple[float, float]:
    (folder / "scopes").mkdir()
    history = folder / "history" if record else None
    async with open_scope_host(folder / "scopes", record=history) as host:
        kind = RecordingJobDriver if record else JobDriver
        drives = [kind(host, name=name) for name in ("cron", "alarm")]
        for drive in drives:
            drive.register_job("bench", "job", _handler)
        for index in range(runs):
            start = StartJobRunInput(module_id="bench", job="job", instance=str(index))
            await drives[0].start_job_run(SCOPE, start)
        began, cpu = time.perf_counter(), time.process_time()
        async with trio.open_nursery() as nursery:
            for drive in drives:
                for _ in range(4):
                    nursery.start_soon(_drive, drive)
        took, used = time.perf_counter() - began, time.process_time() - cpu
    writes = runs * WRITES_PER_RUN
    return writes / took, used / writes


async def _drive(drive: Any) -> None:
    while True:
        report = await drive.run_due_jobs(SCOPE, limit=LIMIT)
        if not report.attempted:
            return


def _round(runs: int, record: bool) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory(dir=".") as name:
        rate, cpu = trio.run(_work, Path(name), runs, record)
        written = sum(p.stat().st_size for p in (Path(name) / "history").glob("*.jsonl"))
        return rate, cpu, written if record else 0


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    ratios = []
    print(
        f"{runs} runs of {WRITES_PER_RUN} writes, gate on: writes per second, recorded / not; "
        "CPU per write (all threads), recorded / not"
    )
    cpu_ratios = []
    for index in range(rounds):
        order = (True, False) if index % 2 == 0 else (False, True)
        found = {record: _round(runs, record) for record in order}
        (on, cpu_on, written), (off, cpu_off, _) = found[True], found[False]
        ratios.append(on / off)
        cpu_ratios.append(cpu_on / cpu_off)
        print(
            f"  round {index + 1}: {on:7.0f} recorded  {off:7.0f} not  {ratios[-1]:.3f}   "
            f"CPU {cpu_on * 1e6:5.0f} µs / {cpu_off * 1e6:5.0f} µs  {cpu_ratios[-1]:.3f}  "
            f"({written / (runs * WRITES_PER_RUN):,.0f} bytes of history per write)"
        )
    print(
        f"  median ratio: writes per second {statistics.median(ratios):.3f}, "
        f"CPU per write {statistics.median(cpu_ratios):.3f}"
    )


if __name__ == "__main__":
    main()
