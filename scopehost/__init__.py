"""The hosted adapter: each scope a Trio actor owning one SQLite database, reached over links.

The reference reproduction of a Durable Object per scope: one message at a time (the input gate),
one transaction per store operation, the store's own clock for every lease time, and a wire whose
latency and faults a test or a simulation controls.
"""

from ._clock import DEFAULT_EPOCH_MS, Clock, StoreClock, WallClock
from ._database import ScopeDatabase
from ._describe import describe
from ._dump import JobRunDump, JobStepDumpRow, read_scope_file
from ._erasure import tombstone
from ._errors import (
    DoorHeld,
    HostClosed,
    ReplyDropped,
    RequestAbandoned,
    RequestDropped,
    ScopeDiskFailed,
    ScopeEvicted,
    ScopeFileChanged,
    ScopeFileForeign,
    ScopeFileGone,
    ScopeHostError,
    ScopeSyncFailed,
    ScopeUnavailable,
    TransportError,
    UnsyncedWrite,
)
from ._history import HistoryRecorder
from ._host import DIRECT_LINK, DatabaseFactory, ScopeHost, open_scope_host
from ._link import (
    DeliverLate,
    LegDelay,
    Link,
    LinkCall,
    LinkOutcome,
    ReplyHook,
    RequestHook,
    RequestVerdict,
    Verdict,
)
from ._network import Network, VirtualClock
from ._operations import DEFAULT_OPERATIONS, ModuleOperation
from ._recording import RecordingJobDriver
from ._sql import (
    JOB_RUN_BEGIN_SQL,
    JOB_RUN_CLAIM_SQL,
    JOB_RUN_DDL,
    JOB_RUN_DUE_SQL,
    JOB_RUN_LIVE_SQL,
    JOB_RUN_MISS_SETTLE_SQL,
    JOB_RUN_MISS_SQL,
    JOB_RUN_PATCH_SQL,
    JOB_RUN_RENEW_SQL,
    JOB_STEP_RECORD_SQL,
)
from ._stub import ScopeDoor, ScopeStub

__all__ = [
    "DEFAULT_EPOCH_MS",
    "DEFAULT_OPERATIONS",
    "DIRECT_LINK",
    "JOB_RUN_BEGIN_SQL",
    "JOB_RUN_CLAIM_SQL",
    "JOB_RUN_DDL",
    "JOB_RUN_DUE_SQL",
    "JOB_RUN_LIVE_SQL",
    "JOB_RUN_MISS_SETTLE_SQL",
    "JOB_RUN_MISS_SQL",
    "JOB_RUN_PATCH_SQL",
    "JOB_RUN_RENEW_SQL",
    "JOB_STEP_RECORD_SQL",
    "Clock",
    "DatabaseFactory",
    "DeliverLate",
    "DoorHeld",
    "HistoryRecorder",
    "HostClosed",
    "JobRunDump",
    "JobStepDumpRow",
    "LegDelay",
    "Link",
    "LinkCall",
    "LinkOutcome",
    "ModuleOperation",
    "Network",
    "RecordingJobDriver",
    "ReplyDropped",
    "ReplyHook",
    "RequestAbandoned",
    "RequestDropped",
    "RequestHook",
    "RequestVerdict",
    "ScopeDatabase",
    "ScopeDiskFailed",
    "ScopeDoor",
    "ScopeEvicted",
    "ScopeFileChanged",
    "ScopeFileForeign",
    "ScopeFileGone",
    "ScopeHost",
    "ScopeHostError",
    "ScopeStub",
    "ScopeSyncFailed",
    "ScopeUnavailable",
    "StoreClock",
    "TransportError",
    "UnsyncedWrite",
    "Verdict",
    "VirtualClock",
    "WallClock",
    "describe",
    "open_scope_host",
    "read_scope_file",
    "tombstone",
]
