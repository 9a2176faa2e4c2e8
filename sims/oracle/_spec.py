"""The spec's numbers and texts, as the oracle states them: read this beside the spec.

Every number and text the oracle's rules depend on is written here, once, from the spec (its
``export declare const`` lines) and from the platform the spec comes from (the values the design
brief lists). None is imported from ``driver``: an oracle that read ``JOB_ADMISSION_MISS_MAX`` from
the code it judges would move with a changed constant and pass it. The test
``tests/sims/test_oracle_spec.py`` holds ``driver``'s constants equal to these, so a deliberate
change to one is a change to both, and an accidental one fails the sweep and that test.
"""

from __future__ import annotations

from typing import Final

# -- the lease (spec: JOB_LEASE_MS, JOB_LEASE_MIN_MS, JOB_LEASE_ENTRY_MARGIN) ---------------------

#: A job's lease when it registers none (the platform's value; the spec leaves it a number).
LEASE_MS: Final = 900_000
#: The shortest lease a job may register: ``leaseMs`` is refused unless an integer of at least it.
LEASE_MIN_MS: Final = 100
#: The longest lease a job may register: a year.
LEASE_MAX_MS: Final = 31_536_000_000
#: The share of its lease a claim must still have left to BEGIN (the margin is the lease times it).
LEASE_ENTRY_MARGIN: Final = 0.25
#: ``last_error`` written by a claim that takes over a BEGUN lease.
LEASE_EXPIRED_NOTE: Final = (
    "interrupted: the pass holding this run stopped reporting, and its lease expired"
)

# -- admission misses (spec: JOB_ADMISSION_MISS_MAX, JOB_ADMISSION_BACKOFF_*) ---------------------

#: The consecutive miss that fails the run.
ADMISSION_MISS_MAX: Final = 10
#: The backoff after a first miss; it doubles per miss up to the maximum (the platform's value).
ADMISSION_BACKOFF_BASE_MS: Final = 1_000
ADMISSION_BACKOFF_MAX_MS: Final = 300_000
#: The prefix of ``last_error`` on a run failed by its tenth miss.
LEASE_TOO_SHORT_NOTE: Final = "lease too short for this environment"

# -- passes (spec: JOB_DEFER_MS; the platform's retry defaults) ----------------------------------

#: How long a deferred run waits before it is due again.
DEFER_MS: Final = 60_000
#: The retry policy a job or a step gets when it names none: attempts in total, and the backoff.
RETRY_MAX_ATTEMPTS: Final = 5
RETRY_BASE_DELAY_MS: Final = 1_000
RETRY_MAX_DELAY_MS: Final = 300_000

# -- reads (the platform's values) ---------------------------------------------------------------

#: Runs one drive call picks when it is given no limit.
DRIVE_LIMIT: Final = 50
#: Rows one operator read returns by default, and at most.
RUN_LIST_LIMIT: Final = 50
RUN_LIST_MAX: Final = 500

# -- erasure (the project's decision, docs/decisions.md) ------------------------------------------

#: What a running run's record says once a subject erasure stopped it.
ERASED_RUNNING_NOTE: Final = (
    "stopped by subject erasure (#37) — this run held an erased subject's data, "
    "so it cannot resume from it"
)
#: What a finished run's record says once a subject erasure redacted it.
ERASED_FINISHED_NOTE: Final = (
    "redacted by subject erasure (#37) — what this job run held about the subject is gone; "
    "that it ran, and when, is not"
)

#: ``driver``'s name for each constant above: the test that holds the two equal reads this.
DRIVER_NAMES: Final[dict[str, str]] = {
    "LEASE_MS": "JOB_LEASE_MS",
    "LEASE_MIN_MS": "JOB_LEASE_MIN_MS",
    "LEASE_MAX_MS": "JOB_LEASE_MAX_MS",
    "LEASE_ENTRY_MARGIN": "JOB_LEASE_ENTRY_MARGIN",
    "LEASE_EXPIRED_NOTE": "JOB_LEASE_EXPIRED_NOTE",
    "ADMISSION_MISS_MAX": "JOB_ADMISSION_MISS_MAX",
    "ADMISSION_BACKOFF_BASE_MS": "JOB_ADMISSION_BACKOFF_BASE_MS",
    "ADMISSION_BACKOFF_MAX_MS": "JOB_ADMISSION_BACKOFF_MAX_MS",
    "LEASE_TOO_SHORT_NOTE": "JOB_LEASE_TOO_SHORT_NOTE",
    "DEFER_MS": "JOB_DEFER_MS",
    "RETRY_MAX_ATTEMPTS": "JOB_RETRY_MAX_ATTEMPTS",
    "RETRY_BASE_DELAY_MS": "JOB_RETRY_BASE_DELAY_MS",
    "RETRY_MAX_DELAY_MS": "JOB_RETRY_MAX_DELAY_MS",
    "DRIVE_LIMIT": "JOB_DRIVE_LIMIT",
    "RUN_LIST_LIMIT": "JOB_RUN_LIST_LIMIT",
    "RUN_LIST_MAX": "JOB_RUN_LIST_MAX",
    "ERASED_RUNNING_NOTE": "JOB_ERASED_RUNNING_NOTE",
    "ERASED_FINISHED_NOTE": "JOB_ERASED_FINISHED_NOTE",
}
