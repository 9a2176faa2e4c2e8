"""What the oracle's kernel model keeps: the job policies, each drive call and each pass it
follows, and the state the rule modules share (``KernelRecords``).

Every record is built from the trace alone: a registration, a drive call's budget, the row a claim
returned, what the handler asked for. Nothing here is read from the kernel's own state.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import attrs

from ._spec import RETRY_BASE_DELAY_MS, RETRY_MAX_ATTEMPTS, RETRY_MAX_DELAY_MS

Row = dict[str, Any]
Report = Callable[[str, str | None, float, str], None]
Probe = Callable[[str], None]


class AnyText:
    """A prediction of SOME error text, whose words the spec leaves to the kernel: the message of
    a failure the kernel itself raises (a step never awaited, a cursor that is not queue-safe, a
    reused step name, a spent step whose ledger kept no error). The spec still determines that the
    text is there: a failed pass writes its error (docs/protocol.md, "How a pass ends")."""

    def __repr__(self) -> str:
        return "(any error text)"


#: The one ``AnyText``: a predicted ``last_error`` that must be a text, whatever its words.
ANY_TEXT = AnyText()


@attrs.frozen
class Policy:
    max_attempts: int = RETRY_MAX_ATTEMPTS
    base_delay_ms: int = RETRY_BASE_DELAY_MS
    max_delay_ms: int = RETRY_MAX_DELAY_MS

    @classmethod
    def of(cls, described: Row | None) -> Policy:
        if described is None:
            return cls()
        return cls(described["max_attempts"], described["base_delay_ms"], described["max_delay_ms"])

    def narrowed(self, step: Row | None) -> Policy:
        """A step's own policy may narrow the job's, never widen it: each number the smaller."""
        if step is None:
            return self
        other = Policy.of(step)
        return Policy(
            min(self.max_attempts, other.max_attempts),
            min(self.base_delay_ms, other.base_delay_ms),
            min(self.max_delay_ms, other.max_delay_ms),
        )

    def window(self, attempts: int) -> tuple[int, int]:
        """The backoff after ``attempts`` consecutive failures: raw, jittered by 0.8 to 1.2."""
        raw = min(self.base_delay_ms * 2 ** max(0, attempts - 1), self.max_delay_ms)
        if raw == 0:
            return 0, 0
        return math.floor(raw * 0.8), math.floor(raw * 1.2)


@attrs.define
class StepModel:
    name: str
    policy: Policy
    boundary_sent: bool = False
    boundary: Row | None = None
    may_run: bool = False
    attempt: int = 0
    ran: bool = False
    error: str | None = None
    door: bool = False
    value: Any = None
    has_value: bool = False
    record_expected: bool = False
    #: The kernel must refuse this step without touching the store (a reused name, or a pass
    #: already stopped).
    refused: bool = False


@attrs.define
class Failure:
    error: str | None
    policy: Policy
    fails_run: bool


@attrs.define
class PassModel:
    owner: str
    run: str
    drive: str
    scope: str
    lease_ms: int
    job: Policy
    tick: TickModel | None
    claim_sent_t: float
    row: Row | None = None
    takeover: bool = False
    claim_delivered_t: float | None = None
    begun: bool = False
    handler: bool = False
    used: set[str] = attrs.field(factory=set)
    lost: bool = False
    spent: str | None = None
    failure: Failure | None = None
    step: StepModel | None = None
    counts: dict[str, float] = attrs.field(factory=dict)
    expected: Row | None = None
    outcome: str | None = None
    exhausted: bool = False
    ended: bool = False
    begin_refused: bool = False
    #: The ``last_error`` this pass's outcome write carried, and the warning its miss sent.
    written_error: str | None = None
    miss_warning: str | None = None


@attrs.define
class TickModel:
    drive: str
    scope: str
    max_passes: int
    limit: int
    picked: list[str] | None = None
    claimed: list[str] = attrs.field(factory=list)
    outcomes: dict[str, int] = attrs.field(factory=dict)
    runs_attempted: set[str] = attrs.field(factory=set)
    runs_won: set[str] = attrs.field(factory=set)
    passes: dict[str, int] = attrs.field(factory=dict)
    last_status: dict[str, str] = attrs.field(factory=dict)
    #: The call was given no ``limit``: the default budget is the one that binds.
    default_limit: bool = False
    #: The snapshot held more runnable runs than the budget: the runs past it are the next call's.
    bound: bool = False
    #: The report's entries, predicted in the order the call met them: each run it left retrying
    #: or failed with the error written on its record (None: a call of the pass that raised,
    #: whose text the transport decides), and each admission miss's warning.
    errors: list[tuple[str, str | None]] = attrs.field(factory=list)
    warnings: list[tuple[str, str]] = attrs.field(factory=list)

    def tally(self, status: str) -> None:
        self.outcomes[status] = self.outcomes.get(status, 0) + 1


def counters_of(text: str | None) -> dict[str, float] | None:
    """A stored counters text as a dict, or None when it is not a JSON object."""
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class KernelRecords:
    """The kernel model's state, shared by its rule modules (drive, starts, steps, outcomes)."""

    def __init__(self, report: Report, probe: Probe) -> None:
        self.report = report
        self.probe = probe
        self.jobs: dict[tuple[str, str, str], tuple[Policy, int]] = {}
        self.passes: dict[str, PassModel] = {}
        self.ticks: dict[tuple[str, str], TickModel] = {}
        self.owners: set[str] = set()
        self.current: dict[tuple[str, str], PassModel] = {}
        self.starts: dict[tuple[str, str], Row] = {}
        #: Each run's (module_id, job), kept by the oracle from the store's rows.
        self.run_keys: dict[str, tuple[str, str]] = {}

    def _pass_of(self, e: Row) -> PassModel | None:
        """The pass whose handler is running for the event's drive and run."""
        return self.current.get((e["drive"], e["run"]))
