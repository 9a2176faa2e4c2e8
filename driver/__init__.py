"""The job-run kernel: every decision of the spec, as async code against the ``JobRunStore`` port.

Imports no trio, sqlite3, time or random: clocks, id mints and the random source are injected.
"""

from ._constants import (
    JOB_ADMISSION_BACKOFF_BASE_MS,
    JOB_ADMISSION_BACKOFF_MAX_MS,
    JOB_ADMISSION_MISS_MAX,
    JOB_ALREADY_REGISTERED,
    JOB_DEFER_MS,
    JOB_DRIVE_LIMIT,
    JOB_DRIVE_SCAN_MAX,
    JOB_ERASED_FINISHED_NOTE,
    JOB_ERASED_RUNNING_NOTE,
    JOB_LEASE_ENTRY_MARGIN,
    JOB_LEASE_EXPIRED_NOTE,
    JOB_LEASE_MIN_MS,
    JOB_LEASE_MS,
    JOB_LEASE_TOO_SHORT_NOTE,
    JOB_RETRY_BASE_DELAY_MS,
    JOB_RETRY_MAX_ATTEMPTS,
    JOB_RETRY_MAX_DELAY_MS,
    JOB_RUN_DUE_AT,
    JOB_RUN_LIST_LIMIT,
    JOB_RUN_LIST_MAX,
    JOB_STEP_REUSED,
    JOB_SUBJECT_MISMATCH,
    SYSTEM_DOOR_WAIT,
)
from ._coordinator import DriveRandom, HostClock, JobDriver, JobHost
from ._drive import DRIVE_LOG, admission_miss_warning, run_due_job_runs
from ._errors import Conflict, FieldError, JobError, ValidationFailed
from ._ids import UlidMint
from ._json import JsonValue, assert_queue_safe, dumps, loads, round_trip
from ._operator import job_run_of
from ._pass import JobPassContext, JobPassRun, run_job_pass
from ._policy import (
    RandomSource,
    admission_backoff_ms,
    admission_miss_outcome,
    assert_lease_ms,
    job_run_list_limit,
    resolve_retry_policy,
    retry_backoff_ms,
)
from ._port import JobRunStore, Observer, SystemScope, ignore_event
from ._start import start_job_run
from ._time import add_ms, iso_from_ms, parse_iso_ms
from ._values import (
    JOB_RUN_STATUSES,
    KEEP_CURSOR,
    AdmissionMissOutcome,
    JobDriveError,
    JobDriveReport,
    JobDriveWarning,
    JobDueKey,
    JobHandler,
    JobMiss,
    JobPassOutcome,
    JobPassResult,
    JobPassStatus,
    JobRegistration,
    JobRun,
    JobRunClaim,
    JobRunFilter,
    JobRunKey,
    JobRunPatch,
    JobRunRow,
    JobRunStatus,
    JobStepBoundary,
    JobStepRow,
    RetryPolicy,
    StartJobRunInput,
)

__all__ = [name for name in dir() if not name.startswith("_")]
