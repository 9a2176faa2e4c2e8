"""A history of release 1 recorded on the real host (``record=``, RecordingJobDriver), judged by
``python -m sims check``; and a killed process's history."""

from __future__ import annotations

from pathlib import Path

from tests.newcomer2.helpers import leave, leave_killed, sims


def test_recorded_v1_history_is_judged_clean(tmp_path: Path) -> None:
    data = tmp_path / "all"
    summary = leave("all", data, "--record", str(data / "history"))
    assert "done, cursor 5" in summary, summary
    assert "'paid': 5" in summary, summary
    assert len(list((data / "history").glob("history-*.jsonl"))) == 1
    done = sims("check", str(data / "history"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the oracle's models of the store and the kernel followed the history" in done.stdout
    assert "step.memo" in done.stdout  # the retried pass's memo of 'pay p2'
    assert "checks: every check held" in done.stdout


def test_killed_history_is_judged_and_refused_as_a_deploy_source(tmp_path: Path) -> None:
    data = tmp_path / "killed"
    leave_killed(data, "--record", str(data / "history"))
    done = sims("check", str(data / "history"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 run still in a handler" in done.stdout
    refused = sims(
        "before-deploy",
        "payouts.py:V2_REKEY",
        "--runs",
        str(data / "history"),
        "--world",
        "world.py:v1",
        "--old",
        "payouts.py:V1",
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "has no recorded outcome" in refused.stderr
    assert "give the scope's file instead" in refused.stderr
