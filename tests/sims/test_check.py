"""``python -m sims check``: histories recorded on a real host, judged by the oracle. Exit 0 when
the spec held, 1 on a violation, 2 when the history cannot be judged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from driver import JobDriver, JobPassResult, StartJobRunInput
from scopehost import RecordingJobDriver, ScopeDatabase, WallClock, open_scope_host
from sims import simulate
from sims.cli._main import main
from sims.mutants._ablation import ablated
from sims.mutants._catalog import MUTANTS


async def handler(ctx: Any) -> JobPassResult:
    one = await ctx.step("one", lambda: 1)
    await trio.sleep(0)  # the other drive's calls come in here
    await ctx.step("two", lambda: one + 1)
    return JobPassResult(done=True)


class DiesAfterStepOne(ScopeDatabase):
    """A store whose process is killed the moment step 'one' is committed: before the host
    records the outcome, as a SIGKILL can fall."""

    def record_step(self, run_id: str, name: str, *args: Any, **kwargs: Any) -> Any:
        recorded = super().record_step(run_id, name, *args, **kwargs)
        if name == "one":
            os._exit(9)
        return recorded


def record(
    folder: Path,
    *,
    database: Any = ScopeDatabase,
    drive: Any = RecordingJobDriver,
    deadline_ms: int | None = None,
    runs: int = 5,
    hours_later: int = 0,
) -> Path:
    """A real host on ``folder/scopes`` recording to ``folder/history``: two drives working the
    same runs at once, as two drives of one process do (``runs`` started unless the folder has
    them; the store's clock ``hours_later`` than the wall's)."""
    (folder / "scopes").mkdir(parents=True, exist_ok=True)
    later_ns = hours_later * 3_600 * 10**9
    clock = WallClock(read_ns=lambda: time.time_ns() + later_ns)

    async def main() -> None:
        async with open_scope_host(
            folder / "scopes", record=folder / "history", database=database, clock=clock
        ) as host:
            drives = [drive(host, name=name) for name in ("cron", "alarm")]
            for each in drives:
                each.register_job("m", "j", handler, deadline_ms=deadline_ms)
            for n in range(runs):
                start = StartJobRunInput(module_id="m", job="j", instance=f"i{n}")
                await drives[0].start_job_run("s", start)
            async with trio.open_nursery() as nursery:
                for each in drives:
                    nursery.start_soon(each.run_due_jobs, "s")

    with ablated(*getattr(database, "ablations", ())):
        trio.run(main)
    return folder / "history"


def record_in_a_process(folder: Path, **options: str) -> int:
    """``record(folder, ...)`` in a process of its own (options as Python source); its exit."""
    given = "".join(f", {name}={value}" for name, value in options.items())
    program = (
        "import sys; from pathlib import Path; from tests.sims.test_check import *; "
        f"record(Path(sys.argv[1]){given})"
    )
    root = Path(__file__).parents[2]
    return subprocess.run([sys.executable, "-c", program, str(folder)], cwd=root).returncode


def check(*paths: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The exit code and what was printed, its lines unwrapped (a long one wraps at 100)."""
    code = main(["check", *map(str, paths)])
    return code, capsys.readouterr().out.replace("\n    ", " ")


def test_a_recorded_history_of_a_correct_host_is_judged_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = check(record(tmp_path), capsys=capsys)
    assert code == 0, out
    assert out.startswith("check: 1 file of 1 process, ")
    assert "  checks: every check held" in out
    assert "  the oracle's models of the store and the kernel followed the history; of the " in out
    assert "rarer moments the spec has rules for (its probes: a takeover, a late BEGIN" in out
    assert "skipped runs-settle: a recorded history has no end" in out
    assert "claim-only-when-due" in out  # among the checks that held


def test_a_host_with_a_broken_store_is_judged_violated_by_the_rule_it_breaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = check(record(tmp_path, database=MUTANTS["claim-not-due"]), capsys=capsys)
    assert code == 1, out
    assert "  claim-only-when-due: VIOLATED" in out
    assert "[violation] claim-only-when-due run " in out
    assert "the spec was violated" in out


