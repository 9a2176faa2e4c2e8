"""Histories: the sequences of store operations the kit drives both stores through.

A history is a list of STEPS, each one wire request with an abstract scope name (``a`` or ``b``;
the kit maps them to fresh scope names per history, so histories never meet in one store):

    {"op": "claim", "scope": "a", "now": "2026-10-04T12:00:01.000Z",
     "args": {"id": "r01", "owner": "o01", "lease_ms": 1002}}

One step is not a request as it stands: ``import_dump`` takes ``{"dump_of": SCOPE, "source":
SCOPE}`` and the kit sends each store the dump that store itself exports of ``dump_of`` at that
moment (the export is compared too), naming ``source``'s scope as where it came from.

How a history is drawn. Hypothesis draws a list of MOVES, each a fixed number of small integers;
a move becomes one step or a few (a whole pass, a run of admission misses) by reading those
integers as choices, while looking at the reference's tables as the history stands — so a claim
names a run that exists, a BEGIN names the lease its claim wrote, and the store's time jumps onto
the edges that matter: a run's due time (the lease's expiry), one millisecond either side of it,
and BEGIN's margin before it, floored and ceiled. Hypothesis shrinks the list by deleting whole
moves and driving each choice towards its first option, which is always the ordinary one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, TypeAlias, TypeVar

import attrs
from hypothesis import strategies as st

from driver import iso_from_ms, parse_iso_ms

Step: TypeAlias = dict[str, Any]
T = TypeVar("T")

#: Where every history's store time starts.
EPOCH: Final = "2026-10-04T12:00:00.000Z"
MAX_MOVES: Final = 30
_CHOICES_PER_MOVE: Final = 16

_KEYS: Final = (("m1", "walk", "default"), ("m1", "walk", "eu"), ("m2", "sync", "default"))
_PAYLOADS: Final = (
    "{}",
    '{"source":"crm"}',
    '{"who":{"subjectId":"s1","piiClass":"email"}}',
    '{"who":{"subjectId":"s2","piiClass":"none"}}',
    '[{"subjectId":"s2","piiClass":"name","n":"Ann"}]',
    "not json",
)
_SUBJECTS: Final = (None, None, "s1", "s2")
#: Leases whose quarter is whole (1000), a quarter (1001), a half (1002) and three quarters (1003)
#: of a millisecond past whole: BEGIN's margin is floored, and these are where that shows.
_LEASES: Final = (1_000, 1_002, 1_003, 1_001, 100, 60_000, 900_000)
_STEP_NAMES: Final = ("fetch", "store", "page-2")
_RESULTS: Final = ('"ok"', None, "null", "42", '{"subjectId":"s1","piiClass":"email"}')
_ERRORS: Final = (None, "boom", "upstream 503")
_CURSORS: Final = (None, "0", '"page-2"', '{"subjectId":"s2","piiClass":"email","at":7}')
_COUNTERS: Final = ("{}", '{"walked":2}', '{"walked":2.5,"skipped":1}')
_LIMITS: Final = (None, 0, -1, 1, 2, 2.5, 500, 501, 1e9, True)
_NOTE: Final = (
    "job m1/walk: claim not begun in time — leaseMs 1000, margin 250 ms, "
    "claim and begin took 900 ms (admission miss {n} of 10)"
)
#: A count no JavaScript number holds exactly; the ``wide-integer`` allowance is about it.
WIDE: Final = 2**53 + 1


def moves() -> st.SearchStrategy[list[list[int]]]:
    """What Hypothesis draws for one history."""
    move = st.lists(st.integers(0, 255), min_size=_CHOICES_PER_MOVE, max_size=_CHOICES_PER_MOVE)
    return st.lists(move, min_size=1, max_size=MAX_MOVES)


class Choices:
    """One move's integers, read as choices in turn (wrapping round if a move needs more)."""

    def __init__(self, integers: Sequence[int]) -> None:
        self._integers = integers
        self._next = 0

    def _take(self) -> int:
        value = self._integers[self._next % len(self._integers)]
        self._next += 1
        return value

    def pick(self, options: Sequence[T]) -> T:
        return options[self._take() % len(options)]

    def number(self, low: int, high: int) -> int:
        return low + self._take() % (high - low + 1)

    def coin(self) -> bool:
        """True or False, evenly; shrinking makes it True."""
        return self._take() % 2 == 0

    def rarely(self, one_in: int) -> bool:
        """True about once in ``one_in``; shrinking makes it False."""
        return self._take() % one_in == one_in - 1


