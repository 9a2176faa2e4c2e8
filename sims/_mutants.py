"""Deliberately broken scope stores: each removes ONE guard the spec puts in its SQL.

They exist to show that the checks notice. A check that stays green when the guard it is about is
gone proves nothing; ``python -m sims sweep random --mutant NAME`` and the tests run each of these
and expect a violation.
"""

from __future__ import annotations

from driver import JobRunClaim, JobRunPatch
from scopehost import ScopeDatabase


class _Impersonating(ScopeDatabase):
    """Writes as whoever holds the run now, so a stale pass's write is no longer refused."""

    def holder(self, id: str) -> str | None:
        row = self.connection.execute(
            "SELECT lease_owner FROM _substrat_job_runs WHERE id = ?", (id,)
        ).fetchone()
        return None if row is None else row[0]


class PatchIgnoresOwner(_Impersonating):
    """``patch`` forgets the lease-owner compare-and-set."""

    def patch(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        return super().patch(id, patch, self.holder(id), now=now)


class CommitIgnoresOwner(_Impersonating):
    """``commit_pass`` forgets the lease-owner compare-and-set."""

    def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        return super().commit_pass(id, patch, self.holder(id), now=now)


class RecordStepIgnoresOwner(ScopeDatabase):
    """``record_step`` forgets the lease check: no renewal, and an unguarded upsert."""

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
        connection = self.connection
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute(
                _UNGUARDED_RECORD_SQL, (run_id, name, result, attempts, last_error, at)
            )
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        return True


_UNGUARDED_RECORD_SQL = (
    "INSERT INTO _substrat_job_steps (run_id, step, result, attempts, last_error, recorded_at) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, step) DO UPDATE SET "
    "result = excluded.result, attempts = excluded.attempts, "
    "last_error = excluded.last_error, recorded_at = excluded.recorded_at"
)


class BeginIgnoresMargin(ScopeDatabase):
    """BEGIN writes while the lease has not expired, however little of it is left."""

    def begin(self, id: str, owner: str, margin_ms: float, *, now: str) -> bool:
        return super().begin(id, owner, 0, now=now)


class TakeoverChargesNothing(ScopeDatabase):
    """A claim that takes over a BEGUN lease charges no attempt (it forgets the lease began)."""

    def claim(self, id: str, owner: str, lease_ms: int, *, now: str) -> JobRunClaim | None:
        self.connection.execute(
            "UPDATE _substrat_job_runs SET lease_began_at = NULL WHERE id = ? "
            "AND status = 'running' AND (next_attempt_at IS NULL OR next_attempt_at <= ?)",
            (id, now),
        )
        return super().claim(id, owner, lease_ms, now=now)


MUTANTS: dict[str, type[ScopeDatabase]] = {
    "patch-owner": PatchIgnoresOwner,
    "commit-owner": CommitIgnoresOwner,
    "record-step-owner": RecordStepIgnoresOwner,
    "begin-margin": BeginIgnoresMargin,
    "takeover-charge": TakeoverChargesNothing,
}
