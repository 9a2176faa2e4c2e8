"""Why the reference answered as it did: the rule that decides a step, in words, and its rows.

A difference is easier to fix when the report says which rule of the protocol decides the answer
("the run is leased to o03 until 12:00:01.002Z, so a claim by o04 must return null") and shows the
rows that rule read. ``explain`` reads the reference's tables as they stood BEFORE the step (the
kit keeps them), and states the rule for the step's operation from those rows and the step's
arguments. It restates the spec's rules on its own (it calls no store code), so a sentence that
disagrees with the reference's answer points at a bug in one of the two.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from itertools import pairwise
from typing import Any, Final, TypeAlias

from driver import iso_from_ms, parse_iso_ms

#: The rule in words, and the rows it read.
Explained: TypeAlias = tuple[str, list[dict[str, Any]]]

#: Mirrors the spec's constants (a test holds them to driver's).
ADMISSION_MISS_MAX: Final = 10
_LIST_DEFAULT: Final = 50
_LIST_MAX: Final = 500
_BACKOFF_MAX_MS: Final = 300_000


def backoff_ms(misses: int) -> int:
    return int(min(_BACKOFF_MAX_MS, 1_000 * 2 ** max(0, misses - 1)))


def _time(value: str) -> str:
    """A store time as the report shows it: the clock, with the date dropped."""
    return value.split("T", 1)[-1] if isinstance(value, str) else repr(value)


def _run(tables: dict[str, Any], id: Any) -> dict[str, Any] | None:
    return next((run for run in tables.get("runs", []) if run.get("id") == id), None)


def _held_by(run: dict[str, Any], owner: Any) -> str | None:
    """Why ``owner`` may NOT write the run (None when it may)."""
    if run["status"] != "running":
        return f"run {run['id']} is {run['status']}"
    if run["lease_owner"] != owner:
        holder = run["lease_owner"]
        held = "held by nobody" if holder is None else f"held by {holder}"
        return f"run {run['id']} is {held}, not by {owner}"
    return None


def explain(
    step: dict[str, Any],
    tables: dict[str, Any],
    dumped: dict[str, Any] | None = None,
    *,
    reply: dict[str, Any] | None = None,
) -> Explained:
    """The rule that decides ``step`` on ``tables`` (the reference's, before it), and the rows
    that rule reads; for an import, ``dumped`` is the tables of the scope it exports. Given the
    reference's ``reply``, a request it refused at its door is explained by that refusal: what
    the request would have done, had it been valid, is no rule of the step."""
    op, args, now = step["op"], step.get("args") or {}, str(step.get("now"))
    if reply is not None and reply.get("ok") is False:
        error = reply.get("error") or {}
        return _refused(op, error, _import_refusal(step, error.get("code")))
    try:
        if op == "import_dump":
            restore = {**args, "restore": args.get("dump_of") == step.get("scope")}
            return _import(restore, now, tables, dumped or {"runs": [], "steps": []})
        rule = _RULES.get(op, _other)
        return rule(args, now, tables)
    except (KeyError, TypeError, ValueError, AttributeError):
        # Arguments a store must refuse: the rule is the store's door, not a table rule.
        return (f"{op} with these arguments must be refused or answered as the reference did", [])


def _import_refusal(step: dict[str, Any], code: Any) -> str:
    """The rule an import's refusal falls under ("" for any other refusal): a dump named for a
    scope it was not exported from (import-wrong-source), or a copy's clash (copy-conflict)."""
    args = step.get("args") or {}
    if step["op"] != "import_dump" or not isinstance(args, dict):
        return ""
    if args.get("dump_of") != args.get("source"):
        return "import-wrong-source"
    copy = args.get("dump_of") != step.get("scope")
    return "copy-conflict" if copy and code == "conflict" else ""


def _refused(op: str, error: dict[str, Any], rule: str = "") -> Explained:
    """A refusal's rule: the code and the paths are the contract (at the door, validation_failed:
    rule door-refusals, unless ``rule`` names another)."""
    code = error.get("code")
    if "paths" in error:
        paths = ", ".join(str(path) for path in error.get("paths") or []) or "none"
        named = f"with the paths {paths}"
    else:
        named = "with no paths field"
    said = f"The reference said: {error.get('message')}"
    if code != "validation_failed":
        # A conflict or a store's failure: decided past the door, by the rows.
        named_rule = f" (rule {rule})" if rule else ""
        return (
            f"the reference refused this {op} ({code}, {named}): a store must refuse it with "
            f"the same code and paths (the message may be its own) and write "
            f"nothing{named_rule}. {said}",
            [],
        )
    return (
        f"the reference refused this {op} at its door ({code}, {named}): a store must refuse "
        f"it with the same code and paths (the message may be its own) and write nothing "
        f"(rule {rule or 'door-refusals'}; docs/conformance.md, What a store refuses). {said}",
        [],
    )


def _missing(op: str, id: Any, answer: str) -> Explained:
    return f"there is no run {id}, so {op} must return {answer}", []


def _claim(args: dict[str, Any], now: str, tables: dict[str, Any]) -> Explained:
    id, owner, lease_ms = args["id"], args["owner"], args["lease_ms"]
    run = _run(tables, id)
    if run is None:
        return _missing("a claim", id, "null")
    rows = [run]
    if run["status"] != "running":
        return f"run {id} is {run['status']}, so a claim must return null", rows
    due = run["next_attempt_at"]
    if due is not None and due > now:
        if run["lease_owner"] is not None:
            return (
                f"the run is leased to {run['lease_owner']} until {_time(due)}, so a claim by "
                f"{owner} at {_time(now)} must return null",
                rows,
            )
        return (
            f"the run waits until {_time(due)}, so a claim at {_time(now)} must return null",
            rows,
        )
    when = "has no next attempt" if due is None else f"was due at {_time(due)}"
    expiry = _time(iso_from_ms(parse_iso_ms(now) + lease_ms))
    text = (
        f"the run {when}, so the claim by {owner} at {_time(now)} takes it, leased until {expiry}"
    )
    if run["lease_began_at"] is not None:
        text += (
            f"; it takes over a pass that began at {_time(run['lease_began_at'])}, so takeover is "
            f"true and attempts go from {run['attempts']} to {run['attempts'] + 1}, with the "
            "expired-lease note as last_error"
        )
    elif run["lease_owner"] is not None:
        text += (
            f"; the expired lease of {run['lease_owner']} never began, so takeover is false and "
            "attempts and last_error stay (rule takeover-of-unbegun)"
        )
    else:
        text += "; no pass began under the old lease, so takeover is false and attempts stay"
    return text, rows


def _begin(args: dict[str, Any], now: str, tables: dict[str, Any]) -> Explained:
    id, owner, margin_ms = args["id"], args["owner"], args["margin_ms"]
    run = _run(tables, id)
    if run is None:
        return _missing("BEGIN", id, "false")
    refused = _held_by(run, owner)
    if refused is not None:
        return f"{refused}, so BEGIN must return false", [run]
    expiry = run["next_attempt_at"]
    left = parse_iso_ms(expiry) - parse_iso_ms(now)
    margin = math.floor(margin_ms)
    verdict = "true" if left > margin else "false"
    text = (
        f"the lease of {owner} runs until {_time(expiry)}, {left} ms after {_time(now)}; BEGIN "
        f"needs more than floor({margin_ms!r}) = {margin} ms left{_margin_edge(left, margin_ms)}, "
        f"so it must return {verdict}"
    )
    if left > margin:
        misses = run.get("admission_misses")
        text += (
            f", write lease_began_at {_time(now)} and clear admission_misses (now "
            f"{json_text(misses) if misses is not None else 'null'}) to null (rule "
            "begin-clears-misses)"
        )
    else:
        text += " and write nothing"
    return text, [run]


def _margin_edge(left: int, margin_ms: float) -> str:
    """The margin's rule when ``left`` sits on its edge ("" off it): floor(margin) + 1 ms left
    writes, floor(margin) does not; with a fraction of .5 or more, a margin rounded instead of
    floored would refuse the first."""
    margin = math.floor(margin_ms)
    if left == margin:
        return " (rule begin-margin-missed)"
    if left != margin + 1:
        return ""
    if margin_ms - margin >= 0.5:
        return " (rule begin-margin-met; floored, never rounded: rule begin-margin-fraction)"
    return " (rule begin-margin-met)"


def _miss(args: dict[str, Any], now: str, tables: dict[str, Any]) -> Explained:
    id, owner = args["id"], args["owner"]
    run = _run(tables, id)
    if run is None:
        return _missing("a miss", id, "null")
    refused = _held_by(run, owner)
    if refused is None and run["lease_began_at"] is not None:
        refused = f"the pass of {owner} began at {_time(run['lease_began_at'])}"
    if refused is not None:
        return f"{refused}, so a miss must return null and write nothing", [run]
    misses = (run["admission_misses"] or 0) + 1
    if misses >= ADMISSION_MISS_MAX:
        then = "fails the run: status failed, the note after 'lease too short for this environment'"
    else:
        wait = backoff_ms(misses)
        until = _time(iso_from_ms(parse_iso_ms(now) + wait))
        then = f"releases the lease and backs the run off {wait} ms, until {until}"
        if misses == ADMISSION_MISS_MAX - 1:
            then += (
                f" (min({_BACKOFF_MAX_MS}, 1000 * 2^{misses - 1})): the largest backoff a miss "
                "writes, since the tenth fails the run before the doubling reaches the cap "
                "(rule miss-largest-backoff)"
            )
    return f"this is admission miss {misses} of {ADMISSION_MISS_MAX}, which {then}", [run]


def _outcome(args: dict[str, Any], now: str, tables: dict[str, Any], op: str) -> Explained:
    id, owner = args["id"], args["owner"]
    run = _run(tables, id)
    if run is None:
        return _missing(f"a {op}", id, "false")
    refused = _held_by(run, owner)
    steps = [row for row in tables.get("steps", []) if row.get("run_id") == id]
    null = _NULL_OWNER if owner is None else ""
    if refused is not None:
        kept = "; the run's step rows stay" if op == "commit_pass" and steps else ""
        return (
            f"{null}{refused}, so the {op} must return false and write nothing{kept}",
            [run, *steps],
        )
    dropped = f" and drop its {len(steps)} step rows" if op == "commit_pass" else ""
    holder = "no pass holds" if owner is None else f"{owner} holds"
    return (
        f"{null}{holder} run {id}, so the {op} must apply: the patch's columns as given (its "
        f"counters {args['patch'].get('counters')} written over the stored "
        f"{run.get('counters')}, never merged: rule commit-over-counters), the lease "
        f"cleared{dropped}",
        [run, *steps],
    )


#: How a write with a null owner is read: ``lease_owner IS ?``, never ``= ?``.
_NULL_OWNER: Final = (
    "the owner is null, which matches only a run no pass holds (lease_owner IS NULL: rule "
    "patch-null-owner); "
)

#: A step result of the JSON text null, as it must be stored and read.
_JSON_NULL: Final = (
    "the JSON text null, a step that returned nothing: completed, stored as the text 'null' and "
    "never as SQL NULL, which means not completed (rule step-result-json-null)"
)


def _step_op(args: dict[str, Any], now: str, tables: dict[str, Any], op: str) -> Explained:
    id, owner, lease_ms, name = args["run_id"], args["owner"], args["lease_ms"], args["name"]
    run = _run(tables, id)
    answer = '{"held": false, "row": null}' if op == "begin_step" else "false"
    if run is None:
        return _missing(op, id, answer)
    steps = [row for row in tables.get("steps", []) if row.get("run_id") == id]
    refused = _held_by(run, owner)
    if refused is not None:
        return f"{refused}, so {op} must return {answer} and renew nothing", [run, *steps]
    expiry = _time(iso_from_ms(parse_iso_ms(now) + lease_ms))
    did = "reads the ledger row of" if op == "begin_step" else "records"
    text = f"{owner} holds run {id}, so {op} renews its lease until {expiry} and {did} step {name}"
    row = next((row for row in steps if row.get("step") == name), None)
    result = args.get("result") if op == "record_step" else (row or {}).get("result")
    if result == "null":
        text += f", whose result is {_JSON_NULL}"
    return text, [run, *steps]


def _due(args: dict[str, Any], now: str, tables: dict[str, Any]) -> Explained:
    bound = args["now_param"]
    running = [run for run in tables.get("runs", []) if run["status"] == "running"]
    due = [
        run for run in running if run["next_attempt_at"] is None or run["next_attempt_at"] <= bound
    ]
    due.sort(key=lambda run: (run["next_attempt_at"] or run["started_at"], run["id"]))
    ids = ", ".join(run["id"] for run in due[: args["max"]]) or "none"
    if args["max"] == 0:
        ids += " (max 0 reads no keys: rule due-max-zero)"
    return (
        f"a running run is due when its next_attempt_at is null or at or before {_time(bound)} "
        f"(at it exactly counts: rule due-at-next-attempt), in due order (next_attempt_at, or "
        f"started_at when it is null), a tie by id, lowest first (rule due-tie), at most "
        f"{args['max']}: {ids}{_tie_against_start(due)}",
        running,
    )


def _tie_against_start(due: list[dict[str, Any]]) -> str:
    """The first tie in ``due`` (in due order) whose lower id started later, in words ("" when
    there is none): a store that orders a tie by start before id reads the two the other way."""
    for earlier, later in pairwise(due):
        at = earlier["next_attempt_at"] or earlier["started_at"]
        if at == (later["next_attempt_at"] or later["started_at"]) and (
            earlier["started_at"] > later["started_at"]
        ):
            return (
                f"; {earlier['id']} and {later['id']} are both due at {_time(at)}, and "
                f"{earlier['id']} goes first by its id though it started later (rule "
                "due-tie-not-start)"
            )
    return ""


def _start(args: dict[str, Any], now: str, tables: dict[str, Any]) -> Explained:
    key = args["key"]
    same = [
        run
        for run in tables.get("runs", [])
        if all(run.get(name) == key.get(name) for name in ("module_id", "job", "instance"))
    ]
    live = sorted((run for run in same if run["status"] == "running"), key=lambda run: run["id"])
    spelled = f"{key.get('module_id')}/{key.get('job')}/{key.get('instance')}"
    if live:
        return (
            f"the key {spelled} has the live run {live[-1]['id']}, so the start must return it "
            "unchanged (whatever the new row's subject) and insert nothing",
            same,
        )
    return (
        f"the key {spelled} has no live run, so the start must insert run {args['row']['id']} "
        "and return it",
        same,
    )


def _list(args: dict[str, Any], now: str, tables: dict[str, Any]) -> Explained:
    filter = args["filter"]
    narrowing = {name: filter[name] for name in _FILTERS if filter.get(name) is not None}
    rows = [
        run
        for run in tables.get("runs", [])
        if all(run.get(name) == value for name, value in narrowing.items())
    ]
    rows.sort(key=lambda run: str(run["id"]), reverse=True)
    limit, why = _list_limit(filter.get("limit"))
    shown = ", ".join(f"{name} {value}" for name, value in narrowing.items()) or "no filter"
    ids = ", ".join(str(run["id"]) for run in rows[:limit]) or "none"
    return (
        f"{_count(len(rows), 'run')} match {shown}; {why}, so the list must return the "
        f"newest {limit} by id, newest first: {ids}",
        rows,
    )


_FILTERS: Final = ("module_id", "job", "instance", "status")


def _list_limit(limit: Any) -> tuple[int, str]:
    """The operator read's row budget, and why: null, a boolean or a number that is not finite
    gives the default 50; a number is floored and held between 1 and 500."""
    if limit is None:
        return _LIST_DEFAULT, "no limit was given, which is the default 50"
    if isinstance(limit, bool):
        return _LIST_DEFAULT, f"the limit {json_text(limit)} is not a number: the default 50"
    if not math.isfinite(limit):
        return _LIST_DEFAULT, f"the limit {limit!r} is not finite: the default 50"
    clamped = int(min(_LIST_MAX, max(1, math.floor(limit))))
    return clamped, f"the limit {limit!r}, floored and held between 1 and 500, is {clamped}"


def json_text(value: Any) -> str:
    return "true" if value is True else "false" if value is False else repr(value)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


#: The keys and indexes to a value inside JSON.
Where: TypeAlias = tuple[str | int, ...]


def _envelope_at(text: Any, subject: str) -> Where | None:
    """Where JSON ``text`` holds, at any depth, an object whose subjectId is ``subject`` with a
    piiClass present and not "none" (the subject's classified envelope): the keys and indexes to
    the first one, in document order; None when it holds none."""
    try:
        pending: list[tuple[Any, Where]] = [(json.loads(text), ())] if isinstance(text, str) else []
    except ValueError:
        return None
    while pending:
        item, path = pending.pop()
        if isinstance(item, dict):
            if item.get("subjectId") == subject and item.get("piiClass", "none") != "none":
                return path
            pending.extend((value, (*path, key)) for key, value in reversed(item.items()))
        elif isinstance(item, list):
            pending.extend(
                (value, (*path, index)) for index, value in reversed(list(enumerate(item)))
            )
    return None


def _inside(path: Where) -> str:
    """Where an envelope at ``path`` lies, when an array holds it on the way ("" when none does),
    with its rule: directly in an array (erase-inside-list), or in what an array holds, an array
    or an object (erase-inside-nested), which an erasure that looks only at an array's own
    elements misses."""
    kinds = ["an array" if isinstance(step, int) else "an object" for step in path]
    if "an array" not in kinds:
        return ""
    spelled = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path)
    rule = (
        "erase-inside-list" if kinds.index("an array") == len(kinds) - 1 else "erase-inside-nested"
    )
    return f" at ${spelled}, in {' in '.join(reversed(kinds))} (rule {rule})"


