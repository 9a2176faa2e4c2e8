"""Five one-bug store adapters for the conformance kit: each a ScopeDatabase subclass with one
operation written again, run in process as LocalTarget(ReferenceStore(database=...)).

Copied as a new user wrote them (tests/sims/test_kit_trial35.py); only type annotations and lint
fixes were added."""

from __future__ import annotations

import builtins
from typing import Any

import attrs

import scopehost._erasure as erasure
from driver import (
    JOB_ERROR_MAX_BYTES,
    JOB_ID_MAX_BYTES,
    JOB_STEP_RESULT_MAX_BYTES,
    JobRunFilter,
    JobRunPatch,
    JobRunRow,
    iso_from_ms,
)
from driver._policy import job_run_list_limit
from scopehost import JobRunDump, ScopeDatabase
from scopehost._database import (
    _check_json,
    _check_lease_ms,
    _check_owner,
    _check_patch,
    _check_patch_owner,
    _check_size,
    _check_storable,
    _check_text,
    _check_whole,
    _time_ms,
)

# 1. record_step: a step already in the ledger is never overwritten (ON CONFLICT DO NOTHING), so
#    a step that failed and is then recorded again keeps its first row (NULL result).
RECORD_KEEP_FIRST = (
    "INSERT INTO _substrat_job_steps (run_id, step, result, attempts, last_error, recorded_at)\n"
    "     SELECT ?, ?, ?, ?, ?, ?\n"
    "      WHERE EXISTS (SELECT 1 FROM _substrat_job_runs WHERE id = ? AND status = 'running' "
    "AND lease_owner IS ?)\n   ON CONFLICT (run_id, step) DO NOTHING"
)


class RecordKeepsFirst(ScopeDatabase):
    def record_step(
        self,
        run_id: str,
        name: str,
        result: str | None,
        attempts: int,
        last_error: str | None,
        at: str,
        owner: str,
        lease_ms: int,
        *,
        now: str,
    ) -> bool:
        now_ms = _time_ms(now, "now")
        _check_storable(run_id, "run_id")
        _check_storable(name, "name")
        _time_ms(at, "at")
        _check_owner(owner)
        _check_lease_ms(lease_ms)
        _check_text(result, "result", nullable=True, remedy="a step result is JSON text or None")
        _check_text(last_error, "last_error", nullable=True, remedy="pass the error text or None")
        _check_whole(
            attempts,
            "attempts",
            minimum=0,
            remedy="a step's attempts is a whole number of 0 or more",
        )
        _check_json(result, "result")
        _check_size(name, JOB_ID_MAX_BYTES, "name", "a step name")
        _check_size(result, JOB_STEP_RESULT_MAX_BYTES, "result", "a step's result")
        _check_size(last_error, JOB_ERROR_MAX_BYTES, "last_error", "an error")
        expiry = iso_from_ms(now_ms + lease_ms)
        with self._tx:
            if not self._renew(run_id, owner, expiry):
                return False
            self._conn.execute(
                RECORD_KEEP_FIRST, (run_id, name, result, attempts, last_error, at, run_id, owner)
            )
        return True


# 2. commit_pass drops the ledger of EVERY run in the scope, not only the committed run's.
class CommitDropsAllLedgers(ScopeDatabase):
    def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        now_ms = _time_ms(now, "now")
        _check_storable(id, "id")
        _check_patch_owner(owner)
        _check_patch(patch, now_ms)
        with self._tx:
            applied = self._apply_patch(id, patch, owner)
            if applied:
                self._conn.execute("DELETE FROM _substrat_job_steps")
        return applied


# 3. erasure walks objects but not lists: an envelope inside a JSON array is missed.
def _carries_no_lists(value: Any, subject_id: str) -> bool:
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
            pending.extend(v for v in item.values() if not isinstance(v, list))
    return False


class ErasureSkipsLists(ScopeDatabase):
    def shred_subject(self, subject_id: str, *, now: str) -> int:
        saved = erasure.carries_envelope
        erasure.carries_envelope = _carries_no_lists
        try:
            return super().shred_subject(subject_id, now=now)
        finally:
            erasure.carries_envelope = saved


# 4. a restore replaces the runs but keeps the step rows of runs the dump does not hold.
class RestoreKeepsStrayLedger(ScopeDatabase):
    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        if getattr(dump, "scope_id", None) != self.scope_id:
            return super().import_dump(dump, source_scope_id, now=now)
        ids = {run.id for run in dump.runs}
        stray = [
            row
            for row in self._conn.execute(
                "SELECT run_id, step, result, attempts, last_error, recorded_at "
                "FROM _substrat_job_steps"
            ).fetchall()
            if row[0] not in ids
        ]
        count = super().import_dump(dump, source_scope_id, now=now)
        with self._tx:
            self._conn.executemany(
                "INSERT OR IGNORE INTO _substrat_job_steps VALUES (?, ?, ?, ?, ?, ?)", stray
            )
        return count


# 5. the operator read orders newest first by started_at (then id), not by id.
class ListByStartedAt(ScopeDatabase):
    def list(self, filter: JobRunFilter, *, now: str) -> builtins.list[JobRunRow]:
        super().list(filter, now=now)  # the reference's refusals, unchanged
        rows = super().list(attrs.evolve(filter, limit=500), now=now)
        rows.sort(key=lambda r: (r.started_at, r.id), reverse=True)
        return rows[: job_run_list_limit(filter.limit)]


ADAPTERS = {
    "record-keeps-first": RecordKeepsFirst,
    "commit-drops-all-ledgers": CommitDropsAllLedgers,
    "erasure-skips-lists": ErasureSkipsLists,
    "restore-keeps-stray-ledger": RestoreKeepsStrayLedger,
    "list-by-started-at": ListByStartedAt,
}
