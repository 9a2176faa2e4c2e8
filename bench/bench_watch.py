"""What the file watch costs a lone caller, and a reader that makes it judge.

``python -m bench.bench_watch [WRITES] [ROUNDS]``:

One caller records WRITES rows (2,000 by default) on one scope of a directory host with the gate
off (``durable=False``, so a sync does not hide the watch), each call a turn of its own actor:
once with the watch as it is, once with it looking at nothing (its two methods replaced by ones
that return at once), alternating, ROUNDS rounds (5 by default), all in this one process. Printed:
the event loop's CPU time per write each way, and their ratio. Then the same with another
connection reading the file before every write, so that every turn begins with the log's change
time moved (as a root reader's ``fchown`` moves it) and the watch judges by SQLite's records.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from scopehost import _watch, open_scope_host


@contextmanager
def _watch_off() -> Iterator[None]:
    changed, noted = _watch.FileWatch.changed, _watch.FileWatch.noted
    _watch.FileWatch.changed = lambda self: None  # type: ignore[method-assign]
    _watch.FileWatch.noted = lambda self: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        _watch.FileWatch.changed = changed  # type: ignore[method-assign]
        _watch.FileWatch.noted = noted  # type: ignore[method-assign]


async def _cpu_per_write(directory: Path, writes: int, reader: bool) -> float:
    async with open_scope_host(directory, durable=False) as host:
        stub = host.stub("s1")
        await stub.invoke("record", {"kind": "warm"})
        outside = sqlite3.connect(directory / "s1.sqlite3") if reader else None
        spent = 0.0
        try:
            for index in range(writes):
                if outside is not None:
                    outside.execute("SELECT count(*) FROM items").fetchone()
                    (directory / "s1.sqlite3-wal").touch()  # what a root reader's fchown does
                started = time.process_time()
                await stub.invoke("record", {"kind": "k", "key": str(index)})
                spent += time.process_time() - started
        finally:
            if outside is not None:
                outside.close()
    return spent / writes * 1e6


def _round(writes: int, *, reader: bool, watch: bool) -> float:
    with tempfile.TemporaryDirectory(dir=".") as name:
        if watch:
            return trio.run(_cpu_per_write, Path(name), writes, reader)
        with _watch_off():
            return trio.run(_cpu_per_write, Path(name), writes, reader)


def main() -> None:
    writes = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    for reader in (False, True):
        label = "a reader before every write" if reader else "a lone caller"
        ratios = []
        print(f"{label}: µs of CPU per write, watch on / off")
        for index in range(rounds):
            order = (True, False) if index % 2 == 0 else (False, True)
            found = {watch: _round(writes, reader=reader, watch=watch) for watch in order}
            ratios.append(found[True] / found[False])
            print(
                f"  round {index + 1}: {found[True]:7.1f} on  {found[False]:7.1f} off  "
                f"{ratios[-1]:.3f}"
            )
        print(f"  median ratio: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