@attrs.define
class View:
    """What the generator may look at: the reference's tables per abstract scope, as the history
    stands, the store time of the last step, and what it minted so far."""

    tables: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    now_ms: int = parse_iso_ms(EPOCH)
    runs_minted: int = 0
    owners_minted: int = 0
    lease_of: dict[str, int] = attrs.field(factory=dict)
    #: The boundary rules (``_boundaries.RULES``) this history's steps exercised, by name.
    exercised: Counter[str] = attrs.field(factory=Counter)

    def runs(self, scope: str = "a") -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = self.tables.get(scope, {}).get("runs", [])
        return runs

    def run(self, id: str, scope: str = "a") -> dict[str, Any] | None:
        return next((run for run in self.runs(scope) if run["id"] == id), None)

    def mint_run(self) -> str:
        self.runs_minted += 1
        return f"r{self.runs_minted:02d}"

    def mint_owner(self, lease_ms: int) -> str:
        self.owners_minted += 1
        owner = f"o{self.owners_minted:02d}"
        self.lease_of[owner] = lease_ms
        return owner


def _iso(ms: int) -> str:
    return iso_from_ms(ms)


def _due_edges(run: dict[str, Any] | None) -> list[int]:
    due = None if run is None else run.get("next_attempt_at")
    if due is None:
        return []
    due_ms = parse_iso_ms(due)
    return [due_ms, due_ms - 1, due_ms + 1]


def _margin_edges(view: View, run: dict[str, Any] | None) -> list[int]:
    """The store times around BEGIN's edge for ``run``'s lease, the sharpest first: its expiry
    less the margin ceiled (where a margin rounded up refuses) and floored, one ms either side."""
    if run is None or run.get("next_attempt_at") is None:
        return []
    lease_ms = view.lease_of.get(run.get("lease_owner") or "")
    if lease_ms is None:
        return []
    due_ms = parse_iso_ms(run["next_attempt_at"])
    margin = lease_ms * 0.25
    edges: list[int] = []
    for whole in dict.fromkeys((math.ceil(margin), math.floor(margin))):
        edges.extend((due_ms - whole, due_ms - whole - 1, due_ms - whole + 1))
    return edges


def _now(draw: Choices, view: View, *, edges: Sequence[int] = ()) -> str:
    """The next step's store time: onto one of ``edges`` (the sharpest first) when there are
    some, else the same, a little later, much later, or onto any run's due time or margin."""
    if edges and draw.coin():
        view.now_ms = draw.pick(edges)
        return _iso(view.now_ms)
    how = draw.pick(("stay", "edge", "tick", "step", "jump"))
    if how == "tick":
        view.now_ms += 1
    elif how == "step":
        view.now_ms += draw.pick((1, 2, 250, 999, 1_000, 1_001, 2_000))
    elif how == "jump":
        view.now_ms += draw.pick((60_000, 300_001, 900_000))
    elif how == "edge":
        candidates = []
        for run in view.runs():
            candidates += _due_edges(run) + _margin_edges(view, run)
        if candidates:
            view.now_ms = draw.pick(candidates)
    return _iso(view.now_ms)


def _run_id(draw: Choices, view: View, *, leased: bool = False) -> str:
    """A run to act on: mostly one that exists (for a pass's write, mostly one that is leased),
    now and then one that is not there."""
    runs = view.runs()
    if leased and not draw.rarely(4):
        runs = [run for run in runs if run.get("lease_owner") is not None] or runs
    if not runs or draw.rarely(20):
        return "r99"  # a run that is not there
    return str(draw.pick([run["id"] for run in runs]))


def _owner(draw: Choices, view: View, run_id: str) -> str:
    """Mostly the run's lease owner; else one seen before, or a new one."""
    run = view.run(run_id)
    current = None if run is None else run.get("lease_owner")
    if current is not None and not draw.rarely(5):
        return str(current)
    known = sorted(view.lease_of)
    if known and draw.coin():
        return str(draw.pick(known))
    return view.mint_owner(draw.pick(_LEASES))


def _lease_of(view: View, owner: str) -> int:
    return view.lease_of.get(owner, 1_000)


def _step(op: str, now: str, args: dict[str, Any], *, scope: str = "a") -> Step:
    return {"op": op, "scope": scope, "now": now, "args": args}


