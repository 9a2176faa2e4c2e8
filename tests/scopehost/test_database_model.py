"""The store against a model: random operation sequences, compared row for row after every step.

The model is a dict of rows that re-states each statement's compare-and-set from the spec's text —
in integer milliseconds, never through SQL — so a disagreement is either a store bug or a misread
of the spec, and the shrunk failure prints as a program that can be pasted into a test.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

import attrs
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

from driver import (
    JOB_LEASE_EXPIRED_NOTE,
    JobDueKey,
    JobMiss,
    JobRunFilter,
    JobRunPatch,
    JobRunRow,
    JobStepRow,
    iso_from_ms,
    parse_iso_ms,
)

from .store_support import T0, open_db

T0_MS = parse_iso_ms(T0)
IDS = tuple(f"r{index}" for index in range(8))
OWNERS = ("o1", "o2", "o3")
INSTANCES = ("a", "b")
STEP_NAMES = ("s1", "s2")
LEASES = st.sampled_from([1, 10, 100, 1_000])
#: A run's starting miss count: often one short of the failing tenth.
MISSES = st.one_of(st.sampled_from([None, 8, 9]), st.integers(0, 9))
MARGINS = st.sampled_from([0, 0.5, 2.5, 25, 250.7])
#: Clock steps that land exactly on a lease's expiry or a margin's edge as often as beside them.
CLOCK_STEPS = st.one_of(
    st.sampled_from([0, 1, 9, 10, 99, 100, 999, 1_000, 300_000]), st.integers(0, 1_200)
)
NOTE = "model"
TIME_FIELDS = ("started_at", "updated_at", "next_attempt_at", "ended_at", "lease_began_at")


def iso(ms: int | None) -> str | None:
    return None if ms is None else iso_from_ms(T0_MS + ms)


@attrs.define
class ModelStore:
    """Rows as dicts, times as ms after ``T0``; each method is one statement group of the spec."""

    runs: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    steps: dict[tuple[str, str], dict[str, Any]] = attrs.field(factory=dict)

    def live(self, instance: str) -> dict[str, Any] | None:
        live = [
            run
            for run in self.runs.values()
            if run["instance"] == instance and run["status"] == "running"
        ]
        return max(live, key=lambda run: run["id"]) if live else None

    def claim(self, id: str, owner: str, lease: int, now: int) -> bool | None:
        run = self.runs.get(id)
        if run is None or run["status"] != "running":
            return None
        if run["next_attempt_at"] is not None and run["next_attempt_at"] > now:
            return None
        took_over = run["lease_began_at"] is not None
        run.update(lease_owner=owner, next_attempt_at=now + lease, updated_at=now)
        run["lease_began_at"] = None
        if took_over:
            run["attempts"] += 1
            run["last_error"] = JOB_LEASE_EXPIRED_NOTE
        return took_over

    def begin(self, id: str, owner: str, margin: float, now: int) -> bool:
        run = self.runs.get(id)
        if (
            run is None
            or run["status"] != "running"
            or run["lease_owner"] != owner
            or run["next_attempt_at"] is None
            or not run["next_attempt_at"] > now + math.floor(margin)
        ):
            return False
        run.update(lease_began_at=now, admission_misses=None)
        return True

    def miss(self, id: str, owner: str, now: int) -> JobMiss | None:
        run = self.runs.get(id)
        if (
            run is None
            or run["status"] != "running"
            or run["lease_owner"] != owner
            or run["lease_began_at"] is not None
        ):
            return None
        misses = (run["admission_misses"] or 0) + 1
        run.update(admission_misses=misses, updated_at=now, lease_owner=None, lease_began_at=None)
        if misses >= 10:
            run.update(
                status="failed",
                next_attempt_at=None,
                ended_at=now,
                last_error=f"lease too short for this environment: {NOTE}",
            )
            return JobMiss(misses, failed=True)
        wait = min(300_000, 1_000 * 2 ** (misses - 1))
        run.update(next_attempt_at=now + wait, ended_at=None)
        return JobMiss(misses, failed=False)

    def patch(self, id: str, values: dict[str, Any], owner: str | None) -> bool:
        run = self.runs.get(id)
        if run is None or run["status"] != "running" or run["lease_owner"] != owner:
            return False
        run.update(values, lease_owner=None, lease_began_at=None)
        return True

    def renew(self, id: str, owner: str, lease: int, now: int) -> bool:
        run = self.runs.get(id)
        if run is None or run["status"] != "running" or run["lease_owner"] != owner:
            return False
        run["next_attempt_at"] = now + lease
        return True

    def due(self, now: int, max: int) -> list[JobDueKey]:
        due = [
            run
            for run in self.runs.values()
            if run["status"] == "running"
            and (run["next_attempt_at"] is None or run["next_attempt_at"] <= now)
        ]
        due.sort(key=lambda run: (_due_at(run), run["id"]))
        return [JobDueKey(run["id"], run["module_id"], run["job"]) for run in due[:max]]


def _due_at(run: dict[str, Any]) -> int:
    due_at = run["next_attempt_at"] if run["next_attempt_at"] is not None else run["started_at"]
    return int(due_at)


def as_row(run: dict[str, Any]) -> JobRunRow:
    values: dict[str, Any] = {
        name: iso(run[name]) if name in TIME_FIELDS else run[name] for name in run
    }
    return JobRunRow(**values)


class StoreMachine(RuleBasedStateMachine):
    #: ids of inserted runs, so a rule names a run that exists far more often than not.
    runs = Bundle("runs")
    RUN_IDS = st.one_of(runs, runs, runs, st.sampled_from(IDS))
    #: (id, as_holder, owner): mostly act as the run's current lease holder, where the
    #: compare-and-sets have something to decide, else as ``owner``: a rival or a stale one.
    HOLDERS = st.tuples(
        RUN_IDS, st.sampled_from([True, True, True, False]), st.sampled_from(OWNERS)
    )

    def __init__(self) -> None:
        super().__init__()
        self.db = open_db()
        self.model = ModelStore()
        self.now = 0

    @property
    def store_now(self) -> str:
        return iso_from_ms(T0_MS + self.now)

    @initialize(
        target=runs,
        misses=st.lists(MISSES, min_size=2, max_size=2),
    )
    def two_live_runs(self, misses: list[int | None]) -> MultipleResults[str]:
        # Every example starts with a live run per key, so the rules have something to decide.
        for id, instance, count in zip(IDS, INSTANCES, misses, strict=False):
            self.start_or_join(id, instance, count)
        return multiple(*IDS[: len(INSTANCES)])

    @rule(ms=CLOCK_STEPS)
    def advance(self, ms: int) -> None:
        self.now += ms

    @rule(id=RUN_IDS, before=st.sampled_from([0, 1, 25, 26, 250, 251]))
    def advance_to_an_edge(self, id: str, before: int) -> None:
        """Step the clock to exactly ``before`` ms short of a run's lease expiry or due time: 0
        and 1 are a claim's edge, 25/26 and 250/251 BEGIN's with a margin of 25 or 250.7."""
        run = self.model.runs.get(id)
        if run is not None and run["next_attempt_at"] is not None:
            self.now = max(self.now, run["next_attempt_at"] - before)

    @rule(
        target=runs,
        id=st.sampled_from(IDS),
        instance=st.sampled_from(INSTANCES),
        misses=MISSES,
    )
    def start_a_run(self, id: str, instance: str, misses: int | None) -> MultipleResults[str]:
        inserted = self.start_or_join(id, instance, misses)
        return multiple(id) if inserted else multiple()

    def start_or_join(self, id: str, instance: str, misses: int | None) -> bool:
        run = {
            "id": id,
            "module_id": "mod",
            "job": "walk",
            "instance": instance,
            "payload": "{}",
            "subject_id": None,
            "status": "running",
            "cursor": None,
            "counters": "{}",
            "attempts": 0,
            "last_error": None,
            "started_at": self.now,
            "updated_at": self.now,
            "next_attempt_at": None,
            "ended_at": None,
            "lease_owner": None,
            "lease_began_at": None,
            "admission_misses": misses,
        }
        row = as_row(run)
        live = self.model.live(instance)
        if live is None and id in self.model.runs:
            with pytest.raises(sqlite3.IntegrityError, match=r"^UNIQUE constraint failed"):
                self.db.start_or_join(row.key, row, now=self.store_now)
            return False
        answer = self.db.start_or_join(row.key, row, now=self.store_now)
        if live is not None:
            assert answer == as_row(live)
            return False
        self.model.runs[id] = run
        assert answer == row
        return True

    def acting(self, holder: tuple[str, bool, str]) -> tuple[str, str]:
        id, as_holder, owner = holder
        run = self.model.runs.get(id)
        if as_holder and run is not None and run["lease_owner"] is not None:
            return id, run["lease_owner"]
        return id, owner

    @rule(id=RUN_IDS, owner=st.sampled_from(OWNERS), lease=LEASES)
    def claim(self, id: str, owner: str, lease: int) -> None:
        claim = self.db.claim(id, owner, lease, now=self.store_now)
        took_over = self.model.claim(id, owner, lease, self.now)
        event(f"claim: {'lost' if took_over is None else 'takeover' if took_over else 'won'}")
        if took_over is None:
            assert claim is None
            return
        assert claim is not None
        assert claim.takeover is took_over
        assert claim.run == as_row(self.model.runs[id])

    # What a drive does most: claim and at once BEGIN, or claim and miss. Composed of the same
    # compared operations, so the lease states the kernel lives in are reached in a few steps.
    @rule(
        id=RUN_IDS,
        owner=st.sampled_from(OWNERS),
        lease=LEASES,
        margin=MARGINS,
        edge=st.sampled_from([None, 0, 1]),
    )
    def claim_then_begin(
        self, id: str, owner: str, lease: int, margin: float, edge: int | None
    ) -> None:
        """``edge`` 0 waits until exactly the margin is left (BEGIN must fail), 1 until 1 ms more
        is (it must hold); None begins at once."""
        self.claim(id, owner, lease)
        run = self.model.runs.get(id)
        if edge is not None and run is not None and run["next_attempt_at"] is not None:
            self.now = max(self.now, run["next_attempt_at"] - math.floor(margin) - edge)
        self.begin((id, False, owner), margin)

    @rule(id=RUN_IDS, owner=st.sampled_from(OWNERS), lease=LEASES)
    def claim_then_miss(self, id: str, owner: str, lease: int) -> None:
        self.claim(id, owner, lease)
        self.miss((id, False, owner))

    @rule(holder=HOLDERS, margin=MARGINS)
    def begin(self, holder: tuple[str, bool, str], margin: float) -> None:
        id, owner = self.acting(holder)
        began = self.db.begin(id, owner, margin, now=self.store_now)
        event(f"begin: {began}")
        assert began is self.model.begin(id, owner, margin, self.now)

    @rule(holder=HOLDERS)
    def miss(self, holder: tuple[str, bool, str]) -> None:
        id, owner = self.acting(holder)
        missed = self.db.miss(id, owner, NOTE, now=self.store_now)
        event(f"miss: {'refused' if missed is None else 'failed' if missed.failed else 'counted'}")
        assert missed == self.model.miss(id, owner, self.now)

    @rule(
        holder=HOLDERS,
        unleased=st.sampled_from([False, False, False, True]),
        # Mostly a pass that advanced: a run settled early leaves nothing for the rest to decide.
        status=st.sampled_from(["running"] * 5 + ["done", "failed"]),
        cursor=st.sampled_from([None, '"c1"', '{"page":2}']),
        attempts=st.integers(0, 3),
        wait=st.one_of(st.none(), st.integers(0, 2_000)),
        commit=st.booleans(),
    )
    def patch(
        self,
        holder: tuple[str, bool, str],
        unleased: bool,
        status: str,
        cursor: str | None,
        attempts: int,
        wait: int | None,
        commit: bool,
    ) -> None:
        id, holding = self.acting(holder)
        # None is the owner of a coordinator from before leases: it patches unleased runs only.
        owner = None if unleased else holding
        values: dict[str, Any] = {
            "status": status,
            "cursor": cursor,
            "counters": f'{{"n":{attempts}}}',
            "attempts": attempts,
            "last_error": None if attempts == 0 else f"failed {attempts}",
            "updated_at": self.now,
            "next_attempt_at": None if wait is None else self.now + wait,
            "ended_at": None if status == "running" else self.now,
        }
        stored: dict[str, Any] = {
            name: iso(value) if name in TIME_FIELDS else value for name, value in values.items()
        }
        patch = JobRunPatch(**stored)
        if commit:
            applied = self.db.commit_pass(id, patch, owner, now=self.store_now)
        else:
            applied = self.db.patch(id, patch, owner, now=self.store_now)
        expected = self.model.patch(id, values, owner)
        event(f"{'commit' if commit else 'patch'}: {expected}")
        if expected and commit:
            for key in [key for key in self.model.steps if key[0] == id]:
                del self.model.steps[key]
        assert applied is expected

    @rule(holder=HOLDERS, name=st.sampled_from(STEP_NAMES), lease=LEASES)
    def begin_step(self, holder: tuple[str, bool, str], name: str, lease: int) -> None:
        id, owner = self.acting(holder)
        boundary = self.db.begin_step(id, name, owner, lease, now=self.store_now)
        held = self.model.renew(id, owner, lease, self.now)
        assert boundary.held is held
        step = self.model.steps.get((id, name)) if held else None
        expected = (
            None
            if step is None
            else JobStepRow(name, step["result"], step["attempts"], step["last_error"])
        )
        assert boundary.row == expected

    @rule(
        holder=HOLDERS,
        name=st.sampled_from(STEP_NAMES),
        result=st.sampled_from([None, "null", '{"x":1}']),
        attempts=st.integers(0, 4),
        lease=LEASES,
    )
    def record_step(
        self,
        holder: tuple[str, bool, str],
        name: str,
        result: str | None,
        attempts: int,
        lease: int,
    ) -> None:
        id, owner = self.acting(holder)
        last_error = "boom" if result is None else None
        held = self.db.record_step(
            id, name, result, attempts, last_error, self.store_now, owner, lease, now=self.store_now
        )
        expected = self.model.renew(id, owner, lease, self.now)
        event(f"record_step: {expected}")
        if expected:
            self.model.steps[(id, name)] = {
                "result": result,
                "attempts": attempts,
                "last_error": last_error,
                "recorded_at": self.now,
            }
        assert held is expected

    @rule(ahead=st.integers(-500, 2_000), max=st.integers(0, 5))
    def due_keys(self, ahead: int, max: int) -> None:
        # The snapshot binds the caller's now, which may be ahead of or behind the store's.
        caller_now = self.now + ahead
        keys = self.db.due_keys(iso_from_ms(T0_MS + caller_now), max, now=self.store_now)
        assert keys == self.model.due(caller_now, max)

    @rule(
        instance=st.one_of(st.none(), st.sampled_from(INSTANCES)),
        status=st.one_of(st.none(), st.sampled_from(["running", "done", "failed"])),
        limit=st.one_of(st.none(), st.integers(-1, 5), st.floats(allow_nan=True)),
    )
    def list_runs(self, instance: str | None, status: Any, limit: float | None) -> None:
        rows = self.db.list(
            JobRunFilter(instance=instance, status=status, limit=limit), now=self.store_now
        )
        runs = sorted(
            (
                run
                for run in self.model.runs.values()
                if instance in (None, run["instance"]) and status in (None, run["status"])
            ),
            key=lambda run: run["id"],
            reverse=True,
        )
        budget = (
            50 if limit is None or not math.isfinite(limit) else min(500, max(1, math.floor(limit)))
        )
        assert rows == [as_row(run) for run in runs[:budget]]

    @invariant()
    def every_row_matches_the_model(self) -> None:
        conn = self.db.connection
        runs = [
            JobRunRow.from_row(row)
            for row in conn.execute("SELECT * FROM _substrat_job_runs ORDER BY id")
        ]
        assert runs == [as_row(self.model.runs[id]) for id in sorted(self.model.runs)]
        steps = [
            tuple(row)
            for row in conn.execute(
                "SELECT run_id, step, result, attempts, last_error, recorded_at "
                "FROM _substrat_job_steps ORDER BY run_id, step"
            )
        ]
        assert steps == [
            (id, name, s["result"], s["attempts"], s["last_error"], iso(s["recorded_at"]))
            for (id, name), s in sorted(self.model.steps.items())
        ]
        assert not conn.in_transaction


StoreMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=60, deadline=None)
TestStoreAgainstModel = StoreMachine.TestCase
