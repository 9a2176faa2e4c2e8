"""The numbers and names the spec and the platform behind it fix.

Kept in one module so that the kernel, the scope host and the simulator read the same value from
the same place; a second spelling of any of these would be a second source of truth.
"""

from typing import Final

#: How long a pass's lease lasts by default, from its claim and again from each step boundary.
JOB_LEASE_MS: Final = 900_000
#: The shortest ``lease_ms`` a job may register; below it the BEGIN margin is noise.
JOB_LEASE_MIN_MS: Final = 100
#: The longest ``lease_ms`` a job may register or a store may be asked for: one year. A lease's
#: expiry is a stored time, and stored times stop at the year 9999; a year-long lease keeps every
#: expiry in range for the next seven millennia, and no pass should go a year without a step.
JOB_LEASE_MAX_MS: Final = 31_536_000_000
#: The share of its lease a claim must still have left to BEGIN its pass.
JOB_LEASE_ENTRY_MARGIN: Final = 0.25
#: Consecutive admission misses after which a run fails rather than being claimed again.
JOB_ADMISSION_MISS_MAX: Final = 10
#: The wait after a first admission miss; it doubles per miss up to the maximum.
JOB_ADMISSION_BACKOFF_BASE_MS: Final = 1_000
#: The longest wait between two admission attempts.
JOB_ADMISSION_BACKOFF_MAX_MS: Final = 300_000
#: The start of ``last_error`` on a run failed for missing its admission too often.
JOB_LEASE_TOO_SHORT_NOTE: Final = "lease too short for this environment"
#: ``last_error`` of a run whose expired, begun lease a later claim took over.
JOB_LEASE_EXPIRED_NOTE: Final = (
    "interrupted: the pass holding this run stopped reporting, and its lease expired"
)
#: How long a deferred run waits before it is due again. Not an attempt.
JOB_DEFER_MS: Final = 60_000
#: When a run became due, spelled exactly as the ``_substrat_job_runs_due_at`` index spells it.
JOB_RUN_DUE_AT: Final = "COALESCE(next_attempt_at, started_at)"
#: Runs one drive picks by default, and due rows one drive examines at most.
JOB_DRIVE_LIMIT: Final = 50
JOB_DRIVE_SCAN_MAX: Final = 500
#: Rows one operator read returns by default, and at most.
JOB_RUN_LIST_LIMIT: Final = 50
JOB_RUN_LIST_MAX: Final = 500
#: The reason of the conflict raised by a second ``step()`` under one name in one pass.
JOB_STEP_REUSED: Final = "job_step_reused"
#: The reason of the conflict raised when a join names a different data subject.
JOB_SUBJECT_MISMATCH: Final = "job_subject_mismatch"
#: The reason a host's system door gives a refusal that means "not now", never "no".
SYSTEM_DOOR_WAIT: Final = "system_door_wait"

#: The deepest a JSON value a run carries (payload, cursor, step result) may nest: lists and
#: objects inside one another, at most this many levels. Deeper values are refused at the door, as
#: Python's JSON reader recurses per level and would fail to read back what was written.
JOB_JSON_MAX_DEPTH: Final = 128
#: The most digits an int in a run's JSON may have: what Python writes and reads back by default
#: (its ``int_max_str_digits``). A longer one could be neither stored nor decoded by the reader.
JOB_JSON_MAX_INT_DIGITS: Final = 4300

#: The platform's limit on one row (a Durable Object's SQLite: 2 MB per string, BLOB or row).
#: The caps below keep a run row, and a step row, under it with every column at its cap.
JOB_ROW_MAX_BYTES: Final = 2_000_000
#: The most UTF-8 bytes of each stored text: a run's payload JSON, its cursor JSON, its counters
#: JSON, a step's result JSON, an error (``last_error`` of a run or a step), and an id or name
#: (run id, module, job, instance, subject, step name, counter name, lease owner). A run row at
#: every cap is 1 000 000 + 500 000 + 100 000 + 100 000 + 6 x 1 024 + its times: under 1.71 MB.
JOB_PAYLOAD_MAX_BYTES: Final = 1_000_000
JOB_CURSOR_MAX_BYTES: Final = 500_000
JOB_COUNTERS_MAX_BYTES: Final = 100_000
JOB_STEP_RESULT_MAX_BYTES: Final = 1_000_000
JOB_ERROR_MAX_BYTES: Final = 100_000
JOB_ID_MAX_BYTES: Final = 1_024
#: How far past the store's now a written time may lie: the longest lease or backoff (a year)
#: from a writer's clock up to a year ahead of the store's. Later than that, a running run would
#: wait for ages, and every start of its key would join it.
JOB_TIME_AHEAD_MAX_MS: Final = 2 * JOB_LEASE_MAX_MS

#: Retry policy defaults: attempts in total (the first included), and the backoff curve.
JOB_RETRY_MAX_ATTEMPTS: Final = 5
JOB_RETRY_BASE_DELAY_MS: Final = 1_000
JOB_RETRY_MAX_DELAY_MS: Final = 300_000

#: What a running run's record says once a subject erasure stopped it.
JOB_ERASED_RUNNING_NOTE: Final = (
    "stopped by subject erasure (#37) — this run held an erased subject's data, "
    "so it cannot resume from it"
)
#: What a finished run's record says once a subject erasure redacted it.
JOB_ERASED_FINISHED_NOTE: Final = (
    "redacted by subject erasure (#37) — what this job run held about the subject is gone; "
    "that it ran, and when, is not"
)
#: The reason of the conflict raised when a dump copied into another scope holds a run id that
#: scope already has: a copy never replaces a run.
JOB_IMPORT_CLASH: Final = "job_import_clash"
#: The reason of the conflict raised when a drive is asked to register a job it already has.
JOB_ALREADY_REGISTERED: Final = "job_already_registered"
