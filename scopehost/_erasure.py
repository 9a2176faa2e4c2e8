"""Subject erasure: everything a scope's job runs held about one data subject, removed in one
store operation (``ScopeDatabase.shred_subject``, inside the caller's transaction).

Terms. The subject's TOMBSTONE is ``{"_substratRedacted":{"reason":"subject-erasure",
"subjectId":<subject>,"at":<store now>}}`` (compact JSON). A CLASSIFIED ENVELOPE for the subject
is a JSON object, at any depth of a decoded value, whose ``"subjectId"`` is the subject and whose
``"piiClass"`` is present and not ``"none"``. Text that is not JSON carries no envelope, and JSON
is read as JSON itself reads it: ``NaN`` or ``Infinity`` make text not JSON (``driver.loads``).
Text nesting past ``JOB_JSON_MAX_DEPTH`` cannot enter through any door, but a database written
before that rule may hold some; the store will not parse it (its parser would run out of stack),
so it is treated, as a precaution, as carrying an envelope for every subject: a privacy operation
must never under-report, and shredding a value nobody can read loses nothing readable. The NOTE
of a run is ``JOB_ERASED_RUNNING_NOTE`` when the run was ``running`` before the erasure, else
``JOB_ERASED_FINISHED_NOTE``.

Every run of the scope falls in one of three cases, decided on the rows as they are:

1. The run HOLDS THE SUBJECT: it declares it (``subject_id`` is the subject), or its payload or
   cursor carries an envelope for it. It is touched when anything of it is not yet redacted: a
   payload that is not the subject's tombstone (another subject's tombstone is not "already
   redacted"), a non-NULL cursor that is not, a non-NULL step result that is not, a non-NULL
   ``last_error`` (the run's or a step's) that is not a note. A touched run gets: payload =
   tombstone; cursor = tombstone unless NULL; every non-NULL step result = tombstone; every
   non-NULL step ``last_error`` = the run's note; and the run is settled (below). Error text can
   quote personal data as easily as a payload, so it goes too.
2. Otherwise, the run is REACHED ONLY THROUGH STEP RESULTS: one or more of its step results carry
   an envelope for the subject. It is touched; each such step row is shredded (result =
   tombstone, a non-NULL ``last_error`` = the run's note), the run is settled, and its payload,
   cursor and other step rows STAY: they are not the subject's.
3. Otherwise the run is not touched.

SETTLED: a ``running`` run becomes ``failed`` (it cannot resume from data that is gone) with
``last_error`` = ``JOB_ERASED_RUNNING_NOTE``, ``updated_at`` = ``ended_at`` = now, and no lease or
due time (``next_attempt_at``, ``lease_owner``, ``lease_began_at`` NULL). A finished run keeps its
status and ``ended_at``: ``last_error`` = ``JOB_ERASED_FINISHED_NOTE``, ``updated_at`` = now.
Counters are numbers and always stay. A NULL stays NULL: a NULL step result means "not completed"
and a NULL cursor "no pass committed", both still true.

The count returned is the number of runs touched, each once. A second erasure of the same subject
touches nothing: case 1 finds only tombstones and notes, and a tombstone is not an envelope (it has
no ``piiClass``), so case 2 finds nothing either.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from driver import JOB_ERASED_FINISHED_NOTE, JOB_ERASED_RUNNING_NOTE, JOB_JSON_MAX_DEPTH, dumps
from driver._json import loads, nesting_depth

REDACTED_KEY: Final = "_substratRedacted"
ERASURE_REASON: Final = "subject-erasure"
_NOTES: Final = frozenset({JOB_ERASED_RUNNING_NOTE, JOB_ERASED_FINISHED_NOTE})


def tombstone(subject_id: str, at: str) -> str:
    """The JSON that replaces an erased value."""
    return dumps({REDACTED_KEY: {"reason": ERASURE_REASON, "subjectId": subject_id, "at": at}})


def _parse(text: str | None) -> tuple[bool, Any]:
    """``(parsed, value)``; ``parsed`` is False for NULL, for text that is not JSON and for text
    too deep to read (which ``_text_carries`` treats as a precaution)."""
    if text is None:
        return False, None
    try:
        return True, loads(text)
    except ValueError:
        return False, None


def _too_deep(text: str | None) -> bool:
    return text is not None and nesting_depth(text) > JOB_JSON_MAX_DEPTH


def is_tombstone(text: str | None, subject_id: str | None = None) -> bool:
    """Whether ``text`` is an erasure tombstone — of ``subject_id`` when one is given."""
    parsed, value = _parse(text)
    if not parsed or not isinstance(value, dict) or set(value) != {REDACTED_KEY}:
        return False
    inner = value[REDACTED_KEY]
    if not isinstance(inner, dict) or inner.get("reason") != ERASURE_REASON:
        return False
    return subject_id is None or inner.get("subjectId") == subject_id


def carries_envelope(value: Any, subject_id: str) -> bool:
    """Whether ``value`` (decoded JSON) holds a classified envelope for ``subject_id`` anywhere.

    Iterative rather than recursive, so a deeply nested value cannot exhaust the stack."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if (
                item.get("subjectId") == subject_id
                and "piiClass" in item
                and item["piiClass"] != "none"
            ):
                return True
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _text_carries(text: str | None, subject_id: str) -> bool:
    if _too_deep(text):
        return True  # unreadable: shredded as a precaution (see the module docstring)
    parsed, value = _parse(text)
    return parsed and carries_envelope(value, subject_id)