def _holds(run: dict[str, Any], steps: list[dict[str, Any]], subject: str) -> str | None:
    """How ``run`` holds ``subject`` (None when it does not), in words."""
    if run.get("subject_id") == subject:
        return "declares it"
    path = _envelope_at(run.get("payload"), subject)
    if path is not None:
        return f"its payload carries its envelope (subject_id is not it){_inside(path)}"
    path = _envelope_at(run.get("cursor"), subject)
    if path is not None:
        return f"only its cursor carries its envelope{_inside(path)}"
    carrying = [
        (str(step["step"]), path)
        for step in steps
        if (path := _envelope_at(step.get("result"), subject)) is not None
    ]
    if carrying:
        return (
            f"only the result of step {', '.join(name for name, _ in carrying)} carries its "
            f"envelope{_inside(carrying[0][1])}, so only that step row is shredded and the "
            "payload, cursor and other steps stay"
        )
    return None


def _shred(args: dict[str, Any], now: str, tables: dict[str, Any]) -> Explained:
    subject = args["subject_id"]
    matched: list[str] = []
    rows: list[dict[str, Any]] = []
    for run in sorted(tables.get("runs", []), key=lambda run: str(run["id"])):
        steps = [row for row in tables.get("steps", []) if row.get("run_id") == run["id"]]
        how = _holds(run, steps, subject)
        if how is None:
            continue
        errors = [str(step["step"]) for step in steps if step.get("last_error") is not None]
        settled = (
            "settled failed, no lease, no due time"
            if run["status"] == "running"
            else f"still {run['status']}, the finished note as last_error"
        )
        noted = f"; the errors of step {', '.join(errors)} become the note" if errors else ""
        matched.append(f"{run['id']} ({how}; {settled}{noted})")
        rows += [run, *steps]
    if not matched:
        return (
            f"no run declares {subject} or carries its envelope (in its payload, cursor or a "
            "step result), so the erasure must touch nothing and return 0",
            [],
        )
    return (
        f"erasure of {subject} must touch each run that holds it and is not yet redacted (a run "
        f"already holding only its tombstones and notes is not counted again): "
        f"{'; '.join(matched)}",
        rows,
    )


