"""What the checker knows of each pass and each run as it replays a trace."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.define
class Pass:
    """One claim's pass, as the trace shows it."""

    owner: str
    run: str
    drive: str
    scope: str
    claim_t: float
    claim_store_ms: int
    lease_ms: int
    begin_t: float | None = None
    begin_store_ms: int | None = None
    begin_delivered_t: float | None = None
    begin_reply_lost: bool = False
    invoke_t: float | None = None
    end_t: float | None = None
    crashed: bool = False
    exhausted: bool = False
    last_renewal_store_ms: int = 0
    recorded: set[str] = attrs.field(factory=set)


@attrs.define
class Run:
    """The checker's model of one run row, in one scope (an import copies a row, id and all, into
    another scope, where it is a row of its own)."""

    id: str
    #: The coalescing key, scope first: one live run per key IN EACH SCOPE.
    key: tuple[str, str, str, str]
    status: str = "running"
    owner: str | None = None
    began: bool = False
    attempts: int = 0
    misses: int = 0
    next_at: int | None = None
    ledger: set[str] = attrs.field(factory=set)
    failed_by: str | None = None
    payload: Any = None


def end_of(p: Pass, default: float) -> float:
    return p.end_t if p.end_t is not None else default
