"""Decoding a run row: strict where work happens (a pass), tolerant where evidence is read.

A pass cannot run on a payload it cannot decode, so ``run_job_pass`` treats a parse failure as a
failed pass. The operator read must still show that row — a read that threw on the one row being
investigated would take every other run on the scope with it — so ``job_run_of`` returns it with
each undecodable JSON column empty, the others decoded, and ``decode_error`` saying why.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from ._json import loads
from ._values import JobRun, JobRunRow


@attrs.frozen
class DecodedColumns:
    """A row's three JSON columns, decoded."""

    payload: Any
    cursor: Any
    counters: dict[str, float]


class ColumnDecodeError(ValueError):
    """One or more of a row's JSON columns would not decode; the message names each."""


def _decode_json(text: str, column: str, problems: list[str]) -> Any:
    try:
        return loads(text)
    except (TypeError, ValueError) as err:
        problems.append(f"{column} is not valid JSON ({err})")
        return None


def _is_count(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def _decode_each(row: JobRunRow) -> tuple[DecodedColumns, list[str]]:
    """Each JSON column decoded on its own: one that fails comes back empty (payload and cursor
    None, counters {}) with its problem listed, and never blanks a column that decoded."""
    problems: list[str] = []
    before = len(problems)
    payload = _decode_json(row.payload, "payload", problems)
    if len(problems) > before:
        payload = None
    cursor = None if row.cursor is None else _decode_json(row.cursor, "cursor", problems)
    before = len(problems)
    counters = _decode_json(row.counters, "counters", problems)
    if len(problems) == before and not (
        isinstance(counters, dict) and all(_is_count(v) for v in counters.values())
    ):
        problems.append(f"counters is JSON but not an object of finite numbers ({row.counters})")
    if len(problems) > before:
        counters = {}
    return DecodedColumns(payload, cursor, counters), problems


def decode_columns(row: JobRunRow) -> DecodedColumns:
    """``payload``, ``cursor`` and ``counters`` decoded, or ``ColumnDecodeError`` naming every
    column that failed. A NULL cursor is a fact ("no pass has committed yet"), decoded as None."""
    decoded, problems = _decode_each(row)
    if problems:
        raise ColumnDecodeError("; ".join(problems))
    return decoded


def job_run_of(row: JobRunRow) -> JobRun:
    """The operator's record of ``row``, decoded tolerantly, column by column.

    A JSON column that will not decode comes back empty (payload None, cursor None, counters {})
    ("the undecodable columns come back empty", docs/protocol.md, "Reading runs") while the
    columns that did decode keep their values: a bad ``counters`` does not blank a good cursor.
    ``decode_error`` names each failing column and says why, in column order (payload, cursor,
    counters), joined by ``"; "``; None when every column decoded.
    """
    decoded, problems = _decode_each(row)
    decode_error = "; ".join(problems) if problems else None
    return JobRun(
        id=row.id,
        module_id=row.module_id,
        job=row.job,
        instance=row.instance,
        status=row.status,
        payload=decoded.payload,
        subject_id=row.subject_id,
        cursor=decoded.cursor,
        counters=decoded.counters,
        attempts=row.attempts,
        last_error=row.last_error,
        started_at=row.started_at,
        updated_at=row.updated_at,
        next_attempt_at=row.next_attempt_at,
        ended_at=row.ended_at,
        lease_owner=row.lease_owner,
        admission_misses=row.admission_misses or 0,
        decode_error=decode_error,
    )
