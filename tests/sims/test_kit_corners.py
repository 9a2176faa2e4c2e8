"""The conformance kit reaches its corners on every seed (issue 35, item 4).

(1) At the default size, every seed from 0 to 9 reaches each corner the kit aims at, by the
report's own counts (``ConformanceReport.exercised``, printed as ``boundary rules exercised``).
(2) Three one-bug adapters, each slipping on one of the corners that a default run used to reach
on some seeds only, are caught on every seed from 0 to 9, at the corner's operation and by the
corner's rule: a claim over an expired lease that never began, a due read with ``max`` 0, and the
erasure of a ``done`` run.
"""

from __future__ import annotations

from typing import Final

import pytest

from driver import JOB_LEASE_EXPIRED_NOTE, JobDueKey, JobRunClaim, JobRunRow
from scopehost import ScopeDatabase
from sims.conformance import (
    DEFAULT_EXAMPLES,
    ConformanceReport,
    LocalTarget,
    ReferenceStore,
    run_conformance,
)

SEEDS: Final = range(10)

#: The corners aimed at on every seed: the three the issue names first, then the rest of
#: docs/protocol.md's edges that a one-line change to a store could break.
CORNERS: Final = (
    "takeover-of-unbegun",
    "due-max-zero",
    "erase-done",
    "erase-finished",
    "erase-running",
    "erase-leased",
    "takeover-of-begun",
    "claim-inside-lease",
    "claim-at-expiry",
    "claim-before-expiry",
    "claim-after-expiry",
    "claim-finished",
    "begin-margin-met",
    "begin-margin-missed",
    "begin-clears-misses",
    "miss-after-begin",
    "miss-to-tenth",
    "miss-past-tenth",
    "stale-patch",
    "stale-commit_pass",
    "stale-begin_step",
    "stale-record_step",
    "holder-after-takeover",
    "due-at-next-attempt",
    "due-before-next-attempt",
    "due-tie",
    "due-skips-finished",
    "join-live",
    "join-finished",
    "join-other-subject",
    "erase-cursor-only",
    "erase-payload-only",
    "erase-step-errors",
    "erase-step-result-only",
    "erase-again",
    "restore-over-live",
    "copy-live",
    "copy-conflict",
    "restore-every-column",
    "copy-every-column",
    "commit-over-counters",
    "list-limit-boolean",
    "list-limit-below-one",
    "list-limit-fraction",
    "list-limit-past-max",
    "list-filtered",
    "list-instance",
    "door-refusals",
    "begin-margin-fraction",
    "due-tie-not-start",
    "erase-inside-nested",
)


def _run(database: type[ScopeDatabase], name: str, seed: int) -> ConformanceReport:
    target = LocalTarget(ReferenceStore(database=database), name=name)
    return run_conformance(target, examples=DEFAULT_EXAMPLES, seed=seed, shrink=False)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_corner_is_reached_at_the_default_size(seed: int) -> None:
    report = _run(ScopeDatabase, "reference", seed)
    assert report.failure is None
    assert report.difference is None, report.difference.line()
    missed = {
        corner: report.exercised[corner] for corner in CORNERS if not report.exercised[corner]
    }
    assert not missed, f"seed {seed} did not reach {sorted(missed)}"
    assert not report.unreached()
    text = "\n".join(report.lines())
    for corner in CORNERS:
        assert f"  {corner} x{report.exercised[corner]}: " in text


class ClaimChargesUnbegun(ScopeDatabase):
    """A claim that charges every takeover of an expired lease, begun or not: the port read the
    claim's CASE as ``lease_owner IS NULL`` where the spec says ``lease_began_at IS NULL``."""

    def claim(self, id: str, owner: str, lease_ms: int, *, now: str) -> JobRunClaim | None:
        before = self.connection.execute(
            "SELECT lease_owner, lease_began_at FROM _substrat_job_runs WHERE id = ?", (id,)
        ).fetchone()
        claimed = super().claim(id, owner, lease_ms, now=now)
        if claimed is None or before is None or before[0] is None or before[1] is not None:
            return claimed
        self.connection.execute(
            "UPDATE _substrat_job_runs SET attempts = attempts + 1, last_error = ? WHERE id = ?",
            (JOB_LEASE_EXPIRED_NOTE, id),
        )
        row = self.connection.execute("SELECT * FROM _substrat_job_runs WHERE id = ?", (id,))
        return JobRunClaim(JobRunRow.from_row(row.fetchone()), claimed.takeover)


class DueMaxZeroReadsAll(ScopeDatabase):
    """A due read that takes ``max`` 0 for "no limit given" (``max || 500``): it reads up to 500."""

    def due_keys(self, now_param: str, max: int, *, now: str) -> list[JobDueKey]:
        return super().due_keys(now_param, max or 500, now=now)


class ErasureFailsDone(ScopeDatabase):
    """An erasure that settles every run it touches as failed, a ``done`` one too (the port's
    settle statement lost its ``WHERE status = 'running'``'s counterpart for finished runs)."""

    def shred_subject(self, subject_id: str, *, now: str) -> int:
        done = dict(
            self.connection.execute(
                "SELECT id, last_error FROM _substrat_job_runs WHERE status = 'done'"
            ).fetchall()
        )
        touched = super().shred_subject(subject_id, now=now)
        for id, error in self.connection.execute(
            "SELECT id, last_error FROM _substrat_job_runs WHERE status = 'done'"
        ).fetchall():
            if id in done and error != done[id]:
                self.connection.execute(
                    "UPDATE _substrat_job_runs SET status = 'failed' WHERE id = ?", (id,)
                )
        return touched


#: Each slip, the operation it is in, and the rule the difference must name.
SLIPS: Final = {
    "claim-charges-unbegun": (ClaimChargesUnbegun, "claim", "rule takeover-of-unbegun"),
    "due-max-zero-reads-all": (DueMaxZeroReadsAll, "due_keys", "rule due-max-zero"),
    # The erasure's rule names each run it must touch by how it ends: a done one stays done.
    "erasure-fails-done": (ErasureFailsDone, "shred_subject", "still done, the finished note"),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", SLIPS)
def test_each_slip_is_caught_on_every_seed_by_its_rule(name: str, seed: int) -> None:
    database, op, rule = SLIPS[name]
    report = _run(database, name, seed)
    assert report.failure is None
    assert report.difference is not None, f"seed {seed} missed {name}"
    assert report.difference.op == op, report.difference.line()
    assert rule in report.difference.rule, report.difference.rule