def _start(draw: Choices, view: View) -> Iterator[Step]:
    now = _now(draw, view)
    module_id, job, instance = draw.pick(_KEYS)
    id = "r01" if view.runs_minted and draw.rarely(30) else view.mint_run()  # r01: id taken
    row = {
        "id": id,
        "module_id": module_id,
        "job": job,
        "instance": instance,
        # Now and then a lone surrogate, which only a JavaScript store can hold (an allowance).
        "payload": '{"n":"\ud800"}' if draw.rarely(40) else draw.pick(_PAYLOADS),
        "subject_id": draw.pick(_SUBJECTS),
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
    key = {"module_id": module_id, "job": job, "instance": instance}
    yield _step("start_or_join", now, {"key": key, "row": row})


def _due(draw: Choices, view: View) -> Iterator[Step]:
    now = _now(draw, view)
    edges = [edge for run in view.runs() for edge in _due_edges(run)]
    now_param = _iso(draw.pick(edges)) if edges and not draw.coin() else now
    yield _step("due_keys", now, {"now_param": now_param, "max": draw.pick((500, 0, 1, 2, 3))})


def _claim(draw: Choices, view: View) -> Iterator[Step]:
    id = _run_id(draw, view)
    now = _now(draw, view, edges=_due_edges(view.run(id)))
    lease_ms = draw.pick(_LEASES)
    if draw.rarely(30):
        # Bad input both stores must refuse, and the edge of the longest lease (a year).
        lease_ms = draw.pick((0, -5, 31_536_000_000, 31_536_000_001))
    yield _step("claim", now, {"id": id, "owner": view.mint_owner(lease_ms), "lease_ms": lease_ms})


def _begin(draw: Choices, view: View) -> Iterator[Step]:
    id = _run_id(draw, view, leased=True)
    now = _now(draw, view, edges=_margin_edges(view, view.run(id)))
    owner = _owner(draw, view, id)
    margin = _lease_of(view, owner) * 0.25
    margin_ms = draw.pick((margin, math.floor(margin), 0, 250.5))
    yield _step("begin", now, {"id": id, "owner": owner, "margin_ms": margin_ms})


def _miss(draw: Choices, view: View) -> Iterator[Step]:
    now = _now(draw, view)
    id = _run_id(draw, view, leased=True)
    owner = _owner(draw, view, id)
    yield _step("miss", now, {"id": id, "owner": owner, "note": _NOTE.format(n="n")})


def _miss_cycle(draw: Choices, view: View) -> Iterator[Step]:
    """Claim and miss, again and again at each backoff's end: up to and past the tenth miss."""
    running = [run["id"] for run in view.runs() if run["status"] == "running"]
    id = str(draw.pick(running)) if running and not draw.rarely(10) else _run_id(draw, view)
    for n in range(1, draw.pick((10, 11, 12, 1, 2, 3, 9)) + 1):
        run = view.run(id)
        if run is not None and run.get("next_attempt_at") is not None:
            view.now_ms = max(view.now_ms, parse_iso_ms(run["next_attempt_at"]))
        now = _iso(view.now_ms)
        owner = view.mint_owner(1_000)
        yield _step("claim", now, {"id": id, "owner": owner, "lease_ms": 1_000})
        yield _step("miss", now, {"id": id, "owner": owner, "note": _NOTE.format(n=n)})


def _begin_step(draw: Choices, view: View) -> Iterator[Step]:
    now = _now(draw, view)
    id = _run_id(draw, view, leased=True)
    owner = _owner(draw, view, id)
    args = {
        "run_id": id,
        "name": draw.pick(_STEP_NAMES),
        "owner": owner,
        "lease_ms": _lease_of(view, owner),
    }
    yield _step("begin_step", now, args)


def _record_step(draw: Choices, view: View) -> Iterator[Step]:
    now = _now(draw, view)
    id = _run_id(draw, view, leased=True)
    owner = _owner(draw, view, id)
    args = {
        "run_id": id,
        "name": draw.pick(_STEP_NAMES),
        "result": draw.pick(_RESULTS),
        "attempts": WIDE if draw.rarely(8) else draw.pick((1, 0, 2, 3)),
        "last_error": draw.pick(_ERRORS),
        "at": now,
        "owner": owner,
        "lease_ms": _lease_of(view, owner),
    }
    yield _step("record_step", now, args)


def _outcome(draw: Choices, view: View, op: str, *, id: str | None = None) -> Iterator[Step]:
    now = _now(draw, view)
    id = id or _run_id(draw, view, leased=True)
    owner: str | None = _owner(draw, view, id)
    if draw.rarely(10):
        owner = None  # a coordinator from before leases patches unleased rows
    status = draw.pick(("running", "done", "running", "failed"))
    if draw.rarely(30):
        status = "paused"  # bad input: both stores must refuse it
    terminal = status in ("done", "failed")
    patch = {
        "status": status,
        "cursor": draw.pick(_CURSORS),
        "counters": draw.pick(_COUNTERS),
        "attempts": draw.pick((0, 1, 2)),
        "last_error": draw.pick(_ERRORS),
        "updated_at": now,
        "next_attempt_at": None if terminal else _iso(view.now_ms + draw.pick((0, 1_000))),
        "ended_at": now if terminal else None,
    }
    yield _step(op, now, {"id": id, "patch": patch, "owner": owner})


def _pass(draw: Choices, view: View) -> Iterator[Step]:
    """A whole pass as a drive makes it, its times drawn onto the edges: claim a due run, BEGIN,
    a few steps, then commit, patch, or stop without an outcome (a crash, which a later claim
    takes over)."""
    running = [run for run in view.runs() if run["status"] == "running"]
    if not running:
        yield from _start(draw, view)
        return
    id = str(draw.pick([run["id"] for run in running]))
    due = view.run(id)
    if due is not None and due.get("next_attempt_at") is not None and not draw.rarely(4):
        view.now_ms = max(view.now_ms, parse_iso_ms(due["next_attempt_at"]))
    lease_ms = draw.pick(_LEASES)
    owner = view.mint_owner(lease_ms)
    yield _step("claim", _iso(view.now_ms), {"id": id, "owner": owner, "lease_ms": lease_ms})
    now = _now(draw, view, edges=_margin_edges(view, view.run(id)))
    yield _step("begin", now, {"id": id, "owner": owner, "margin_ms": lease_ms * 0.25})
    for _ in range(draw.number(0, 3)):
        name = draw.pick(_STEP_NAMES)
        now = _now(draw, view, edges=_due_edges(view.run(id)))
        yield _step(
            "begin_step", now, {"run_id": id, "name": name, "owner": owner, "lease_ms": lease_ms}
        )
        failed = draw.rarely(4)
        record = {
            "run_id": id,
            "name": name,
            "result": None if failed else draw.pick(_RESULTS),
            "attempts": 1,
            "last_error": "boom" if failed else None,
            "at": now,
            "owner": owner,
            "lease_ms": lease_ms,
        }
        yield _step("record_step", _now(draw, view), record)
    ending = draw.pick(("commit_pass", "patch", "commit_pass", "crash"))
    if ending != "crash":
        yield from _outcome(draw, view, ending, id=id)


def _list(draw: Choices, view: View) -> Iterator[Step]:
    now = _now(draw, view)
    filter: dict[str, Any] = {}
    module_id, job, instance = draw.pick(_KEYS)
    for name, value in (("module_id", module_id), ("job", job), ("instance", instance)):
        if draw.rarely(4):
            filter[name] = value
    if draw.rarely(3):
        filter["status"] = draw.pick(("running", "done", "failed"))
    limit = draw.pick(_LIMITS)
    if limit is not None:
        filter["limit"] = limit
    yield _step("list", now, {"filter": filter})


def _shred(draw: Choices, view: View) -> Iterator[Step]:
    now = _now(draw, view)
    yield _step("shred_subject", now, {"subject_id": draw.pick(("s1", "s2", "s3"))})


def _copy(draw: Choices, view: View) -> Iterator[Step]:
    now = _now(draw, view)
    how = draw.pick(("restore", "copy", "copy-back", "wrong-source"))
    if how == "restore":
        yield _step("import_dump", now, {"dump_of": "a", "source": "a"})
    elif how == "copy":
        yield _step("import_dump", now, {"dump_of": "a", "source": "a"}, scope="b")
    elif how == "copy-back":
        yield _step("import_dump", now, {"dump_of": "b", "source": "b"})
    else:  # bad input: a dump said to come from a scope it was not exported from
        yield _step("import_dump", now, {"dump_of": "a", "source": "b"}, scope="b")


def _export(draw: Choices, view: View) -> Iterator[Step]:
    yield _step("export_dump", _now(draw, view), {}, scope=draw.pick(("a", "b")))


def _patch(draw: Choices, view: View) -> Iterator[Step]:
    return _outcome(draw, view, "patch")


def _commit(draw: Choices, view: View) -> Iterator[Step]:
    return _outcome(draw, view, "commit_pass")


Builder: TypeAlias = Callable[[Choices, View], Iterator[Step]]

#: The random moves, each with its weight. ``_start`` is first: a shrunk move becomes a start.
RANDOM_MOVES: Final[tuple[tuple[Builder, int], ...]] = (
    (_start, 4),
    (_pass, 5),
    (_due, 2),
    (_claim, 4),
    (_begin, 4),
    (_miss, 1),
    (_miss_cycle, 2),
    (_begin_step, 2),
    (_record_step, 3),
    (_patch, 2),
    (_commit, 3),
    (_list, 2),
    (_shred, 1),
    (_copy, 1),
    (_export, 1),
)
