"""Two host processes on one directory, starting runs on the same scopes, then killed.

``python -m tests.scopehost.two_hosts write FOLDER NAME [SECONDS]`` opens a host on FOLDER and
starts runs on three scopes, which another process started the same way serves too, printing
each run's id as its start is acknowledged (the output gate on: acknowledged means synced). It
goes on until killed, or for SECONDS. ``python -m tests.scopehost.two_hosts count FOLDER IDS``
then opens a fresh host and prints how many of the ids in the file IDS are missing.

Used by the test that kills both writers part-way, and by ``bench/bench_two_hosts.py`` for the
20-second figure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from driver import JobRunKey, JobRunRow
from scopehost import open_scope_host

SCOPES = ("s1", "s2", "s3")
STARTED = "2026-10-04T12:00:00.000Z"


async def write(folder: Path, name: str, seconds: float) -> None:
    async with open_scope_host(folder) as host:
        with trio.move_on_after(seconds):
            for index in range(10**9):
                scope = SCOPES[index % len(SCOPES)]
                run_id = f"{scope}.{name}.{index:08}"
                key = JobRunKey("mod", "walk", run_id)
                row = JobRunRow.fresh(run_id, key, payload="{}", at=STARTED)
                await host.stub(scope).start_or_join(key, row)
                print(run_id, flush=True)


async def missing(folder: Path, ids: list[str]) -> int:
    found: set[str] = set()
    async with open_scope_host(folder) as host:
        for scope in SCOPES:
            found.update(run.id for run in (await host.stub(scope).export_dump()).runs)
    return len(set(ids) - found)


def main(argv: list[str]) -> None:
    if argv[0] == "write":
        seconds = float(argv[3]) if len(argv) > 3 else 3600.0
        trio.run(write, Path(argv[1]), argv[2], seconds)
    else:
        ids = Path(argv[2]).read_text().split()
        print(trio.run(missing, Path(argv[1]), ids))


if __name__ == "__main__":
    main(sys.argv[1:])
