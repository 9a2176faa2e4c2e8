"""Run as a script by test_retirement.py, in its own process, under a low file-handle limit:
``python -m tests.scopehost.many_scopes DIRECTORY SCOPES LIMIT MAX_OPEN [at-once]`` (MAX_OPEN 0:
no cap; ``at-once``: every scope called at the same time, each reply 5 ms on the wire).

The directory first gets SCOPES scope files, copies of one made by ``ScopeDatabase`` (a host
restarted over a directory of scopes; creating each schema anew would time SQLite, not the host).
Then every scope is touched once (a ``list``) through one directory host, and one line printed:
``ok <scopes touched> <most open at once> <retired>``, or ``failed <error>`` at the first call
that fails (at once: the first failure, or ``ok``).
"""

from __future__ import annotations

import resource
import shutil
import sqlite3
import sys
from pathlib import Path

import trio
import trio.testing

from driver import JobRunFilter
from scopehost import Link, ScopeDatabase, ScopeHostError, StoreClock, open_scope_host


def prepare(directory: Path, scopes: int) -> None:
    template = directory / "scope-0.sqlite3"
    connection = sqlite3.connect(template, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    ScopeDatabase(connection, "scope-0")
    connection.close()
    for index in range(1, scopes):
        shutil.copyfile(template, directory / f"scope-{index}.sqlite3")


async def touch(directory: str, scopes: int, max_open: int | None) -> str:
    most = 0
    async with open_scope_host(directory, clock=StoreClock(), max_open_scopes=max_open) as host:
        for index in range(scopes):
            try:
                await host.stub(f"scope-{index}").list(JobRunFilter())
            except ScopeHostError as error:
                return f"failed {error}"
            most = max(most, host.open_scopes)
        return f"ok {scopes} {most} {host.retirement.retired}"


async def touch_at_once(directory: str, scopes: int, max_open: int | None) -> str:
    failures: list[str] = []
    async with open_scope_host(directory, clock=StoreClock(), max_open_scopes=max_open) as host:
        slow = Link(reply_ms=5)

        async def call(index: int) -> None:
            try:
                await host.stub(f"scope-{index}", link=slow).list(JobRunFilter())
            except ScopeHostError as error:
                failures.append(str(error))

        async with trio.open_nursery() as nursery:
            for index in range(scopes):
                nursery.start_soon(call, index)
    return f"failed {failures[0]}" if failures else "ok"


def main() -> None:
    directory, scopes, limit, max_open = sys.argv[1], *map(int, sys.argv[2:5])
    at_once = sys.argv[5:] == ["at-once"]
    prepare(Path(directory), scopes)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    clock = trio.testing.MockClock(autojump_threshold=0)
    print(
        trio.run(
            touch_at_once if at_once else touch, directory, scopes, max_open or None, clock=clock
        )
    )


if __name__ == "__main__":
    main()
