"""The wire as the reference speaks it, the comparison rules, the allowances, the CLI verdicts."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sims.cli._main import main
from sims.conformance import (
    ALLOWANCES,
    LocalTarget,
    ReferenceStore,
    replay_history,
    serve_lines,
)
from sims.conformance._compare import compare_tables, compare_values

NOW = "2026-10-04T12:00:00.000Z"
LATER = "2026-10-04T12:00:01.000Z"
PLANTED = Path(__file__).with_name("conformance_planted.py")


def _row(id: str) -> dict[str, Any]:
    return {
        "id": id,
        "module_id": "m1",
        "job": "walk",
        "instance": "default",
        "payload": "{}",
        "subject_id": None,
        "status": "running",
        "cursor": None,
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


START: dict[str, Any] = {
    "op": "start_or_join",
    "scope": "a",
    "now": NOW,
    "args": {"key": {"module_id": "m1", "job": "walk", "instance": "default"}, "row": _row("r01")},
}
CLAIM: dict[str, Any] = {
    "op": "claim",
    "scope": "a",
    "now": NOW,
    "args": {"id": "r01", "owner": "o1", "lease_ms": 1000},
}


def _serve(*requests: Any) -> list[dict[str, Any]]:
    lines = io.StringIO(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in requests)
    )
    out = io.StringIO()
    serve_lines(ReferenceStore(), lines, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _wire(step: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"wire": 1, **step, **more}


def test_the_reference_answers_each_line_in_order() -> None:
    hello, started, claimed, missing = _serve(
        {"wire": 1, "op": "hello"},
        _wire(START),
        _wire(CLAIM, tables=True),
        _wire({**CLAIM, "args": {"id": "r99", "owner": "o2", "lease_ms": 1000}}),
    )
    assert hello == {"ok": True, "result": {"wire": 1, "store": "reference"}}
    assert started == {"ok": True, "result": _row("r01")}
    assert claimed["result"]["takeover"] is False
    assert claimed["result"]["run"]["next_attempt_at"] == LATER
    assert claimed["tables"] == {"runs": [claimed["result"]["run"]], "steps": []}
    assert missing == {"ok": True, "result": None}


def test_a_refusal_names_its_paths_and_writes_nothing() -> None:
    started, refused = _serve(
        _wire(START),
        _wire({**CLAIM, "args": {"id": "r01", "owner": "o1", "lease_ms": 0}}, tables=True),
    )
    assert refused["ok"] is False
    assert refused["error"]["code"] == "validation_failed"
    assert refused["error"]["paths"] == ["lease_ms"]
    assert refused["tables"]["runs"] == [started["result"]]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "the line is not JSON: Expecting value: line 1 column 1 (char 0)"),
        ('{"wire": 2, "op": "hello"}', "wire 2 is not spoken here; this store speaks 1"),
        ('{"wire": 1, "op": "drop"}', "op 'drop' is not an operation of wire 1"),
        (
            '{"wire": 1, "op": "tables", "now": "x"}',
            "scope must name the scope, a non-empty string",
        ),
        (
            '{"wire": 1, "op": "claim", "scope": "a", "now": "x", "args": {"id": "r"}}',
            "args must have exactly the fields id, owner, lease_ms; missing: owner, lease_ms",
        ),
    ],
)
def test_a_request_that_is_not_the_wire_gets_bad_request(line: str, message: str) -> None:
    (reply,) = _serve(line)
    assert reply == {"ok": False, "error": {"code": "bad_request", "message": message}}


def test_values_compare_as_json_with_types() -> None:
    assert compare_values(True, 1, strict=False).difference == (
        "at the value the reference has True and the target 1"
    )
    assert compare_values({"a": [1, 2]}, {"a": [1, 3]}, strict=False).difference == (
        "at a.1 the reference has 2 and the target 3"
    )
    assert compare_values(3, 3.0, strict=False).difference is None


def test_tables_name_the_row_that_differs() -> None:
    ours = {"runs": [{"id": "r01", "status": "running"}], "steps": []}
    theirs = {"runs": [{"id": "r01", "status": "done"}], "steps": []}
    assert compare_tables(ours, theirs, strict=False).difference == (
        "at runs.r01.status the reference has 'running' and the target 'done'"
    )
    swapped = {"runs": [{"id": "b"}, {"id": "a"}], "steps": []}
    ordered = {"runs": [{"id": "a"}, {"id": "b"}], "steps": []}
    found = compare_tables(ordered, swapped, strict=False).difference
    assert found is not None
    assert found.startswith("the rows agree but come in another order")


class _Doubles(LocalTarget):
    """The reference, its numbers passed through doubles as a JavaScript runtime's are."""

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        def doubled(value: Any) -> Any:
            if isinstance(value, bool):
                return value
            if isinstance(value, int):
                return int(float(value))
            if isinstance(value, dict):
                return {key: doubled(item) for key, item in value.items()}
            if isinstance(value, list):
                return [doubled(item) for item in value]
            return value

        return super().call(doubled(request))


class _Reworded(LocalTarget):
    """The reference, its refusals in other words."""

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        reply = super().call(request)
        if not reply["ok"]:
            reply["error"]["message"] = "nope"
        return reply


RECORD_WIDE: dict[str, Any] = {
    "op": "record_step",
    "scope": "a",
    "now": NOW,
    "args": {
        "run_id": "r01",
        "name": "fetch",
        "result": None,
        "attempts": 2**53 + 1,
        "last_error": None,
        "at": NOW,
        "owner": "o1",
        "lease_ms": 1000,
    },
}


