"""A new user's six one-bug store adapters (``kit_trial35b_adapters.py``): the kit's default run
catches each on every seed from 0 to 9, at the operation the bug is in, and the difference names
the rule it breaks (the reference is clean on those seeds, and reaches the corners aimed at
these bugs on each: ``test_kit_corners.py``).

- ``charges-unbegun-takeover``: a claim over an expired lease that never began is charged as a
  takeover (rule ``takeover-of-unbegun``).
- ``begin-margin-rounded``: BEGIN's margin is rounded, not floored (rules ``begin-margin-met``
  and ``begin-margin-fraction``: a lease of 1003 ms, margin 250.75, with 251 ms left).
- ``erasure-skips-nested-arrays``: an erasure misses an envelope in an array in an array (rule
  ``erase-inside-nested``).
- ``restore-upserts-rows``: a restore upserts the dump's runs and deletes nothing else (rule
  ``restore-earlier-dump``).
- ``copy-keeps-due-time``: a copy into another scope fails its running runs but keeps their
  ``next_attempt_at`` (rule ``copy-live``).
- ``due-tie-by-age``: the due read breaks a tie of due times by ``started_at`` before id (rule
  ``due-tie-not-start``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

import pytest

from scopehost import ScopeDatabase
from sims.conformance import (
    DEFAULT_EXAMPLES,
    ConformanceReport,
    LocalTarget,
    ReferenceStore,
    run_conformance,
)
from sims.conformance._explain import explain
from tests.sims.kit_trial35b_adapters import CLASSES

SEEDS: Final = range(10)
_PROGRAM: Final = Path(__file__).with_name("kit_trial35b_adapters.py")

#: Each adapter, the operation it is caught at, and the rule the difference must name.
CAUGHT: Final = {
    "charges-unbegun-takeover": ("claim", "rule takeover-of-unbegun"),
    "begin-margin-rounded": ("begin", "rule begin-margin-met"),
    "erasure-skips-nested-arrays": ("shred_subject", "rule erase-inside-nested"),
    "restore-upserts-rows": ("import_dump", "rule restore-earlier-dump"),
    "copy-keeps-due-time": ("import_dump", "rule copy-live"),
    "due-tie-by-age": ("due_keys", "rule due-tie-not-start"),
}


def _run(database: type[ScopeDatabase], name: str, seed: int) -> ConformanceReport:
    target = LocalTarget(ReferenceStore(database=database), name=name)
    return run_conformance(target, examples=DEFAULT_EXAMPLES, seed=seed, shrink=False)


def test_every_adapter_of_the_file_is_held_to_a_rule() -> None:
    assert sorted(CAUGHT) == sorted(CLASSES)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_each_adapter_is_caught_on_every_seed_by_its_rule(name: str, seed: int) -> None:
    op, rule = CAUGHT[name]
    report = _run(CLASSES[name], name, seed)
    assert report.failure is None, report.failure
    assert report.difference is not None, f"{name} slipped through on seed {seed}"
    assert report.difference.op == op, report.difference.line()
    assert rule in report.difference.rule, report.difference.rule


def test_an_adapter_served_by_serve_stdio_is_caught_as_a_command() -> None:
    # The adapters' file serves one of them with sims.conformance.serve_stdio, as the docs show.
    report = run_conformance(
        f"{sys.executable} {_PROGRAM} due-tie-by-age", examples=DEFAULT_EXAMPLES, seed=0
    )
    assert report.failure is None, report.failure
    assert report.difference is not None
    assert report.difference.op == "due_keys", report.difference.line()
    assert "rule due-tie-not-start" in report.difference.rule


# The sentences that name these rules, from rows as the reference holds them.


def _run_row(id: str, **more: Any) -> dict[str, Any]:
    row = {
        "id": id,
        "payload": "{}",
        "subject_id": None,
        "status": "running",
        "cursor": None,
        "started_at": "2026-10-04T12:00:00.000Z",
        "next_attempt_at": None,
        "lease_owner": None,
        "lease_began_at": None,
        "admission_misses": None,
    }
    row.update(more)
    return row


def _explained(op: str, args: dict[str, Any], tables: dict[str, Any], **step: Any) -> str:
    now = step.pop("now", "2026-10-04T12:00:01.000Z")
    rule, _rows = explain({"op": op, "scope": "a", "now": now, "args": args, **step}, tables)
    return rule


def test_a_begin_on_the_margins_edge_names_the_margins_rule() -> None:
    held = _run_row("r01", lease_owner="o1", next_attempt_at="2026-10-04T12:00:01.251Z")
    tables = {"runs": [held], "steps": []}
    args = {"id": "r01", "owner": "o1", "margin_ms": 250.75}
    assert (
        "BEGIN needs more than floor(250.75) = 250 ms left (rule begin-margin-met; floored, never "
        "rounded: rule begin-margin-fraction), so it must return true"
    ) in _explained("begin", args, tables)
    missed = _explained("begin", args, tables, now="2026-10-04T12:00:01.001Z")
    assert "= 250 ms left (rule begin-margin-missed), so it must return false" in missed
    whole = _explained("begin", {**args, "margin_ms": 250.25}, tables)
    assert "= 250 ms left (rule begin-margin-met), so it must return true" in whole
    # Off the edge, the margin decides nothing close: no margin rule is named.
    early = _explained("begin", args, tables, now="2026-10-04T12:00:00.000Z")
    assert "ms left, so it must return true" in early


def test_a_due_tie_against_start_order_names_its_rule() -> None:
    runs = [
        _run_row("r01", started_at="2026-10-04T12:00:01.000Z"),
        _run_row(
            "r02",
            started_at="2026-10-04T12:00:00.000Z",
            next_attempt_at="2026-10-04T12:00:01.000Z",
        ),
    ]
    rule = _explained(
        "due_keys",
        {"now_param": "2026-10-04T12:00:01.000Z", "max": 500},
        {"runs": runs, "steps": []},
    )
    assert rule.endswith(
        "at most 500: r01, r02; r01 and r02 are both due at 12:00:01.000Z, and r01 goes first by "
        "its id though it started later (rule due-tie-not-start)"
    )


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ('[["x",@]]', "at $[0][1], in an array in an array (rule erase-inside-nested)"),
        (
            '{"rows":[{"who":@}]}',
            "at $.rows[0].who, in an object in an array in an object (rule erase-inside-nested)",
        ),
        ('{"to":["x",@]}', "at $.to[1], in an array in an object (rule erase-inside-list)"),
    ],
)
def test_an_erasure_says_where_an_array_hides_the_envelope(payload: str, where: str) -> None:
    envelope = '{"subjectId":"s1","piiClass":"email"}'
    tables = {"runs": [_run_row("r01", payload=payload.replace("@", envelope))], "steps": []}
    rule = _explained("shred_subject", {"subject_id": "s1"}, tables)
    assert f"r01 (its payload carries its envelope (subject_id is not it) {where}; " in rule


def test_a_copy_of_a_leased_run_names_what_it_does_not_carry() -> None:
    leased = _run_row(
        "r01", lease_owner="o1", next_attempt_at="2026-10-04T12:00:02.000Z", admission_misses=1
    )
    copy = {"op": "import_dump", "scope": "b", "now": "2026-10-04T12:00:01.000Z"}
    dumped = {"runs": [leased, _run_row("r02")], "steps": []}
    rule, _rows = explain(
        {**copy, "args": {"dump_of": "a", "source": "a"}}, {"runs": [], "steps": []}, dumped
    )
    assert rule.endswith(
        "the running runs (r01, r02) become failed as not carried, with no lease and no due time, "
        "ended now (r01's lease_owner and next_attempt_at: not carried, each null in the copy; "
        "rule copy-live)"
    )
