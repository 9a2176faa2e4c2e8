"""The workerd target refuses what the reference now refuses at its doors: times a run could never
run again at, numbers that overflow to Infinity, text past its cap under the row limit, and a
restored lease longer than any store writes. Each step below is refused by the reference (its own
tests hold that); the kit finds a difference if the worker accepted any of them."""

from __future__ import annotations

from typing import Any

from driver import JOB_CURSOR_MAX_BYTES, JOB_LEASE_MAX_MS, JOB_PAYLOAD_MAX_BYTES, add_ms
from sims.conformance import replay_history

T0 = "2026-10-04T12:00:00.000Z"


def _row(id: str, **changes: Any) -> dict[str, Any]:
    row = {
        "id": id, "module_id": "m", "job": "j", "instance": id, "payload": "{}",
        "subject_id": None, "status": "running", "cursor": None, "counters": "{}",
        "attempts": 0, "last_error": None, "started_at": T0, "updated_at": T0,
        "next_attempt_at": None, "ended_at": None, "lease_owner": None, "lease_began_at": None,
        "admission_misses": None,
    }  # fmt: skip
    return {**row, **changes}


def _start(id: str, **changes: Any) -> dict[str, Any]:
    row = _row(id, **changes)
    key = {"module_id": "m", "job": "j", "instance": row["instance"]}
    return {"op": "start_or_join", "scope": "a", "now": T0, "args": {"key": key, "row": row}}


def _patch(op: str, **changes: Any) -> dict[str, Any]:
    patch = {
        "status": "running", "cursor": None, "counters": "{}", "attempts": 0,
        "last_error": None, "updated_at": T0, "next_attempt_at": None, "ended_at": None,
    }  # fmt: skip
    args = {"id": "r1", "patch": {**patch, **changes}, "owner": "o1"}
    return {"op": op, "scope": "a", "now": T0, "args": args}


def test_workerd_refuses_what_would_make_a_run_unrunnable_as_the_reference_does() -> None:
    history = [
        _start("r1"),
        {"op": "claim", "scope": "a", "now": T0,
         "args": {"id": "r1", "owner": "o1", "lease_ms": JOB_LEASE_MAX_MS}},
        _patch("patch", next_attempt_at="never"),
        _patch("patch", next_attempt_at="2026-13-45T99:99:99.999Z"),
        _patch("commit_pass", next_attempt_at="9999-12-31T23:59:59.999Z"),
        _patch("patch", counters='{"n":1e309}'),
        _patch("commit_pass", cursor='"' + "c" * JOB_CURSOR_MAX_BYTES + '"'),
        _patch("patch", last_error="e" * 100_001),
        {"op": "record_step", "scope": "a", "now": T0,
         "args": {"run_id": "r1", "name": "s", "result": "[" + "1," * 500_000 + "1]",
                  "attempts": 1, "last_error": None, "at": T0, "owner": "o1", "lease_ms": 1_000}},
        _start("r2", payload='"' + "p" * JOB_PAYLOAD_MAX_BYTES + '"'),
        _start("r3", counters='{"n":-1e400}'),
        _start("r4", instance="i" * 1_025),
        # A restore whose lease (a year from T0) ends more than a year past the import's now.
        {"op": "import_dump", "scope": "a", "now": add_ms(T0, -1),
         "args": {"dump_of": "a", "source": "a"}},
        {"op": "export_dump", "scope": "a", "now": T0, "args": {}},
    ]  # fmt: skip
    report = replay_history(history, target="workerd")
    assert report.ok, "\n".join(report.lines())
