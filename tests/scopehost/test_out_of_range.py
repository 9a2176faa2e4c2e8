"""The store's doors refuse, by path and before any transaction, the counts, leases, margins and
limits the spec forbids or SQLite cannot hold: a negative count, an ``ended_at`` on a live run, a
lease longer than any claim writes, an int past SQLite's 64 bits or past every float. Each used to
be accepted (a run that can never be right) or to end in a raw ``OverflowError``/``ValueError``.
A link's delay past every float, which its legs could never wait, is refused where it is given."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from driver import (
    JOB_LEASE_MAX_MS,
    JOB_TIME_AHEAD_MAX_MS,
    JobRunFilter,
    ValidationFailed,
)
from scopehost import JobRunDump, Link, LinkCall, StoreClock, open_scope_host

from ..refusals import refusal
from .store_support import (
    LEASE_MS,
    T0,
    advanced_patch,
    at,
    claimed_and_begun,
    new_row,
    open_db,
    read,
    started,
)

SQLITE_MAX = 2**63 - 1
SQLITE_PAST = f"more than {SQLITE_MAX}, the largest integer SQLite holds"
ATTEMPTS = "attempts counts consecutive failed passes, a whole number of 0 or more"
MISSES = (
    "admission_misses counts consecutive claims that did not begin, a whole number of 0 or more, "
    "or None for none"
)
NOT_ENDED = "start_or_join inserts a live run, which has not ended — leave ended_at None"
DAY_MS = 86_400_000


def long_lease(ms: int) -> str:
    return (
        f"is {at(ms)!r}, a lease ending more than {JOB_LEASE_MAX_MS} ms (a year, the longest "
        "lease) past the store's now; no claim writes that lease — write an expiry within a year "
        "of now, or leave lease_owner None"
    )


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ({"attempts": -5}, "row.attempts", f"is -5; {ATTEMPTS}"),
        ({"attempts": 2**63}, "row.attempts", f"is {2**63}, {SQLITE_PAST}; {ATTEMPTS}"),
        (
            {"attempts": 10**400},
            "row.attempts",
            f"is an int of 401 digits, {SQLITE_PAST}; {ATTEMPTS}",
        ),
        (
            {"attempts": 10**5000},  # past Python's own limit on printing an int
            "row.attempts",
            f"is an int of thousands of digits, {SQLITE_PAST}; {ATTEMPTS}",
        ),
        ({"attempts": True}, "row.attempts", f"is True; {ATTEMPTS}"),
        ({"attempts": 1.0}, "row.attempts", f"is 1.0; {ATTEMPTS}"),
        ({"admission_misses": -3}, "row.admission_misses", f"is -3; {MISSES}"),
        (
            {"admission_misses": 2**64},
            "row.admission_misses",
            f"is {2**64}, {SQLITE_PAST}; {MISSES}",
        ),
        ({"ended_at": T0}, "row.ended_at", f"is {T0!r}; {NOT_ENDED}"),
        ({"ended_at": "yesterday"}, "row.ended_at", f"is 'yesterday'; {NOT_ENDED}"),
        (
            {"lease_owner": "owner-1", "next_attempt_at": at(700 * DAY_MS)},
            "row.next_attempt_at",
            long_lease(700 * DAY_MS),
        ),
        (
            {"lease_owner": "owner-1", "next_attempt_at": at(JOB_LEASE_MAX_MS + 1)},
            "row.next_attempt_at",
            long_lease(JOB_LEASE_MAX_MS + 1),
        ),
        (
            {"lease_owner": "owner-1", "lease_began_at": "then"},
            "row.lease_began_at",
            "is 'then'; store times are ISO-8601 UTC with milliseconds and Z, like "
            "'2026-10-04T12:00:00.000Z'",
        ),
        (
            {"lease_owner": "owner-1", "lease_began_at": at(JOB_TIME_AHEAD_MAX_MS + 1)},
            "row.lease_began_at",
            f"is {at(JOB_TIME_AHEAD_MAX_MS + 1)!r}: it is more than {JOB_TIME_AHEAD_MAX_MS} ms "
            "(two years) past the store's now; a running run due that late would block its key "
            "for as long — write a time within a lease or a backoff of now",
        ),
    ],
)
def test_start_or_join_refuses_a_row_no_store_could_have_written(
    change: dict[str, Any], path: str, message: str
) -> None:
    db = open_db()
    row = new_row(**change)
    with pytest.raises(ValidationFailed) as caught:
        db.start_or_join(row.key, row, now=T0)
    assert refusal(caught) == [(path, message)]
    assert db.export_dump(now=T0).runs == ()


@pytest.mark.parametrize(
    "change",
    [
        {"attempts": SQLITE_MAX},
        {"admission_misses": SQLITE_MAX},
        {"admission_misses": 0},
        {"lease_owner": "owner-1", "next_attempt_at": at(JOB_LEASE_MAX_MS)},
        # Not leased, a backoff may lie further off: two years, as a patch may write.
        {"next_attempt_at": at(700 * DAY_MS)},
        {"lease_owner": "owner-1", "next_attempt_at": at(LEASE_MS), "lease_began_at": T0},
    ],
)
def test_start_or_join_takes_a_row_at_the_edges(change: dict[str, Any]) -> None:
    db = open_db()
    row = new_row(**change)
    assert db.start_or_join(row.key, row, now=T0) == row
    assert read(db) == row


def test_an_int_past_sqlite_is_refused_by_every_count_a_door_takes() -> None:
    db = open_db()
    started(db)
    claimed_and_begun(db)
    before = read(db)
    calls: list[tuple[Callable[[], object], str, str]] = [
        (
            lambda: db.due_keys(T0, 2**63, now=T0),
            "max",
            "a due snapshot reads a whole number of keys, 0 or more (SQLite would read a "
            "negative limit as no limit)",
        ),
        (
            lambda: db.patch(
                "run-1", attrs.evolve(advanced_patch(), attempts=2**63), "owner-1", now=T0
            ),
            "patch.attempts",
            ATTEMPTS,
        ),
        (
            lambda: db.commit_pass(
                "run-1", attrs.evolve(advanced_patch(), attempts=2**63), "owner-1", now=T0
            ),
            "patch.attempts",
            ATTEMPTS,
        ),
        (
            lambda: db.record_step("run-1", "s", "1", 2**63, None, T0, "owner-1", LEASE_MS, now=T0),
            "attempts",
            "a step's attempts is a whole number of 0 or more",
        ),
    ]
    for call, path, remedy in calls:
        with pytest.raises(ValidationFailed) as caught:
            call()
        assert refusal(caught) == [(path, f"is {2**63}, {SQLITE_PAST}; {remedy}")]
    assert read(db) == before
    assert db.export_dump(now=T0).steps == ()
    # The largest SQLite integer is a count like any other.
    assert len(db.due_keys(at(LEASE_MS), SQLITE_MAX, now=T0)) == 1


@pytest.mark.parametrize(
    ("margin", "shown"),
    [
        (1e300, "1e+300"),
        pytest.param(10**400, "an int of 401 digits", id="1e400"),
        (JOB_LEASE_MAX_MS + 1, str(JOB_LEASE_MAX_MS + 1)),
        (JOB_LEASE_MAX_MS + 0.5, str(JOB_LEASE_MAX_MS + 0.5)),
    ],
)
def test_a_begin_margin_past_the_longest_lease_is_refused(margin: float, shown: str) -> None:
    db = open_db()
    started(db)
    assert db.claim("run-1", "owner-1", LEASE_MS, now=T0) is not None
    with pytest.raises(ValidationFailed) as caught:
        db.begin("run-1", "owner-1", margin, now=T0)
    assert refusal(caught) == [
        (
            "margin_ms",
            f"is {shown}; the BEGIN margin is at most {JOB_LEASE_MAX_MS} ms (a year, the longest "
            "lease), as no lease could run longer past now",
        )
    ]
    assert read(db).lease_began_at is None
    # A margin of a year is taken, and no lease of a second outlasts it.
    assert db.begin("run-1", "owner-1", JOB_LEASE_MAX_MS, now=T0) is False
    assert db.begin("run-1", "owner-1", LEASE_MS * 0.25, now=T0) is True


def test_a_negative_int_margin_of_any_size_is_refused_as_negative() -> None:
    db = open_db()
    with pytest.raises(ValidationFailed) as caught:
        db.begin("run-1", "owner-1", -(10**400), now=T0)
    assert refusal(caught) == [
        (
            "margin_ms",
            "is a negative int of 401 digits; the BEGIN margin is a finite number of "
            "milliseconds, 0 or more",
        )
    ]


@pytest.mark.parametrize("limit", [10**400, -(10**400), 2**1024], ids=["1e400", "-1e400", "2^1024"])
def test_an_operator_read_limit_past_every_number_is_refused(limit: int) -> None:
    db = open_db()
    started(db)
    with pytest.raises(ValidationFailed) as caught:
        db.list(JobRunFilter(limit=limit), now=T0)
    [(path, message)] = refusal(caught)
    assert path == "filter.limit"
    assert message.startswith("is a negative int of " if limit < 0 else "is an int of ")
    assert message.endswith(
        " digits, past any number JSON carries; pass a limit of up to 500 rows, or None for the "
        "default"
    )


@pytest.mark.parametrize("limit", [10**300, 2**1023], ids=["1e300", "2^1023"])
def test_an_operator_read_limit_as_large_as_a_float_is_clamped(limit: int) -> None:
    db = open_db()
    started(db)
    assert [row.id for row in db.list(JobRunFilter(limit=limit), now=T0)] == ["run-1"]


@pytest.mark.parametrize(("column", "value"), [("attempts", 2**63), ("admission_misses", 2**63)])
def test_an_import_refuses_a_count_past_sqlite_and_writes_nothing(column: str, value: int) -> None:
    source = open_db(scope_id="scope-a")
    started(source)
    dump = source.export_dump(now=T0)
    change: dict[str, Any] = {column: value}
    dump = JobRunDump(dump.scope_id, (attrs.evolve(dump.runs[0], **change),), ())
    target = open_db(scope_id="scope-b")
    started(target, "run-0")
    before = target.export_dump(now=T0)
    with pytest.raises(ValidationFailed) as caught:
        target.import_dump(dump, "scope-a", now=T0)
    assert refusal(caught) == [(f"dump.runs.0.{column}", f"is {SQLITE_PAST} (run 'run-1')")]
    assert target.export_dump(now=T0) == before
    # The same refusal when the dump is read back from its document.
    with pytest.raises(ValidationFailed) as caught:
        JobRunDump.from_json(dump.to_json())
    assert refusal(caught) == [(f"dump.runs.0.{column}", f"is {SQLITE_PAST} (run 'run-1')")]


async def test_the_refusals_reach_a_caller_across_the_link(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        stub = host.stub("s1")
        row = new_row(attempts=-5)
        with pytest.raises(ValidationFailed) as caught:
            await stub.start_or_join(row.key, row)
        assert refusal(caught) == [("row.attempts", f"is -5; {ATTEMPTS}")]
        with pytest.raises(ValidationFailed) as caught:
            await stub.due_keys(T0, 2**63)
        assert [path for path, _ in refusal(caught)] == ["max"]
        with pytest.raises(ValidationFailed) as caught:
            await stub.list(JobRunFilter(limit=10**400))
        assert [path for path, _ in refusal(caught)] == ["filter.limit"]
        assert await stub.list(JobRunFilter()) == []


# -- a link's legs -------------------------------------------------------------------------------

LEG = (
    "pass a leg's delay as a finite number of ms >= 0, a mapping of operation names to such "
    "numbers ('*' for the rest), or a function of (call, rng) that draws one"
)


@pytest.mark.parametrize("ms", [10**400, -(10**400), 2**1024], ids=["1e400", "-1e400", "2^1024"])
def test_a_leg_delay_past_every_float_is_refused_where_the_link_is_built(ms: int) -> None:
    with pytest.raises(ValueError, match=rf"^request_ms={ms}; {re.escape(LEG)}$"):
        Link(request_ms=ms)
    with pytest.raises(
        ValueError,
        match=rf"^reply_ms\['\*'\]={ms}; a mapping's keys are operation names \('\*' for the "
        r"rest\) and its values finite numbers of ms >= 0$",
    ):
        Link(reply_ms={"*": ms})
    # Drawn per call, it is refused where it is drawn.
    link = Link(name="lan", request_ms=lambda call, rng: ms)
    with pytest.raises(
        ValueError,
        match=rf"^link 'lan' drew a delay of {ms} ms for 'claim'; a leg's delay must be a "
        r"finite number >= 0$",
    ):
        link.delay_ms(link.request_ms, LinkCall("lan", 1, "s1", "claim", ()))


def test_a_leg_latency_of_up_to_a_day_is_taken_and_one_past_it_refused() -> None:
    # A latency a float holds but no network has (1e300 ms) used to be taken: every call over the
    # link waited for ever. A day is the most a leg may be given.
    link = Link(name="lan", request_ms=86_400_000, reply_ms={"claim": 86_400_000.0, "*": 2})
    call = LinkCall("lan", 1, "s1", "claim", ())
    assert link.delay_ms(link.request_ms, call) == 86_400_000
    assert link.delay_ms(link.reply_ms, call) == 86_400_000
    with pytest.raises(
        ValueError, match=r"^request_ms=10{300}; a leg's latency is at most 86400000 ms \(a day\)"
    ):
        Link(name="lan", request_ms=10**300)
