"""Boundary moves: histories aimed at the edges of the protocol, where adapters go wrong.

A random move (``_history``) rarely lines two owners up on one lease, or a read up on a due time to
the millisecond. Each move here sets up the state its rule needs — a run leased by one owner, a
pass that BEGAN, a run backing off — reading the run's status, owner, lease expiry,
``lease_began_at``, misses and due time from the reference's tables as the history stands (the
``View``), and then makes the one request that sits on the edge. When the request really sits on
its edge, the move counts the rule as exercised (``View.exercised``, counted as the request is
made), so a kit run can say which rules it compared and how often.

Each rule is named in ``RULES`` with the sentence the report and docs/conformance.md use. The
first option of every choice is the sharpest edge, so a shrunk history keeps the boundary.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator
from typing import Any, Final

from driver import parse_iso_ms

from ._history import _NOTE, Builder, Choices, Step, View, _iso, _step
from ._reference_doc import DOC_NOW, REFUSALS

#: Every boundary rule a move may exercise: its name and what it holds the target to.
RULES: Final = {
    "claim-inside-lease": "a second owner claims a run whose lease is still running: null",
    "claim-at-expiry": "a second owner claims at the lease's expiry, to the millisecond: it wins",
    "claim-before-expiry": "a second owner claims 1 ms before the lease's expiry: null",
    "claim-after-expiry": "a second owner claims 1 ms after the lease's expiry: it wins",
    "takeover-of-begun": "a claim over an expired lease whose pass BEGAN: takeover, an attempt",
    "begin-margin-met": "BEGIN with floor(margin) + 1 ms of the lease left: it writes",
    "begin-margin-missed": "BEGIN with exactly floor(margin) ms of the lease left: it does not",
    "stale-patch": "the owner a takeover displaced patches the run: refused (false)",
    "stale-commit_pass": "the owner a takeover displaced commits: refused, the ledger kept",
    "stale-begin_step": "the owner a takeover displaced reaches a step: not held, no renewal",
    "stale-record_step": "the owner a takeover displaced records a step: refused, nothing kept",
    "holder-after-takeover": "the owner that took the run over records a step and ends its pass",
    "miss-to-tenth": "admission misses up to the tenth, which fails the run",
    "miss-past-tenth": "a claim and a miss after the tenth: the failed run is not claimed",
    "due-at-next-attempt": "a due read bound at a run's next_attempt_at exactly: the run is due",
    "due-before-next-attempt": "a due read bound 1 ms before a run's next_attempt_at: not due",
    "join-live": "a start of a key with a live run: the live run, nothing inserted",
    "join-finished": "a start of a key whose runs all finished: a new run inserted",
    "join-other-subject": "a start of a live key for another subject: the live run still",
    "erase-leased": "erasure of a subject whose run is leased: settled failed, lease cleared",
    "restore-over-live": "a restore into a scope with a leased run: the dump's rows, running",
    "copy-live": "a copy of running runs into another scope: each failed as not carried",
    "list-limit-boolean": "a list over four rows or more with a limit of true or false: 50",
    "list-limit-below-one": "a list over several rows with a limit of 0, -1 or 0.5: one row",
    "list-limit-fraction": "a list over several rows with a limit of 2.5 or 1.5: floored",
    "list-limit-past-max": "a list with a limit of 501 or 1e9: clamped to 500",
    "list-filtered": "a list filtered by module and status over several rows: newest id first",
    "begin-clears-misses": "BEGIN on a run with admission misses: the misses cleared",
    "erase-cursor-only": "erasure of a subject only in a run's cursor: the run touched",
    "erase-payload-only": "erasure of a subject only in a run's payload: the run touched",
    "erase-step-errors": "erasure of a declared subject whose step rows carry errors: noted",
    "erase-step-result-only": "erasure of a subject only in a step result: that step shredded",
    "erase-finished": "erasure of a finished run's subject: its status kept, its note written",
    "restore-every-column": "a restore of rows with every column set: each column as exported",
    "copy-every-column": "a copy of rows with every column set: carried, running ones failed",
    "commit-over-counters": "a commit over counters already stored: the given ones, not merged",
    "due-tie": "runs due at the same time: due order, then id, cut by the limit",
    "list-instance": "a list filtered by instance over runs of two instances: those only",
    "door-refusals": "each request of the refusal table below: the same code and paths",
    "takeover-of-unbegun": "a claim over an expired lease that never BEGAN: no takeover, no charge",
    "due-max-zero": "a due read with max 0 over due runs: no keys",
    "due-skips-finished": "a due read over finished runs with no next_attempt_at: not due",
    "claim-finished": "a claim of a done run: null",
    "miss-after-begin": "a miss by the owner whose pass BEGAN: null, nothing written",
    "erase-done": "erasure of a done run's subject: still done, its note written",
    "erase-running": "erasure of a subject whose running run holds no lease: settled failed",
    "erase-again": "a second erasure of the same subject: nothing touched, 0",
    "copy-conflict": "a copy into a scope that already holds one of its ids: conflict",
    "erase-inside-list": "erasure of a subject only inside a JSON array: that value shredded",
    "list-id-not-start": "a list where a newer id started earlier: newest id first, not by start",
    "restore-earlier-dump": "a restore of an earlier export over rows since: the dump's rows only",
    "copy-beside-held": "a copy into a scope holding runs and steps of its own: added beside them",
    "import-wrong-source": "an import naming a source the dump did not come from: refused",
    "patch-null-owner": "a patch or commit with a null owner: applies to an unleased run only",
    "step-result-json-null": "a step recorded with the JSON text null: kept as text, completed",
    "miss-largest-backoff": "the ninth miss: the largest backoff, 256 s (the tenth fails the run)",
    "begin-margin-fraction": "a margin of x.5 or x.75, floor(margin) + 1 ms left: BEGIN writes",
    "due-tie-not-start": "runs due at the same time, the lower id started later: by id, not start",
    "erase-inside-nested": "erasure of a subject in an array in an array, or an object in an array",
}

_SHORT_LEASES: Final = (1_002, 1_003, 1_000, 1_001, 100)
_MARGIN_LEASES: Final = (1_002, 1_003, 1_001, 1_000, 4_002, 100)
_SUBJECT_PAYLOADS: Final = ('{"who":{"subjectId":"s1","piiClass":"email"}}', "{}")

Made = Generator[Step, None, Any]


def _running(view: View, scope: str = "a") -> list[dict[str, Any]]:
    return [run for run in view.runs(scope) if run["status"] == "running"]


def _expiry_ms(run: dict[str, Any] | None) -> int | None:
    if run is None or run.get("next_attempt_at") is None:
        return None
    return parse_iso_ms(run["next_attempt_at"])


def _row(id: str, key: tuple[str, str, str], now: str, **more: Any) -> dict[str, Any]:
    module_id, job, instance = key
    row = {
        "id": id,
        "module_id": module_id,
        "job": job,
        "instance": instance,
        "payload": "{}",
        "subject_id": None,
        "status": "running",
        "cursor": None,
        "counters": "{}",
        "attempts": 0,
        "last_error": None,
        "started_at": now,
        "updated_at": now,
        "next_attempt_at": None,
        "ended_at": None,
        "lease_owner": None,
        "lease_began_at": None,
        "admission_misses": None,
    }
    row.update(more)
    return row


def _start(view: View, key: tuple[str, str, str], **more: Any) -> Step:
    now = _iso(view.now_ms)
    module_id, job, instance = key
    args = {
        "key": {"module_id": module_id, "job": job, "instance": instance},
        "row": _row(view.mint_run(), key, now, **more),
    }
    return _step("start_or_join", now, args)


def _new_run(view: View, **more: Any) -> Made:
    """Start a run of a key of its own (so it joins nothing); its id."""
    step = _start(view, ("m1", "walk", f"k{view.runs_minted + 1:02d}"), **more)
    yield step
    return str(step["args"]["row"]["id"])


def _held(
    draw: Choices, view: View, *, begin: bool, leases: tuple[int, ...] = _SHORT_LEASES
) -> Made:
    """A run leased (and, with ``begin``, begun) by a new owner at the current time: an existing
    run that is due now, or a new one. Returns (id, owner, lease_ms, claimed at ms)."""
    due = [
        run["id"]
        for run in _running(view)
        if (_expiry_ms(run) or 0) <= view.now_ms and run.get("admission_misses") is None
    ]
    if due and draw.rarely(3):
        id = str(draw.pick(due))
    else:
        id = yield from _new_run(view, **_subject(draw))
    lease_ms = draw.pick(leases)
    owner = view.mint_owner(lease_ms)
    claimed_at = view.now_ms
    yield _step("claim", _iso(claimed_at), {"id": id, "owner": owner, "lease_ms": lease_ms})
    if begin:
        yield _step(
            "begin", _iso(claimed_at), {"id": id, "owner": owner, "margin_ms": lease_ms * 0.25}
        )
    return id, owner, lease_ms, claimed_at


def _subject(draw: Choices) -> dict[str, Any]:
    if draw.rarely(3):
        return {"subject_id": "s1", "payload": draw.pick(_SUBJECT_PAYLOADS)}
    return {}


def _leased_to(view: View, id: str, owner: str) -> int | None:
    """The lease's expiry when ``owner`` holds run ``id`` now, else None."""
    run = view.run(id)
    if run is None or run["status"] != "running" or run.get("lease_owner") != owner:
        return None
    return _expiry_ms(run)


