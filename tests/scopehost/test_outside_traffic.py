"""What others do to an open scope's file never stops the scope or costs an acknowledged write.

Readers (the ``sqlite3`` shell, a read-only connection, SQLite's backup API, an integrity check),
a checkpoint from a shell, another connection's write and every change of metadata alone
(``chmod``, ``chown``, ``touch``, a hard link, an extended attribute) are SQLite's own traffic or
no change at all: the scope goes on serving, as root (where SQLite ``fchown``s the log it opens)
and as another user. Only a real write behind SQLite's back is refused (see
``test_file_changed``), and even then the scope's own log is kept, never deleted.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from driver import JobRunFilter
from scopehost import ScopeFileChanged, StoreClock, open_scope_host
from scopehost._host import ScopeHost

from .async_support import new_row

#: The ordinary user the outside programs run as, besides root.
NOBODY = 65534


async def start_runs(host: ScopeHost, prefix: str, count: int) -> None:
    for index in range(count):
        row = new_row(f"{prefix}{index:03}", instance=f"{prefix}{index}")
        await host.stub("s1").start_or_join(row.key, row)


async def count_runs(host: ScopeHost) -> int:
    return len(await host.stub("s1").list(JobRunFilter(limit=500)))


def rows_in(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return int(conn.execute("SELECT count(*) FROM _substrat_job_runs").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def folder() -> Iterator[Path]:
    """A scope directory another user can reach (pytest's own temporary folders are root's
    alone): the ordinary user reads there as an operator would."""
    path = Path(tempfile.mkdtemp(prefix="scopes-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def shell(path: Path, command: str, *, user: int | None = None) -> None:
    """``sqlite3 FILE COMMAND``, as root or as ``user``. Whether the shell itself succeeds (an
    ordinary user may not checkpoint a file of root's) is beside the point: the scope must go on."""
    if shutil.which("sqlite3") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the sqlite3 shell is missing: .ci/run installs it (Debian's sqlite3)")
        pytest.skip("the sqlite3 shell is not installed (Debian's sqlite3)")
    argv = ["sqlite3", str(path), command]
    if user is not None:
        if os.geteuid() != 0:
            pytest.skip("another user's reads need root to switch to that user")
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    subprocess.run(argv, capture_output=True, timeout=60, check=False)


READERS: dict[str, Callable[[Path], None]] = {
    "select": lambda path: shell(path, "SELECT count(*) FROM _substrat_job_runs"),
    "backup": lambda path: shell(path, f".backup {path.parent / 'copy.db'}"),
    "integrity check": lambda path: shell(path, "PRAGMA integrity_check"),
    "checkpoint": lambda path: shell(path, "PRAGMA wal_checkpoint"),
    "truncating checkpoint": lambda path: shell(path, "PRAGMA wal_checkpoint(TRUNCATE)"),
    "select as another user": lambda path: shell(
        path, "SELECT count(*) FROM _substrat_job_runs", user=NOBODY
    ),
    "backup as another user": lambda path: shell(path, ".backup /dev/null", user=NOBODY),
    "integrity check as another user": lambda path: shell(
        path, "PRAGMA integrity_check", user=NOBODY
    ),
    "checkpoint as another user": lambda path: shell(path, "PRAGMA wal_checkpoint", user=NOBODY),
}


def read_only_connection(path: Path) -> None:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.execute("SELECT count(*) FROM _substrat_job_runs").fetchone()
    finally:
        conn.close()


def backup_api(path: Path) -> None:
    source, target = sqlite3.connect(path), sqlite3.connect(path.parent / "copy.db")
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


def own_table_write(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS operator_notes (note TEXT)")
        conn.execute("INSERT INTO operator_notes VALUES ('looked at it')")
        conn.commit()
    finally:
        conn.close()


IN_PROCESS: dict[str, Callable[[Path], None]] = {
    "read-only connection": read_only_connection,
    "backup API": backup_api,
    "write to a table of its own": own_table_write,
}


def set_xattr(path: Path) -> None:
    try:
        os.setxattr(path, "user.backup", b"yes")
    except OSError as error:
        pytest.skip(f"this file system keeps no extended attributes ({error})")


METADATA: dict[str, Callable[[Path], None]] = {
    "chmod to the same mode": lambda path: path.chmod(path.stat().st_mode & 0o7777),
    "chmod to another mode": lambda path: path.chmod(0o600),
    "chown to the same owner": lambda path: os.chown(path, path.stat().st_uid, path.stat().st_gid),
    "touch": lambda path: path.touch(),
    "hard link": lambda path: os.link(path, path.parent / "linked.sqlite3"),
    "extended attribute": set_xattr,
    "touch of the log": lambda path: Path(f"{path}-wal").touch(),
    "chmod of the log": lambda path: Path(f"{path}-wal").chmod(0o600),
}


async def serves_on(folder: Path, act: Callable[[Path], None]) -> None:
    """50 runs acknowledged, then ``act`` on the open scope's file: the scope serves every one
    of them, takes 10 more, and a fresh host finds all 60 in a whole file."""
    path = folder / "s1.sqlite3"
    async with open_scope_host(folder, clock=StoreClock()) as host:
        await start_runs(host, "01RUNA", 50)
        act(path)
        assert await count_runs(host) == 50
        await start_runs(host, "01RUNB", 10)
        assert await count_runs(host) == 60
    assert not (folder / "s1.sqlite3-changed").exists()
    async with open_scope_host(folder, clock=StoreClock()) as host:
        assert await count_runs(host) == 60
    assert rows_in(path) == 60


@pytest.mark.parametrize("reader", sorted(READERS))
async def test_a_shell_reading_or_checkpointing_an_open_scope_leaves_it_serving(
    folder: Path, reader: str
) -> None:
    # Under the wall clock: the shell runs in real time beside the host.
    await serves_on(folder, READERS[reader])


@pytest.mark.parametrize("other", sorted(IN_PROCESS))
async def test_another_connection_in_the_process_leaves_the_scope_serving(
    autojump_clock: trio.testing.MockClock, folder: Path, other: str
) -> None:
    await serves_on(folder, IN_PROCESS[other])


@pytest.mark.parametrize("change", sorted(METADATA))
async def test_a_change_of_metadata_found_by_a_call_is_no_change(
    autojump_clock: trio.testing.MockClock, folder: Path, change: str
) -> None:
    await serves_on(folder, METADATA[change])


@pytest.mark.parametrize("change", sorted(METADATA))
async def test_a_change_of_metadata_found_by_an_idle_retirement_loses_nothing(
    autojump_clock: trio.testing.MockClock, folder: Path, change: str
) -> None:
    path = folder / "s1.sqlite3"
    async with open_scope_host(folder, clock=StoreClock(), idle_ms=1_000) as host:
        await start_runs(host, "01RUNA", 50)
        METADATA[change](path)
        await trio.sleep(5)  # virtual: the idle scope retires, and its close looks at the file
        assert host.open_scopes == 0
        assert await count_runs(host) == 50
    assert not (folder / "s1.sqlite3-changed").exists()
    assert rows_in(path) == 50


async def test_a_deleted_log_is_refused_and_the_file_left_as_it_was(
    autojump_clock: trio.testing.MockClock, folder: Path
) -> None:
    path = folder / "s1.sqlite3"
    async with open_scope_host(folder, clock=StoreClock()) as host:
        await start_runs(host, "01RUNA", 5)
        Path(f"{path}-wal").unlink()
        with pytest.raises(ScopeFileChanged, match=r"\(the log was deleted\);.* log was left as"):
            await count_runs(host)


async def test_a_refused_file_keeps_the_scope_log_to_put_back_with_the_right_file(
    autojump_clock: trio.testing.MockClock, folder: Path
) -> None:
    """An operator copies the wrong file over an open scope, then puts the right one back: the
    scope's own log, moved aside as it refused, brings back every acknowledged write."""
    path, log = folder / "s1.sqlite3", folder / "s1.sqlite3-wal"
    kept = folder / "s1.sqlite3-wal.kept"
    async with open_scope_host(folder, clock=StoreClock()) as host:
        await start_runs(host, "01RUNA", 20)
        host.evict("s1")  # folded into the file: the right file, to put back
        right = folder / "right.sqlite3"
        shutil.copyfile(path, right)
        await start_runs(host, "01RUNB", 30)  # acknowledged, in the open log only
        wrong = sqlite3.connect(folder / "wrong.sqlite3")
        wrong.execute("CREATE TABLE _substrat_job_runs (id TEXT)")
        wrong.close()
        shutil.copyfile(folder / "wrong.sqlite3", path)
        with pytest.raises(ScopeFileChanged, match=f"moved aside to {kept}"):
            await count_runs(host)
        assert kept.exists()
        assert not log.exists()  # never applied to the wrong file
        shutil.copyfile(right, path)
        os.replace(kept, log)  # as the refusal says
        assert host.evict("s1")
        assert await count_runs(host) == 50
    assert rows_in(path) == 50