def test_the_histories_of_two_processes_are_merged_and_their_drives_told_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two real processes, one after the other, on one scope folder: the second finds the runs
    # the first left, and both have drives named cron and alarm, each numbering its calls from 1.
    for _ in range(2):
        assert record_in_a_process(tmp_path) == 0
    code, out = check(tmp_path / "history", capsys=capsys)
    assert code == 0, out
    assert out.startswith("check: 2 files of 2 processes, ")
    assert (
        "scopes called by more than one process (s): each by processes of one machine, merged "
        "by the one clock they share: exact" in out
    )
    # Two processes of different hosts on one scope: containers of one machine, or two stores
    # of one name (a scope's file is shared only on one machine); said, with the remedy.
    second = sorted((tmp_path / "history").glob("history-*.jsonl"))[1]
    head, rest = second.read_text().split("\n", 1)
    moved = json.loads(head)
    moved["process"] = "elsewhere:" + moved["process"].rpartition(":")[2]
    second.write_text(json.dumps(moved) + "\n" + rest)
    code, out = check(tmp_path / "history", capsys=capsys)
    assert code == 0, out
    assert "scope s was called by processes of 2 hosts (elsewhere, " in out
    assert "give the histories of one deployment" in out


def test_a_reply_written_as_its_execution_without_one_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (path,) = record(tmp_path).glob("history-*.jsonl")
    lines = path.read_text().splitlines()
    executions = [n for n, line in enumerate(lines) if '"ev":"rpc.exec"' in line]
    assert any('"as_exec":true' in line for line in lines)  # the recorder left outcomes out
    path.write_text("\n".join(line for n, line in enumerate(lines) if n not in executions) + "\n")
    message = cannot_judge(capsys, path)
    assert " is written as its execution's, and no execution of it is in the history" in message


def test_a_cut_last_line_is_left_out_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (path,) = record(tmp_path).glob("history-*.jsonl")
    with path.open("a") as file:
        file.write('{"ev":"rpc.send","link":"cron"')  # a process killed as it wrote
    code, out = check(path, capsys=capsys)
    assert code == 0, out
    assert f"{path}: its last line was cut (the process was killed as it wrote it)" in out


def test_a_write_in_flight_when_its_process_was_killed_is_set_aside_not_blamed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Process 1 dies the moment its store commits step 'one': its history has the call sent and
    # no outcome. Process 2 (its store's clock an hour on, so the lease has run out) takes the
    # run over and reads the memo of 'one', which nobody in the history recorded.
    assert record_in_a_process(tmp_path, database="DiesAfterStepOne", runs="1") == 9
    history = record(tmp_path, runs=0, hours_later=1)
    code, out = check(history, capsys=capsys)
    assert code == 0, out
    # The dead process's pass stopped when it died: the takeover an hour later overlaps nothing.
    assert "its history ends at" in out
    assert "[explained] double-run" not in out
    assert "not judged (what the history cannot tell the oracle):" in out
    assert "record_step sent by process " in out
    assert "had no recorded outcome (the process ended between the store's commit" in out
    assert "1 run not judged (above)" in out
    # Without the call that was in flight, the same history is the spec's violation: what was
    # set aside is exactly what the oracle could not know.
    (first,) = [
        p for p in history.glob("history-*.jsonl") if '"ev":"rpc.send"' in p.read_text()[-500:]
    ]
    lines = first.read_text().splitlines(keepends=True)
    first.write_text("".join(lines[:-1]))
    code, out = check(history, capsys=capsys)
    assert code == 1, out
    assert "ledger-one-pass: VIOLATED" in out


def test_the_models_follow_a_killed_history_up_to_its_write_in_flight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Three runs and two drives: the kill leaves writes in flight, and the models, taking them
    # for unrun, would predict the next process's due reads wrongly (862 false findings on the
    # shop's served history before the models stopped there). What they say from the first
    # write in flight on is set aside, said, and never the spec's violation.
    assert record_in_a_process(tmp_path, database="DiesAfterStepOne", runs="3") == 9
    code, out = check(record(tmp_path, runs=0, hours_later=1), capsys=capsys)
    assert code == 0, out
    assert "\nfindings:" not in out
    assert "  the oracle's models of the store and the kernel followed the history" in out
    if "  the oracle's models from " in out:
        assert "what they say from there is set aside:" in out
        assert "; the oracle's models followed the history until " in out


def test_runs_made_before_recording_began_are_not_judged_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The oracle models a run from its start: a run it never saw start would look to it like a
    # claim of a run that was never due.
    async def before() -> None:
        (tmp_path / "scopes").mkdir()
        async with open_scope_host(tmp_path / "scopes") as host:
            drive = JobDriver(host, name="unrecorded")
            for n in range(3):
                start = StartJobRunInput(module_id="m", job="j", instance=f"before{n}")
                await drive.start_job_run("s", start)

    trio.run(before)
    code, out = check(record(tmp_path, runs=1), capsys=capsys)
    assert code == 0, out
    assert out.count("its beginning is not in the history (made before recording began") == 3
    assert "every check held; 3 runs not judged (above)" in out
    # The models would take the runs they never saw start for rows from nowhere: skipped, said,
    # and none of their checks among those that held.
    assert "skipped the oracle's models of the store and the kernel (" in out
    assert "3 runs began before the history (" in out
    assert "the models know a run from its start" in out
    assert "store-claim" not in out.split("held:")[1].split("skipped")[0]


