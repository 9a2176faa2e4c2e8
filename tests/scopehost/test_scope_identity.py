"""Scope files know their scope: a file of another scope is refused by name, two ids that one
case-insensitive file system maps to one file are refused, and the record of the scopes a directory
held survives its deletion under a running host."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing

from driver import JobRunFilter
from scopehost import ScopeFileForeign, ScopeFileGone, StoreClock, open_scope_host
from scopehost._identity import META_TABLE
from scopehost._known import KNOWN_SCOPES_FILE

from .async_support import new_row


async def test_a_scope_file_records_its_scope_beside_the_spec_tables_and_outside_a_dump(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        row = new_row("01RUNA")
        await host.stub("s1").start_or_join(row.key, row)
        dump = await host.stub("s1").export_dump()
        assert [run.id for run in dump.runs] == ["01RUNA"]
    conn = sqlite3.connect(tmp_path / "s1.sqlite3")
    assert conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall() == [("scope_id", "s1")]
    conn.close()


async def test_a_file_of_another_scope_copied_into_place_is_refused_by_name(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        row = new_row("01SECRET")
        await host.stub("other").start_or_join(row.key, row)
        await host.stub("s1").list(JobRunFilter())
    (tmp_path / "s1.sqlite3").unlink()
    shutil.copy(tmp_path / "other.sqlite3", tmp_path / "s1.sqlite3")
    path = tmp_path / "s1.sqlite3"
    message = (
        f"list did not run: scope 's1': its database file {path} belongs to scope 'other' (the "
        "file records it); nothing was read or written — put scope 's1''s own file back, or move "
        "this one to other.sqlite3 where it belongs"
    )
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        for _ in range(2):
            with pytest.raises(ScopeFileForeign, match=f"^{re.escape(message)}$"):
                await host.stub("s1").list(JobRunFilter())
        # The other scope's runs were not served, and the file was not stamped as s1's.
    conn = sqlite3.connect(path)
    assert conn.execute(f"SELECT value FROM {META_TABLE}").fetchall() == [("other",)]
    conn.close()


async def test_ids_that_one_case_insensitive_file_names_are_refused_by_name(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        row = new_row("01RUNA")
        await host.stub("Tenant").start_or_join(row.key, row)
    # A file system that ignores case opens Tenant's file for "tenant": a link does the same here.
    (tmp_path / "tenant.sqlite3").symlink_to(tmp_path / "Tenant.sqlite3")
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        with pytest.raises(
            ScopeFileForeign,
            match=r"belongs to scope 'Tenant' \(the file records it\); nothing was read or "
            r"written — this file system ignores case, so scope ids that differ only in case "
            r"name one file: use ids that differ otherwise$",
        ):
            await host.stub("tenant").list(JobRunFilter())
        assert [run.id for run in await host.stub("Tenant").list(JobRunFilter())] == ["01RUNA"]
    assert "+tenant" not in (tmp_path / KNOWN_SCOPES_FILE).read_text().split()


async def test_a_record_deleted_under_a_running_host_is_written_again_with_every_scope(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        await host.stub("s1").list(JobRunFilter())
        (tmp_path / KNOWN_SCOPES_FILE).unlink()
        await host.stub("s2").list(JobRunFilter())  # a new scope after the deletion
    assert set((tmp_path / KNOWN_SCOPES_FILE).read_text().split()) == {"+s1", "+s2"}
    for scope in ("s1", "s2"):
        (tmp_path / f"{scope}.sqlite3").unlink()
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        for scope in ("s1", "s2"):
            with pytest.raises(ScopeFileGone, match="is gone, and this directory held it before"):
                await host.stub(scope).list(JobRunFilter())  # not back empty


async def test_a_directory_deleted_and_made_again_under_a_running_host_still_knows_its_scopes(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    directory = tmp_path / "scopes"
    directory.mkdir()
    async with open_scope_host(directory, clock=StoreClock()) as host:
        await host.stub("s1").list(JobRunFilter())
        shutil.rmtree(directory)
        directory.mkdir()
        await host.stub("s2").list(JobRunFilter())
        with pytest.raises(ScopeFileGone):
            await host.stub("s1").list(JobRunFilter())
    assert set((directory / KNOWN_SCOPES_FILE).read_text().split()) == {"+s1", "+s2"}
    async with open_scope_host(directory, clock=StoreClock()) as host:
        with pytest.raises(ScopeFileGone, match="is gone, and this directory held it before"):
            await host.stub("s1").list(JobRunFilter())