def _begin_at_edge(view: View, id: str, owner: str, lease_ms: int, *, met: bool) -> Step | None:
    """BEGIN with the margin just met (floor(margin) + 1 ms of the lease left) or just missed
    (floor(margin) ms left); None when the run is no longer ``owner``'s to begin."""
    expiry = _leased_to(view, id, owner)
    if expiry is None:
        return None
    margin = lease_ms * 0.25
    left = math.floor(margin) + (1 if met else 0)
    if expiry - left < view.now_ms:
        return None
    view.now_ms = expiry - left
    view.exercised["begin-margin-met" if met else "begin-margin-missed"] += 1
    if met and margin - math.floor(margin) >= 0.5:
        # Here a margin rounded, not floored, asks 1 ms more (x.5 half up, or to even for odd x).
        view.exercised["begin-margin-fraction"] += 1
    return _step("begin", _iso(view.now_ms), {"id": id, "owner": owner, "margin_ms": margin})


def lease_story(draw: Choices, view: View) -> Iterator[Step]:
    """One lease from claim to takeover, on its edges: a pass claims and BEGINs with the margin
    just met (or at once), maybe records a step; rivals claim inside the lease and 1 ms before
    its expiry (both null), then at the expiry or 1 ms after (a takeover); the displaced owner
    then writes all it could (patch, commit, step boundary, step record: each refused), and the
    new holder writes."""
    id, owner, lease_ms, claimed_at = yield from _held(
        draw, view, begin=False, leases=_MARGIN_LEASES
    )
    if draw.rarely(3):
        margin = lease_ms * 0.25
        yield _step("begin", _iso(view.now_ms), {"id": id, "owner": owner, "margin_ms": margin})
    else:
        begin = _begin_at_edge(view, id, owner, lease_ms, met=True)
        if begin is not None:
            yield begin
    if draw.coin():
        yield _write("record_step", draw, view, id, owner, lease_ms)
    expiry = _leased_to(view, id, owner)
    if expiry is None:
        return
    inside = max(view.now_ms, claimed_at + draw.pick((1, lease_ms // 2, 0)))
    last = draw.pick(("at", "after"))
    for where, at in (
        ("inside", min(inside, expiry - 2)),
        ("before", expiry - 1),
        (last, expiry + (0 if last == "at" else 1)),
    ):
        if at < view.now_ms:
            continue
        view.now_ms = at
        began = view.run(id) or {}
        rival = view.mint_owner(draw.pick(_SHORT_LEASES))
        rule = {"inside": "claim-inside-lease", "at": "claim-at-expiry"}
        view.exercised[rule.get(where, f"claim-{where}-expiry")] += 1
        if where in ("at", "after") and began.get("lease_began_at") is not None:
            view.exercised["takeover-of-begun"] += 1
        yield _step("claim", _iso(at), {"id": id, "owner": rival, "lease_ms": view.lease_of[rival]})
    holder = (view.run(id) or {}).get("lease_owner")
    if holder is None or holder == owner:
        return
    first = draw.number(0, len(_WRITES) - 1)
    for op in _WRITES[first:] + _WRITES[:first]:
        view.now_ms += draw.pick((0, 1))
        view.exercised[f"stale-{op}"] += 1
        yield _write(op, draw, view, id, owner, lease_ms)
    if not draw.rarely(3):
        # The new holder finishes its pass: a step, then its outcome (the ledger then goes).
        holder_lease = view.lease_of.get(holder, 1_000)
        view.exercised["holder-after-takeover"] += 1
        yield _write("record_step", draw, view, id, holder, holder_lease)
        yield _write(draw.pick(("commit_pass", "patch")), draw, view, id, holder, holder_lease)


_STEP_NAMES: Final = ("fetch", "store")
_WRITES: Final = ("patch", "commit_pass", "begin_step", "record_step")


def _write(op: str, draw: Choices, view: View, id: str, owner: str, lease_ms: int) -> Step:
    now = _iso(view.now_ms)
    if op in ("patch", "commit_pass"):
        done = draw.coin()
        patch = {
            "status": "done" if done else "running",
            "cursor": draw.pick(('"page-2"', None)),
            "counters": '{"walked":2}',
            "attempts": 0,
            "last_error": None,
            "updated_at": now,
            "next_attempt_at": None if done else _iso(view.now_ms + 1_000),
            "ended_at": now if done else None,
        }
        return _step(op, now, {"id": id, "patch": patch, "owner": owner})
    name = draw.pick(_STEP_NAMES)
    if op == "begin_step":
        return _step(op, now, {"run_id": id, "name": name, "owner": owner, "lease_ms": lease_ms})
    args = {
        "run_id": id,
        "name": name,
        "result": draw.pick(('"ok"', None)),
        "attempts": 1,
        "last_error": None,
        "at": now,
        "owner": owner,
        "lease_ms": lease_ms,
    }
    return _step(op, now, args)


def misses_to_the_tenth(draw: Choices, view: View) -> Iterator[Step]:
    """A new run claimed and missed at each backoff's end, up to the tenth miss and past it; the
    first claim's BEGIN comes with its margin just missed."""
    id = yield from _new_run(view)
    lease_ms = draw.pick(_MARGIN_LEASES)
    for n in range(1, draw.pick((11, 10, 12)) + 1):
        run = view.run(id)
        due = _expiry_ms(run)
        if due is not None:
            view.now_ms = max(view.now_ms, due)
        owner = view.mint_owner(lease_ms)
        yield _step("claim", _iso(view.now_ms), {"id": id, "owner": owner, "lease_ms": lease_ms})
        if n == 1:
            # The pass came back with too little of its lease left: BEGIN refuses, it misses.
            begin = _begin_at_edge(view, id, owner, lease_ms, met=False)
            if begin is not None:
                yield begin
        now = _iso(view.now_ms)
        if n == 9:
            # 2^8 s: the doubling's largest, since the tenth fails the run before the 300 s cap.
            view.exercised["miss-largest-backoff"] += 1
        elif n == 10:
            view.exercised["miss-to-tenth"] += 1
        elif n > 10:
            view.exercised["miss-past-tenth"] += 1
        yield _step("miss", now, {"id": id, "owner": owner, "note": _NOTE.format(n=n)})


def due_read_at_next_attempt(draw: Choices, view: View) -> Iterator[Step]:
    """A due read bound exactly at a running run's next_attempt_at, or 1 ms before it."""
    waiting = [run for run in _running(view) if run.get("next_attempt_at") is not None]
    if not waiting or draw.rarely(3):
        yield from _held(draw, view, begin=draw.coin())
        waiting = [run for run in _running(view) if run.get("next_attempt_at") is not None]
        if not waiting:
            return
    due = _expiry_ms(draw.pick(waiting))
    assert due is not None
    for exact in (True, False):
        bound = due if exact else due - 1
        view.exercised["due-at-next-attempt" if exact else "due-before-next-attempt"] += 1
        args = {"now_param": _iso(bound), "max": draw.pick((500, 1, 2))}
        yield _step("due_keys", _iso(view.now_ms), args)


def joins(draw: Choices, view: View) -> Iterator[Step]:
    """Starts of a key with a live run (the same subject, then another), and of a key whose runs
    all finished."""
    live = _running(view)
    if live and draw.rarely(3):
        run: dict[str, Any] | None = draw.pick(live)
    else:
        id = yield from _new_run(view, subject_id=draw.pick((None, "s1")))
        run = view.run(id)
    if run is None:
        return
    key = (run["module_id"], run["job"], run["instance"])
    view.exercised["join-live"] += 1
    yield _start(view, key, subject_id=run.get("subject_id"))
    view.exercised["join-other-subject"] += 1
    yield _start(view, key, subject_id="s2" if run.get("subject_id") != "s2" else "s1")
    id, owner, _lease, _at = yield from _held(draw, view, begin=True)
    yield _write_done(view, id, owner, status=draw.pick(("done", "failed")))
    finished = view.run(id)
    if finished is None or finished["status"] == "running":
        return
    view.exercised["join-finished"] += 1
    yield _start(view, (finished["module_id"], finished["job"], finished["instance"]))


def _write_done(view: View, id: str, owner: str, *, status: str) -> Step:
    now = _iso(view.now_ms)
    patch = {
        "status": status,
        "cursor": None,
        "counters": "{}",
        "attempts": 0,
        "last_error": "boom" if status == "failed" else None,
        "updated_at": now,
        "next_attempt_at": None,
        "ended_at": now,
    }
    return _step("commit_pass", now, {"id": id, "patch": patch, "owner": owner})


def erase_leased(draw: Choices, view: View) -> Iterator[Step]:
    """Erasure of the subject of a run that a pass holds (begun or not)."""
    id = yield from _new_run(view, subject_id="s1", payload=draw.pick(_SUBJECT_PAYLOADS))
    lease_ms = draw.pick(_SHORT_LEASES)
    owner = view.mint_owner(lease_ms)
    now = _iso(view.now_ms)
    yield _step("claim", now, {"id": id, "owner": owner, "lease_ms": lease_ms})
    how = draw.pick(("at once", "missed", "not"))
    if how == "at once":
        yield _step("begin", now, {"id": id, "owner": owner, "margin_ms": lease_ms * 0.25})
    elif how == "missed":
        begin = _begin_at_edge(view, id, owner, lease_ms, met=False)
        if begin is not None:
            yield begin
            now = begin["now"]
    if _leased_to(view, id, owner) is None:
        return
    view.exercised["erase-leased"] += 1
    yield _step("shred_subject", now, {"subject_id": "s1"})


def imports_over_live(draw: Choices, view: View) -> Iterator[Step]:
    """A restore into a scope that holds a leased run, or a copy of running runs elsewhere."""
    id, owner, _lease, _at = yield from _held(draw, view, begin=draw.coin())
    if _leased_to(view, id, owner) is None:
        return
    now = _iso(view.now_ms)
    restore = _step("import_dump", now, {"dump_of": "a", "source": "a"})
    copy = _step("import_dump", now, {"dump_of": "a", "source": "a"}, scope="b")
    for step in (restore, copy) if draw.coin() else (copy, restore):
        view.exercised["restore-over-live" if step["scope"] == "a" else "copy-live"] += 1
        yield step


# The rules below reach what the random moves reach too seldom for a one-rule slip to show on
# every seed: odd list limits over several rows, BEGIN over misses, erasure of each way a run
# holds a subject, imports of rows with every column set, commits over stored counters, ties.

_ENVELOPE: Final = '{"subjectId":"s1","piiClass":"email","n":"Ann"}'
_ODD_LIMITS: Final = (
    ("list-limit-boolean", True),
    ("list-limit-below-one", 0),
    ("list-limit-fraction", 2.5),
    ("list-limit-boolean", False),
    ("list-limit-below-one", -1),
    ("list-limit-fraction", 1.5),
    ("list-limit-below-one", 0.5),
    ("list-limit-past-max", 501),
    ("list-limit-past-max", 1e9),
)


def _commit(view: View, id: str, owner: str | None, op: str = "commit_pass", **more: Any) -> Step:
    """The holder's outcome at the current time: running and due at once unless ``more`` says
    otherwise."""
    now = _iso(view.now_ms)
    patch = {
        "status": "running",
        "cursor": None,
        "counters": "{}",
        "attempts": 0,
        "last_error": None,
        "updated_at": now,
        "next_attempt_at": None,
        "ended_at": None,
    }
    patch.update(more)
    if patch["status"] != "running":
        patch["ended_at"] = now
    return _step(op, now, {"id": id, "patch": patch, "owner": owner})


def _begun(view: View, id: str, lease_ms: int = 60_000) -> Made:
    """Claim ``id`` now and BEGIN at once; the new owner."""
    owner = view.mint_owner(lease_ms)
    now = _iso(view.now_ms)
    yield _step("claim", now, {"id": id, "owner": owner, "lease_ms": lease_ms})
    yield _step("begin", now, {"id": id, "owner": owner, "margin_ms": lease_ms * 0.25})
    return owner


def _record(view: View, id: str, owner: str, name: str, result: Any, error: Any) -> Step:
    now = _iso(view.now_ms)
    args = {
        "run_id": id,
        "name": name,
        "result": result,
        "attempts": 2 if error else 1,
        "last_error": error,
        "at": now,
        "owner": owner,
        "lease_ms": view.lease_of.get(owner, 60_000),
    }
    return _step("record_step", now, args)


def unbegun_takeover(draw: Choices, view: View) -> Iterator[Step]:
    """A lease that never BEGAN (its holder reached a step boundary, or its BEGIN came with the
    margin just missed, or it sent none) expires and a rival claims it at the expiry or 1 ms
    after: no takeover, no attempt, the last error kept; the rival's pass then begins and ends."""
    id = yield from _new_run(view, last_error=draw.pick((None, "boom")), attempts=draw.pick((0, 1)))
    lease_ms = draw.pick(_MARGIN_LEASES)
    owner = view.mint_owner(lease_ms)
    yield _step("claim", _iso(view.now_ms), {"id": id, "owner": owner, "lease_ms": lease_ms})
    how = draw.pick(("missed", "step", "none"))
    if how == "missed":
        begin = _begin_at_edge(view, id, owner, lease_ms, met=False)
        if begin is not None:
            yield begin
    elif how == "step":
        yield _write("begin_step", draw, view, id, owner, lease_ms)
    run = view.run(id)
    expiry = _leased_to(view, id, owner)
    if run is None or expiry is None or run.get("lease_began_at") is not None:
        return
    view.now_ms = max(view.now_ms, expiry + draw.pick((0, 1)))
    rival_lease = draw.pick(_SHORT_LEASES)
    rival = view.mint_owner(rival_lease)
    view.exercised["takeover-of-unbegun"] += 1
    yield _step("claim", _iso(view.now_ms), {"id": id, "owner": rival, "lease_ms": rival_lease})
    yield _step(
        "begin", _iso(view.now_ms), {"id": id, "owner": rival, "margin_ms": rival_lease * 0.25}
    )
    yield _commit(view, id, rival, op=draw.pick(("commit_pass", "patch")))


def odd_lists(draw: Choices, view: View) -> Iterator[Step]:
    """Operator lists with odd limits (booleans, below one, fractions, past the maximum) over at
    least four rows and one whose id is the newest but whose start is the earliest (so the order by
    id is not the order by start), so each limit's clamp shows in how many come back, and in which
    order; then two filtered ones (by module and status, and by instance)."""
    while len(view.runs()) < 4:
        yield from _new_run(view, **_subject(draw))
        view.now_ms += draw.pick((0, 1))
    # A newer id that started earlier than every run before it (as a row copied in from an older
    # store would): ordering by id and ordering by started_at part ways.
    earliest = min(parse_iso_ms(run["started_at"]) for run in view.runs())
    yield from _new_run(view, started_at=_iso(earliest - draw.pick((1_000, 1, 60_000))))
    first = draw.number(0, len(_ODD_LIMITS) - 1)
    for rule, limit in (_ODD_LIMITS[first:] + _ODD_LIMITS[:first])[: draw.pick((3, 4, 2))]:
        view.exercised[rule] += 1
        view.exercised["list-id-not-start"] += 1
        yield _step("list", _iso(view.now_ms), {"filter": {"limit": limit}})
    run = draw.pick(view.runs())
    view.exercised["list-filtered"] += 1
    filter = {"module_id": run["module_id"], "status": run["status"]}
    yield _step("list", _iso(view.now_ms), {"filter": filter})
    # Each run started here has an instance of its own: one instance is one run of the four.
    run = draw.pick(view.runs())
    view.exercised["list-instance"] += 1
    filter = {"job": run["job"], "instance": run["instance"]}
    yield _step("list", _iso(view.now_ms), {"filter": filter})


def begin_over_misses(draw: Choices, view: View) -> Iterator[Step]:
    """A run missed once or more, claimed again at its backoff's end, then BEGUN with the margin
    just met (a fractional one, for leases whose quarter is not whole): the misses are cleared; a
    miss after the BEGIN is refused."""
    id = yield from _new_run(view)
    for _ in range(draw.pick((1, 2, 3))):
        run = view.run(id)
        view.now_ms = max(view.now_ms, _expiry_ms(run) or 0)
        owner = view.mint_owner(1_000)
        yield _step("claim", _iso(view.now_ms), {"id": id, "owner": owner, "lease_ms": 1_000})
        yield _step(
            "miss", _iso(view.now_ms), {"id": id, "owner": owner, "note": _NOTE.format(n=1)}
        )
    view.now_ms = max(view.now_ms, _expiry_ms(view.run(id)) or 0)
    # Quarters of 250.75 and 251.5 ms first: there floor(margin) + 1 ms is what a rounded margin
    # refuses, whichever way it rounds a half; then 250.5 (half up) and 250.25 (ceiled).
    lease_ms = draw.pick((1_003, 1_006, 1_002, 1_001))
    owner = view.mint_owner(lease_ms)
    yield _step("claim", _iso(view.now_ms), {"id": id, "owner": owner, "lease_ms": lease_ms})
    begin = _begin_at_edge(view, id, owner, lease_ms, met=True)
    if begin is None:
        return
    view.exercised["begin-clears-misses"] += 1
    yield begin
    view.exercised["miss-after-begin"] += 1
    yield _step("miss", _iso(view.now_ms), {"id": id, "owner": owner, "note": _NOTE.format(n=1)})
    yield _commit(view, id, owner, op=draw.pick(("commit_pass", "patch")))


#: The holders that hide s1's envelope (``@``) in arrays, as their payload, cursor and step
#: result: directly in an array; in an array in an array (an erasure that walks only the objects
#: an array holds misses it); in an object in an array in an object (one that looks for
#: envelopes only among an array's own elements misses it).
_PLACES: Final = ("payload", "cursor", "step")
_HIDDEN: Final = {
    "list": ('{"to":["x",@]}', '{"seen":[@]}', "[1,@]"),
    "nested-arrays": ('[["x",@]]', '{"pages":[[@]]}', "[[1,@]]"),
    "nested-object": ('{"rows":[{"who":@}]}', '{"seen":[{"by":@}]}', '{"rows":[{"at":@}]}'),
}


def _holder_of(draw: Choices, view: View, how: str, turn: int = 0) -> Made:
    """A run that holds s1 in one way (``how``), built by a start and a pass or two; a holder
    that hides it in arrays hides it in the place ``turn`` picks for its kind."""
    declared = "s1" if how in ("declared-steps", "finished", "done", "running") else None
    payload = _ENVELOPE if how == "payload" else draw.pick(("{}", '{"source":"crm"}'))
    hidden = _HIDDEN.get(how)
    where = _PLACES[(turn + list(_HIDDEN).index(how)) % len(_PLACES)] if hidden else None
    if hidden and where == "payload":
        payload = hidden[0].replace("@", _ENVELOPE)
    id = yield from _new_run(view, subject_id=declared, payload=payload)
    owner = yield from _begun(view, id)
    if hidden and where == "cursor":
        yield _commit(view, id, owner, cursor=hidden[1].replace("@", _ENVELOPE))
        owner = yield from _begun(view, id)
    elif hidden and where == "step":
        yield _record(view, id, owner, "fetch", hidden[2].replace("@", _ENVELOPE), None)
    if how == "cursor":
        yield _commit(view, id, owner, cursor='{"page":2,"who":' + _ENVELOPE + "}")
        owner = yield from _begun(view, id)
    if how in ("declared-steps", "step-result", "finished"):
        result = _ENVELOPE if how == "step-result" else '"ok"'
        yield _record(view, id, owner, "fetch", result, draw.pick((None, "boom")))
        yield _record(view, id, owner, "store", None, "upstream 503: Ann")
    if how == "finished":
        yield _commit(view, id, owner, op="patch", status="failed", last_error="boom")
    elif how == "done":
        yield _commit(view, id, owner, cursor='"end"', status="done")
    elif how == "running" or draw.coin():
        yield _commit(view, id, owner, op="patch", next_attempt_at=_iso(view.now_ms + 1_000))
    return id


#: The holders every erasure makes: one of each final status, a running run (their status is what
#: the erasure decides), and those holding s1 only inside JSON arrays (in its payload, its cursor
#: or a step result: an erasure that walks objects but not arrays, or arrays but not what they
#: nest, misses it).
_SETTLED: Final = ("finished", "done", "running", "list", "nested-arrays", "nested-object")

_ERASURE_RULES: Final = {
    "cursor": "erase-cursor-only",
    "payload": "erase-payload-only",
    "declared-steps": "erase-step-errors",
    "step-result": "erase-step-result-only",
    "finished": "erase-finished",
    "done": "erase-done",
    "running": "erase-running",
    "list": "erase-inside-list",
    "nested-arrays": "erase-inside-nested",
    "nested-object": "erase-inside-nested",
}


def erasures(draw: Choices, view: View) -> Iterator[Step]:
    """Runs holding s1 each in one way (only in the cursor, only in the payload, declared with
    step rows that carry errors, only in a step result, declared and failed, declared and done,
    declared and running with no lease, only inside a JSON array, only in an array in an array,
    only in an object in an array), beside one that names s1 with a ``piiClass`` of none; then s1
    erased, and erased again (which touches nothing). The final statuses, the running run and the
    arrays come first in the turn, so every erasure settles one of each and walks into arrays."""
    kinds = list(_ERASURE_RULES)
    first = draw.number(0, len(kinds) - 1)
    turn = kinds[first:] + kinds[:first]
    settled = [how for how in turn if how in _SETTLED]
    chosen = settled + [how for how in turn if how not in _SETTLED][: draw.pick((1, 2, 4))]
    # The arrays' holders hide s1 each in another place, and the turn moves with the history's
    # state as well as the draw (Hypothesis draws the same small integers again and again), so
    # each seed hides it in each place in each way.
    places = draw.number(0, 255) + view.runs_minted + view.now_ms
    for how in chosen:
        yield from _holder_of(draw, view, how, places)
    if draw.coin():
        yield from _new_run(view, payload='{"who":{"subjectId":"s1","piiClass":"none"}}')
    view.now_ms += draw.pick((1, 0))
    for how in chosen:
        view.exercised[_ERASURE_RULES[how]] += 1
    yield _step("shred_subject", _iso(view.now_ms), {"subject_id": "s1"})
    view.exercised["erase-again"] += 1
    yield _step("shred_subject", _iso(view.now_ms + draw.pick((1, 0))), {"subject_id": "s1"})


def full_imports(draw: Choices, view: View) -> Iterator[Step]:
    """Rows with every column set (a cursor, counters, attempts, errors, a lease, admission
    misses, step rows with errors), restored into their scope and copied into the other."""
    id = yield from _new_run(view, subject_id="s1", payload=_ENVELOPE)
    owner = yield from _begun(view, id)
    yield _record(view, id, owner, "fetch", '"ok"', "boom")
    cursor, counters = '{"page":2}', '{"walked":2,"skipped":1}'
    yield _commit(
        view,
        id,
        owner,
        op="patch",
        cursor=cursor,
        counters=counters,
        attempts=2,
        last_error="boom",
    )
    owner = view.mint_owner(1_000)
    yield _step("claim", _iso(view.now_ms), {"id": id, "owner": owner, "lease_ms": 1_000})
    yield _step("miss", _iso(view.now_ms), {"id": id, "owner": owner, "note": _NOTE.format(n=1)})
    view.now_ms = max(view.now_ms, _expiry_ms(view.run(id)) or 0)
    again = view.mint_owner(1_000)
    yield _step("claim", _iso(view.now_ms), {"id": id, "owner": again, "lease_ms": 1_000})
    other = yield from _new_run(view, counters='{"walked":1}')
    holder = yield from _begun(view, other)
    yield _record(view, other, holder, "fetch", None, "upstream 503")
    if draw.coin():
        yield _commit(view, other, holder, op="patch", status="done", cursor='"end"')
    # Scope b's own run and step row, which the copy must leave beside what it adds.
    yield from _own_run_in_b(view)
    now = _iso(view.now_ms)
    restore = _step("import_dump", now, {"dump_of": "a", "source": "a"})
    copy = _step("import_dump", now, {"dump_of": "a", "source": "a"}, scope="b")
    view.exercised["restore-every-column"] += 1
    view.exercised["copy-every-column"] += 1
    if _beside(view):
        view.exercised["copy-beside-held"] += 1
    yield from (restore, copy) if draw.coin() else (copy, restore)
    # The copy again: scope b now holds every id of the dump, so it is a conflict.
    view.exercised["copy-conflict"] += 1
    yield _step("import_dump", now, {"dump_of": "a", "source": "a"}, scope="b")
    if draw.coin():
        yield _step("import_dump", now, {"dump_of": "b", "source": "b"}, scope="b")
    # A dump named for a scope it was not exported from: refused, whichever scope it goes to.
    view.exercised["import-wrong-source"] += 1
    yield _step("import_dump", now, {"dump_of": "a", "source": "b"}, scope=draw.pick(("b", "a")))


def _own_run_in_b(view: View) -> Iterator[Step]:
    """A run started in scope b and begun, with a step recorded: rows of b's own."""
    start = _start(view, ("m1", "walk", f"k{view.runs_minted + 1:02d}"))
    id = start["args"]["row"]["id"]
    owner = view.mint_owner(60_000)
    now = _iso(view.now_ms)
    for step in (
        start,
        _step("claim", now, {"id": id, "owner": owner, "lease_ms": 60_000}),
        _step("begin", now, {"id": id, "owner": owner, "margin_ms": 15_000.0}),
        _record(view, id, owner, "fetch", '"ok"', None),
    ):
        yield {**step, "scope": "b"}


def _beside(view: View) -> bool:
    """Whether a copy of scope a into scope b lands beside runs of b's own: b holds runs, and
    none of a's ids (which would make the copy a conflict)."""
    held = {run["id"] for run in view.runs("b")}
    return bool(held) and not held & {run["id"] for run in view.runs("a")}


def earlier_restore(draw: Choices, view: View) -> Iterator[Step]:
    """Scope a exported, then grown (a run started since, with a step row of its own, and a step
    recorded since on a run the dump holds), then restored from that earlier export: it holds
    the dump's rows and nothing else, not a step row of what came after."""
    kept = yield from _new_run(view)
    owner = yield from _begun(view, kept)
    if draw.coin():
        yield _record(view, kept, owner, "fetch", '"ok"', None)
    yield _step("export_dump", _iso(view.now_ms), {})
    view.now_ms += draw.pick((1, 1_000, 0))
    grown = yield from _new_run(view)
    holder = yield from _begun(view, grown)
    yield _record(view, grown, holder, draw.pick(_STEP_NAMES), draw.pick(('"ok"', None)), None)
    yield _record(view, kept, owner, "store", '"ok"', None)
    view.exercised["restore-earlier-dump"] += 1
    args = {"dump_of": "a", "source": "a", "earlier": True}
    yield _step("import_dump", _iso(view.now_ms), args)


def null_owners(draw: Choices, view: View) -> Iterator[Step]:
    """Writes with a null owner, as a coordinator from before leases makes them (``lease_owner
    IS ?``): a patch of a running run no pass holds applies, and one of a leased run is refused.
    Between them, the pass records a step that returned nothing (the JSON text null, which is a
    completed step, not SQL NULL) and reads it back as its memo, then fails and keeps its
    ledger, which a null owner's commit then drops."""
    id = yield from _new_run(view)
    view.exercised["patch-null-owner"] += 1
    yield _commit(view, id, None, op="patch", counters='{"walked":1}')
    owner = yield from _begun(view, id)
    view.exercised["patch-null-owner"] += 1
    yield _commit(view, id, None, op=draw.pick(("patch", "commit_pass")))
    name = draw.pick(_STEP_NAMES)
    view.exercised["step-result-json-null"] += 1
    yield _record(view, id, owner, name, "null", None)
    args = {"run_id": id, "name": name, "owner": owner, "lease_ms": view.lease_of[owner]}
    yield _step("begin_step", _iso(view.now_ms), args)
    yield _commit(view, id, owner, op="patch", attempts=1, last_error="boom")
    view.exercised["patch-null-owner"] += 1
    yield _commit(view, id, None, cursor='"page-2"')


def counters_over_stored(draw: Choices, view: View) -> Iterator[Step]:
    """Passes that commit counters over counters already stored: the store writes what it is
    given (merging them is the coordinator's job, not the store's)."""
    id = yield from _new_run(view, counters=draw.pick(('{"walked":1}', "{}")))
    ops = ("commit_pass", draw.pick(("commit_pass", "patch")))
    for op, counters in zip(
        ops, ('{"walked":2}', draw.pick(('{"walked":3}', '{"skipped":1}'))), strict=True
    ):
        owner = yield from _begun(view, id)
        view.exercised["commit-over-counters"] += 1
        yield _commit(view, id, owner, op=op, counters=counters)
        view.now_ms += 1


def _tie_not_by_start(view: View) -> bool:
    """Whether runs due now at the same time read in another order by start than by id."""
    tied: dict[str, list[dict[str, Any]]] = {}
    for run in _running(view):
        due = run.get("next_attempt_at") or run["started_at"]
        if run.get("next_attempt_at") is None or parse_iso_ms(due) <= view.now_ms:
            tied.setdefault(due, []).append(run)
    return any(
        sorted(runs, key=lambda run: run["id"])
        != sorted(runs, key=lambda run: (run["started_at"], run["id"]))
        for runs in tied.values()
    )


def due_ties(draw: Choices, view: View) -> Iterator[Step]:
    """Runs due at the same time, by their start, by a backoff that ends on another's start and by
    a patch (a higher id that started earlier), read in due order (then id, never start) with
    limits that cut between them."""
    tied = [(yield from _new_run(view)), (yield from _new_run(view))]
    view.now_ms += 5
    yield from _new_run(view)
    owner = view.mint_owner(1_000)
    first = tied[draw.number(0, 1)]
    yield _step("claim", _iso(view.now_ms), {"id": first, "owner": owner, "lease_ms": 1_000})
    yield _step("miss", _iso(view.now_ms), {"id": first, "owner": owner, "note": _NOTE.format(n=1)})
    view.now_ms = max(view.now_ms, _expiry_ms(view.run(first)) or 0)
    yield from _new_run(view)
    # Due then too, by a patch: a higher id that started earlier (a row copied in from an older
    # store), so the tie's order by id is not its order by start.
    older = yield from _new_run(view, started_at=_iso(view.now_ms - draw.pick((1, 1_000, 60_000))))
    patcher = yield from _begun(view, older, 1_000)
    yield _commit(view, older, patcher, op="patch", next_attempt_at=_iso(view.now_ms))
    # A run that finished (done, so no next_attempt_at): never due, and never claimed again.
    done = yield from _new_run(view)
    holder = yield from _begun(view, done, 1_000)
    yield _commit(view, done, holder, status="done")
    view.exercised["claim-finished"] += 1
    rival = view.mint_owner(1_000)
    yield _step("claim", _iso(view.now_ms), {"id": done, "owner": rival, "lease_ms": 1_000})
    for limit in (500, draw.pick((1, 2, 3)), 0):
        view.exercised["due-max-zero" if limit == 0 else "due-tie"] += 1
        view.exercised["due-skips-finished"] += 1
        if limit == 500 and _tie_not_by_start(view):
            view.exercised["due-tie-not-start"] += 1
        args = {"now_param": _iso(view.now_ms), "max": limit}
        yield _step("due_keys", _iso(view.now_ms), args)


#: The refusals a history makes at the doors: every one of the table but an import's (the kit's
#: import step exports a scope first, and an import's own refusals are its conflict's) and the
#: lone surrogate's (a JavaScript store keeps such text, under an allowance that ends the
#: history there; random starts make it), all of them in each story, so that a default run makes
#: each several times on every seed.
_DOOR_REFUSALS: Final = tuple(
    refusal for refusal in REFUSALS if refusal[0] != "import_dump" and "surrogate" not in refusal[1]
)


def door_refusals(draw: Choices, view: View) -> Iterator[Step]:
    """Bad input at the doors, at the history's own time and on its runs: each request of the
    refusal table (docs/conformance.md), which both stores must refuse alike, by code and paths,
    writing nothing."""
    # Where the turn begins moves with the history's state as well as the draw (Hypothesis draws
    # the same small integers again and again), so a history that ends early still puts each
    # refusal first somewhere.
    first = (draw.number(0, 255) + view.runs_minted * 5 + view.now_ms) % len(_DOOR_REFUSALS)
    turn = _DOOR_REFUSALS[first:] + _DOOR_REFUSALS[:first]
    now = _iso(view.now_ms)
    for op, _what, args, at in turn:
        if op == "start_or_join":
            # An id of its own: a store that lets the row through must not meet one it holds.
            args = {**args, "row": {**args["row"], "id": view.mint_run()}}
        view.exercised["door-refusals"] += 1
        yield _step(op, now if at == DOC_NOW else at, args)


def imports(draw: Choices, view: View) -> Iterator[Step]:
    """Every kind of import in one story: rows with every column restored, copied beside a
    scope's own rows, copied again (a conflict) and named for the wrong scope (refused), then an
    earlier export restored over what came after it."""
    yield from full_imports(draw, view)
    yield from earlier_restore(draw, view)


def outcome_writes(draw: Choices, view: View) -> Iterator[Step]:
    """Outcome writes over stored counters, then with a null owner. One story, not two: a longer
    list of stories would tell each of the others less often (the erasures' rarest holders
    were then missed on some seeds)."""
    yield from counters_over_stored(draw, view)
    yield from null_owners(draw, view)


_CORNERS: Final = (
    unbegun_takeover,
    odd_lists,
    begin_over_misses,
    erasures,
    imports,
    outcome_writes,
    due_ties,
    door_refusals,
)


def corners(draw: Choices, view: View) -> Iterator[Step]:
    """Three of the stories above, in a turn drawn from the list: most histories are one or two
    moves long, so one move tells several stories and each reaches its rules on every seed."""
    first = draw.number(0, len(_CORNERS) - 1)
    for story in (_CORNERS[first:] + _CORNERS[:first])[:3]:
        yield from story(draw, view)


#: The boundary moves, each with its weight.
BOUNDARY_MOVES: Final[tuple[tuple[Builder, int], ...]] = (
    (lease_story, 12),
    (misses_to_the_tenth, 6),
    (due_read_at_next_attempt, 8),
    (joins, 8),
    (erase_leased, 6),
    (imports_over_live, 6),
    (corners, 30),
)