def test_a_drive_driven_by_several_tasks_at_once_is_judged_without_the_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def main() -> None:
        (tmp_path / "scopes").mkdir()
        async with open_scope_host(tmp_path / "scopes", record=tmp_path / "history") as host:
            drive = RecordingJobDriver(host, name="cron")
            drive.register_job("m", "j", handler)
            for n in range(4):
                await drive.start_job_run(
                    "s", StartJobRunInput(module_id="m", job="j", instance=f"i{n}")
                )
            async with trio.open_nursery() as nursery:
                for _ in range(3):  # three tasks, one JobDriver: its calls overlap
                    nursery.start_soon(drive.run_due_jobs, "s")

    trio.run(main)
    code, out = check(tmp_path / "history", capsys=capsys)
    assert code == 0, out
    assert "drive cron made up to 3 calls at once (several tasks driving one JobDriver)" in out
    assert "drive-passes" not in out.split("held:")[1].split("skipped")[0]
    assert "claim-only-when-due" in out.split("held:")[1]  # the invariant checks still ran


def cannot_judge(capsys: pytest.CaptureFixture[str], *paths: Path) -> str:
    code, out = check(*paths, capsys=capsys)
    assert code == 2, out
    assert out.startswith("check: cannot judge: ")
    return out.removeprefix("check: cannot judge: ").strip()


def test_a_worlds_trace_is_not_a_recorded_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "world.jsonl"
    simulate("late-begin", 1).outcome.trace.write(path)
    assert cannot_judge(capsys, path) == (
        f"{path}: its first line is a 'world.begin' event, not record.begin: not a history "
        "recorded on a real host (a world's trace is judged by `python -m sims replay`)"
    )


def test_a_history_whose_first_part_is_gone_is_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (path,) = record(tmp_path).glob("history-*.jsonl")
    events = [json.loads(line) for line in path.read_text().splitlines()]
    events[0]["part"] = 2  # as if part 1 had been rotated away
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert "part 1 of its history is missing (rotated away, or not given)" in cannot_judge(
        capsys, path
    )


def test_a_drive_that_did_not_record_its_side_is_named_with_the_remedy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = record(tmp_path, drive=JobDriver)
    assert cannot_judge(capsys, history) == (
        "a drive on link 'direct' sent due_keys but recorded nothing of its own side (what it "
        "registered, what its handlers asked): on a recording host, build every drive as "
        "scopehost.RecordingJobDriver(host, name=...)"
    )


def test_a_job_with_a_pass_deadline_is_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = record(tmp_path, deadline_ms=60_000)
    assert cannot_judge(capsys, history).startswith(
        "drive cron registered job 'j' with a pass deadline (60000 ms): the oracle has no model "
        "of a cancelled handler"
    )


def test_a_path_that_is_not_there_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cannot_judge(capsys, tmp_path / "nope") == f"{tmp_path / 'nope'}: no such file or folder"


def test_a_line_that_is_not_an_event_is_named_with_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "history-x.jsonl"
    path.write_text(
        '{"t": 0, "ev": "record.begin", "format": 5, "process": "h:1", "part": 1}\n[1, 2]\n'
    )
    assert cannot_judge(capsys, path).startswith(f"{path}: line 2 is list [1, 2], not an event")
    path.write_text('{"t": 0, "ev": "record.begin"}\n')
    assert cannot_judge(capsys, path) == (
        f"{path}: its record.begin line says format None, process None, part None; this check "
        "reads what a recorder of format 5 or 6 writes (the format, the process as HOST:PID, "
        "the part as 1, 2, ...)"
    )


def test_a_history_with_nothing_in_it_is_not_judged_and_a_file_named_twice_is_read_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "history-x.jsonl"
    path.write_text('{"t": 0, "ev": "record.begin", "format": 5, "process": "h:1", "part": 1}\n')
    assert cannot_judge(capsys, path, tmp_path) == (
        "1 file of h:1 hold no event after record.begin: nothing happened on the host while it "
        "recorded, so there is nothing to judge"
    )
