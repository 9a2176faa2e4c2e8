"""The oracle's rules for the scope's own calls that rewrite many rows: erasure and import.

Re-stated from the spec and the project's decisions (docs/checks.md says which), over the model's
dict rows. Erasure: a run that HOLDS the subject (declares it, or its payload or cursor carries its
classified envelope) loses everything it held (payload, a non-NULL cursor, every completed step
result become the subject's tombstone; every error text, the run's and each step's, becomes the
redaction note; a running run fails); a run reached only through step results carrying the
envelope has those step rows shredded (tombstone, note) and is settled with the note, keeping its
own payload, cursor and other steps. The count is the runs touched, each once, and a
second erasure touches nothing. Import: into the scope the dump came from it is a restore (the
tables become the dump's rows); into another scope running runs arrive failed as not carried, and
a run id that already exists there refuses the whole import.
"""

from __future__ import annotations

import json
from typing import Any

from ._spec import ERASED_FINISHED_NOTE, ERASED_RUNNING_NOTE

Row = dict[str, Any]
Steps = dict[tuple[str, str], Row]

#: A predicted refusal: the store must answer with an error and write nothing.
REFUSED = "<refused>"

_REDACTED = "_substratRedacted"


def tombstone(subject: str, at: str) -> str:
    return json.dumps(
        {_REDACTED: {"reason": "subject-erasure", "subjectId": subject, "at": at}},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _parsed(text: str | None) -> tuple[bool, Any]:
    if text is None:
        return False, None
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def tombstone_of(text: str | None) -> str | None:
    """The subject a tombstone names, or None when ``text`` is not a tombstone."""
    ok, value = _parsed(text)
    if not ok or not isinstance(value, dict) or set(value) != {_REDACTED}:
        return None
    inner = value[_REDACTED]
    if not isinstance(inner, dict) or inner.get("reason") != "subject-erasure":
        return None
    subject = inner.get("subjectId")
    return subject if isinstance(subject, str) else None


def carries(text: str | None, subject: str) -> bool:
    """Whether ``text`` holds, at any depth, a classified envelope for ``subject``."""
    ok, value = _parsed(text)
    if not ok:
        return False
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if item.get("subjectId") == subject and item.get("piiClass", "none") != "none":
                return True
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _note(row: Row) -> str:
    return ERASED_RUNNING_NOTE if row["status"] == "running" else ERASED_FINISHED_NOTE


def _settle(row: Row, now: str) -> None:
    note = _note(row)
    if row["status"] == "running":
        row.update(
            status="failed",
            next_attempt_at=None,
            ended_at=now,
            lease_owner=None,
            lease_began_at=None,
        )
    row.update(last_error=note, updated_at=now)


def erase_subject(runs: dict[str, Row], steps: Steps, subject: str, now: str) -> int:
    """Apply one erasure of ``subject`` to the model's rows; the number of runs touched."""
    stone = tombstone(subject, now)
    by_run: dict[str, list[tuple[str, str]]] = {}
    for key in steps:
        by_run.setdefault(key[0], []).append(key)
    touched = 0
    for run_id in sorted(runs):
        row = runs[run_id]
        own = [steps[k] for k in by_run.get(run_id, [])]
        note = _note(row)
        holds = (
            row.get("subject_id") == subject
            or carries(row["payload"], subject)
            or carries(row["cursor"], subject)
        )
        if holds:
            if not _still_held(row, own, subject):
                continue
            row["payload"] = stone
            if row["cursor"] is not None:
                row["cursor"] = stone
            for step in own:
                if step["result"] is not None:
                    step["result"] = stone
                if step["last_error"] is not None:
                    step["last_error"] = note
            _settle(row, now)
            touched += 1
            continue
        carrying = [s for s in own if carries(s["result"], subject)]
        if not carrying:
            continue
        for step in carrying:
            step["result"] = stone
            if step["last_error"] is not None:
                step["last_error"] = note
        _settle(row, now)
        touched += 1
    return touched


def _still_held(row: Row, own: list[Row], subject: str) -> bool:
    """A run holding the subject still has something of it: a value not yet the subject's
    tombstone, or an error text (the run's or a step's) other than a redaction note."""
    values = [row["payload"], row["cursor"], *(s["result"] for s in own)]
    if any(v is not None and tombstone_of(v) != subject for v in values):
        return True
    errors = [row["last_error"], *(s["last_error"] for s in own)]
    return any(e is not None and e not in _NOTES for e in errors)


_STATUSES = ("running", "done", "failed")
#: Either redaction note: an error text erasure already wrote holds nothing more.
_NOTES = (ERASED_RUNNING_NOTE, ERASED_FINISHED_NOTE)


def not_carried(source: str) -> str:
    return (
        f"not carried: copied from scope {source} before it ran; "
        "it runs in the scope that asked for it, never in a copy"
    )


def import_rows(
    runs: dict[str, Row], steps: Steps, dump: Row, scope: str, source: str, now: str
) -> tuple[Any, str]:
    """Apply one import of ``dump`` (as the trace describes it) to the model's rows."""
    dump_runs: list[Row] = dump["runs"]
    dump_steps: list[Row] = dump["steps"]
    if any(r.get("status") not in _STATUSES for r in dump_runs):
        return REFUSED, "an import validates every row first: a bad row refuses it whole"
    if dump["scope_id"] == scope:
        runs.clear()
        steps.clear()
        for r in dump_runs:
            runs[r["id"]] = dict(r)
        for s in dump_steps:
            steps[(s["run_id"], s["step"])] = dict(s)
        return len(dump_runs), "an import into its own scope is a restore: the dump's rows replace"
    held = set(runs) | {key[0] for key in steps}
    if any(r["id"] in held for r in dump_runs):
        return REFUSED, "an import into another scope never replaces a run that exists there"
    for r in dump_runs:
        row = dict(r)
        if row["status"] == "running":
            row.update(
                status="failed",
                last_error=not_carried(source),
                updated_at=now,
                next_attempt_at=None,
                ended_at=now,
                lease_owner=None,
                lease_began_at=None,
            )
        runs[row["id"]] = row
    for s in dump_steps:
        steps[(s["run_id"], s["step"])] = dict(s)
    return len(dump_runs), "an import into another scope settles its running runs as not carried"
