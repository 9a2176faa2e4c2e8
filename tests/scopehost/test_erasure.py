"""Subject erasure: declared and classified data become a tombstone, once, in one transaction."""

from __future__ import annotations

import json
import sqlite3

import attrs
import pytest

from driver import (
    JOB_ERASED_FINISHED_NOTE,
    JOB_ERASED_RUNNING_NOTE,
    JobStepRow,
    ValidationFailed,
    dumps,
)
from scopehost._database import ScopeDatabase

from . import store_support
from .store_support import LEASE_MS, T0, advanced_patch, at, claimed_and_begun, open_db, read, steps

ERASED_AT = at(60_000)
TOMBSTONE = (
    '{"_substratRedacted":{"reason":"subject-erasure","subjectId":"person-7",'
    f'"at":"{ERASED_AT}"}}}}'
)


def envelope(subject: str = "person-7", pii: str = "contact") -> dict[str, str]:
    return {"subjectId": subject, "piiClass": pii, "email": "someone@example.org"}


def started(db: ScopeDatabase, run_id: str, **changes: object) -> None:
    store_support.started(db, run_id, instance=run_id, **changes)


def record(db: ScopeDatabase, run_id: str, step: str, result: str | None) -> None:
    db.connection.execute(
        "INSERT INTO _substrat_job_steps (run_id, step, result, attempts, recorded_at) "
        "VALUES (?, ?, ?, 1, ?)",
        (run_id, step, result, T0),
    )


def test_a_running_run_that_declares_the_subject_is_failed_and_redacted() -> None:
    db = open_db()
    started(db, "run-1", subject_id="person-7", cursor='"page-2"', counters='{"walked":4}')
    claimed_and_begun(db, "run-1")
    record(db, "run-1", "a", '{"name":"x"}')
    record(db, "run-1", "b", None)
    before = read(db)

    assert db.shred_subject("person-7", now=ERASED_AT) == 1

    assert read(db) == attrs.evolve(
        before,
        payload=TOMBSTONE,
        cursor=TOMBSTONE,
        status="failed",
        last_error=JOB_ERASED_RUNNING_NOTE,
        updated_at=ERASED_AT,
        next_attempt_at=None,
        ended_at=ERASED_AT,
        lease_owner=None,
        lease_began_at=None,
    )
    assert steps(db) == [JobStepRow("a", TOMBSTONE, 1, None), JobStepRow("b", None, 1, None)]


@pytest.mark.parametrize("status", ["done", "failed"])
def test_a_finished_run_keeps_its_status_and_says_it_was_redacted(status: str) -> None:
    db = open_db()
    started(db, "run-1", subject_id="person-7", cursor='"end"')
    db.connection.execute(
        "UPDATE _substrat_job_runs SET status = ?, ended_at = ?, last_error = 'boom'",
        (status, at(5)),
    )
    before = read(db)

    assert db.shred_subject("person-7", now=ERASED_AT) == 1

    assert read(db) == attrs.evolve(
        before,
        payload=TOMBSTONE,
        cursor=TOMBSTONE,
        last_error=JOB_ERASED_FINISHED_NOTE,
        updated_at=ERASED_AT,
    )


def test_a_null_cursor_stays_null() -> None:
    db = open_db()
    started(db, "run-1", subject_id="person-7")

    assert db.shred_subject("person-7", now=ERASED_AT) == 1
    assert read(db).cursor is None


@pytest.mark.parametrize(
    "where",
    [
        {"payload": dumps({"to": envelope()})},
        {"payload": dumps([[{"deep": [envelope()]}]])},
        {"payload": dumps(envelope())},
        {"cursor": dumps({"last": envelope()})},
    ],
    ids=["payload", "payload-deep", "payload-itself", "cursor"],
)
def test_an_envelope_in_the_payload_or_cursor_redacts_an_undeclared_run_whole(
    where: dict[str, str],
) -> None:
    db = open_db()
    started(db, "run-1", payload=where.get("payload", "{}"), cursor=where.get("cursor"))
    record(db, "run-1", "a", where.get("step", "1"))

    assert db.shred_subject("person-7", now=ERASED_AT) == 1

    row = read(db)
    assert (row.status, row.payload) == ("failed", TOMBSTONE)
    assert steps(db) == [JobStepRow("a", TOMBSTONE, 1, None)]


