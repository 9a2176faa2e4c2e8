"""Every field, every time (issue 35, item 2): the oracle compares every field of the outcome row a
pass writes and of the status and error it reports, a prediction of "none" included.

Each test plants one wrong value in a recorded trace of the ``oracle-edges`` world (or runs a
one-line slip of the kernel) and expects the oracle to name the rule it breaks.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

from sims import Trace, check_trace, simulate
from sims.mutants._ablation import Ablation
from sims.mutants._catalog import _ablated

from .oracle_edges import EDGES

Event = dict[str, Any]
Mutate = Callable[[list[Event]], None]

#: The rules the oracle names for each kind of pass, as its findings spell them.
DEFERRAL_RULE = "a deferral charges nothing, records no error and waits DEFER_MS"
COMMIT_RULE = "a committed pass writes its cursor"
REUSE_RULE = "a failed step fails the pass by the step's own policy"
REPORTED_RULE = "a pass's reported error is present exactly on retrying and failed"


@cache
def _recorded() -> tuple[Event, ...]:
    trace = simulate(EDGES, 1).outcome.trace
    return tuple(trace.events)


def _findings(mutate: Mutate) -> list[tuple[str, str]]:
    events = [copy.deepcopy(e) for e in _recorded()]
    mutate(events)
    again = Trace.from_lines(json.dumps(e) for e in events)
    return [(f.check, f.text) for f in check_trace(again).violations]


def _owner_of(events: list[Event], status: str) -> str:
    """The owner of the first pass that reported ``status``."""
    return str(_reported(events, status)["owner"])


def _outcome_send(events: list[Event], status: str) -> Event:
    """The outcome write of the first pass that reported ``status``."""
    owner = _owner_of(events, status)
    return next(
        e
        for e in events
        if e["ev"] == "rpc.send" and e["op"] in ("patch", "commit_pass") and e["args"][2] == owner
    )


def _reported(events: list[Event], status: str) -> Event:
    return next(e for e in events if e["ev"] == "pass.outcome" and e["status"] == status)


def _reuse_retry(events: list[Event]) -> Event:
    """The outcome of the first pass that reused a step name: a failure in the kernel's words."""
    return next(
        e
        for e in events
        if e["ev"] == "rpc.send"
        and e["op"] == "patch"
        and e["args"][1]["status"] == "running"
        and "was already used in this pass" in (e["args"][1]["last_error"] or "")
    )


def _named(findings: list[tuple[str, str]], *words: str) -> bool:
    return any(
        check == "pass-outcome" and all(w in text for w in words) for check, text in findings
    )


def test_the_recorded_world_is_clean_and_has_what_the_tests_tamper_with() -> None:
    events = list(_recorded())
    # Replayed alone (without its scenario), the trace is judged by every rule that compares what
    # was written and reported: none of them speaks before anything is planted.
    assert [f for f in _findings(lambda events: None) if f[0] == "pass-outcome"] == []
    deferral = _outcome_send(events, "deferred")["args"][1]
    assert deferral["last_error"] is None
    assert deferral["status"] == "running"
    assert _reuse_retry(events)["args"][1]["attempts"] == 1


# -- last_error, where the oracle predicts none --------------------------------------------------


def test_a_deferral_that_writes_the_door_s_refusal_as_the_run_s_error_is_reported() -> None:
    def plant(events: list[Event]) -> None:
        refusal = _reported(events, "deferred")["error"]
        _outcome_send(events, "deferred")["args"][1]["last_error"] = refusal

    findings = _findings(plant)
    assert _named(findings, "last_error", "where the record must carry none", DEFERRAL_RULE)