def test_a_wide_integer_is_an_allowance_and_strict_makes_it_a_difference() -> None:
    history = [START, CLAIM, RECORD_WIDE]
    allowed = replay_history(history, target=_Doubles(ReferenceStore()))
    assert allowed.ok
    assert allowed.allowed["wide-integer"] > 0
    assert any("wide-integer x" in line for line in allowed.lines())
    strict = replay_history(history, target=_Doubles(ReferenceStore()), strict=True)
    assert strict.difference is not None
    assert strict.difference.line() == (
        "step 3 (record_step): after it, the tables of scope a differ: at "
        "steps.r01/fetch.attempts the reference has 9007199254740993 and the target "
        "9007199254740992"
    )


def test_a_reworded_refusal_is_an_allowance_and_strict_makes_it_a_difference() -> None:
    history = [START, {**CLAIM, "args": {"id": "r01", "owner": "o1", "lease_ms": -5}}]
    allowed = replay_history(history, target=_Reworded(ReferenceStore()))
    assert allowed.ok
    assert dict(allowed.allowed) == {"refusal-message": 1}
    strict = replay_history(history, target=_Reworded(ReferenceStore()), strict=True)
    assert strict.difference is not None
    assert strict.difference.detail.startswith("the refusals' messages differ (--strict)")
    assert set(ALLOWANCES) == {"lone-surrogate", "refusal-message", "wide-integer"}


class _Replacing(LocalTarget):
    """The reference, a lone surrogate replaced as a JavaScript runtime's SQLite stores it."""

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        text = json.dumps(request).replace("\\ud800", "\\ufffd")
        return super().call(json.loads(text))


def test_a_lone_surrogate_ends_the_history_as_an_allowance() -> None:
    surrogate = {**START, "args": {**START["args"], "row": {**_row("r01"), "payload": '"\ud800"'}}}
    history = [surrogate, CLAIM]
    allowed = replay_history(history, target=_Replacing(ReferenceStore()))
    assert allowed.ok
    assert dict(allowed.allowed) == {"lone-surrogate": 1}
    assert allowed.operations == 1  # the claim after it was not compared: the stores differ now
    strict = replay_history(history, target=_Replacing(ReferenceStore()), strict=True)
    assert strict.difference is not None
    assert strict.difference.step == 1
    # The reference refuses such text at its door (ValidationFailed naming the path).
    assert strict.difference.detail.startswith(
        'the reference refused (validation_failed: "row.payload holds a lone surrogate'
    )


def test_the_cli_says_what_it_compared_and_exits_by_the_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reference = f"{sys.executable} -m sims.conformance"
    assert main(["conformance", "--target", reference, "--examples", "5", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "agreed with the reference: 5 histories," in out
    assert "seed 4 (--seed 4 repeats it)" in out
    broken = f"{sys.executable} {PLANTED} commit-keeps-ledger"
    record = {**RECORD_WIDE, "args": {**RECORD_WIDE["args"], "attempts": 1, "result": "1"}}
    patch = {
        "status": "done",
        "cursor": None,
        "counters": "{}",
        "attempts": 0,
        "last_error": None,
        "updated_at": NOW,
        "next_attempt_at": None,
        "ended_at": NOW,
    }
    commit = {**CLAIM, "op": "commit_pass", "args": {"id": "r01", "patch": patch, "owner": "o1"}}
    # Without a step row to keep, the broken commit does what a right one does ...
    assert (
        main(["conformance", "--target", broken, "--replay", json.dumps([START, CLAIM, commit])])
        == 0
    )
    # ... and with one, it differs: exit 1, the step, and the command that replays it.
    history = json.dumps([START, CLAIM, record, commit])
    assert main(["conformance", "--target", broken, "--replay", history]) == 1
    out = capsys.readouterr().out
    assert "conformance: DIFFERENCE between the reference and" in out
    assert "step 4 (commit_pass): after it, the tables of scope a differ" in out
    assert "python -m sims conformance --target" in out
    assert main(["conformance", "--target", reference, "--examples", "0"]) == 2
    assert capsys.readouterr().err == "error: --examples is 0; run at least 1 history\n"
    assert main(["conformance", "--target", reference, "--replay", "[]"]) == 2
    assert capsys.readouterr().err == "error: a history is a non-empty JSON array of steps\n"
    assert main(["conformance", "--target", reference, "--replay", "@no-such.json"]) == 2
    assert capsys.readouterr().err == (
        "error: --replay @no-such.json: cannot read no-such.json (No such file or directory); "
        "name a file that holds a history the kit printed\n"
    )


def test_a_target_that_does_not_speak_the_wire_fails_the_run_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    echo = f"{sys.executable} -c \"import sys; [print(line, end='') for line in sys.stdin]\""
    assert main(["conformance", "--target", echo, "--examples", "3", "--seed", "1"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(
        f"conformance: FAILED — the target command {echo!r} replied "
        '\'{"wire":1,"op":"hello"}\', which is not a wire reply: its ok is not true or false\n'
    )
    silent = f"{sys.executable} -c pass"
    assert main(["conformance", "--target", silent, "--examples", "3", "--seed", "1"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(
        f"conformance: FAILED — the target command {silent!r} closed its output before "
        "replying; it exited with code 0\n"
    )


def test_the_explanations_use_the_spec_constants() -> None:
    from driver import JOB_ADMISSION_MISS_MAX, admission_backoff_ms
    from sims.conformance import _explain

    assert _explain.ADMISSION_MISS_MAX == JOB_ADMISSION_MISS_MAX
    assert [_explain.backoff_ms(n) for n in range(12)] == [
        admission_backoff_ms(n) for n in range(12)
    ]
