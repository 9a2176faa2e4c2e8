"""What ``open_scope_host`` refuses, and what it chooses when it is not told."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio
import trio.testing

from driver import JobDriver, StartJobRunInput
from scopehost import StoreClock, open_scope_host


@pytest.mark.parametrize("directory", ["", "  "])
async def test_an_empty_directory_is_refused_rather_than_read_as_the_working_directory(
    directory: str,
) -> None:
    message = (
        f"directory {directory!r} is empty; pass the directory to keep the scopes' files in "
        '("." for the working directory), or None to keep them in memory'
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        async with open_scope_host(directory):
            pass


async def test_a_missing_directory_and_a_file_are_each_refused_for_what_they_are(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(
        ValueError, match=f"^{re.escape(f'directory {str(missing)!r} does not exist')};"
    ):
        async with open_scope_host(missing):
            pass
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(
        ValueError,
        match=f"^{re.escape(f'directory {str(afile)!r} is a file, not a directory;')}",
    ):
        async with open_scope_host(afile):
            pass


async def test_two_hosts_left_to_their_default_random_source_mint_different_ids(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    # Two processes on one directory: the same millisecond, the same scope, two new runs.
    ids = []
    for instance in ("walk-a", "walk-b"):
        async with open_scope_host(tmp_path, clock=StoreClock()) as host:
            drive = JobDriver(host, name=instance)
            start = StartJobRunInput(module_id="importer", job="walk", instance=instance)
            ids.append((await drive.start_job_run("tenant", start)).id)
    assert ids[0][:10] == ids[1][:10]  # the same millisecond of the ULID
    assert ids[0] != ids[1]
