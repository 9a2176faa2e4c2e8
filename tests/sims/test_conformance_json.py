"""Regression histories for the two differences the conformance kit found between the reference
and the workerd worker: JSON text with ``NaN`` and JSON nested past the depth limit. Before the
rule in docs/decisions.md ("JSON text at the store's doors"), the reference stored both and its
erasure then disagreed with a JavaScript store's; now both stores refuse both, by the same paths.
"""

from __future__ import annotations

import json
from typing import Any

from sims.conformance import replay_history

NOW = "2026-10-04T12:00:00.000Z"
NAN = '{"x":NaN,"who":{"subjectId":"s1","piiClass":"email"}}'
#: A subject envelope 1 500 levels down: deeper than Python's parser goes, shallower than V8's.
DEEP = "[" * 1_500 + json.dumps({"subjectId": "s1", "piiClass": "email"}) + "]" * 1_500


def _start(id: str, instance: str, *, payload: str = "{}", cursor: str | None = None) -> Any:
    row = {
        "id": id,
        "module_id": "m1",
        "job": "walk",
        "instance": instance,
        "payload": payload,
        "subject_id": None,
        "status": "running",
        "cursor": cursor,
        "counters": "{}",
        "attempts": 0,
        "last_error": None,
        "started_at": NOW,
        "updated_at": NOW,
        "next_attempt_at": None,
        "ended_at": None,
        "lease_owner": None,
        "lease_began_at": None,
        "admission_misses": None,
    }
    key = {"module_id": "m1", "job": "walk", "instance": instance}
    return {"op": "start_or_join", "scope": "a", "now": NOW, "args": {"key": key, "row": row}}


HISTORY: list[Any] = [
    _start("r01", "nan", payload=NAN),
    _start("r02", "deep", payload=DEEP),
    _start("r03", "deep-cursor", cursor=DEEP),
    _start("r04", "plain", payload="not json"),
    {
        "op": "claim", "scope": "a", "now": NOW,
        "args": {"id": "r04", "owner": "o1", "lease_ms": 60_000},
    },
    {
        "op": "record_step",
        "scope": "a",
        "now": NOW,
        "args": {
            "run_id": "r04", "name": "fetch", "result": NAN, "attempts": 1,
            "last_error": None, "at": NOW, "owner": "o1", "lease_ms": 60_000,
        },
    },
    {"op": "shred_subject", "scope": "a", "now": NOW, "args": {"subject_id": "s1"}},
]  # fmt: skip


def test_nan_and_deep_json_are_refused_alike_by_the_reference_and_workerd() -> None:
    report = replay_history(HISTORY, target="workerd")
    assert report.ok, "\n".join(report.lines())
    assert report.operations == len(HISTORY)