@pytest.mark.parametrize(
    "payload",
    [
        dumps({"to": envelope(pii="none")}),
        dumps({"to": {"subjectId": "person-7"}}),
        dumps({"to": envelope(subject="person-8")}),
        dumps({"to": envelope(subject="person-70")}),
        dumps({"note": "person-7 wrote in", "subjectId": ["person-7"], "piiClass": "contact"}),
        dumps("person-7"),
    ],
    ids=["pii-none", "no-pii-class", "other-subject", "prefix", "id-in-a-list", "bare-string"],
)
def test_what_is_not_a_classified_envelope_for_the_subject_touches_nothing(payload: str) -> None:
    db = open_db()
    started(db, "run-1", payload=payload)
    before = read(db)

    assert db.shred_subject("person-7", now=ERASED_AT) == 0
    assert read(db) == before


def test_an_envelope_with_a_null_pii_class_still_counts() -> None:
    db = open_db()
    started(db, "run-1", payload=dumps({"subjectId": "person-7", "piiClass": None}))

    assert db.shred_subject("person-7", now=ERASED_AT) == 1


def test_an_envelope_spelled_with_json_escapes_is_found() -> None:
    db = open_db()
    escaped = json.dumps({"p": {"subjectId": "person-7", "piiClass": "né"}}, ensure_ascii=True)
    started(db, "run-1", payload=escaped.replace("subjectId", "subject\\u0049d"))

    assert db.shred_subject("person-7", now=ERASED_AT) == 1


def test_only_the_runs_holding_the_subject_are_touched_and_counted() -> None:
    db = open_db()
    started(db, "declared", subject_id="person-7")
    started(db, "carried", payload=dumps({"to": envelope()}))
    started(db, "someone-else", subject_id="person-8", payload=dumps(envelope("person-8")))
    started(db, "nobody")
    untouched = [read(db, "someone-else"), read(db, "nobody")]

    assert db.shred_subject("person-7", now=ERASED_AT) == 2

    assert [read(db, "someone-else"), read(db, "nobody")] == untouched


def test_a_second_erasure_touches_nothing() -> None:
    db = open_db()
    started(db, "declared", subject_id="person-7", cursor='"c"')
    started(db, "carried", payload=dumps({"to": envelope()}))
    record(db, "declared", "a", '"x"')
    assert db.shred_subject("person-7", now=ERASED_AT) == 2
    after = [read(db, "declared"), read(db, "carried"), steps(db, "declared")]

    assert db.shred_subject("person-7", now=at(90_000)) == 0

    assert [read(db, "declared"), read(db, "carried"), steps(db, "declared")] == after


def test_a_declared_run_whose_values_are_all_tombstones_is_not_touched_again() -> None:
    db = open_db()
    started(db, "run-1", subject_id="person-7", payload=TOMBSTONE)

    assert db.shred_subject("person-7", now=at(90_000)) == 0


def test_json_that_does_not_parse_never_crashes_erasure() -> None:
    db = open_db()
    started(db, "declared", subject_id="person-7", payload="{not json", cursor="[[[")
    started(db, "undeclared", payload="{not json either")
    # No door lets either text in (tests/scopehost/test_stored_json.py); a database from before
    # that rule may hold them.
    nan = '{"x":NaN,"who":' + json.dumps(envelope()) + "}"
    deep = "[" * 100_000 + "]" * 100_000
    for run_id, payload in (("nan", nan), ("too-deep", deep)):
        started(db, run_id)
        db.connection.execute(
            "UPDATE _substrat_job_runs SET payload = ? WHERE id = ?", (payload, run_id)
        )
    record(db, "undeclared", "a", "{broken")

    # The run too deep to read is shredded as a precaution: erasure never under-reports.
    assert db.shred_subject("person-7", now=ERASED_AT) == 2

    assert (read(db, "declared").payload, read(db, "declared").cursor) == (TOMBSTONE, TOMBSTONE)
    assert read(db, "undeclared").payload == "{not json either"
    assert read(db, "too-deep").payload == TOMBSTONE
    # NaN is not JSON, as a JavaScript store reads it: that text carries no envelope.
    assert read(db, "nan").payload.startswith('{"x":NaN')
    assert db.shred_subject("person-7", now=ERASED_AT) == 0