def _import(
    args: dict[str, Any], now: str, tables: dict[str, Any], dumped: dict[str, Any]
) -> Explained:
    runs = list(dumped.get("runs", []))
    steps = list(dumped.get("steps", []))
    if args.get("dump_of") != args.get("source"):
        return (
            f"the dump was exported from scope {args.get('dump_of')} but names scope "
            f"{args.get('source')} as its source, so the import must be refused "
            "(validation_failed at source_scope_id) and write nothing (rule import-wrong-source)",
            [],
        )
    if args.get("restore"):
        return (
            f"a restore into the scope the dump came from: the tables are replaced by its "
            f"{_count(len(runs), 'run')} and {_count(len(steps), 'step row')}, every column as "
            "exported (running runs stay running, leases, counters and admission misses kept)"
            + _dropped(tables, dumped),
            runs + steps,
        )
    held = {str(run["id"]) for run in tables.get("runs", [])}
    held |= {str(step["run_id"]) for step in tables.get("steps", [])}
    clash = [run for run in runs if str(run["id"]) in held]
    if clash:
        return (
            f"a copy into another scope that already holds run {clash[0]['id']}: a conflict "
            "(code conflict, no paths), and nothing is written",
            clash,
        )
    running = [run for run in runs if run.get("status") == "running"]
    failed = (
        f"the running runs ({', '.join(str(run['id']) for run in running)}) become failed as not "
        f"carried, with no lease and no due time, ended now{_uncarried(running)}"
        if running
        else "no run in it is running"
    )
    own = tables.get("runs", [])
    beside = (
        f"; the {_count(len(own), 'run')} and {_count(len(tables.get('steps', [])), 'step row')} "
        "the scope already holds stay beside them, untouched: a copy replaces nothing (rule "
        "copy-beside-held)"
        if own
        else ""
    )
    return (
        f"a copy into another scope: its {_count(len(runs), 'run')} and "
        f"{_count(len(steps), 'step row')} are added with every other column as exported; "
        f"{failed}{beside}",
        runs + steps,
    )


