"""Idle scopes close (after an idle time, least recently used first at a cap) and reopen on their
next call; a directory host serves far more scopes than it has file handles."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from driver import JobRunFilter
from scopehost import Link, StoreClock, open_scope_host

from .async_support import new_row

#: SQLite files on tmpfs when the machine has one: creating 10 000 of them on a disk that syncs
#: each transaction would time the disk, not the host.
_FAST_DIR = Path("/dev/shm")


async def test_an_idle_scope_closes_after_its_idle_time_and_reopens_on_the_next_call(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock(), idle_ms=5_000) as host:
        stub = host.stub("s1")
        row = new_row("01RUNA")
        await stub.start_or_join(row.key, row)
        await host.sleep_ms(4_000)
        await stub.list(JobRunFilter())  # used again: the idle time starts over
        await host.sleep_ms(4_000)
        assert host.open_scopes == 1
        await host.sleep_ms(1_500)
        assert host.open_scopes == 0
        assert host.retirement.retired == 1
        assert [r.id for r in await stub.list(JobRunFilter())] == ["01RUNA"]
        assert host.open_scopes == 1


async def test_at_the_cap_the_least_recently_used_idle_scope_closes_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock(), max_open_scopes=2) as host:
        for scope in ("s1", "s2", "s1", "s3"):
            await host.stub(scope).list(JobRunFilter())
        assert sorted(host._actors) == ["s1", "s3"]
        assert host.retirement.retired == 1


async def test_busy_scopes_opened_past_the_cap_close_as_they_fall_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Forty new scopes called at once on a cap of 8: each is busy as it opens, so the host opens
    # past the cap; once they are answered, it is back at the cap with no further call needed.
    async with open_scope_host(clock=StoreClock(), max_open_scopes=8) as host:
        slow = Link(request_ms=0, reply_ms=5)  # replies held on the wire: the callers overlap
        async with trio.open_nursery() as nursery:
            for index in range(40):
                nursery.start_soon(host.stub(f"s{index}", link=slow).list, JobRunFilter())
        assert host.open_scopes == 8
        assert host.retirement.retired == 32
        # A retired scope answers its next call as before.
        assert await host.stub("s0").list(JobRunFilter()) == []
        assert host.open_scopes == 8


@pytest.mark.parametrize(
    ("idle_ms", "max_open", "message"),
    [
        (0, None, r"^idle_ms=0; pass the ms an idle scope stays open \(a finite number > 0\), "),
        (None, 0, r"^max_open_scopes=0; pass a whole number >= 1, or None for no cap$"),
    ],
)
async def test_bad_limits_are_refused(
    idle_ms: float | None, max_open: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        async with open_scope_host(idle_ms=idle_ms, max_open_scopes=max_open):
            pass


def _touch(directory: Path, scopes: int, limit: int, max_open: int, *mode: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tests.scopehost.many_scopes"]
        + [str(value) for value in (directory, scopes, limit, max_open, *mode)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    return result.stdout.strip()


@pytest.fixture
def scope_dir(tmp_path: Path) -> Iterator[Path]:
    if _FAST_DIR.is_dir() and os.access(_FAST_DIR, os.W_OK):
        directory = _FAST_DIR / f"scopes-{os.getpid()}-{tmp_path.name}"
        directory.mkdir()
        yield directory
        for path in directory.iterdir():
            path.unlink()
        directory.rmdir()
    else:
        yield tmp_path


def test_ten_thousand_scopes_work_through_one_directory_host_under_256_file_handles(
    scope_dir: Path,
) -> None:
    assert _touch(scope_dir, 10_000, 256, 64) == "ok 10000 64 9936"


def test_running_out_of_file_handles_says_so(scope_dir: Path) -> None:
    out = _touch(scope_dir, 200, 64, 0)
    assert out.startswith("failed list did not run: scope 'scope-")
    assert out.endswith(
        "' cannot open its database: the process is out of file handles (limit 64; a scope in "
        "WAL mode holds three, and no max_open_scopes is set); pass open_scope_host a "
        "max_open_scopes well under a third of the limit, or raise the limit (ulimit -n)"
    )


def test_scopes_called_all_at_once_stay_within_the_cap_and_the_file_handles(
    scope_dir: Path,
) -> None:
    # Each scope is busy as it opens, so the host opens it past the cap; it retires the moment it
    # drains, so 2 000 scopes called at once fit in 256 handles with a cap of 64.
    assert _touch(scope_dir, 2_000, 256, 64, "at-once") == "ok"


def test_out_of_file_handles_under_a_cap_too_high_for_the_limit_says_to_lower_it(
    scope_dir: Path,
) -> None:
    out = _touch(scope_dir, 200, 64, 40)
    assert re.fullmatch(
        r"failed list did not run: scope 'scope-\d+' cannot open its database: the process is "
        r"out of file handles \(limit 64; a scope in WAL mode holds three, and max_open_scopes "
        r"is 40, and \d+ other scopes have their file open\); lower max_open_scopes to well "
        r"under a third of the limit \(the process's other files count too\), or raise the "
        r"limit \(ulimit -n\)",
        out,
    ), out