def _unredacted_value(text: str | None, subject_id: str) -> bool:
    return text is not None and not is_tombstone(text, subject_id)


def _unredacted_error(text: str | None) -> bool:
    return text is not None and text not in _NOTES


_Step = tuple[str, str | None, str | None]  # step, result, last_error


def shred_subject_rows(conn: sqlite3.Connection, subject_id: str, now: str) -> int:
    """Erase ``subject_id`` from every run and step row (see the module docstring); returns the
    number of runs touched.

    Runs inside the caller's transaction. Every row is examined rather than pre-filtered in SQL:
    an envelope can be spelled with JSON escapes that no ``LIKE`` would find, and a missed run is a
    person not erased, while erasure is rare enough that a full read costs nothing that matters.
    """
    steps_by_run: dict[str, list[_Step]] = {}
    for run_id, step, result, last_error in conn.execute(
        "SELECT run_id, step, result, last_error FROM _substrat_job_steps ORDER BY run_id, step"
    ):
        steps_by_run.setdefault(run_id, []).append((step, result, last_error))

    stone = tombstone(subject_id, now)
    touched = 0
    runs = conn.execute(
        "SELECT id, subject_id, status, payload, cursor, last_error FROM _substrat_job_runs "
        "ORDER BY id"
    ).fetchall()
    for run_id, declared, status, payload, cursor, last_error in runs:
        steps = steps_by_run.get(run_id, [])
        note = JOB_ERASED_RUNNING_NOTE if status == "running" else JOB_ERASED_FINISHED_NOTE
        holds = (
            declared == subject_id
            or _text_carries(payload, subject_id)
            or _text_carries(cursor, subject_id)
        )
        if holds:
            if not (
                _unredacted_value(payload, subject_id)
                or _unredacted_value(cursor, subject_id)
                or _unredacted_error(last_error)
                or any(
                    _unredacted_value(result, subject_id) or _unredacted_error(error)
                    for _, result, error in steps
                )
            ):
                continue
            conn.execute(
                "UPDATE _substrat_job_steps SET "
                "result = CASE WHEN result IS NULL THEN NULL ELSE ? END, "
                "last_error = CASE WHEN last_error IS NULL THEN NULL ELSE ? END "
                "WHERE run_id = ?",
                (stone, note, run_id),
            )
            conn.execute(
                "UPDATE _substrat_job_runs SET payload = ?, "
                "cursor = CASE WHEN cursor IS NULL THEN NULL ELSE ? END WHERE id = ?",
                (stone, stone, run_id),
            )
        else:
            carrying = [step for step, result, _ in steps if _text_carries(result, subject_id)]
            if not carrying:
                continue
            conn.executemany(
                "UPDATE _substrat_job_steps SET result = ?, "
                "last_error = CASE WHEN last_error IS NULL THEN NULL ELSE ? END "
                "WHERE run_id = ? AND step = ?",
                [(stone, note, run_id, step) for step in carrying],
            )
        _settle(conn, run_id, status, note, now)
        touched += 1
    return touched


def _settle(conn: sqlite3.Connection, run_id: str, status: str, note: str, now: str) -> None:
    if status == "running":
        conn.execute(
            "UPDATE _substrat_job_runs SET status = 'failed', last_error = ?, updated_at = ?, "
            "next_attempt_at = NULL, ended_at = ?, lease_owner = NULL, lease_began_at = NULL "
            "WHERE id = ?",
            (note, now, now, run_id),
        )
    else:
        conn.execute(
            "UPDATE _substrat_job_runs SET last_error = ?, updated_at = ? WHERE id = ?",
            (note, now, run_id),
        )
