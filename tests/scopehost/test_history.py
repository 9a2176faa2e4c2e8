"""A real host records its history: one file per process, each event a line as a world writes it,
parts rotated and bounded, and every drive on a recording host records its side too."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from driver import JobDriver, JobPassResult, StartJobRunInput
from scopehost import HistoryRecorder, RecordingJobDriver, open_scope_host


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_event_is_a_line_with_its_wall_clock_time_after_a_header(tmp_path: Path) -> None:
    now = iter([1_000.0, 1_000.0, 1_000.5, 999.0])  # the last: a clock stepped back
    recorder = HistoryRecorder(tmp_path, clock=lambda: next(now))
    recorder("claim.won", {"drive": "cron", "run": "r1"})
    recorder("begin.ok", {"drive": "cron", "run": "r1"})
    recorder.close()
    (path,) = tmp_path.glob("history-*.jsonl")
    assert path == recorder.path
    assert path.name.startswith(f"history-{os.uname().nodename}-{os.getpid()}-")
    header, *events = lines(path)
    assert header == {
        "ev": "record.begin",
        "format": 6,
        "part": 1,
        "process": f"{os.uname().nodename}:{os.getpid()}",
        "t": 1_000_000.0,
    }
    assert events == [
        {"t": 1_000_500.0, "ev": "claim.won", "drive": "cron", "run": "r1"},
        # Never back in time within a file: a clock stepped back repeats the last time.
        {"t": 1_000_500.0, "ev": "begin.ok", "drive": "cron", "run": "r1"},
    ]


def test_a_reply_that_delivers_what_ran_is_written_without_it(tmp_path: Path) -> None:
    recorder = HistoryRecorder(tmp_path)
    rows = [{"id": "r1", "status": "running"}]
    call = {"link": "cron", "seq": 7, "scope": "s", "op": "due_keys"}
    recorder("rpc.exec", {**call, "store_at": "x", "result": rows})
    recorder("rpc.deliver", {**call, "store_at": "x", "result": rows})
    # Another answer than the one that ran (a world's wire can change it) is written whole.
    recorder("rpc.exec", {**call, "seq": 8, "store_at": "x", "result": rows})
    recorder("rpc.deliver", {**call, "seq": 8, "store_at": "x", "result": list(rows)})
    recorder.close()
    _, ran, delivered, ran_again, delivered_whole = lines(recorder.path)
    assert ran["result"] == rows
    assert delivered == {
        "t": delivered["t"],
        "ev": "rpc.deliver",
        **call,
        "store_at": "x",
        "as_exec": True,
    }
    assert ran_again["result"] == delivered_whole["result"] == rows
    assert "as_exec" not in delivered_whole


def test_what_orjson_cannot_write_is_written_by_the_standard_encoder(tmp_path: Path) -> None:
    recorder = HistoryRecorder(tmp_path)
    recorder("world.note", {"big": 2**70, "text": "caf\u00e9 \ud800"})
    recorder("world.note", {"text": "caf\u00e9"})
    recorder.close()
    _, big, plain = lines(recorder.path)
    assert big["big"] == 2**70
    assert big["text"] == "caf\u00e9 \ud800"
    assert plain["text"] == "caf\u00e9"
    # orjson's own line keeps the text as UTF-8, as the standard encoder with ensure_ascii=False.
    assert "café".encode() in recorder.path.read_bytes()


def test_parts_rotate_and_only_the_newest_are_kept(tmp_path: Path) -> None:
    recorder = HistoryRecorder(tmp_path, max_bytes=4096, keep=2)
    for n in range(200):
        recorder("world.note", {"text": "x" * 100, "n": n})
    recorder.close()
    parts = sorted(tmp_path.glob("history-*.jsonl"), key=lambda p: lines(p)[0]["part"])
    assert len(parts) == 2
    numbers = [lines(p)[0]["part"] for p in parts]
    assert numbers[1] == numbers[0] + 1 > 2  # part 1 was deleted: the history is bounded
    assert all(p.stat().st_size < 4096 + 200 for p in parts)
    assert lines(parts[-1])[-1]["n"] == 199


def test_a_folder_that_is_no_path_or_cannot_be_written_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^the history's folder is ''; give the path of a folder"):
        HistoryRecorder("")
    with pytest.raises(ValueError, match=r"^the history's folder is 123; give the path"):
        HistoryRecorder(123)  # type: ignore[arg-type]
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"cannot be made \(File exists\); give a folder"):
        HistoryRecorder(tmp_path / "file")
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o500)
    try:
        if os.access(tmp_path / "ro", os.W_OK):
            return  # root writes anywhere: nothing to refuse here
        with pytest.raises(ValueError, match=r"cannot be written \(Permission denied\)"):
            HistoryRecorder(tmp_path / "ro")
    finally:
        (tmp_path / "ro").chmod(0o700)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_bytes": 10}, "max_bytes=10: give a part's size in bytes, at least 4096"),
        ({"keep": 0}, "keep=0: give how many parts to keep, at least 1"),
    ],
)
def test_bad_bounds_are_refused_by_name(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        HistoryRecorder(tmp_path, **options)


async def handler(ctx: Any) -> JobPassResult:
    one = await ctx.step("one", lambda: 1)
    await ctx.step("two", lambda: one + 1)
    return JobPassResult(done=True)


async def test_a_recording_host_and_its_drives_write_one_history(tmp_path: Path) -> None:
    (tmp_path / "scopes").mkdir()
    async with open_scope_host(tmp_path / "scopes", record=tmp_path / "history") as host:
        drive = RecordingJobDriver(host, name="cron")
        drive.register_job("m", "j", handler)
        await drive.start_job_run("s", StartJobRunInput(module_id="m", job="j", instance="i"))
        await drive.run_due_jobs("s")
    (path,) = (tmp_path / "history").glob("history-*.jsonl")
    events = lines(path)
    kinds = [e["ev"] for e in events]
    for kind in ("job.register", "start.call", "drive.call", "claim.won", "hx.step", "hx.end"):
        assert kind in kinds
    assert kinds.index("drive.report") > kinds.index("pass.outcome")
    # Each drive has a link of its own, named as it is: the oracle tells drives apart by it.
    assert {e["link"] for e in events if e["ev"] == "rpc.send" and e["op"] == "claim"} == {"cron"}


async def test_a_recording_driver_needs_a_history_to_write(tmp_path: Path) -> None:
    async with open_scope_host() as host:
        with pytest.raises(ValueError, match=r"^RecordingJobDriver\(host\) on a host that records"):
            RecordingJobDriver(host, name="cron")
        with pytest.raises(ValueError, match=r"^record= and observer= were both given"):
            async with open_scope_host(record=tmp_path, observer=lambda e, f: None):
                pass


def test_a_plain_drive_on_a_recording_host_is_told_apart(tmp_path: Path) -> None:
    # Its calls are recorded by the host, over the host's own link, with nothing of its side:
    # `check` refuses such a history rather than judge half of it (tests/sims/test_check.py).
    async def main() -> None:
        async with open_scope_host(record=tmp_path) as host:
            drive = JobDriver(host, name="plain")
            drive.register_job("m", "j", handler)
            await drive.start_job_run("s", StartJobRunInput(module_id="m", job="j", instance="i"))
            await drive.run_due_jobs("s")

    trio.run(main)
    (path,) = tmp_path.glob("history-*.jsonl")
    sent = [e for e in lines(path) if e["ev"] == "rpc.send"]
    assert {e["link"] for e in sent} == {"direct"}
    assert not [e for e in lines(path) if e["ev"] == "drive.call"]


def test_every_line_is_on_file_before_a_call_that_can_change_the_store_is_sent(
    tmp_path: Path,
) -> None:
    # What a SIGKILL can cost is only what followed the last such call: reads, kernel events.
    recorder = HistoryRecorder(tmp_path)
    recorder("drive.call", {"drive": "cron", "scope": "s"})
    recorder("rpc.send", {"link": "cron", "seq": 1, "scope": "s", "op": "due_keys", "args": []})
    assert [e["ev"] for e in lines(recorder.path)] == ["record.begin"]
    recorder("rpc.send", {"link": "cron", "seq": 2, "scope": "s", "op": "claim", "args": ["r"]})
    assert [e["ev"] for e in lines(recorder.path)] == [
        "record.begin",
        "drive.call",
        "rpc.send",
        "rpc.send",
    ]
    recorder("claim.won", {"drive": "cron", "run": "r"})
    recorder.close()
    assert lines(recorder.path)[-1]["ev"] == "claim.won"


async def test_a_recorder_given_to_the_host_is_the_givers_to_close(tmp_path: Path) -> None:
    for given in ("record", "observer"):
        recorder = HistoryRecorder(tmp_path / given)
        options: dict[str, Any] = {given: recorder}
        async with open_scope_host(**options) as host:
            assert host.recorder is recorder
        assert not recorder.closed, given
        recorder.close()
    async with open_scope_host(record=tmp_path / "made") as host:
        made = host.recorder
    assert made is not None
    assert made.closed
