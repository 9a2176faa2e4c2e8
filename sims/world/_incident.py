"""An incident's rows in a world: a scope's export, its times moved to the world's clock.

A dump from a real host holds that host's wall-clock times: when each run started, when its lease
runs out, when it is due again. A world's store clock starts elsewhere (``DEFAULT_EPOCH_MS``).
Restored as they are, a lease taken at the incident would stand for months of the world's time,
or a retry be long overdue. So every time in the dump moves by one amount, which puts the moment
of the incident at the world's now: each lease, retry and step keeps its distance from it, and the
world goes on from there. The moment of the incident is the latest time at which something
happened in the dump (a run started, was written, began a lease or ended; a step was recorded),
never a time it points to ahead (a lease's expiry, a retry's due time, ``next_attempt_at``).
"""

from __future__ import annotations

from typing import Any

import attrs

from driver import iso_from_ms, parse_iso_ms
from scopehost import JobRunDump

#: The time columns of a run row, and of a step row.
_RUN_TIMES = ("started_at", "updated_at", "next_attempt_at", "ended_at", "lease_began_at")
_STEP_TIMES = ("recorded_at",)
#: Those that say when something happened (``next_attempt_at`` says when something will).
_RUN_HAPPENED = ("started_at", "updated_at", "ended_at", "lease_began_at")


def latest_ms(dump: JobRunDump) -> int:
    """The moment of the incident, as near as the dump's rows tell: the latest time at which
    something happened in it."""
    times = [
        parse_iso_ms(value)
        for rows, columns in ((dump.runs, _RUN_HAPPENED), (dump.steps, _STEP_TIMES))
        for row in rows
        for column in columns
        if isinstance(value := getattr(row, column), str)
    ]
    if not times:
        raise ValueError(f"the dump of scope {dump.scope_id!r} holds no run: nothing to restore")
    return max(times)


def moved(dump: JobRunDump, scope_id: str, by_ms: int) -> JobRunDump:
    """``dump`` as scope ``scope_id``'s, every time in it ``by_ms`` later."""

    def move(row: Any, columns: tuple[str, ...]) -> Any:
        changes = {
            column: iso_from_ms(parse_iso_ms(value) + by_ms)
            for column in columns
            if isinstance(value := getattr(row, column), str)
        }
        return attrs.evolve(row, **changes)

    return JobRunDump(
        scope_id,
        tuple(move(run, _RUN_TIMES) for run in dump.runs),
        tuple(move(step, _STEP_TIMES) for step in dump.steps),
    )
