"""One-bug store adapters, one slip each on a corner of docs/protocol.md the conformance kit aims at
on every seed (``tests/sims/test_conformance_corner_slips.py``): each a ``ScopeDatabase`` subclass
with one operation written again, as a port's one-line mistake would write it, run in process as
``LocalTarget(ReferenceStore(database=...))``."""

from __future__ import annotations

from typing import Final

import attrs

from driver import JobMiss, JobRunPatch, add_ms, admission_backoff_ms
from scopehost import JobRunDump, ScopeDatabase
from scopehost._sql import JOB_RUN_PATCH_SQL

#: The outcome write as a port that spelt ``IS ?`` as ``= ?`` runs it: NULL = NULL is not true
#: in SQL, so a null owner's write never applies, not even to a run no pass holds.
_PATCH_OWNER_EQUALS: Final = JOB_RUN_PATCH_SQL.replace("lease_owner IS ?", "lease_owner = ?")
#: The outcome write as a port that leaves the owner out when the caller passes none: a null
#: owner's write applies over a lease another pass holds.
_PATCH_ANY_OWNER: Final = JOB_RUN_PATCH_SQL.replace(
    "AND lease_owner IS ?", "AND (lease_owner IS ? OR 1)"
)


def _patched(db: ScopeDatabase, sql: str, id: str, patch: JobRunPatch, owner: str | None) -> bool:
    values = (
        patch.status,
        patch.cursor,
        patch.counters,
        patch.attempts,
        patch.last_error,
        patch.updated_at,
        patch.next_attempt_at,
        patch.ended_at,
    )
    return bool(db.connection.execute(sql, (*values, id, owner)).rowcount == 1)


class PatchOwnerEquals(ScopeDatabase):
    """``lease_owner = ?`` for ``lease_owner IS ?``: a null owner patches nothing."""

    def _apply_patch(self, id: str, patch: JobRunPatch, owner: str | None) -> bool:
        return _patched(self, _PATCH_OWNER_EQUALS, id, patch, owner)


class NullOwnerPatchesAny(ScopeDatabase):
    """A null owner reads as "no owner check": it patches a run another pass holds."""

    def _apply_patch(self, id: str, patch: JobRunPatch, owner: str | None) -> bool:
        sql = _PATCH_ANY_OWNER if owner is None else JOB_RUN_PATCH_SQL
        return _patched(self, sql, id, patch, owner)


class CopyReplaces(ScopeDatabase):
    """A copy (a dump of another scope) replaces the scope's rows as a restore does, keeping only
    what the dump brings: the DELETEs moved out of the restore's branch."""

    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        count = super().import_dump(dump, source_scope_id, now=now)
        ids = [run.id for run in dump.runs]
        marks = ", ".join("?" for _ in ids)  # SQLite reads NOT IN () as true for every row
        with self._tx:
            self.connection.execute(
                f"DELETE FROM _substrat_job_steps WHERE run_id NOT IN ({marks})", ids
            )
            self.connection.execute(
                f"DELETE FROM _substrat_job_runs WHERE id NOT IN ({marks})", ids
            )
        return count


class ImportTrustsTheDump(ScopeDatabase):
    """An import that takes the dump's own scope_id for its source, never checking the one the
    caller named: a dump named for a scope it was not exported from is imported."""

    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        return super().import_dump(dump, dump.scope_id, now=now)


class CopySkipsHeldIds(ScopeDatabase):
    """A copy that adds only the runs the scope does not hold yet (an ``INSERT OR IGNORE``'s
    reading of a clash) instead of refusing the whole dump as a conflict."""

    def import_dump(self, dump: JobRunDump, source_scope_id: str, *, now: str) -> int:
        if dump.scope_id == self.scope_id:
            return super().import_dump(dump, source_scope_id, now=now)
        held = {row[0] for row in self.connection.execute("SELECT id FROM _substrat_job_runs")}
        fresh = attrs.evolve(
            dump,
            runs=tuple(run for run in dump.runs if run.id not in held),
            steps=tuple(step for step in dump.steps if step.run_id not in held),
        )
        return super().import_dump(fresh, source_scope_id, now=now)


#: Four minutes: under the ninth miss's 256 s, over the eighth's 128 s.
_FOUR_MINUTES_MS: Final = 240_000


class BackoffCappedAtFourMinutes(ScopeDatabase):
    """Admission backoffs capped at four minutes, where the spec caps them at 300 s: only the
    ninth miss, the largest backoff a store writes (256 s), comes out differently."""

    def miss(self, id: str, owner: str, note: str, *, now: str) -> JobMiss | None:
        missed = super().miss(id, owner, note, now=now)
        if missed is not None and not missed.failed:
            wait = min(_FOUR_MINUTES_MS, admission_backoff_ms(missed.misses))
            with self._tx:
                self.connection.execute(
                    "UPDATE _substrat_job_runs SET next_attempt_at = ? WHERE id = ?",
                    (add_ms(now, wait), id),
                )
        return missed


class JsonNullResultAsNone(ScopeDatabase):
    """A step result of the JSON text null stored as SQL NULL (a port that parsed the JSON and
    bound the value): the completed step reads as not completed."""

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
        stored = None if result == "null" else result
        return super().record_step(
            run_id, name, stored, attempts, last_error, at, owner, lease_ms, now=now
        )
