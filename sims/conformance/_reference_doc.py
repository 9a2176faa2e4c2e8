"""The part of docs/conformance.md an adapter author copies from: the SQL and the refusals,
generated from the source so the page cannot drift from what the reference does.

- The SQL: every statement of ``scopehost._sql``, verbatim.
- The refusals: one request per validation rule of the store's doors (``REFUSALS``), each run
  through a fresh reference; the table shows what the reference answered (code, paths, message).
  A test holds the page equal to ``generated_reference()`` and checks that the requests reach
  every refusal the store's operations can raise.

``python -m sims.conformance.write_reference docs/conformance.md`` rewrites the generated part.
"""

from __future__ import annotations

import json
from typing import Any, Final

from scopehost import _sql

from ._wire import ReferenceStore

BEGIN_MARK: Final = (
    "<!-- generated from the source: do not edit by hand (see _reference_doc.py) -->"
)
END_MARK: Final = "<!-- end of the generated part -->"

#: The store time of every request of the table (a refusal of a bad time names its own).
DOC_NOW: Final = "2026-10-04T12:00:00.000Z"
_NOW: Final = DOC_NOW
_KEY: Final = {"module_id": "m1", "job": "walk", "instance": "default"}
_ROW: Final = {
    "id": "r01", **_KEY, "payload": "{}", "subject_id": None, "status": "running",
    "cursor": None, "counters": "{}", "attempts": 0, "last_error": None, "started_at": _NOW,
    "updated_at": _NOW, "next_attempt_at": None, "ended_at": None, "lease_owner": None,
    "lease_began_at": None, "admission_misses": None,
}  # fmt: skip
_PATCH: Final = {
    "status": "running", "cursor": None, "counters": "{}", "attempts": 0, "last_error": None,
    "updated_at": _NOW, "next_attempt_at": None, "ended_at": None,
}  # fmt: skip
_RECORD: Final = {
    "run_id": "r01", "name": "fetch", "result": '"ok"', "attempts": 1, "last_error": None,
    "at": _NOW, "owner": "o1", "lease_ms": 1000,
}  # fmt: skip
_NAN: Final = '{"x":NaN}'
_SURROGATE: Final = '"\ud800"'

#: One request per refusal: the operation, what is wrong with it, and its args (``now`` is the
#: request's time when it is not the ordinary one).
REFUSALS: Final[tuple[tuple[str, str, dict[str, Any], str], ...]] = (
    (
        "claim",
        "a store time not in the one ISO form",
        {"id": "r01", "owner": "o1", "lease_ms": 1000},
        "12:00",
    ),
    (
        "start_or_join",
        "a row of another key",
        {"key": {**_KEY, "instance": "eu"}, "row": _ROW},
        _NOW,
    ),
    (
        "start_or_join",
        "a row that is not running",
        {"key": _KEY, "row": {**_ROW, "status": "done"}},
        _NOW,
    ),
    ("start_or_join", "JSON text with NaN", {"key": _KEY, "row": {**_ROW, "payload": _NAN}}, _NOW),
    (
        "start_or_join",
        "text with a lone surrogate",
        {"key": _KEY, "row": {**_ROW, "payload": _SURROGATE}},
        _NOW,
    ),
    (
        "start_or_join",
        "a running row with an end",
        {"key": _KEY, "row": {**_ROW, "ended_at": _NOW}},
        _NOW,
    ),
    (
        "start_or_join",
        "a lease past a year",
        {
            "key": _KEY,
            "row": {**_ROW, "lease_owner": "o1", "next_attempt_at": "2027-10-05T12:00:00.000Z"},
        },
        _NOW,
    ),
    ("due_keys", "a bound not in the ISO form", {"now_param": "now", "max": 5}, _NOW),
    ("due_keys", "a negative limit", {"now_param": _NOW, "max": -1}, _NOW),
    ("due_keys", "a limit past SQLite's integers", {"now_param": _NOW, "max": 2**63}, _NOW),
    ("claim", "an empty owner", {"id": "r01", "owner": "", "lease_ms": 1000}, _NOW),
    ("claim", "a lease of 0 ms", {"id": "r01", "owner": "o1", "lease_ms": 0}, _NOW),
    (
        "claim",
        "a lease past a year",
        {"id": "r01", "owner": "o1", "lease_ms": 31_536_000_001},
        _NOW,
    ),
    (
        "claim",
        "an owner past its size cap (1 024 bytes)",
        {"id": "r01", "owner": "o" * 1_025, "lease_ms": 1000},
        _NOW,
    ),
    (
        "patch",
        "a time not in the one ISO form (next_attempt_at 'never')",
        {"id": "r01", "patch": {**_PATCH, "next_attempt_at": "never"}, "owner": None},
        _NOW,
    ),
    (
        "patch",
        "a time past the two years a write may look ahead",
        {
            "id": "r01",
            "patch": {**_PATCH, "next_attempt_at": "2099-01-01T00:00:00.000Z"},
            "owner": None,
        },
        _NOW,
    ),
    ("begin", "a negative margin", {"id": "r01", "owner": "o1", "margin_ms": -1}, _NOW),
    (
        "begin",
        "a margin past a year",
        {"id": "r01", "owner": "o1", "margin_ms": 31_536_000_001},
        _NOW,
    ),
    ("miss", "no note", {"id": "r01", "owner": "o1", "note": None}, _NOW),
    (
        "patch",
        "a status that is not a run's",
        {"id": "r01", "patch": {**_PATCH, "status": "paused"}, "owner": None},
        _NOW,
    ),
    (
        "patch",
        "negative attempts",
        {"id": "r01", "patch": {**_PATCH, "attempts": -1}, "owner": None},
        _NOW,
    ),
    (
        "commit_pass",
        "a cursor with NaN",
        {"id": "r01", "patch": {**_PATCH, "cursor": _NAN}, "owner": "o1"},
        _NOW,
    ),
    (
        "begin_step",
        "a lease of 0 ms",
        {"run_id": "r01", "name": "fetch", "owner": "o1", "lease_ms": 0},
        _NOW,
    ),
    ("record_step", "a result that is not text", {**_RECORD, "result": 5}, _NOW),
    ("record_step", "an error that is not text", {**_RECORD, "last_error": 5}, _NOW),
    ("record_step", "negative attempts", {**_RECORD, "attempts": -1}, _NOW),
    ("record_step", "a step time not in the ISO form", {**_RECORD, "at": "then"}, _NOW),
    ("record_step", "a result with NaN", {**_RECORD, "result": _NAN}, _NOW),
    ("shred_subject", "no subject", {"subject_id": ""}, _NOW),
    ("list", "a status that is not a run's", {"filter": {"status": "paused"}}, _NOW),
    ("list", "a key field that is not text", {"filter": {"job": 5}}, _NOW),
    ("list", "a limit that is not a number", {"filter": {"limit": "ten"}}, _NOW),
    ("list", "a limit past every float", {"filter": {"limit": 10**400}}, _NOW),
    (
        "import_dump",
        "a dump named for another scope",
        {"dump": {"scope_id": "x", "runs": [], "steps": []}, "source_scope_id": "y"},
        _NOW,
    ),
    (
        "import_dump",
        "a dump row with a bad status",
        {
            "dump": {"scope_id": "x", "runs": [{**_ROW, "status": "paused"}], "steps": []},
            "source_scope_id": "x",
        },
        _NOW,
    ),
)


