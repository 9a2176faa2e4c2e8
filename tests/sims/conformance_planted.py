"""Stores with one bug planted each, for the tests that show the conformance kit catches them.

Each is a ``ScopeDatabase`` with one rule of the spec broken the way an adapter could break it, one
per boundary rule the kit aims at (``sims.conformance._boundaries.RULES``) and a few more. Run as a
script (``python tests/sims/conformance_planted.py NAME``) it serves the wire on stdin and stdout
over the broken store, as any COMMAND target does; the tests reach most of them in process through
``LocalTarget``, which sends every request and reply through the wire's JSON just the same.
"""

from __future__ import annotations

import json
import math
import sys

import attrs

from driver import (
    JobMiss,
    JobRunClaim,
    JobRunFilter,
    JobRunKey,
    JobRunPatch,
    JobRunRow,
    JobStepBoundary,
    add_ms,
    admission_backoff_ms,
)
from scopehost import JobRunDump, ScopeDatabase
from scopehost._erasure import carries_envelope
from sims.conformance import ReferenceStore, serve_stdio


def _holder(db: ScopeDatabase, id: str) -> str | None:
    row = db.connection.execute(
        "SELECT lease_owner FROM _substrat_job_runs WHERE id = ?", (id,)
    ).fetchone()
    return None if row is None else row[0]


class ClaimIgnoresLease(ScopeDatabase):
    """A claim that ignores a lease another owner still holds (the issue's own bug)."""

    def claim(self, id: str, owner: str, lease_ms: int, *, now: str) -> JobRunClaim | None:
        if _holder(self, id) not in (None, owner):
            self.connection.execute(
                "UPDATE _substrat_job_runs SET next_attempt_at = ? WHERE id = ?", (now, id)
            )
        return super().claim(id, owner, lease_ms, now=now)


class ClaimIgnoresDueEdge(ScopeDatabase):
    """A claim that reads "due" as strictly before now: a run due at exactly now is not claimed."""

    def claim(self, id: str, owner: str, lease_ms: int, *, now: str) -> JobRunClaim | None:
        row = self.connection.execute(
            "SELECT next_attempt_at FROM _substrat_job_runs WHERE id = ?", (id,)
        ).fetchone()
        if row is not None and row[0] == now:
            return None
        return super().claim(id, owner, lease_ms, now=now)


class ClaimOneMsEarly(ScopeDatabase):
    """A claim that counts a run due one millisecond before its next_attempt_at."""

    def claim(self, id: str, owner: str, lease_ms: int, *, now: str) -> JobRunClaim | None:
        row = self.connection.execute(
            "SELECT next_attempt_at FROM _substrat_job_runs WHERE id = ?", (id,)
        ).fetchone()
        if row is not None and row[0] == add_ms(now, 1):
            self.connection.execute(
                "UPDATE _substrat_job_runs SET next_attempt_at = ? WHERE id = ?", (now, id)
            )
        return super().claim(id, owner, lease_ms, now=now)


class TakeoverIsFree(ScopeDatabase):
    """A takeover of a pass that BEGAN costs no attempt (and keeps the last error)."""

    def claim(self, id: str, owner: str, lease_ms: int, *, now: str) -> JobRunClaim | None:
        before = self.connection.execute(
            "SELECT attempts, last_error FROM _substrat_job_runs WHERE id = ?", (id,)
        ).fetchone()
        claimed = super().claim(id, owner, lease_ms, now=now)
        if claimed is None or not claimed.takeover:
            return claimed
        self.connection.execute(
            "UPDATE _substrat_job_runs SET attempts = ?, last_error = ? WHERE id = ?",
            (before[0], before[1], id),
        )
        run = self.connection.execute("SELECT * FROM _substrat_job_runs WHERE id = ?", (id,))
        return JobRunClaim(JobRunRow.from_row(run.fetchone()), True)


class BeginMarginRounded(ScopeDatabase):
    """BEGIN's margin rounded half up instead of floored: 250.5 ms counts as 251."""

    def begin(self, id: str, owner: str, margin_ms: float, *, now: str) -> bool:
        return super().begin(id, owner, math.floor(margin_ms + 0.5), now=now)


class BeginMarginInclusive(ScopeDatabase):
    """BEGIN writes with exactly the margin left (>= where the spec says >)."""

    def begin(self, id: str, owner: str, margin_ms: float, *, now: str) -> bool:
        return super().begin(id, owner, max(0.0, margin_ms - 1), now=now)


