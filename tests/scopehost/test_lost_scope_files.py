"""A scope whose file was deleted while it was closed (retired, evicted, or its host down) fails
every call with ``ScopeFileGone`` instead of coming back empty; ``forget`` accepts the loss."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import trio
import trio.testing

from driver import JobRunFilter
from scopehost import ScopeFileGone, StoreClock, open_scope_host
from scopehost._known import KNOWN_SCOPES_FILE

from .async_support import new_row


def gone(path: Path, scope_id: str = "s1") -> str:
    message = (
        f"list did not run: scope {scope_id!r}: its database file {path} is gone, and this "
        "directory held it before; nothing was written and no empty file was created in its "
        f"place — restore the file, or call forget({scope_id!r}) on the scope host to start the "
        "scope over empty"
    )
    return f"^{re.escape(message)}$"


async def test_a_retired_scope_whose_file_was_deleted_fails_every_call_and_creates_nothing(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock(), idle_ms=1_000) as host:
        stub = host.stub("s1")
        row = new_row("01RUNA")
        await stub.start_or_join(row.key, row)
        await host.sleep_ms(2_000)
        assert host.open_scopes == 0  # retired: its database is closed
        path = tmp_path / "s1.sqlite3"
        path.unlink()
        for _ in range(2):
            with pytest.raises(ScopeFileGone, match=gone(path)):
                await stub.list(JobRunFilter())
            assert not path.exists()
        # A scope never opened before is still created as it always was.
        assert await host.stub("s2").list(JobRunFilter()) == []
        assert (tmp_path / "s2.sqlite3").exists()


async def test_a_host_restarted_on_the_directory_knows_the_scopes_it_held(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        row = new_row("01RUNA")
        await host.stub("s1").start_or_join(row.key, row)
    path = tmp_path / "s1.sqlite3"
    shutil.move(path, tmp_path / "backup")
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        with pytest.raises(ScopeFileGone, match=gone(path)):
            await host.stub("s1").list(JobRunFilter())
        shutil.move(tmp_path / "backup", path)  # restored: the scope is back as it was
        assert [r.id for r in await host.stub("s1").list(JobRunFilter())] == ["01RUNA"]


async def test_a_scope_another_host_opened_on_the_same_directory_is_known_too(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with (
        open_scope_host(tmp_path, clock=StoreClock()) as first,
        open_scope_host(tmp_path, clock=StoreClock()) as second,
    ):
        # `second` read the directory's record before `first` opened s1.
        await first.stub("s1").list(JobRunFilter())
        first.evict("s1")
        await trio.testing.wait_all_tasks_blocked()  # its actor closed the file
        path = tmp_path / "s1.sqlite3"
        path.unlink()
        with pytest.raises(ScopeFileGone, match=gone(path)):
            await second.stub("s1").list(JobRunFilter())
        first.forget("s1")
        assert await second.stub("s1").list(JobRunFilter()) == []  # `second` hears of it


async def test_forget_starts_a_lost_scope_over_empty_and_clears_what_its_file_left(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        stub = host.stub("s1")
        row = new_row("01RUNA")
        await stub.start_or_join(row.key, row)
        path = tmp_path / "s1.sqlite3"
        path.unlink()  # while its actor has it open
        wal = tmp_path / "s1.sqlite3-wal"
        assert wal.exists()
        host.forget("s1")
        assert not wal.exists()
        assert host.open_scopes == 0
        assert await stub.list(JobRunFilter()) == []
        await stub.start_or_join(row.key, row)
    # The fresh file is known in its turn: a restarted host does not start it over again.
    path.unlink()
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        with pytest.raises(ScopeFileGone, match=gone(path)):
            await host.stub("s1").list(JobRunFilter())
    assert (tmp_path / KNOWN_SCOPES_FILE).read_text() == "+s1\n-s1\n+s1\n"


async def test_forget_refuses_a_file_still_there_a_busy_scope_and_a_memory_host(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        stub = host.stub("s1")
        await stub.list(JobRunFilter())
        path = tmp_path / "s1.sqlite3"
        with pytest.raises(
            ValueError,
            match=f"^{re.escape(f'forget({chr(39)}s1{chr(39)}): its database file {path} is')} "
            r"still there; to start the scope over empty, delete the file \(with its -wal and "
            r"-shm files\) first$",
        ):
            host.forget("s1")
        path.unlink()
        answers: list[object] = []
        host.submit("s1", "list", (JobRunFilter(),), answers.append)  # queued, not yet served
        with pytest.raises(
            ValueError,
            match=r"^forget\('s1'\): calls to the scope are waiting in its queue; forget it once "
            r"they have been answered$",
        ):
            host.forget("s1")
        await trio.testing.wait_all_tasks_blocked()
        [answer] = answers
        assert isinstance(answer.error, ScopeFileGone)  # type: ignore[attr-defined]
        host.forget("s1")
    async with open_scope_host(clock=StoreClock()) as host:
        with pytest.raises(
            ValueError,
            match=r"^forget\('s1'\): this host keeps its scopes in memory, where no file can go "
            r"missing; there is nothing to forget$",
        ):
            host.forget("s1")


async def test_forget_refuses_a_scope_the_directory_never_held(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        await host.stub("s1").list(JobRunFilter())
        (tmp_path / "s1.sqlite3").unlink()
        message = (
            f"forget('s2'): the directory {tmp_path} holds no record of that scope (never "
            "opened here, or forgotten already); there is nothing to forget — check the scope's "
            "name"
        )
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            host.forget("s2")  # a misspelling of s1
        host.forget("s1")
        with pytest.raises(
            ValueError, match=r"^forget\('s1'\): the directory .* forgotten already"
        ):
            host.forget("s1")


async def test_the_lost_files_write_ahead_log_left_behind_is_named_in_the_error(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    # A crash leaves a scope's -wal beside its file; if the file is then lost, SQLite would apply
    # that log to any copy put back at the path, so the error says to deal with it first.
    path = tmp_path / "s1.sqlite3"
    wal = tmp_path / "s1.sqlite3-wal"
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        row = new_row("01RUNA")
        await host.stub("s1").start_or_join(row.key, row)
        shutil.copy(wal, tmp_path / "crashed-wal")  # the log as a crash would leave it
    path.unlink()
    shutil.move(tmp_path / "crashed-wal", wal)
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        with pytest.raises(ScopeFileGone) as caught:
            await host.stub("s1").list(JobRunFilter())
    assert (
        f"restore the file (the lost file's write-ahead log {wal} is still there: remove it and "
        "its -shm file, or replace it with the restored copy's own, before putting the file "
        "back, since SQLite would apply it to whatever file is put back), or call forget('s1')"
    ) in str(caught.value)


async def test_a_relative_directory_stays_the_same_directory_after_the_process_changes_its_own(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "scopes").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    async with open_scope_host("scopes", clock=StoreClock(), idle_ms=1_000) as host:
        row = new_row("01RUNA")
        await host.stub("s1").start_or_join(row.key, row)
        await host.sleep_ms(2_000)
        assert host.open_scopes == 0  # closed: the next call opens the file by its path again
        monkeypatch.chdir(tmp_path / "elsewhere")
        assert [r.id for r in await host.stub("s1").list(JobRunFilter())] == ["01RUNA"]
        assert await host.stub("s2").list(JobRunFilter()) == []
        assert host.directory == tmp_path.resolve() / "scopes"
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == []
    assert (tmp_path / "scopes" / "s2.sqlite3").exists()
