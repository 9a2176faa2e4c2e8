"""Six one-bug store adapters, written by a new user from the docs alone: each is the reference
store (``scopehost.ScopeDatabase``) with one operation written again, carrying one plausible,
subtle bug that breaks one rule of docs/protocol.md, a different rule each
(``tests/sims/test_kit_trial35b.py`` holds the kit to catching each, by its rule).

Copied as the new user wrote them; only this docstring (theirs named the folders they ran from),
one function's parameter names (for mypy) and the lint's line breaks changed. Each serves the
wire as a COMMAND target with ``sims.conformance.serve_stdio``:

    python -m sims conformance --target "python tests/sims/kit_trial35b_adapters.py NAME"

where NAME is a key of ``CLASSES``; in process, the same store is
``LocalTarget(ReferenceStore(database=CLASSES[NAME]))``.

They use private helpers of the reference (``scopehost._database._time_ms`` and the other input
checks, ``ScopeDatabase._conn``/``_tx``/``_one_read``, ``scopehost._erasure.carries_envelope``,
``scopehost._dump._not_carried``) so that each adapter differs from the reference in its bug only.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

import scopehost._erasure as _erasure
from driver import (
    JOB_LEASE_EXPIRED_NOTE,
    JOB_LEASE_MAX_MS,
    JobRunClaim,
    JobRunRow,
    ValidationFailed,
    iso_from_ms,
)
from scopehost import JOB_RUN_BEGIN_SQL, ScopeDatabase
from scopehost._database import _check_lease_ms, _check_owner, _check_storable, _shown, _time_ms
from scopehost._dump import JobRunDump, not_carried_note, validate_dump

# ---------------------------------------------------------------------------------------------
# 1. A claim over an expired lease that never began is charged as a takeover.
# ---------------------------------------------------------------------------------------------

_BUGGY_CLAIM_SQL = (
    "UPDATE _substrat_job_runs\n"
    "     SET lease_owner = ?, next_attempt_at = ?, updated_at = ?, lease_began_at = NULL,\n"
    "         attempts = attempts + CASE WHEN lease_owner IS NULL THEN 0 ELSE 1 END,\n"
    "         last_error = CASE WHEN lease_owner IS NULL THEN last_error ELSE ? END\n"
    "   WHERE id = ? AND status = 'running' AND (next_attempt_at IS NULL OR next_attempt_at <= ?)\n"
    "   RETURNING *"
)


class ChargesUnbegunTakeover(ScopeDatabase):
    """Breaks docs/protocol.md, "Takeover": "If the lease had **not begun**, the claim ran nothing
    and is taken over for free (`slow-begin` shows it)."

    The bug: the claim decides "takeover" (and charges an attempt with the expired-lease note) by
    whether the row had a ``lease_owner`` before, not whether it had ``lease_began_at``. Every
    expired lease is treated as a crashed pass, including a claim whose BEGIN never wrote.
    """

    def claim(self, id: str, owner: str, lease_ms: int, *, now: str) -> JobRunClaim | None:
        now_ms = _time_ms(now, "now")
        _check_storable(id, "id")
        _check_owner(owner)
        _check_lease_ms(lease_ms)
        expiry = iso_from_ms(now_ms + lease_ms)
        with self._tx:
            before = self._conn.execute(
                "SELECT lease_owner FROM _substrat_job_runs WHERE id = ?", (id,)
            ).fetchone()
            claimed = self._conn.execute(
                _BUGGY_CLAIM_SQL, (owner, expiry, now, JOB_LEASE_EXPIRED_NOTE, id, now)
            ).fetchall()
        if not claimed:
            return None
        return JobRunClaim(JobRunRow.from_row(claimed[0]), before[0] is not None)


# ---------------------------------------------------------------------------------------------
# 2. BEGIN's margin rounded to the nearest millisecond instead of down.
# ---------------------------------------------------------------------------------------------


class BeginMarginRounded(ScopeDatabase):
    """Breaks docs/protocol.md, "BEGIN, the commitment point": BEGIN writes "only while this claim
    still owns the lease and the lease runs more than the margin past the store's now (strict,
    with the margin rounded down to a whole millisecond)."

    The bug: the fractional margin is made whole with Python's ``round()`` (to the nearest, ties
    to even) instead of ``math.floor``. For a margin like 250.75 ms (lease 1003 ms) the store
    requires 251 ms left where the spec requires 250, so a BEGIN with exactly 251 ms of the lease
    left is refused. Margins with a fraction below one half (and x.5 with an even x) agree.
    """

    def begin(self, id: str, owner: str, margin_ms: float, *, now: str) -> bool:
        now_ms = _time_ms(now, "now")
        _check_storable(id, "id")
        _check_owner(owner)
        if (
            not isinstance(margin_ms, int | float)
            or isinstance(margin_ms, bool)
            or not 0 <= margin_ms < math.inf
        ):
            raise ValidationFailed.at(
                "margin_ms",
                f"is {_shown(margin_ms)}; the BEGIN margin is a finite number of milliseconds, "
                "0 or more",
            )
        if margin_ms > JOB_LEASE_MAX_MS:
            raise ValidationFailed.at(
                "margin_ms",
                f"is {_shown(margin_ms)}; the BEGIN margin is at most {JOB_LEASE_MAX_MS} ms (a "
                "year, the longest lease), as no lease could run longer past now",
            )
        threshold = iso_from_ms(now_ms + round(margin_ms))  # BUG: round, not floor
        with self._tx:
            began = self._conn.execute(JOB_RUN_BEGIN_SQL, (now, id, owner, threshold)).rowcount
        return began == 1


# ---------------------------------------------------------------------------------------------
# 3. Erasure looks into arrays of objects, but not into arrays nested in arrays.
# ---------------------------------------------------------------------------------------------


def _carries_envelope_shallow_arrays(value: Any, subject_id: str) -> bool:
    """Like the reference's ``carries_envelope``, but an array is searched only for the objects
    it holds directly: an array inside an array is skipped."""
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
            pending.extend(element for element in item if isinstance(element, dict))  # BUG
    return False


@contextmanager
def _envelope_finder(finder: Any) -> Iterator[None]:
    saved = _erasure.carries_envelope
    _erasure.carries_envelope = finder
    try:
        yield
    finally:
        _erasure.carries_envelope = saved


class ErasureSkipsNestedArrays(ScopeDatabase):
    """Breaks docs/protocol.md, "Erasure": "A **classified envelope** for the subject is a JSON
    object, anywhere inside a value, with that `"subjectId"` and a `"piiClass"` other than
    `"none"`".

    The bug: the envelope search walks objects' values and the objects an array holds, but skips
    an element of an array that is itself an array, so an envelope at ``[[{...}]]`` (or
    ``{"rows": [[{...}]]}``) is not found, and the run (or step) holding it is not erased.
    """

    def shred_subject(self, subject_id: str, *, now: str) -> int:
        with _envelope_finder(_carries_envelope_shallow_arrays):
            return super().shred_subject(subject_id, now=now)


# ---------------------------------------------------------------------------------------------
# 4. A restore replaces the dump's runs one by one instead of replacing the tables.
# ---------------------------------------------------------------------------------------------

_RUN_COLUMNS = tuple(field.name for field in attrs.fields(JobRunRow))


class RestoreUpsertsRows(ScopeDatabase):
    """Breaks docs/protocol.md, "Restore: export and import": "**Into its own scope** (a
    restore), the scope's job tables are **replaced** by the dump's rows: every run and step row
    the scope held is deleted first, so restoring an older dump can never leave two live runs for
    one key."

    The bug: a restore upserts each of the dump's runs (``INSERT OR REPLACE``) and replaces that
    run's step rows, but deletes nothing else. Restoring the scope's current export is exact;
    restoring an EARLIER export leaves the runs and step rows written since it in place.
    """

    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        if not isinstance(dump, JobRunDump) or dump.scope_id != self.scope_id:
            return super().import_dump(dump, source_scope_id, now=now)
        _time_ms(now, "now")
        if source_scope_id != dump.scope_id:
            return super().import_dump(dump, source_scope_id, now=now)
        validate_dump(dump, now=now)
        insert_run = (
            f"INSERT OR REPLACE INTO _substrat_job_runs ({', '.join(_RUN_COLUMNS)}) "
            f"VALUES ({', '.join('?' for _ in _RUN_COLUMNS)})"
        )
        with self._tx:
            for run in dump.runs:
                self._conn.execute("DELETE FROM _substrat_job_steps WHERE run_id = ?", (run.id,))
                self._conn.execute(insert_run, attrs.astuple(run))
            self._conn.executemany(
                "INSERT INTO _substrat_job_steps "
                "(run_id, step, result, attempts, last_error, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (attrs.astuple(step) for step in dump.steps),
            )
        return len(dump.runs)


# ---------------------------------------------------------------------------------------------
# 5. A copy into another scope fails its running runs but keeps their due time.
# ---------------------------------------------------------------------------------------------


class CopyKeepsDueTime(ScopeDatabase):
    """Breaks docs/protocol.md, "Restore: export and import" and "A lease": "**Into another
    scope** (a copy), the rows are added, and a `running` run is failed with `not carried: ...`"
    and "An erasure, an import into another scope and every terminal outcome also leave the
    lease free, with the run no longer `running`" (a lease is "`lease_owner` plus an expiry in
    `next_attempt_at`"); the SQL contract: "`next_attempt_at` | when the run is due: NULL = now
    (or terminal); a backoff; or, while leased, the lease's expiry".

    The bug: the copy fails each running run and clears ``lease_owner`` and ``lease_began_at``,
    but keeps its ``next_attempt_at`` (the lease's expiry, or a backoff), so a failed run in the
    copy still carries a due time. A copied run that had none is exact.
    """

    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        if not isinstance(dump, JobRunDump) or dump.scope_id == self.scope_id:
            return super().import_dump(dump, source_scope_id, now=now)
        import scopehost._dump as _dump

        saved = _dump._not_carried

        def _not_carried_keeping_due(run: JobRunRow, source_scope_id: str, now: str) -> JobRunRow:
            if run.status != "running":
                return run
            return attrs.evolve(
                run,
                status="failed",
                last_error=not_carried_note(source_scope_id),
                updated_at=now,
                ended_at=now,
                lease_owner=None,
                lease_began_at=None,
            )  # BUG: next_attempt_at kept

        _dump._not_carried = _not_carried_keeping_due
        try:
            return super().import_dump(dump, source_scope_id, now=now)
        finally:
            _dump._not_carried = saved


# ---------------------------------------------------------------------------------------------
# 6. The due read breaks ties of due time by age (started_at) before id.
# ---------------------------------------------------------------------------------------------

_BUGGY_DUE_SQL = (
    "SELECT id, module_id, job FROM ("
    "SELECT id, module_id, job, started_at, started_at AS due_at FROM _substrat_job_runs "
    "WHERE status = 'running' AND next_attempt_at IS NULL "
    "UNION ALL "
    "SELECT id, module_id, job, started_at, next_attempt_at AS due_at FROM _substrat_job_runs "
    "WHERE status = 'running' AND next_attempt_at <= ?"
    ") ORDER BY due_at, started_at, id LIMIT ?"  # BUG: started_at before id
)


class DueTieByAge(ScopeDatabase):
    """Breaks docs/protocol.md, "One drive, end to end": the due read is "ordered by **when each
    became due** (`COALESCE(next_attempt_at, started_at)`, then id)" (and the statements table:
    "ordered by `COALESCE(next_attempt_at, started_at), id`, limited").

    The bug: among runs due at the same time, the oldest (``started_at``) goes first, and only
    then the id ("ties go to the run that has waited longest"). It differs only on a tie of due
    time between runs whose start order is the reverse of their id order: say r01 started at
    12:00:05 and was never claimed (due 12:00:05), and r02 started at 12:00:01 and backs off
    until 12:00:05; the spec reads r01 then r02, this store r02 then r01.
    """

    def due_keys(self, now_param: str, max: int, *, now: str) -> list[Any]:
        from driver import JobDueKey
        from scopehost._database import _check_whole

        _time_ms(now, "now")
        _time_ms(now_param, "now_param")
        _check_whole(
            max,
            "max",
            minimum=0,
            remedy="a due snapshot reads a whole number of keys, 0 or more "
            "(SQLite would read a negative limit as no limit)",
        )
        with self._one_read:
            rows = self._conn.execute(_BUGGY_DUE_SQL, (now_param, max)).fetchall()
        return [JobDueKey(row[0], row[1], row[2]) for row in rows]


CLASSES: dict[str, type[ScopeDatabase]] = {
    "charges-unbegun-takeover": ChargesUnbegunTakeover,
    "begin-margin-rounded": BeginMarginRounded,
    "erasure-skips-nested-arrays": ErasureSkipsNestedArrays,
    "restore-upserts-rows": RestoreUpsertsRows,
    "copy-keeps-due-time": CopyKeepsDueTime,
    "due-tie-by-age": DueTieByAge,
}

ADAPTERS: dict[str, str] = {
    "charges-unbegun-takeover": "Takeover: a lease that had not begun is taken over for free "
    "(no attempt, no note)",
    "begin-margin-rounded": "BEGIN: the lease must run more than the margin, rounded DOWN to a "
    "whole millisecond, past the store's now",
    "erasure-skips-nested-arrays": "Erasure: a classified envelope anywhere inside a value "
    "(here: inside an array inside an array)",
    "restore-upserts-rows": "Restore: into its own scope the job tables are replaced; every run "
    "and step row held is deleted first",
    "copy-keeps-due-time": "Copy into another scope: a running run is failed as not carried, its "
    "lease (owner and next_attempt_at expiry) left free",
    "due-tie-by-age": "Due order: COALESCE(next_attempt_at, started_at), then id (not started_at)",
}


def main(argv: list[str]) -> None:
    from sims.conformance import ReferenceStore, serve_stdio

    if len(argv) != 2 or argv[1] not in CLASSES:
        sys.stderr.write(f"usage: adapters.py NAME, NAME one of {', '.join(CLASSES)}\n")
        raise SystemExit(2)
    serve_stdio(ReferenceStore(database=CLASSES[argv[1]]))


if __name__ == "__main__":
    main(sys.argv)