class StalePatch(ScopeDatabase):
    """A patch applied whoever holds the run: the owner argument is ignored."""

    def patch(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        return super().patch(id, patch, _holder(self, id), now=now)


class StaleCommit(ScopeDatabase):
    """A commit applied whoever holds the run."""

    def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        return super().commit_pass(id, patch, _holder(self, id), now=now)


class StaleBeginStep(ScopeDatabase):
    """A step boundary that renews the lease whoever holds the run."""

    def begin_step(
        self, run_id: str, name: str, owner: str, lease_ms: int, *, now: str
    ) -> JobStepBoundary:
        holder = _holder(self, run_id)
        return super().begin_step(run_id, name, holder or owner, lease_ms, now=now)


class StaleRecordStep(ScopeDatabase):
    """A step record kept whoever holds the run."""

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
        holder = _holder(self, run_id) or owner
        return super().record_step(
            run_id, name, result, attempts, last_error, at, holder, lease_ms, now=now
        )


class MissNeverFails(ScopeDatabase):
    """The tenth admission miss backs off like the ninth instead of failing the run."""

    def miss(self, id: str, owner: str, note: str, *, now: str) -> JobMiss | None:
        missed = super().miss(id, owner, note, now=now)
        if missed is None or not missed.failed:
            return missed
        self.connection.execute(
            "UPDATE _substrat_job_runs SET status = 'running', ended_at = NULL, "
            "last_error = NULL, next_attempt_at = ? WHERE id = ?",
            (add_ms(now, admission_backoff_ms(missed.misses)), id),
        )
        return JobMiss(missed.misses, False)


class MissFailsAtNinth(ScopeDatabase):
    """The ninth admission miss fails the run (one too early)."""

    def miss(self, id: str, owner: str, note: str, *, now: str) -> JobMiss | None:
        missed = super().miss(id, owner, note, now=now)
        if missed is None or missed.misses != 9:
            return missed
        self.connection.execute(
            "UPDATE _substrat_job_runs SET status = 'failed', ended_at = ?, "
            "next_attempt_at = NULL, last_error = ? WHERE id = ?",
            (now, f"lease too short for this environment: {note}", id),
        )
        return JobMiss(9, True)


class DueReadStrict(ScopeDatabase):
    """A due read that counts a run due only strictly after its next_attempt_at."""

    def due_keys(self, now_param: str, max: int, *, now: str) -> list:  # type: ignore[type-arg]
        try:
            earlier = add_ms(now_param, -1)
        except (TypeError, ValueError):
            earlier = now_param
        return super().due_keys(earlier, max, now=now)


class JoinAlwaysInserts(ScopeDatabase):
    """A start that inserts its row even while the key has a live run."""

    def start_or_join(self, key: JobRunKey, row: JobRunRow, *, now: str) -> JobRunRow:
        live = self.connection.execute(
            "SELECT id FROM _substrat_job_runs WHERE module_id = ? AND job = ? AND instance = ? "
            "AND status = 'running'",
            (key.module_id, key.job, key.instance),
        ).fetchall()
        joined = super().start_or_join(key, row, now=now)
        if (
            live
            and joined.id != row.id
            and not self.connection.execute(
                "SELECT 1 FROM _substrat_job_runs WHERE id = ?", (row.id,)
            ).fetchone()
        ):
            self.connection.execute(
                "INSERT INTO _substrat_job_runs SELECT ?, module_id, job, instance, ?, ?, "
                "'running', NULL, '{}', 0, NULL, ?, ?, NULL, NULL, NULL, NULL, NULL "
                "FROM _substrat_job_runs WHERE id = ?",
                (row.id, row.payload, row.subject_id, now, now, joined.id),
            )
            return row
        return joined


class JoinFinished(ScopeDatabase):
    """A start that joins the key's newest run even when it has finished."""

    def start_or_join(self, key: JobRunKey, row: JobRunRow, *, now: str) -> JobRunRow:
        newest = self.connection.execute(
            "SELECT * FROM _substrat_job_runs WHERE module_id = ? AND job = ? AND instance = ? "
            "ORDER BY id DESC LIMIT 1",
            (key.module_id, key.job, key.instance),
        ).fetchone()
        if newest is not None and newest["status"] != "running" and row.key == key:
            return JobRunRow.from_row(newest)
        return super().start_or_join(key, row, now=now)


class JoinSameSubjectOnly(ScopeDatabase):
    """A start that joins a live run only when it is for the same subject."""

    def start_or_join(self, key: JobRunKey, row: JobRunRow, *, now: str) -> JobRunRow:
        live = self.connection.execute(
            "SELECT subject_id FROM _substrat_job_runs WHERE module_id = ? AND job = ? "
            "AND instance = ? AND status = 'running' ORDER BY id DESC LIMIT 1",
            (key.module_id, key.job, key.instance),
        ).fetchone()
        joined = super().start_or_join(key, row, now=now)
        if live is not None and live[0] != row.subject_id and joined.id != row.id:
            self.connection.execute(
                "UPDATE _substrat_job_runs SET status = 'failed' WHERE id = ?", (joined.id,)
            )
            try:
                return super().start_or_join(key, row, now=now)
            finally:
                self.connection.execute(
                    "UPDATE _substrat_job_runs SET status = 'running' WHERE id = ?", (joined.id,)
                )
        return joined


class ErasureKeepsLease(ScopeDatabase):
    """An erasure that settles a leased run but leaves its lease on it."""

    def shred_subject(self, subject_id: str, *, now: str) -> int:
        leases = self.connection.execute(
            "SELECT id, lease_owner, lease_began_at FROM _substrat_job_runs "
            "WHERE lease_owner IS NOT NULL"
        ).fetchall()
        touched = super().shred_subject(subject_id, now=now)
        for id, owner, began in leases:
            self.connection.execute(
                "UPDATE _substrat_job_runs SET lease_owner = ?, lease_began_at = ? WHERE id = ?",
                (owner, began, id),
            )
        return touched


class RestoreSettlesRunning(ScopeDatabase):
    """A restore that fails running runs as if it were a copy."""

    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        imported = super().import_dump(dump, source_scope_id, now=now)
        if dump.scope_id == self.scope_id:
            self.connection.execute(
                "UPDATE _substrat_job_runs SET status = 'failed', ended_at = ?, "
                "next_attempt_at = NULL, lease_owner = NULL, lease_began_at = NULL "
                "WHERE status = 'running'",
                (now,),
            )
        return imported


class CopyKeepsRunning(ScopeDatabase):
    """A copy that keeps the dump's running runs running (they would run twice)."""

    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        imported = super().import_dump(dump, source_scope_id, now=now)
        if dump.scope_id != self.scope_id:
            for run in dump.runs:
                if run.status == "running":
                    self.connection.execute(
                        "UPDATE _substrat_job_runs SET status = 'running', ended_at = NULL, "
                        "last_error = ?, next_attempt_at = ?, lease_owner = ?, "
                        "lease_began_at = ?, updated_at = ? WHERE id = ?",
                        (
                            run.last_error,
                            run.next_attempt_at,
                            run.lease_owner,
                            run.lease_began_at,
                            run.updated_at,
                            run.id,
                        ),
                    )
        return imported


class CommitKeepsLedger(ScopeDatabase):
    """A commit that writes the run but leaves the pass's step rows behind."""

    def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        return self.patch(id, patch, owner, now=now)


class ListBooleanLimitIsOne(ScopeDatabase):
    """An operator list that reads a limit of ``true`` as the number 1 (JavaScript's coercion)."""

    def list(self, filter: JobRunFilter, *, now: str) -> list[JobRunRow]:
        limit: object = filter.limit  # the wire hands a JSON true through as it is
        if limit is True:
            filter = attrs.evolve(filter, limit=1)
        return super().list(filter, now=now)


class ListLimitRoundedUp(ScopeDatabase):
    """An operator list that rounds a fractional limit up instead of flooring it."""

    def list(self, filter: JobRunFilter, *, now: str) -> list[JobRunRow]:
        limit = filter.limit
        if isinstance(limit, float) and math.isfinite(limit) and limit != math.floor(limit):
            filter = attrs.evolve(filter, limit=math.ceil(limit))
        return super().list(filter, now=now)


class ListLimitBelowOneIsDefault(ScopeDatabase):
    """An operator list that reads a limit below 1 as "no limit given" (the default 50)."""

    def list(self, filter: JobRunFilter, *, now: str) -> list[JobRunRow]:
        limit = filter.limit
        if not isinstance(limit, bool) and isinstance(limit, int | float) and limit < 1:
            filter = attrs.evolve(filter, limit=None)
        return super().list(filter, now=now)


class BeginKeepsMisses(ScopeDatabase):
    """BEGIN that writes its time but keeps the run's admission misses."""

    def begin(self, id: str, owner: str, margin_ms: float, *, now: str) -> bool:
        row = self.connection.execute(
            "SELECT admission_misses FROM _substrat_job_runs WHERE id = ?", (id,)
        ).fetchone()
        began = super().begin(id, owner, margin_ms, now=now)
        if began and row is not None:
            self.connection.execute(
                "UPDATE _substrat_job_runs SET admission_misses = ? WHERE id = ?", (row[0], id)
            )
        return began


def _run_text(db: ScopeDatabase) -> list[tuple[str, str | None, str, str | None]]:
    return db.connection.execute(
        "SELECT id, subject_id, payload, cursor FROM _substrat_job_runs"
    ).fetchall()


def _carries(text: str | None, subject_id: str) -> bool:
    try:
        return text is not None and carries_envelope(json.loads(text), subject_id)
    except ValueError:
        return False


class ErasureSkipsCursor(ScopeDatabase):
    """An erasure that looks for the subject in the declared column and the payload, not the
    cursor: a run whose subject sits only in its cursor is left as it was."""

    def shred_subject(self, subject_id: str, *, now: str) -> int:
        hidden = [
            (id, cursor)
            for id, declared, payload, cursor in _run_text(self)
            if declared != subject_id
            and not _carries(payload, subject_id)
            and _carries(cursor, subject_id)
        ]
        for id, _cursor in hidden:
            self.connection.execute(
                "UPDATE _substrat_job_runs SET cursor = NULL WHERE id = ?", (id,)
            )
        try:
            return super().shred_subject(subject_id, now=now)
        finally:
            for id, cursor in hidden:
                self.connection.execute(
                    "UPDATE _substrat_job_runs SET cursor = ? WHERE id = ?", (cursor, id)
                )


class ErasureDeclaredOnly(ScopeDatabase):
    """An erasure that matches only runs declaring the subject (``WHERE subject_id = ?``), not
    those whose payload carries its envelope."""

    def shred_subject(self, subject_id: str, *, now: str) -> int:
        hidden = [
            (id, payload)
            for id, declared, payload, _cursor in _run_text(self)
            if declared != subject_id and _carries(payload, subject_id)
        ]
        for id, _payload in hidden:
            self.connection.execute(
                "UPDATE _substrat_job_runs SET payload = '{}' WHERE id = ?", (id,)
            )
        try:
            return super().shred_subject(subject_id, now=now)
        finally:
            for id, payload in hidden:
                self.connection.execute(
                    "UPDATE _substrat_job_runs SET payload = ? WHERE id = ?", (payload, id)
                )


class ErasureKeepsStepErrors(ScopeDatabase):
    """An erasure that shreds step results but leaves the steps' error text."""

    def shred_subject(self, subject_id: str, *, now: str) -> int:
        errors = self.connection.execute(
            "SELECT run_id, step, last_error FROM _substrat_job_steps"
        ).fetchall()
        touched = super().shred_subject(subject_id, now=now)
        self.connection.executemany(
            "UPDATE _substrat_job_steps SET last_error = ? WHERE run_id = ? AND step = ?",
            [(error, run_id, step) for run_id, step, error in errors],
        )
        return touched


class ErasureIgnoresStepResults(ScopeDatabase):
    """An erasure that never reads step results: a run reached only through one is missed."""

    def shred_subject(self, subject_id: str, *, now: str) -> int:
        holding = {
            id
            for id, declared, payload, cursor in _run_text(self)
            if declared == subject_id
            or _carries(payload, subject_id)
            or _carries(cursor, subject_id)
        }
        hidden = [
            (run_id, step, result)
            for run_id, step, result in self.connection.execute(
                "SELECT run_id, step, result FROM _substrat_job_steps"
            ).fetchall()
            if run_id not in holding and _carries(result, subject_id)
        ]
        for run_id, step, _result in hidden:
            self.connection.execute(
                "UPDATE _substrat_job_steps SET result = '{}' WHERE run_id = ? AND step = ?",
                (run_id, step),
            )
        try:
            return super().shred_subject(subject_id, now=now)
        finally:
            for run_id, step, result in hidden:
                self.connection.execute(
                    "UPDATE _substrat_job_steps SET result = ? WHERE run_id = ? AND step = ?",
                    (result, run_id, step),
                )


class CommitMergesCounters(ScopeDatabase):
    """A commit that adds the pass's counters to those stored instead of writing them as given
    (the schema's "merged on each commit" read as the store's job)."""

    def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        row = self.connection.execute(
            "SELECT counters FROM _substrat_job_runs WHERE id = ?", (id,)
        ).fetchone()
        applied = super().commit_pass(id, patch, owner, now=now)
        if applied and row is not None:
            merged = json.loads(row[0])
            for name, value in json.loads(patch.counters).items():
                merged[name] = merged.get(name, 0) + value
            self.connection.execute(
                "UPDATE _substrat_job_runs SET counters = ? WHERE id = ?",
                (json.dumps(merged, separators=(",", ":")), id),
            )
        return applied


class DueTiesNewestFirst(ScopeDatabase):
    """A due read that breaks ties in the due order by id descending."""

    def due_keys(self, now_param: str, max: int, *, now: str) -> list:  # type: ignore[type-arg]
        keys = super().due_keys(now_param, 1_000_000, now=now)
        due_at = dict(
            self.connection.execute(
                "SELECT id, COALESCE(next_attempt_at, started_at) FROM _substrat_job_runs"
            ).fetchall()
        )
        keys = sorted(keys, key=lambda key: key.id, reverse=True)
        keys.sort(key=lambda key: due_at[key.id])
        return keys[:max]


class ImportDropsMisses(ScopeDatabase):
    """An import (restore or copy) that does not carry the runs' admission misses."""

    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        imported = super().import_dump(dump, source_scope_id, now=now)
        self.connection.executemany(
            "UPDATE _substrat_job_runs SET admission_misses = NULL WHERE id = ?",
            [(run.id,) for run in dump.runs],
        )
        return imported


class ImportDropsStepErrors(ScopeDatabase):
    """An import (restore or copy) that does not carry the steps' error text."""

    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        imported = super().import_dump(dump, source_scope_id, now=now)
        self.connection.executemany(
            "UPDATE _substrat_job_steps SET last_error = NULL WHERE run_id = ?",
            [(run.id,) for run in dump.runs],
        )
        return imported


#: Each planted bug by name, with the boundary rule it breaks (None: a rule of its own).
PLANTED: dict[str, type[ScopeDatabase]] = {
    "claim-ignores-lease": ClaimIgnoresLease,
    "claim-due-edge": ClaimIgnoresDueEdge,
    "claim-one-ms-early": ClaimOneMsEarly,
    "takeover-is-free": TakeoverIsFree,
    "begin-margin-rounded": BeginMarginRounded,
    "begin-margin-inclusive": BeginMarginInclusive,
    "stale-patch": StalePatch,
    "stale-commit": StaleCommit,
    "stale-begin-step": StaleBeginStep,
    "stale-record-step": StaleRecordStep,
    "miss-never-fails": MissNeverFails,
    "miss-fails-at-ninth": MissFailsAtNinth,
    "due-read-strict": DueReadStrict,
    "join-always-inserts": JoinAlwaysInserts,
    "join-finished": JoinFinished,
    "join-same-subject-only": JoinSameSubjectOnly,
    "erasure-keeps-lease": ErasureKeepsLease,
    "restore-settles-running": RestoreSettlesRunning,
    "copy-keeps-running": CopyKeepsRunning,
    "commit-keeps-ledger": CommitKeepsLedger,
    "list-boolean-limit-is-one": ListBooleanLimitIsOne,
    "list-limit-rounded-up": ListLimitRoundedUp,
    "list-limit-below-one-is-default": ListLimitBelowOneIsDefault,
    "begin-keeps-misses": BeginKeepsMisses,
    "erasure-skips-cursor": ErasureSkipsCursor,
    "erasure-declared-only": ErasureDeclaredOnly,
    "erasure-keeps-step-errors": ErasureKeepsStepErrors,
    "erasure-ignores-step-results": ErasureIgnoresStepResults,
    "commit-merges-counters": CommitMergesCounters,
    "due-ties-newest-first": DueTiesNewestFirst,
    "import-drops-misses": ImportDropsMisses,
    "import-drops-step-errors": ImportDropsStepErrors,
}

if __name__ == "__main__":
    serve_stdio(ReferenceStore(database=PLANTED[sys.argv[1]]))