def test_the_kernel_slip_that_records_the_refusal_on_a_deferral_is_caught() -> None:
    # The slip of the issue, in the kernel's own source: the deferral's patch carries the door's
    # refusal as last_error instead of the run's (here: none).
    slip = _ablated(
        "DeferralRecordsRefusal",
        "A deferral writes the door's refusal as the run's last_error.",
        Ablation(
            "driver._pass",
            "            run.last_error,\n            at,\n            add_ms(at, JOB_DEFER_MS),",
            "            refusal,\n            at,\n            add_ms(at, JOB_DEFER_MS),",
        ),
    )
    seen: list[str] = []
    for seed in range(1, 4):
        violations = simulate(EDGES, seed, database=slip).report.violations
        if any(
            f.check == "pass-outcome" and "last_error" in f.text and DEFERRAL_RULE in f.text
            for f in violations
        ):
            return
        seen += [f.line() for f in violations[:2]]
    pytest.fail(f"the deferral slip went unseen in {EDGES} seeds 1..3; saw {seen}")


def test_a_commit_that_writes_an_error_is_reported() -> None:
    def plant(events: list[Event]) -> None:
        _outcome_send(events, "advanced")["args"][1]["last_error"] = "boom"

    assert _named(_findings(plant), "last_error 'boom'", COMMIT_RULE)


def test_a_failure_in_the_kernel_s_words_that_writes_no_error_is_reported() -> None:
    # A reused step name fails the pass with the kernel's own message: its words are free, that
    # there is one is not, even while the run is still retrying.
    def plant(events: list[Event]) -> None:
        _reuse_retry(events)["args"][1]["last_error"] = None

    assert _named(_findings(plant), "last_error None", "writes its error", REUSE_RULE)


# -- every other column of the outcome row -------------------------------------------------------

#: (the reported status whose outcome write is tampered with, column, planted value, words the
#: finding must carry, the rule's words)
PLANTS = [
    ("deferred", "status", "done", "status 'done'", DEFERRAL_RULE),
    ("deferred", "cursor", '"elsewhere"', "cursor", DEFERRAL_RULE),
    ("deferred", "counters", '{"x": 1}', "counters", DEFERRAL_RULE),
    ("deferred", "attempts", 1, "attempts 1, not 0", DEFERRAL_RULE),
    ("deferred", "next_attempt_at", None, "a backoff of none", DEFERRAL_RULE),
    ("deferred", "ended_at", "2026-10-04T12:01:01.986Z", "ended_at", DEFERRAL_RULE),
    ("deferred", "updated_at", "yesterday", "updated_at 'yesterday'", DEFERRAL_RULE),
    ("advanced", "cursor", "2", "cursor '2'", COMMIT_RULE),
    ("advanced", "attempts", 3, "attempts 3, not 0", COMMIT_RULE),
    ("advanced", "next_attempt_at", "2026-10-04T12:00:09.000Z", "where none is due", COMMIT_RULE),
    ("advanced", "status", "done", "status 'done'", COMMIT_RULE),
    ("retrying", "next_attempt_at", None, "a backoff of none", REUSE_RULE),
    ("retrying", "attempts", 0, "attempts 0, not 1", REUSE_RULE),
    ("retrying", "last_error", "other", "last_error 'other', not 'upstream said no'", REUSE_RULE),
]


@pytest.mark.parametrize(("status", "column", "value", "words", "rule"), PLANTS)
def test_a_wrong_column_in_an_outcome_is_reported(
    status: str, column: str, value: Any, words: str, rule: str
) -> None:
    def plant(events: list[Event]) -> None:
        _outcome_send(events, status)["args"][1][column] = value

    findings = _findings(plant)
    assert _named(findings, words, rule), findings


# -- the error a pass reports with its status ----------------------------------------------------


@pytest.mark.parametrize(
    ("status", "said", "words"),
    [
        ("deferred", None, "where a deferred pass reports the door's refusal"),
        ("advanced", "boom", "where a pass that ends advanced reports none"),
        ("completed", "boom", "where a pass that ends completed reports none"),
        ("superseded", "boom", "where a pass that ends superseded reports none"),
        ("retrying", "another", "not the error its outcome left on the record"),
        ("failed", "another", "not the error its outcome left on the record"),
    ],
)
def test_a_wrong_reported_error_is_reported(status: str, said: str | None, words: str) -> None:
    def plant(events: list[Event]) -> None:
        _reported(events, status)["error"] = said

    assert _named(_findings(plant), words, REPORTED_RULE)
