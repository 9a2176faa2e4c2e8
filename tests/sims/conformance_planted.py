"""Stores with one bug planted each, for the tests that show the conformance kit catches them.

Each is a ``ScopeDatabase`` with one rule of the spec broken the way an adapter could break it.
Run as a script (``python tests/sims/conformance_planted.py NAME``) it serves the wire on stdin and
stdout over the broken store, as any COMMAND target does.
"""

from __future__ import annotations

import math
import sys

from driver import JobMiss, JobRunClaim, JobRunPatch, add_ms, admission_backoff_ms
from scopehost import ScopeDatabase
from sims.conformance import ReferenceStore, serve_stdio


class ClaimIgnoresDueEdge(ScopeDatabase):
    """A claim that reads "due" as strictly before now: a run due at exactly now is not claimed."""

    def claim(self, id: str, owner: str, lease_ms: int, *, now: str) -> JobRunClaim | None:
        row = self.connection.execute(
            "SELECT next_attempt_at FROM _substrat_job_runs WHERE id = ?", (id,)
        ).fetchone()
        if row is not None and row[0] == now:
            return None
        return super().claim(id, owner, lease_ms, now=now)


class BeginMarginRounded(ScopeDatabase):
    """BEGIN's margin rounded half up instead of floored: 250.5 ms counts as 251."""

    def begin(self, id: str, owner: str, margin_ms: float, *, now: str) -> bool:
        return super().begin(id, owner, math.floor(margin_ms + 0.5), now=now)


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


class CommitKeepsLedger(ScopeDatabase):
    """A commit that writes the run but leaves the pass's step rows behind."""

    def commit_pass(self, id: str, patch: JobRunPatch, owner: str | None, *, now: str) -> bool:
        return self.patch(id, patch, owner, now=now)


PLANTED: dict[str, type[ScopeDatabase]] = {
    "claim-due-edge": ClaimIgnoresDueEdge,
    "begin-margin-rounded": BeginMarginRounded,
    "miss-never-fails": MissNeverFails,
    "commit-keeps-ledger": CommitKeepsLedger,
}

if __name__ == "__main__":
    serve_stdio(ReferenceStore(database=PLANTED[sys.argv[1]]))
