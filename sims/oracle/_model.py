"""The oracle's store: the spec's SQL re-stated over dicts of rows, predicting every reply.

Theory of operation
-------------------
The model keeps, per scope, the ``_substrat_job_runs`` rows (dicts keyed by column, exactly as a
trace describes a ``JobRunRow``) and the ``_substrat_job_steps`` rows. For every store operation the
trace shows executed (``rpc.exec``, with the store's time ``store_at``), it computes from the
operation's arguments, that time and its own rows what the spec says the reply is and how the rows
change, applies the change, and hands back the prediction; the oracle compares it with the reply the
store gave. A reply that differs is a violation named after the rule the operation states.

It imports no decision code and no constant from ``driver`` or ``scopehost``: only the ISO time
spelling (a formatting helper, not a rule); its numbers are the oracle's own (``_spec``). Every
rule below is written again from the spec's doc comments, so that a bug in the store cannot hide
behind the same bug in its checker.

Where the model's rows may have drifted (after a violation, the store really did something else),
a checkpoint of the store's real rows (``world.sync``) is compared column by column and then
adopted, so one bug is reported once rather than on every later operation.
"""

from __future__ import annotations

import json
from typing import Any

from driver import iso_from_ms, parse_iso_ms

from ._erasure import erase_subject, import_rows
from ._spec import (
    ADMISSION_BACKOFF_BASE_MS,
    ADMISSION_BACKOFF_MAX_MS,
    ADMISSION_MISS_MAX,
    LEASE_EXPIRED_NOTE,
    LEASE_TOO_SHORT_NOTE,
    RUN_LIST_LIMIT,
    RUN_LIST_MAX,
)

Row = dict[str, Any]
#: The step rows of one scope, by (run id, step name).
Steps = dict[tuple[str, str], Row]

#: What the model says a store operation answers and which rule decided it.
Prediction = tuple[Any, str]


def admission_backoff(misses: int) -> int:
    """The spec's admission backoff: 1 s after the first miss, doubling, at most five minutes."""
    backoff = int(ADMISSION_BACKOFF_BASE_MS * 2 ** max(0, misses - 1))
    return min(ADMISSION_BACKOFF_MAX_MS, backoff)


def too_short_text(note: str) -> str:
    """The whole ``last_error`` of a run failed at the tenth miss: the note's prefix once."""
    prefix = LEASE_TOO_SHORT_NOTE + ": "
    return prefix + note.removeprefix(prefix)


def step_reply(row: Row | None) -> Row | None:
    if row is None:
        return None
    return {k: row[k] for k in ("step", "result", "attempts", "last_error")}


