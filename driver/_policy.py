"""Pure rules with numbers in them: admission backoff, list limits, lease bounds, retry backoff."""

from __future__ import annotations

import math
from typing import Protocol

from ._constants import (
    JOB_ADMISSION_BACKOFF_BASE_MS,
    JOB_ADMISSION_BACKOFF_MAX_MS,
    JOB_ADMISSION_MISS_MAX,
    JOB_LEASE_MAX_MS,
    JOB_LEASE_MIN_MS,
    JOB_LEASE_TOO_SHORT_NOTE,
    JOB_RUN_LIST_LIMIT,
    JOB_RUN_LIST_MAX,
)
from ._errors import FieldError, ValidationFailed
from ._time import add_ms
from ._values import AdmissionMissOutcome, RetryPolicy


class RandomSource(Protocol):
    """The injected random source (a ``random.Random`` does): one float in [0, 1) per call."""

    def random(self) -> float: ...


def admission_backoff_ms(misses: int) -> int:
    """How long a run waits after its ``misses``-th consecutive admission miss."""
    return min(JOB_ADMISSION_BACKOFF_MAX_MS, JOB_ADMISSION_BACKOFF_BASE_MS << max(0, misses - 1))


def admission_miss_outcome(misses: int, now: str, note: str) -> AdmissionMissOutcome:
    """What a run's ``misses``-th consecutive miss does at the store's ``now``: a backoff, or at
    ``JOB_ADMISSION_MISS_MAX`` a failure whose ``last_error`` is the whole text,
    ``f"{JOB_LEASE_TOO_SHORT_NOTE}: {note}"``. ``note`` is the drive's bare warning: this helper,
    shared by every store, writes the prefix, so no adapter can spell the text differently."""
    if misses >= JOB_ADMISSION_MISS_MAX:
        return AdmissionMissOutcome("failed", None, now, f"{JOB_LEASE_TOO_SHORT_NOTE}: {note}")
    return AdmissionMissOutcome("running", add_ms(now, admission_backoff_ms(misses)), None, None)


def job_run_list_limit(limit: float | None) -> int:
    """The operator read's row budget: None or non-finite gives the default, else clamped."""
    if limit is None or isinstance(limit, bool) or not math.isfinite(limit):
        return JOB_RUN_LIST_LIMIT
    return int(min(JOB_RUN_LIST_MAX, max(1, math.floor(limit))))


def assert_lease_ms(lease_ms: object) -> None:
    """Refuse a job's ``lease_ms`` unless it is None or an integer of at least the minimum."""
    if lease_ms is None:
        return
    if type(lease_ms) is not int or not JOB_LEASE_MIN_MS <= lease_ms <= JOB_LEASE_MAX_MS:
        raise ValidationFailed.at(
            "lease_ms",
            f"is {lease_ms!r}; a job's lease must be an integer from {JOB_LEASE_MIN_MS} to "
            f"{JOB_LEASE_MAX_MS} ms (a year), or None for the default",
        )


def assert_deadline_ms(deadline_ms: object) -> None:
    """Refuse a job's pass ``deadline_ms`` unless it is None (no deadline, as the spec has it) or
    an integer from 1 ms to ``JOB_LEASE_MAX_MS``."""
    if deadline_ms is None:
        return
    if type(deadline_ms) is not int or not 1 <= deadline_ms <= JOB_LEASE_MAX_MS:
        raise ValidationFailed.at(
            "deadline_ms",
            f"is {deadline_ms!r}; a pass deadline must be an integer from 1 to "
            f"{JOB_LEASE_MAX_MS} ms (a year), or None for no deadline",
        )


def _policy_errors(policy: RetryPolicy, path: str) -> list[FieldError]:
    errors = []
    if type(policy.max_attempts) is not int or policy.max_attempts < 1:
        errors.append(
            FieldError(
                f"{path}.max_attempts", f"is {policy.max_attempts!r}; it must be an int >= 1"
            )
        )
    for name in ("base_delay_ms", "max_delay_ms"):
        value = getattr(policy, name)
        if type(value) is not int or not 0 <= value <= JOB_LEASE_MAX_MS:
            # The bound keeps every backoff's due time a time the store can write.
            errors.append(
                FieldError(
                    f"{path}.{name}",
                    f"is {value!r}; it must be an int from 0 to {JOB_LEASE_MAX_MS} (a year)",
                )
            )
    return errors


def _not_a_policy(value: object, path: str, default: str) -> list[FieldError]:
    # Checked before any field is read: a str or a dict would otherwise fail as a bare
    # AttributeError on ``max_attempts``, naming neither the argument nor the remedy.
    if isinstance(value, RetryPolicy):
        return []
    return [FieldError(path, f"is {value!r}; pass a RetryPolicy (or leave it out for {default})")]


def resolve_retry_policy(
    job: RetryPolicy | None,
    step: RetryPolicy | None = None,
    *,
    path: str = "retry",
    step_path: str | None = None,
) -> RetryPolicy:
    """The policy a step runs under: the job's (defaults filled in), which a step may narrow and
    never widen — each number is the smaller of the two. ``step_path`` names the step's policy in
    an error (``f"{path}(step)"`` unless given)."""
    base = job if job is not None else RetryPolicy()
    errors = _not_a_policy(base, path, "the defaults") or _policy_errors(base, path)
    if step is not None:
        where = step_path if step_path is not None else f"{path}(step)"
        errors += _not_a_policy(step, where, "the job's") or _policy_errors(step, where)
    if errors:
        raise ValidationFailed(errors)
    if step is None:
        return base
    return RetryPolicy(
        max_attempts=min(base.max_attempts, step.max_attempts),
        base_delay_ms=min(base.base_delay_ms, step.base_delay_ms),
        max_delay_ms=min(base.max_delay_ms, step.max_delay_ms),
    )


def retry_backoff_ms(policy: RetryPolicy, attempts: int, rng: RandomSource) -> int:
    """The wait before the next pass after ``attempts`` consecutive failures, with jitter drawn
    from ``rng`` (none when the raw delay is 0, so a zero policy draws nothing)."""
    raw = min(policy.base_delay_ms << max(0, attempts - 1), policy.max_delay_ms)
    if raw == 0:
        return 0
    return math.floor(raw * (0.8 + 0.4 * rng.random()))