def refusal_replies() -> list[dict[str, Any]]:
    """Each of ``REFUSALS`` answered by a fresh reference scope that holds one running run."""
    replies = []
    for op, _what, args, now in REFUSALS:
        store = ReferenceStore()
        base = {"wire": 1, "scope": "doc", "now": _NOW}
        store.call({**base, "op": "start_or_join", "args": {"key": _KEY, "row": _ROW}})
        replies.append(store.call({**base, "op": op, "now": now, "args": args}))
        store.close()
    return replies


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def generated_reference() -> str:
    """The generated part of docs/conformance.md, between its marks."""
    out = [BEGIN_MARK, "", "### The SQL, verbatim", ""]
    out.append(
        "Each statement is `scopehost._sql`'s, character for character; the workerd worker "
        "runs the same text. An adapter binds the parameters in the order the statement names "
        'them. The DDL\'s comment that the counters are "merged on each commit" speaks of the '
        "driver, which merges a pass's counts before it commits: the store writes the counters "
        "it is given, never merging (rule commit-over-counters)."
    )
    for name in sorted(name for name in dir(_sql) if name.startswith("JOB_")):
        out += ["", f"`{name}`:", "", "```sql", getattr(_sql, name).strip("\n"), "```"]
    out += ["", "### What a store refuses", ""]
    out.append(
        "One request per rule, as the reference answers it. Every refusal is `validation_failed`"
        " before anything is written; `paths` is the contract and the message is the "
        "reference's own words (`refusal-message`). Any operation refuses a `now` not in the "
        "ISO form, text holding a lone surrogate, and JSON text with NaN or Infinity or nested "
        "deeper than the store reads, in the same way."
    )
    out += ["", "| op | refused | paths | the reference's message |", "|---|---|---|---|"]
    for (op, what, _args, _now), reply in zip(REFUSALS, refusal_replies(), strict=True):
        error = reply.get("error") or {}
        paths = ", ".join(f"`{path}`" for path in error.get("paths") or []) or "none"
        message = _cell(json.dumps(error.get("message"), ensure_ascii=False)[1:-1])
        out.append(f"| `{op}` | {what} | {paths} | {message} |")
    out += ["", END_MARK]
    return "\n".join(out)


def rewrite(page: str) -> str:
    """``page`` with its generated part replaced by ``generated_reference()``."""
    head, mark, rest = page.partition(BEGIN_MARK)
    _old, end, tail = rest.partition(END_MARK)
    if not mark or not end:
        raise ValueError(
            "the page lacks the generated part's marks; add both on lines of their own"
        )
    return head + generated_reference() + tail
