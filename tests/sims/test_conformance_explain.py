"""Every operation's difference is explained by its own rule, from the rows that decide it; a rule
or operation a kit run never reached is a loud line; the shrinker deletes steps to a fixpoint."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from sims.conformance import LocalTarget, ReferenceStore, run_conformance
from sims.conformance._boundaries import RULES
from sims.conformance._explain import explain
from sims.conformance._kit import COMPARED_OPERATIONS, ConformanceReport, Difference, _trim

from .conformance_planted import PLANTED


def _run(id: str, **more: Any) -> dict[str, Any]:
    row = {
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
        "started_at": "2026-10-04T12:00:00.000Z",
        "updated_at": "2026-10-04T12:00:00.000Z",
        "next_attempt_at": None,
        "ended_at": None,
        "lease_owner": None,
        "lease_began_at": None,
        "admission_misses": None,
    }
    row.update(more)
    return row


def _step(run_id: str, name: str, result: str | None, error: str | None) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "step": name,
        "result": result,
        "attempts": 1,
        "last_error": error,
        "recorded_at": "2026-10-04T12:00:00.000Z",
    }


def _explained(op: str, args: dict[str, Any], tables: dict[str, Any], **more: Any) -> Any:
    step = {"op": op, "scope": "a", "now": "2026-10-04T12:00:01.000Z", "args": args}
    return explain(step, tables, **more)


TABLES = {
    "runs": [_run("r01"), _run("r02", status="done"), _run("r03", job="sync"), _run("r04")],
    "steps": [],
}


def test_a_list_names_its_rows_the_limit_as_read_and_the_ids_it_returns() -> None:
    rule, rows = _explained("list", {"filter": {"limit": True}}, TABLES)
    assert rule == (
        "4 runs match no filter; the limit true is not a number: the default 50, so the list "
        "must return the newest 50 by id, newest first: r04, r03, r02, r01"
    )
    assert [row["id"] for row in rows] == ["r04", "r03", "r02", "r01"]
    rule, rows = _explained("list", {"filter": {"job": "walk", "limit": 1.5}}, TABLES)
    assert rule == (
        "3 runs match job walk; the limit 1.5, floored and held between 1 and 500, is 1, so the "
        "list must return the newest 1 by id, newest first: r04"
    )
    assert [row["id"] for row in rows] == ["r04", "r02", "r01"]
    rule, _rows = _explained("list", {"filter": {"limit": -1}}, TABLES)
    assert "the limit -1, floored and held between 1 and 500, is 1" in rule


ENVELOPE = '{"subjectId":"s1","piiClass":"email"}'


def test_an_erasure_names_every_run_it_must_touch_and_why() -> None:
    tables = {
        "runs": [
            _run("r01", subject_id="s1", status="done"),
            _run("r02", payload=ENVELOPE),
            _run("r03", cursor='{"who":' + ENVELOPE + "}"),
            _run("r04"),
            _run("r05", payload='{"subjectId":"s1","piiClass":"none"}'),
        ],
        "steps": [
            _step("r01", "fetch", None, "boom"),
            _step("r04", "fetch", ENVELOPE, None),
            _step("r04", "store", '"ok"', "boom"),
        ],
    }
    rule, rows = _explained("shred_subject", {"subject_id": "s1"}, tables)
    assert rule == (
        "erasure of s1 must touch each run that holds it and is not yet redacted (a run already "
        "holding only its tombstones and notes is not counted again): "
        "r01 (declares it; still done, the finished note as last_error; the errors of step "
        "fetch become the note); "
        "r02 (its payload carries its envelope (subject_id is not it); settled failed, no "
        "lease, no due time); "
        "r03 (only its cursor carries its envelope; settled failed, no lease, no due time); "
        "r04 (only the result of step fetch carries its envelope, so only that step row is "
        "shredded and the payload, cursor and other steps stay; settled failed, no lease, no "
        "due time; the errors of step store become the note)"
    )
    ids = [row.get("id", row.get("run_id")) for row in rows]
    assert ids == ["r01", "r01", "r02", "r03", "r04", "r04", "r04"]
    rule, rows = _explained("shred_subject", {"subject_id": "s9"}, tables)
    assert rule.startswith("no run declares s9 or carries its envelope")
    assert rows == []


def test_an_import_says_restore_or_copy_and_which_rows_decide_it() -> None:
    dumped = {"runs": [_run("r01"), _run("r02", status="done")], "steps": []}
    restore = {"op": "import_dump", "scope": "a", "now": "2026-10-04T12:00:01.000Z"}
    rule, rows = explain({**restore, "args": {"dump_of": "a", "source": "a"}}, dumped, dumped)
    assert rule.startswith("a restore into the scope the dump came from: the tables are replaced")
    assert len(rows) == 2
    copy = {**restore, "scope": "b", "args": {"dump_of": "a", "source": "a"}}
    rule, rows = explain(copy, {"runs": [], "steps": []}, dumped)
    assert rule == (
        "a copy into another scope: its 2 runs and 0 step rows are added with every other column "
        "as exported; the running runs (r01) become failed as not carried, with no lease and no "
        "due time, ended now"
    )
    rule, rows = explain(copy, {"runs": [_run("r02")], "steps": []}, dumped)
    assert rule == (
        "a copy into another scope that already holds run r02: a conflict (code conflict, no "
        "paths), and nothing is written"
    )
    wrong = {**copy, "args": {"dump_of": "a", "source": "b"}}
    assert "must be refused (validation_failed at source_scope_id)" in explain(wrong, {}, dumped)[0]


def test_a_rule_or_operation_reached_zero_times_is_a_loud_line() -> None:
    report = ConformanceReport(target="t", strict=False, histories=1, operations=1)
    report.exercised.update({name: 2 for name in RULES if name != "due-tie"})
    report.reached.update({op: 3 for op in COMPARED_OPERATIONS if op != "list"})
    printed = report.lines()
    assert f"  NOT REACHED due-tie x0: {RULES['due-tie']}" in printed
    assert "  NOT REACHED list x0: no history compared this operation" in printed
    assert f"  claim-inside-lease x2: {RULES['claim-inside-lease']}" in printed
    assert report.unreached() == ["due-tie", "list"]
    assert (
        "conformance: WARNING — not reached: due-tie, list; nothing about them was compared "
        "(run more --examples or another --seed)"
    ) in printed
    report.exercised["due-tie"] = 1
    report.reached["list"] = 1
    assert not any("NOT REACHED" in line or "WARNING" in line for line in report.lines())


def test_a_default_run_reaches_every_rule_and_every_operation() -> None:
    report = run_conformance(LocalTarget(ReferenceStore()), examples=100, seed=4)
    assert report.ok
    assert report.unreached() == []


def test_a_list_bug_shrinks_to_the_rows_its_limit_cuts_and_the_list() -> None:
    # Caught on this seed, the list bug shrinks to the rows its limit cuts and the list itself:
    # three starts (2.5 floors to 2 of 3 rows) and the list, nothing else.
    bug = "list-limit-rounded-up"
    report = run_conformance(
        LocalTarget(ReferenceStore(database=PLANTED[bug])), examples=100, seed=3
    )
    assert report.difference is not None
    assert report.history is not None
    assert [step["op"] for step in report.history] == ["start_or_join"] * 3 + ["list"]
    assert report.difference.rule.startswith("3 runs match no filter; the limit 2.5")


class _Stores:
    """A stand-in for the two stores: a history differs while it holds step ``x``, except that
    step ``a`` is needed while step ``b`` is still there (deleting ``b`` frees ``a``)."""

    def run(self, steps: Iterator[Any], view: None, record: list[Any]) -> tuple[Any, Counter[str]]:
        record.extend(steps)
        names = [step["op"] for step in record]
        differs = "x" in names and not ("b" in names and "a" not in names)
        return (Difference(len(record), "x", "differs", "") if differs else None), Counter()


def test_step_deletion_runs_until_a_pass_deletes_nothing() -> None:
    history = [{"op": name} for name in ("a", "b", "x")]
    first = Difference(3, "x", "differs", "")
    _difference, trimmed = _trim(_Stores(), first, history)  # type: ignore[arg-type]
    # One pass keeps a (b was still there when a was tried); the second deletes it.
    assert trimmed == [{"op": "x"}]


def test_a_refused_request_is_explained_by_its_refusal_not_by_what_it_would_have_done() -> None:
    error = {"code": "validation_failed", "message": "patch.status is 'paused'; ..."}
    refused = {"ok": False, "error": {**error, "paths": ["patch.status"]}}
    args = {"id": "r01", "patch": {"status": "paused"}, "owner": None}
    rule, rows = _explained("patch", args, TABLES, reply=refused)
    assert rule == (
        "the reference refused this patch at its door (validation_failed, with the paths "
        "patch.status): a store must refuse it with the same code and paths (the message may be "
        "its own) and write nothing (rule door-refusals; docs/conformance.md, What a store "
        "refuses). The reference said: patch.status is 'paused'; ..."
    )
    assert rows == []
    conflict = {"ok": False, "error": {"code": "conflict", "message": "run r01 is there"}}
    rule, _ = _explained("patch", args, TABLES, reply=conflict)
    assert rule == (
        "the reference refused this patch (conflict, with no paths field): a store must refuse it "
        "with the same code and paths (the message may be its own) and write nothing. The "
        "reference said: run r01 is there"
    )
    # An answer, not a refusal, leaves the operation's own rule to say it.
    rule, _ = _explained("patch", args, TABLES, reply={"ok": True, "result": False})
    assert not rule.startswith("the reference refused")


def test_each_rule_of_an_operation_names_what_a_port_most_often_misses() -> None:
    held = _run(
        "r01",
        lease_owner="o1",
        next_attempt_at="2026-10-04T12:00:05.000Z",
        admission_misses=3,
        counters='{"n":1}',
    )
    tables = {"runs": [held], "steps": []}
    rule, _ = _explained("begin", {"id": "r01", "owner": "o1", "margin_ms": 250.0}, tables)
    assert rule.endswith(
        "so it must return true, write lease_began_at 12:00:01.000Z and clear admission_misses "
        "(now 3) to null (rule begin-clears-misses)"
    )
    patch = {"status": "running", "counters": '{"n":2}'}
    rule, _ = _explained("commit_pass", {"id": "r01", "patch": patch, "owner": "o1"}, tables)
    assert '(its counters {"n":2} written over the stored {"n":1}, never merged: rule ' in rule
    rule, _ = _explained("due_keys", {"now_param": "2026-10-04T12:00:01.000Z", "max": 2}, TABLES)
    assert "a tie by id, lowest first (rule due-tie), at most 2: r01, r03" in rule
    rule, rows = _explained("export_dump", {}, TABLES)
    assert rule == (
        "an export answers the scope's id and every row verbatim, every column as stored: its 4 "
        "runs by id and its 0 step rows by run and name, and writes nothing"
    )
    assert len(rows) == 4
