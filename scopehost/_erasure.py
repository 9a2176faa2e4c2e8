"""Subject erasure: what a scope's job runs held about one data subject, replaced by a tombstone.

A run is TOUCHED when it still holds something about the subject that is not yet redacted:

- it DECLARES the subject (``subject_id``) and its payload, cursor or a completed step result is
  not already a tombstone; or
- its payload, cursor or a step result carries, at any depth, a CLASSIFIED ENVELOPE for the
  subject: a JSON object whose ``"subjectId"`` is the subject and whose ``"piiClass"`` is present
  and not ``"none"``.

A touched run's payload, cursor and every completed step result become the tombstone. A NULL
stays NULL: it holds nothing, and it means something — a NULL step result is "this step has not
completed" (a tombstone there would read as a completed step whose memo is the tombstone), and a
NULL cursor is "no pass has committed", which is still true after the erasure. A running run is
failed (it cannot resume from data that is gone) and a finished one keeps its status; both say why
on the record. Counters are numbers and are kept.

Idempotent by construction: the tombstone names the subject but carries no ``piiClass``, so it is
not an envelope, and a declared run whose every value is already a tombstone holds nothing more —
a second erasure of the same subject touches no run. Text that is not JSON cannot carry an envelope
we could find, so it never crashes erasure; the run's declared subject still applies to it.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final

from driver import JOB_ERASED_FINISHED_NOTE, JOB_ERASED_RUNNING_NOTE, dumps

REDACTED_KEY: Final = "_substratRedacted"
ERASURE_REASON: Final = "subject-erasure"


def tombstone(subject_id: str, at: str) -> str:
    """The JSON that replaces an erased value."""
    return dumps({REDACTED_KEY: {"reason": ERASURE_REASON, "subjectId": subject_id, "at": at}})


def _parse(text: str | None) -> tuple[bool, Any]:
    """``(parsed, value)``; ``parsed`` is False for NULL and for text that is not JSON."""
    if text is None:
        return False, None
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return False, None


def is_tombstone(text: str | None) -> bool:
    parsed, value = _parse(text)
    if not parsed or not isinstance(value, dict) or set(value) != {REDACTED_KEY}:
        return False
    inner = value[REDACTED_KEY]
    return isinstance(inner, dict) and inner.get("reason") == ERASURE_REASON


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
    parsed, value = _parse(text)
    return parsed and carries_envelope(value, subject_id)


def _still_holds(text: str | None) -> bool:
    """Whether a declared run's value is something other than NULL or a tombstone."""
    return text is not None and not is_tombstone(text)


def shred_subject_rows(conn: sqlite3.Connection, subject_id: str, now: str) -> int:
    """Erase ``subject_id`` from every run and step row; returns the number of runs touched.

    Runs inside the caller's transaction. Every run is examined rather than pre-filtered in SQL:
    an envelope can be spelled with JSON escapes that no ``LIKE`` would find, and a missed run is a
    person not erased, while erasure is rare enough that a full read costs nothing that matters.
    """
    results_by_run: dict[str, list[str]] = {}
    for run_id, result in conn.execute(
        "SELECT run_id, result FROM _substrat_job_steps WHERE result IS NOT NULL"
    ):
        results_by_run.setdefault(run_id, []).append(result)

    touched: list[tuple[str, str]] = []
    for run_id, declared, status, payload, cursor in conn.execute(
        "SELECT id, subject_id, status, payload, cursor FROM _substrat_job_runs ORDER BY id"
    ):
        held = [payload, cursor, *results_by_run.get(run_id, ())]
        if any(_text_carries(text, subject_id) for text in held) or (
            declared == subject_id and any(_still_holds(text) for text in held)
        ):
            touched.append((run_id, status))

    stone = tombstone(subject_id, now)
    for run_id, status in touched:
        conn.execute(
            "UPDATE _substrat_job_steps SET result = ? WHERE run_id = ? AND result IS NOT NULL",
            (stone, run_id),
        )
        if status == "running":
            conn.execute(
                "UPDATE _substrat_job_runs SET payload = ?, "
                "cursor = CASE WHEN cursor IS NULL THEN NULL ELSE ? END, status = 'failed', "
                "last_error = ?, updated_at = ?, next_attempt_at = NULL, ended_at = ?, "
                "lease_owner = NULL, lease_began_at = NULL WHERE id = ?",
                (stone, stone, JOB_ERASED_RUNNING_NOTE, now, now, run_id),
            )
        else:
            conn.execute(
                "UPDATE _substrat_job_runs SET payload = ?, "
                "cursor = CASE WHEN cursor IS NULL THEN NULL ELSE ? END, last_error = ?, "
                "updated_at = ? WHERE id = ?",
                (stone, stone, JOB_ERASED_FINISHED_NOTE, now, run_id),
            )
    return len(touched)