class ScopeModel:
    """One scope's tables, as the spec says they must be."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.runs: dict[str, Row] = {}
        self.steps: Steps = {}

    # -- the JobRunStore operations: each returns (reply, rule) ----------------------------------

    def start_or_join(self, now: str, key: Row, row: Row) -> Prediction:
        live = [
            r
            for r in self.runs.values()
            if r["status"] == "running"
            and (r["module_id"], r["job"], r["instance"])
            == (key["module_id"], key["job"], key["instance"])
        ]
        if live:
            return dict(max(live, key=lambda r: r["id"])), "a start against a live key joins it"
        self.runs[row["id"]] = dict(row)
        return dict(row), "a start with no live run for its key inserts the row it was handed"

    def due_keys(self, now: str, now_param: str, limit: int) -> Prediction:
        due = [
            r
            for r in self.runs.values()
            if r["status"] == "running"
            and (r["next_attempt_at"] is None or r["next_attempt_at"] <= now_param)
        ]
        due.sort(key=lambda r: (r["next_attempt_at"] or r["started_at"], r["id"]))
        reply = [{"id": r["id"], "job": r["job"], "module_id": r["module_id"]} for r in due]
        return reply[:limit], "the due read: running, next_attempt_at NULL or passed, by due-at"

    def claim(self, now: str, run_id: str, owner: str, lease_ms: int) -> Prediction:
        row = self.runs.get(run_id)
        if row is None or row["status"] != "running":
            return None, "a claim wins only a running run"
        if row["next_attempt_at"] is not None and row["next_attempt_at"] > now:
            return None, "a claim wins only a due run (next_attempt_at passed by the store's now)"
        began = row["lease_began_at"] is not None
        row["lease_owner"] = owner
        row["next_attempt_at"] = iso_from_ms(parse_iso_ms(now) + lease_ms)
        row["updated_at"] = now
        row["lease_began_at"] = None
        if began:
            row["attempts"] += 1
            row["last_error"] = LEASE_EXPIRED_NOTE
        rule = (
            "a takeover of a BEGUN lease charges one attempt with the expiry note"
            if began
            else "a claim of an unbegun or free lease charges nothing"
        )
        return {"run": dict(row), "takeover": began}, rule

    def begin(self, now: str, run_id: str, owner: str, margin_ms: float) -> Prediction:
        row = self.runs.get(run_id)
        threshold = iso_from_ms(parse_iso_ms(now) + int(margin_ms // 1))
        rule = "BEGIN writes only while its claim holds a lease running past now plus the margin"
        if (
            row is None
            or row["status"] != "running"
            or row["lease_owner"] != owner
            or row["next_attempt_at"] is None
            or not row["next_attempt_at"] > threshold
        ):
            return False, rule
        row["lease_began_at"] = now
        row["admission_misses"] = None
        return True, rule + ", and clears the admission misses"

    def miss(self, now: str, run_id: str, owner: str, note: str) -> Prediction:
        row = self.runs.get(run_id)
        if (
            row is None
            or row["status"] != "running"
            or row["lease_owner"] != owner
            or row["lease_began_at"] is not None
        ):
            return None, "a miss is written only by the unbegun holder of the lease"
        misses = (row["admission_misses"] or 0) + 1
        row.update(admission_misses=misses, updated_at=now, lease_owner=None, lease_began_at=None)
        if misses >= ADMISSION_MISS_MAX:
            row.update(status="failed", next_attempt_at=None, ended_at=now)
            row["last_error"] = too_short_text(note)
            return {"failed": True, "misses": misses}, (
                f"the {ADMISSION_MISS_MAX}th consecutive admission miss fails the run"
            )
        row["next_attempt_at"] = iso_from_ms(parse_iso_ms(now) + admission_backoff(misses))
        row["ended_at"] = None
        return {"failed": False, "misses": misses}, (
            "an admission miss adds one to the count it finds and backs off"
        )

    def patch(self, now: str, run_id: str, patch: Row, owner: str | None) -> Prediction:
        row = self.runs.get(run_id)
        if row is None or row["status"] != "running" or row["lease_owner"] != owner:
            return False, "an outcome is written only while its pass holds a running run"
        row.update(
            status=patch["status"],
            cursor=patch["cursor"],
            counters=patch["counters"],
            attempts=patch["attempts"],
            last_error=patch["last_error"],
            updated_at=patch["updated_at"],
            next_attempt_at=patch["next_attempt_at"],
            ended_at=patch["ended_at"],
            lease_owner=None,
            lease_began_at=None,
        )
        return True, "an outcome from the holder is written whole and releases the lease"

    def commit_pass(self, now: str, run_id: str, patch: Row, owner: str | None) -> Prediction:
        applied, rule = self.patch(now, run_id, patch, owner)
        if applied:
            for key in [k for k in self.steps if k[0] == run_id]:
                del self.steps[key]
            return True, rule + "; a commit drops the pass's step ledger with it"
        return False, rule + "; a refused commit keeps the ledger"

    def _renew(self, now: str, run_id: str, owner: str, lease_ms: int) -> bool:
        row = self.runs.get(run_id)
        if row is None or row["status"] != "running" or row["lease_owner"] != owner:
            return False
        row["next_attempt_at"] = iso_from_ms(parse_iso_ms(now) + lease_ms)
        return True

    def begin_step(self, now: str, run_id: str, name: str, owner: str, lease_ms: int) -> Prediction:
        if not self._renew(now, run_id, owner, lease_ms):
            return {"held": False, "row": None}, "a step boundary holds only for the lease holder"
        return {"held": True, "row": step_reply(self.steps.get((run_id, name)))}, (
            "a step boundary renews the lease to now plus the lease and reads the step's row"
        )

    def record_step(
        self,
        now: str,
        run_id: str,
        name: str,
        result: str | None,
        attempts: int,
        last_error: str | None,
        at: str,
        owner: str,
        lease_ms: int,
    ) -> Prediction:
        if not self._renew(now, run_id, owner, lease_ms):
            return False, "a step is recorded only while its pass holds a running run"
        self.steps[(run_id, name)] = {
            "run_id": run_id,
            "step": name,
            "result": result,
            "attempts": attempts,
            "last_error": last_error,
            "recorded_at": at,
        }
        return True, "a step record renews the lease and upserts the step's row"

    def list(self, now: str, filter: Row) -> Prediction:
        rows = [
            r
            for r in self.runs.values()
            if all(
                filter.get(column) is None or r[column] == filter[column]
                for column in ("module_id", "job", "instance", "status")
            )
        ]
        rows.sort(key=lambda r: r["id"], reverse=True)
        return [dict(r) for r in rows[: list_limit(filter.get("limit"))]], (
            "the operator read: every filter field narrows, newest first, its limit clamped"
        )

    def shred_subject(self, now: str, subject: str) -> Prediction:
        touched = erase_subject(self.runs, self.steps, subject, now)
        return touched, "erasure removes what every run held about the subject, once"

    def export_dump(self, now: str) -> Prediction:
        runs = [dict(self.runs[k]) for k in sorted(self.runs)]
        steps = [dict(self.steps[k]) for k in sorted(self.steps)]
        return {"runs": runs, "scope_id": self.scope, "steps": steps}, (
            "an export carries every run and step row verbatim"
        )

    def import_dump(self, now: str, dump: Row, source: str) -> Prediction:
        return import_rows(self.runs, self.steps, dump, self.scope, source, now)


def list_limit(limit: Any) -> int:
    if limit is None or isinstance(limit, bool) or not isinstance(limit, int | float):
        return RUN_LIST_LIMIT
    if limit != limit or limit in (float("inf"), float("-inf")):
        return RUN_LIST_LIMIT
    return int(min(RUN_LIST_MAX, max(1, int(limit // 1))))


#: How each operation's traced arguments map onto the model's method (the store's now first).
def predict(model: ScopeModel, op: str, now: str, args: list[Any]) -> Prediction | None:
    """The model's reply to ``op`` (None: an operation the model does not cover)."""
    if op == "start_or_join":
        return model.start_or_join(now, args[0], args[1])
    if op == "due_keys":
        return model.due_keys(now, args[0], args[1])
    if op == "claim":
        return model.claim(now, args[0], args[1], args[2])
    if op == "begin":
        return model.begin(now, args[0], args[1], args[2])
    if op == "miss":
        return model.miss(now, args[0], args[1], args[2])
    if op == "patch":
        return model.patch(now, args[0], args[1], args[2])
    if op == "commit_pass":
        return model.commit_pass(now, args[0], args[1], args[2])
    if op == "begin_step":
        return model.begin_step(now, *args[:4])
    if op == "record_step":
        return model.record_step(now, *args[:8])
    if op == "list":
        return model.list(now, args[0])
    if op == "shred_subject":
        return model.shred_subject(now, args[0])
    if op == "export_dump":
        return model.export_dump(now)
    if op == "import_dump":
        return model.import_dump(now, args[0], args[1])
    return None


def json_equal(a: str | None, b: str | None) -> bool:
    """Two JSON columns hold the same value (compact spelling aside)."""
    if a == b:
        return True
    if a is None or b is None:
        return False
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return False
