"""Deliberately broken stores and kernels: each breaks ONE rule the spec states.

They exist to show that the checks notice. A check that stays green when the rule it is about is
broken proves nothing; ``python -m sims sweep random --mutant NAME`` and the tests run each of
these and expect the oracle to name the rule (``MUTANT_RULES``).

Two kinds. The first five re-implement a store method without one guard. The rest are source
ablations (``_ablation``): one fragment of the real store's or kernel's source changed, for the
length of a world — a store that is otherwise the real one, carrying the ablation as
``ablations``, which ``run_world`` applies around the world and puts back afterwards.
"""

from __future__ import annotations

from typing import ClassVar

from driver import JobRunClaim, JobRunPatch
from scopehost import ScopeDatabase

from ._ablation import Ablation


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


class _Ablated(ScopeDatabase):
    """The real store; the world runs with ``ablations`` applied to the code."""

    ablations: ClassVar[tuple[Ablation, ...]] = ()


def _ablated(name: str, doc: str, *ablations: Ablation) -> type[ScopeDatabase]:
    return type(name, (_Ablated,), {"__doc__": doc, "ablations": ablations})


_SQL = "scopehost._sql"
_PASS = "driver._pass"
_DRIVE = "driver._drive"
_POLICY = "driver._policy"

#: name -> (the mutant, the oracle check that must name it).
_ABLATIONS: dict[str, tuple[type[ScopeDatabase], str]] = {
    "claim-not-due": (
        _ablated(
            "ClaimNotDue",
            "The claim forgets its due test: a live lease can be taken.",
            Ablation(
                _SQL,
                "next_attempt_at <= ?)\\n   RETURNING *",
                "next_attempt_at <= ? OR 1)\\n   RETURNING *",
            ),
        ),
        "store-claim",
    ),
    "takeover-note": (
        _ablated(
            "TakeoverKeepsError",
            "A takeover keeps the run's old error instead of writing the expiry note.",
            Ablation(
                _SQL,
                "THEN last_error ELSE ? END",
                "THEN last_error ELSE COALESCE(last_error, ?) END",
            ),
        ),
        "store-claim",
    ),
    "begin-keeps-misses": (
        _ablated(
            "BeginKeepsMisses",
            "BEGIN no longer clears the consecutive admission misses.",
            Ablation(_SQL, "admission_misses = NULL\\n", "admission_misses = admission_misses\\n"),
        ),
        "store-",
    ),
    "miss-not-added": (
        _ablated(
            "MissNotAdded",
            "A miss writes a count of one instead of adding one to the count it finds.",
            Ablation(_SQL, "COALESCE(admission_misses, 0) + 1", "1"),
        ),
        "store-miss",
    ),
    "renew-unguarded": (
        _ablated(
            "RenewUnguarded",
            "A step boundary renews the lease whoever holds it.",
            Ablation(
                _SQL,
                "next_attempt_at = ?\\n   WHERE id = ? AND status = 'running' "
                'AND lease_owner IS ?"',
                "next_attempt_at = ?\\n   WHERE id = ? AND status = 'running' "
                'AND (lease_owner IS ? OR 1)"',
            ),
        ),
        "store-",
    ),
    "due-by-id": (
        _ablated(
            "DueById",
            "The due read orders by id, not by when each run became due.",
            Ablation(
                "scopehost._database", ') ORDER BY due_at, id LIMIT ?"', ') ORDER BY id LIMIT ?"'
            ),
        ),
        "store-due_keys",
    ),
    "join-widened": (
        _ablated(
            "JoinWidened",
            "A start joins the newest run for its key even when it has ended.",
            Ablation(
                _SQL, "AND status = 'running' ORDER BY id DESC LIMIT 1", "ORDER BY id DESC LIMIT 1"
            ),
        ),
        "store-start_or_join",
    ),
    "commit-keeps-ledger": (
        _ablated(
            "CommitKeepsLedger",
            "A commit keeps the pass's step ledger.",
            Ablation("scopehost._database", "self._conn.execute(_LEDGER_DROP_SQL, (id,))", "pass"),
        ),
        "store-",
    ),
    "miss-max-eleven": (
        _ablated(
            "MissMaxEleven",
            "The run fails at the eleventh consecutive miss, not the tenth.",
            Ablation(
                _POLICY,
                "if misses >= JOB_ADMISSION_MISS_MAX:",
                "if misses > JOB_ADMISSION_MISS_MAX:",
            ),
        ),
        "store-miss",
    ),
    "admission-backoff-flat": (
        _ablated(
            "AdmissionBackoffFlat",
            "The admission backoff no longer doubles per miss.",
            Ablation(
                _POLICY,
                "JOB_ADMISSION_BACKOFF_BASE_MS << max(0, misses - 1)",
                "JOB_ADMISSION_BACKOFF_BASE_MS",
            ),
        ),
        "store-",
    ),
    "step-policy-widened": (
        _ablated(
            "StepPolicyWidened",
            "A step's own policy may widen the job's attempts.",
            Ablation(
                _POLICY,
                "max_attempts=min(base.max_attempts, step.max_attempts)",
                "max_attempts=max(base.max_attempts, step.max_attempts)",
            ),
        ),
        "pass-outcome",
    ),
    "backoff-jitter-wide": (
        _ablated(
            "BackoffJitterWide",
            "The retry backoff's jitter runs past 1.2 of the raw delay.",
            Ablation(_POLICY, "0.8 + 0.4 * rng.random()", "0.8 + 0.8 * rng.random()"),
        ),
        "pass-outcome",
    ),
    "counters-not-merged": (
        _ablated(
            "CountersNotMerged",
            "A pass's counts are not added to the counter bag it commits.",
            Ablation(_PASS, "self._counters.get(name, 0) + by", "self._counters.get(name, 0)"),
        ),
        "pass-outcome",
    ),
    "omitted-cursor-cleared": (
        _ablated(
            "OmittedCursorCleared",
            "A pass that omits its cursor commits NULL instead of keeping the last one.",
            Ablation(_PASS, "        cursor = run.cursor\n", "        cursor = None\n"),
        ),
        "pass-outcome",
    ),
    "deferral-charges": (
        _ablated(
            "DeferralCharges",
            "A deferred pass is charged an attempt.",
            Ablation(
                _PASS,
                "            run.attempts,\n            run.last_error,",
                "            run.attempts + 1,\n            run.last_error,",
            ),
        ),
        "pass-outcome",
    ),
    "retry-limit-late": (
        _ablated(
            "RetryLimitLate",
            "A run fails one attempt after its job's max_attempts.",
            Ablation(
                _PASS,
                "if fails_run or attempts >= self._job_policy.max_attempts:",
                "if fails_run or attempts > self._job_policy.max_attempts:",
            ),
        ),
        "pass-outcome",
    ),
    "memo-ignored": (
        _ablated(
            "MemoIgnored",
            "A step whose result is committed runs its body again.",
            Ablation(_PASS, "if row is not None and row.result is not None:", "if False:"),
        ),
        "step-memo",
    ),
    "spent-step-runs": (
        _ablated(
            "SpentStepRuns",
            "A step that has used its attempts runs once more.",
            Ablation(
                _PASS, "if attempts >= policy.max_attempts:", "if attempts > policy.max_attempts:"
            ),
        ),
        "step-memo",
    ),
    "step-reuse-allowed": (
        _ablated(
            "StepReuseAllowed",
            "A second step under one name in one pass is not refused.",
            Ablation(_PASS, "if name in self._used:", "if False:"),
        ),
        "step-boundary",
    ),
    "owner-reused": (
        _ablated(
            "OwnerReused",
            "A claim's owner is the run's id, the same for every claim of the run.",
            Ablation(_DRIVE, "owner = self.mint_owner()", "owner = key.id"),
        ),
        "fresh-owner",
    ),
    "exhaustion-late": (
        _ablated(
            "ExhaustionLate",
            "A takeover that used the job's last attempt still runs the handler.",
            Ablation(
                _DRIVE,
                "if claim.takeover and run.attempts >= policy.max_attempts:",
                "if claim.takeover and run.attempts > policy.max_attempts:",
            ),
        ),
        "takeover-exhausted",
    ),
    "begin-unmeasured": (
        _ablated(
            "BeginUnmeasured",
            "The drive sends BEGIN however little of its lease its own clock says is left.",
            Ablation(_DRIVE, "if lease_ms - self.waited_ms(started) > margin_ms:", "if True:"),
        ),
        "begin-admission",
    ),
    "join-other-subject": (
        _ablated(
            "JoinOtherSubject",
            "A start under another subject joins the live run instead of being refused.",
            Ablation("driver._start", "if live.subject_id != input.subject:", "if False:"),
        ),
        "join-subject",
    ),
    "payload-unchecked": (
        _ablated(
            "PayloadUnchecked",
            "A start no longer refuses a payload that is not queue-safe.",
            Ablation(
                "driver._start",
                'errors += queue_safety_errors(input.payload, "payload", cap=_PAYLOAD_CAP)',
                "pass",
            ),
        ),
        "payload-refused",
    ),
    "due-strict": (
        _ablated(
            "DueStrict",
            "The due read leaves out a run due in the very millisecond of the read (< for <=).",
            Ablation(
                "scopehost._database",
                'next_attempt_at <= ?"',
                'next_attempt_at < ?"',
            ),
        ),
        "store-due_keys",
    ),
    "memo-raw-text": (
        _ablated(
            "MemoRawText",
            "A completed step hands the handler its memo's JSON text, not the value.",
            Ablation(_PASS, "return loads(row.result)", "return row.result"),
        ),
        "step-return",
    ),
    "lease-min-fifty": (
        _ablated(
            "LeaseMinFifty",
            "A job may register a lease from 50 ms, half the spec's minimum.",
            Ablation(
                "driver._constants", "JOB_LEASE_MIN_MS: Final = 100", "JOB_LEASE_MIN_MS: Final = 50"
            ),
        ),
        "register-lease",
    ),
    "drive-budget-ignored": (
        _ablated(
            "DriveBudgetIgnored",
            "A drive given no limit takes every runnable run of its snapshot, not the default 50.",
            Ablation(
                _DRIVE,
                'budget = JOB_DRIVE_LIMIT if limit is None else _count_option(limit, "limit")',
                'budget = JOB_DRIVE_SCAN_MAX if limit is None else _count_option(limit, "limit")',
            ),
        ),
        "drive-selection",
    ),
    "deferral-reported-as-error": (
        _ablated(
            "DeferralReportedAsError",
            "A deferred pass is reported in the drive report's errors as well as counted deferred.",
            Ablation(
                _DRIVE,
                "            tally.deferred += 1\n",
                "            tally.deferred += 1\n"
                '            tally.errors.append(JobDriveError(run.id, "deferred"))\n',
            ),
        ),
        "drive-report",
    ),
    "erasure-keeps-step-results": (
        _ablated(
            "ErasureKeepsStepResults",
            "An erasure leaves a subject's envelope in the step results of a run that holds "
            "nothing else of the subject.",
            Ablation(
                "scopehost._erasure",
                "carrying = [step for step, result, _ in steps if "
                "_text_carries(result, subject_id)]",
                "carrying: list[str] = []",
            ),
        ),
        "store-",
    ),
}

#: The oracle check each mutant must make a sweep report (a prefix of the check's name).
MUTANT_RULES: dict[str, str] = {
    "patch-owner": "no-write-after-lease-lost",
    "commit-owner": "no-write-after-lease-lost",
    "record-step-owner": "no-write-after-lease-lost",
    "begin-margin": "begin-margin",
    "takeover-charge": "attempts-charged",
    **{name: rule for name, (_, rule) in _ABLATIONS.items()},
}

MUTANTS: dict[str, type[ScopeDatabase]] = {
    "patch-owner": PatchIgnoresOwner,
    "commit-owner": CommitIgnoresOwner,
    "record-step-owner": RecordStepIgnoresOwner,
    "begin-margin": BeginIgnoresMargin,
    "takeover-charge": TakeoverChargesNothing,
    **{name: mutant for name, (mutant, _) in _ABLATIONS.items()},
}