#: The columns of a lease and a due time, which a copy does not carry for a running run.
_LEASE_COLUMNS: Final = ("lease_owner", "lease_began_at", "next_attempt_at")


def _uncarried(running: list[dict[str, Any]]) -> str:
    """What a copy clears of the running runs it fails, in words ("" when none holds a lease or
    a due time): each of those columns null, whatever the dump holds."""
    held = [
        f"{run['id']}'s {_and([name for name in _LEASE_COLUMNS if run.get(name) is not None])}"
        for run in running
        if any(run.get(name) is not None for name in _LEASE_COLUMNS)
    ]
    if not held:
        return ""
    return f" ({'; '.join(held)}: not carried, each null in the copy; rule copy-live)"


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _dropped(tables: dict[str, Any], dumped: dict[str, Any]) -> str:
    """What a restore deletes that its dump does not bring back (an earlier export's restore
    over rows written since), in words; "" when the scope holds nothing more."""
    ids = {run.get("id") for run in dumped.get("runs", [])}
    keys = {(step.get("run_id"), step.get("step")) for step in dumped.get("steps", [])}
    runs = [str(run["id"]) for run in tables.get("runs", []) if run.get("id") not in ids]
    steps = [
        f"{step['run_id']}/{step['step']}"
        for step in tables.get("steps", [])
        if (step.get("run_id"), step.get("step")) not in keys
    ]
    if not runs and not steps:
        return ""
    gone = [f"run {', '.join(runs)}"] if runs else []
    gone += [f"step row {', '.join(steps)}"] if steps else []
    return (
        f"; what the scope holds and the dump does not is deleted, not kept: {'; '.join(gone)} "
        "(rule restore-earlier-dump)"
    )


def _export(args: dict[str, Any], now: str, tables: dict[str, Any]) -> Explained:
    runs, steps = tables.get("runs", []), tables.get("steps", [])
    return (
        f"an export answers the scope's id and every row verbatim, every column as stored: its "
        f"{_count(len(runs), 'run')} by id and its {_count(len(steps), 'step row')} by run and "
        "name, and writes nothing",
        runs + steps,
    )


def _other(args: dict[str, Any], now: str, tables: dict[str, Any]) -> Explained:
    return "the reference's answer is the spec's; see docs/conformance.md for the operation", []


_RULES: Final[dict[str, Callable[[dict[str, Any], str, dict[str, Any]], Explained]]] = {
    "claim": _claim,
    "begin": _begin,
    "miss": _miss,
    "patch": lambda args, now, tables: _outcome(args, now, tables, "patch"),
    "commit_pass": lambda args, now, tables: _outcome(args, now, tables, "commit_pass"),
    "begin_step": lambda args, now, tables: _step_op(args, now, tables, "begin_step"),
    "record_step": lambda args, now, tables: _step_op(args, now, tables, "record_step"),
    "due_keys": _due,
    "start_or_join": _start,
    "shred_subject": _shred,
    "list": _list,
    "export_dump": _export,
}