def test_a_pass_still_running_when_its_run_is_erased_writes_nothing_more() -> None:
    db = open_db()
    started(db, "run-1", subject_id="person-7")
    claimed_and_begun(db, "run-1")
    assert db.shred_subject("person-7", now=at(10)) == 1
    after = read(db)

    assert not db.record_step("run-1", "a", '"x"', 1, None, at(11), "owner-1", LEASE_MS, now=at(11))
    assert not db.begin_step("run-1", "a", "owner-1", LEASE_MS, now=at(11)).held
    assert not db.commit_pass("run-1", advanced_patch(), "owner-1", now=at(12))
    assert not db.patch("run-1", advanced_patch(), "owner-1", now=at(12))
    assert read(db) == after
    assert steps(db) == []


def test_an_erasure_that_fails_half_way_leaves_everything_as_it_was() -> None:
    db = open_db()
    started(db, "run-1", subject_id="person-7")
    started(db, "run-2", subject_id="person-7")
    record(db, "run-2", "a", '"x"')
    before = [read(db, "run-1"), read(db, "run-2"), steps(db, "run-2")]
    db.connection.execute(
        "CREATE TRIGGER no_update BEFORE UPDATE ON _substrat_job_runs WHEN NEW.id = 'run-2' "
        "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    )

    with pytest.raises(sqlite3.IntegrityError, match=r"^injected failure$"):
        db.shred_subject("person-7", now=ERASED_AT)

    assert [read(db, "run-1"), read(db, "run-2"), steps(db, "run-2")] == before


@pytest.mark.parametrize(("subject", "shown"), [("", "''"), (None, "None")])
def test_an_erasure_without_a_subject_is_refused(subject: object, shown: str) -> None:
    with pytest.raises(
        ValidationFailed, match=rf"^subject_id is {shown}; name the data subject to erase$"
    ):
        open_db().shred_subject(subject, now=T0)  # type: ignore[arg-type]


def test_a_declared_run_loses_every_error_text_too() -> None:
    db = open_db()
    started(db, "run-1", subject_id="person-7", last_error="mail to someone@example.org bounced")
    record(db, "run-1", "a", '"x"')
    record(db, "run-1", "b", None)
    db.connection.execute(
        "UPDATE _substrat_job_steps SET last_error = 'someone@example.org: 550' WHERE step = 'b'"
    )

    assert db.shred_subject("person-7", now=ERASED_AT) == 1

    assert read(db).last_error == JOB_ERASED_RUNNING_NOTE
    assert steps(db) == [
        JobStepRow("a", TOMBSTONE, 1, None),
        JobStepRow("b", None, 1, JOB_ERASED_RUNNING_NOTE),
    ]
    assert db.shred_subject("person-7", now=at(90_000)) == 0


def test_another_subjects_tombstone_is_not_already_redacted() -> None:
    db = open_db()
    others = TOMBSTONE.replace("person-7", "person-8")
    started(db, "run-1", subject_id="person-7", payload=others)

    assert db.shred_subject("person-7", now=ERASED_AT) == 1

    assert read(db).payload == TOMBSTONE


def test_a_run_reached_only_through_a_step_keeps_its_payload_and_cursor() -> None:
    db = open_db()
    started(db, "run-1", payload='{"source":"crm"}', cursor='"page-3"')
    record(db, "run-1", "fetch", dumps({"reply": [1, envelope()]}))
    record(db, "run-1", "other", '"kept"')
    db.connection.execute(
        "UPDATE _substrat_job_steps SET last_error = 'first try failed' WHERE step = 'fetch'"
    )
    before = read(db)

    assert db.shred_subject("person-7", now=ERASED_AT) == 1

    assert read(db) == attrs.evolve(
        before,
        status="failed",
        last_error=JOB_ERASED_RUNNING_NOTE,
        updated_at=ERASED_AT,
        ended_at=ERASED_AT,
    )
    assert steps(db) == [
        JobStepRow("fetch", TOMBSTONE, 1, JOB_ERASED_RUNNING_NOTE),
        JobStepRow("other", '"kept"', 1, None),
    ]
    assert db.shred_subject("person-7", now=at(90_000)) == 0


def test_a_run_reached_several_ways_counts_once() -> None:
    db = open_db()
    started(db, "run-1", subject_id="person-7", payload=dumps({"to": envelope()}))
    record(db, "run-1", "a", dumps(envelope()))
    record(db, "run-1", "b", dumps(envelope()))

    assert db.shred_subject("person-7", now=ERASED_AT) == 1
