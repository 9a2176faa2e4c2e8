"""The checks read a trace and say, in words, what broke the spec — including on traces no world
would write, which is where a check earns its keep."""

from __future__ import annotations

from typing import Any

from sims import CheckReport, Trace, check_trace, simulate

RUN = "01RUN0000000000000000000AA"
ROW = {
    "id": RUN,
    "module_id": "importer",
    "job": "walk",
    "instance": "default",
    "status": "running",
    "attempts": 0,
    "next_attempt_at": None,
    "lease_owner": None,
    "lease_began_at": None,
    "admission_misses": None,
    "last_error": None,
}


def _build(events: tuple[dict[str, Any], ...]) -> Trace:
    trace = Trace()
    trace.events.extend(events)
    return trace


def _start(
    t: float, row_id: str = RUN, seq: int = 1, scope: str = "scope-1"
) -> list[dict[str, Any]]:
    row = {**ROW, "id": row_id}
    send = {
        "t": t,
        "ev": "rpc.send",
        "link": "a",
        "seq": seq,
        "scope": scope,
        "op": "start_or_join",
        "args": [{}, row],
    }
    done = {
        "t": t,
        "ev": "rpc.exec",
        "link": "a",
        "seq": seq,
        "scope": scope,
        "op": "start_or_join",
        "store_at": "2026-10-04T12:00:00.000Z",
        "result": row,
    }
    return [send, done]


def test_a_handler_run_without_begin_is_a_violation() -> None:
    report = check_trace(
        _build(
            (
                *_start(0),
                {"t": 5, "ev": "handler.invoke", "drive": "a", "run": RUN, "owner": "O1"},
            )
        ),
        settles=False,
    )
    assert [f.line() for f in report.violations] == [
        "[violation] handler-iff-begin run 0000AA at 5 ms: drive a invoked the handler for pass "
        "O1 with no BEGIN written for it"
    ]


def test_a_second_live_run_for_one_key_is_a_violation() -> None:
    report = check_trace(_build((*_start(0), *_start(1, RUN[:-2] + "BB", seq=2))), settles=False)
    assert [f.check for f in report.violations] == ["one-live-run-per-key"]
    assert "while run 0000AA was live for the same key importer/walk/default in scope scope-1" in (
        report.violations[0].text
    )


def test_one_instance_live_in_several_scopes_is_not_a_double_start() -> None:
    starts = (
        *_start(0, scope="scope-1"),
        *_start(1, RUN[:-2] + "BB", seq=2, scope="scope-2"),
        *_start(2, RUN[:-2] + "CC", seq=3, scope="scope-3"),
    )
    assert check_trace(_build(starts), settles=False).violations == ()
    # ... while the same key twice in ONE of those scopes still is.
    again = _start(3, RUN[:-2] + "DD", seq=4, scope="scope-2")
    report = check_trace(_build((*starts, *again)), settles=False)
    assert [(f.check, f.run) for f in report.violations] == [
        ("one-live-run-per-key", RUN[:-2] + "DD")
    ]


def test_a_run_left_running_at_the_end_is_reported_when_faults_were_bounded() -> None:
    end = {"t": 9, "ev": "world.end", "runs": {"scope-1": [dict(ROW)]}}
    assert [f.check for f in check_trace(_build((*_start(0), end))).violations] == ["runs-settle"]
    assert check_trace(_build((*_start(0), end)), settles=False).ok


def test_checking_a_kept_trace_agrees_with_checking_it_live() -> None:
    simulation = simulate("lease-expiry-between-steps", 2)
    again = check_trace(simulation.outcome.trace)
    assert again.findings == simulation.report.findings


def test_a_violation_repeated_on_one_run_is_listed_a_few_times_then_counted() -> None:
    invokes = (
        {"t": 5 + i, "ev": "handler.invoke", "drive": "a", "run": RUN, "owner": f"O{i}"}
        for i in range(40)
    )
    report = check_trace(_build((*_start(0), *invokes)), settles=False)
    assert not report.ok
    assert [f.check for f in report.violations] == ["handler-iff-begin"] * 6
    assert [f.line() for f in report.violations[:5]] == [
        f"[violation] handler-iff-begin run 0000AA at {5 + i} ms: drive a invoked the handler for "
        f"pass O{i} with no BEGIN written for it"
        for i in range(5)
    ]
    assert report.violations[5].line() == (
        "[violation] handler-iff-begin run 0000AA at 44 ms: … and 35 more handler-iff-begin "
        "violations on this run, not listed (at most 5 of one check on one run are)"
    )
    # The verdict counts every violation, the listed ones and those past the cap.
    assert report.violation_count == 40
    assert CheckReport(report.findings).violation_count == 6
