"""The differential kit: the reference and a target, driven through the same histories in lockstep.

Theory of operation. Hypothesis draws a history one step at a time (``_history``), each step
looking at the reference's tables as they stand. Every step goes to both stores with the same
store time; the two replies are compared, then both tables of the scope it touched. The first
difference ends the history, Hypothesis shrinks the history to the fewest steps that still differ,
and the kit prints that history as a command that replays it and as a test to paste. Differences
the kit allows on purpose are named (``_compare.ALLOWANCES``), counted and printed; ``strict``
makes them differences.

Each history runs in scopes of its own (``a`` and ``b`` mapped to fresh names), so no history
sees another's rows and a replay needs no reset of the target.
"""

from __future__ import annotations

import hashlib
import json
import os
import pprint
import shlex
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import attrs
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky

from scopehost import ScopeDatabase

from .._seeded import seed_only
from ._boundaries import RULES
from ._compare import ALLOWANCES, Comparison, compare_replies, compare_tables
from ._explain import explain
from ._generate import draw_steps
from ._history import Step, View, moves
from ._targets import LocalTarget, Target, TargetFailed, open_target
from ._wire import OPERATIONS, WIRE_VERSION, DatabaseFactory, ReferenceStore

_SCOPES: Final = ("a", "b")
#: The operations a history compares (``hello`` and ``tables`` are the wire's own).
COMPARED_OPERATIONS: Final = tuple(op for op in OPERATIONS if op not in ("hello", "tables"))
#: Asks a store to answer with both tables of the scope as the operation left them.
_TABLES: Final = {"tables": True}


class _Stop:
    """What a step returns when an allowance ended the history (see ``Comparison.stop``)."""


_STOPPED: Final = _Stop()


@attrs.frozen
class Difference:
    """Where a history first made the two stores disagree."""

    step: int
    op: str
    what: str
    detail: str
    #: The rule that decides the step, in words (``_explain``), from the reference's rows.
    rule: str = ""
    #: The rows that rule read, as the reference held them before the step (compact JSON).
    rows: tuple[str, ...] = ()
    #: Both stores' replies to the step (compact JSON, cut when long).
    reference: str = ""
    target: str = ""

    def line(self) -> str:
        return f"step {self.step} ({self.op}): {self.what}: {self.detail}"

    def explanation(self) -> list[str]:
        """The lines that say why: the rule, the rows it read, and both answers."""
        out = []
        if self.rule:
            out.append(f"  the rule: {self.rule}")
        if self.rows:
            out.append("  the rows it read (the reference's, before the step):")
            out.extend(f"    {row}" for row in self.rows)
        if self.reference or self.target:
            out.append(f"  the reference answered: {self.reference}")
            out.append(f"  the target answered:    {self.target}")
        return out


@attrs.define
class ConformanceReport:
    """What one run of the kit compared, and what it found."""

    target: str
    strict: bool
    seed: int | None = None
    histories: int = 0
    operations: int = 0
    allowed: Counter[str] = attrs.field(factory=Counter)
    #: How many times the histories stepped onto each boundary rule (``_boundaries.RULES``).
    exercised: Counter[str] = attrs.field(factory=Counter)
    #: How many times each operation of the wire was compared (``OPERATIONS``).
    reached: Counter[str] = attrs.field(factory=Counter)
    difference: Difference | None = None
    history: list[Step] | None = None
    failure: str | None = None
    #: The difference did not come back when the same history ran again: the target answers
    #: the same requests in different ways (a store must not).
    flaky: bool = False
    #: A digest of every history run, in order: the same seed and size give the same digest in
    #: any process (from the command line or the API), so a seed is seen to mean one history set.
    digest: str = ""

    def add_history(self, history: list[Step]) -> None:
        """Count ``history`` (as it ran) into :attr:`digest`."""
        text = self.digest + json.dumps(history, sort_keys=True)
        self.digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()

    @property
    def ok(self) -> bool:
        return self.difference is None and self.failure is None

    def command(self) -> str:
        """The command that replays the shrunk history against the same target."""
        assert self.history is not None
        words = ["python", "-m", "sims", "conformance", "--target", self.target]
        if self.strict:
            words.append("--strict")
        words += ["--replay", _json_shown(self.history)]
        return shlex.join(words)

    def test_source(self) -> str:
        """A pytest function that replays the shrunk history; it fails until the stores agree."""
        assert self.history is not None
        body = pprint.pformat(self.history, width=88, sort_dicts=False)
        strict = ", strict=True" if self.strict else ""
        return (
            "from sims.conformance import replay_history\n\n\n"
            "def test_conformance_history() -> None:\n"
            f"    history = (\n        {_indent(body)}\n    )\n"
            f"    report = replay_history(history, target={self.target!r}{strict})\n"
            "    assert report.difference is None, report.difference.line()\n"
        )

    def unreached(self) -> list[str]:
        """The boundary rules and the wire's operations no history of this run reached: what
        an agreement did not compare (an empty list when every one was reached)."""
        rules = [name for name in RULES if not self.exercised[name]]
        return rules + [op for op in COMPARED_OPERATIONS if not self.reached[op]]

    def _coverage(self) -> list[str]:
        """Each boundary rule and each operation with how often it was reached; one reached
        zero times is a loud line of its own, since nothing about it was compared."""
        out = ["boundary rules exercised (docs/conformance.md lists them):"]
        for name in RULES:
            count = self.exercised[name]
            loud = "  NOT REACHED " if not count else "  "
            out.append(f"{loud}{name} x{count}: {RULES[name]}")
        out.append("operations compared:")
        out.append("  " + ", ".join(f"{op} x{self.reached[op]}" for op in COMPARED_OPERATIONS))
        out.extend(
            f"  NOT REACHED {op} x0: no history compared this operation"
            for op in COMPARED_OPERATIONS
            if not self.reached[op]
        )
        unreached = self.unreached()
        if unreached and self.failure is None:
            out.append(
                f"conformance: WARNING — not reached: {', '.join(unreached)}; nothing about "
                "them was compared (run more --examples or another --seed)"
            )
        return out

    def lines(self) -> list[str]:
        out = []
        histories = "1 history" if self.histories == 1 else f"{self.histories} histories"
        compared = (
            f"{histories}, {_count(self.operations, 'operation')}, both tables compared after each"
        )
        seed = "" if self.seed is None else f"; seed {self.seed} (--seed {self.seed} repeats it)"
        if self.failure is not None:
            out.append(f"conformance: FAILED — {self.failure}")
            out.append(f"conformance: before that, compared {compared}{seed}")
        elif self.difference is not None:
            out.append(f"conformance: DIFFERENCE between the reference and {self.target}")
            out.append(f"  {self.difference.line()}")
            if self.flaky:
                out.append(
                    "  it did not reproduce: the same history, run again, did not differ there "
                    "(the target answers the same requests differently from one run to the next)"
                )
            out.extend(self.difference.explanation())
            out.append(f"conformance: compared {compared}{seed}")
            assert self.history is not None
            steps = _count(len(self.history), "step")
            out.append(f"\nthe shrunk history ({steps}), as a command:\n")
            out.append(self.command())
            out.append("\nand as a test to paste:\n")
            out.append(self.test_source())
        else:
            out.append(
                f"conformance: {self.target} agreed with the reference: {compared}{seed}"
                + (" (strict)" if self.strict else "")
                + f"; histories digest {self.digest}"
            )
        if self.exercised or self.reached:
            out.extend(self._coverage())
        if self.allowed:
            out.append("allowances used (--strict makes each a difference):")
            for name, count in sorted(self.allowed.items()):
                out.append(f"  {name} x{count}: {ALLOWANCES[name].reason}")
        elif self.failure is None:
            out.append("allowances used: none")
        return out


def _indent(text: str) -> str:
    return text.replace("\n", "\n        ")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class _Abort(BaseException):
    """The target stopped answering: stop the search (not a difference to shrink)."""


class _Found(Exception):
    """A history made the stores disagree: Hypothesis shrinks it."""


class _Enough(BaseException):
    """Hypothesis has shrunk for its budget: stop it and keep the smallest history found."""


#: How many histories a kit run generates when it is not told (``--examples``).
DEFAULT_EXAMPLES: Final = 100

#: Histories Hypothesis may run while shrinking a difference, before the kit keeps the smallest
#: so far (and then deletes single steps from it itself): a bound on the time a finding costs.
SHRINK_BUDGET: Final = 150


@attrs.define
class _Lockstep:
    reference: Target
    target: Target
    strict: bool
    report: ConformanceReport
    prefix: str
    histories_begun: int = 0

    def scopes(self) -> dict[str, str]:
        self.histories_begun += 1
        return {name: f"{self.prefix}h{self.histories_begun}-{name}" for name in _SCOPES}

    def _both(self, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.reference.call(request), self.target.call(request)

    def run(
        self, steps: Iterator[Step], view: View | None, record: list[Step]
    ) -> tuple[Difference | None, Counter[str]]:
        """Run ``steps`` on both stores until one differs; the allowances used along the way."""
        scopes = self.scopes()
        allowed: Counter[str] = Counter()
        before: dict[str, Any] = {}
        saved: dict[str, tuple[Any, Any]] = {}
        for number, step in enumerate(steps, start=1):
            record.append(step)
            difference = self._step(number, step, scopes, view, allowed, (before, saved))
            if isinstance(difference, _Stop):
                break
            if difference is not None:
                return difference, allowed
        return None, allowed

    def _step(
        self,
        number: int,
        step: Step,
        scopes: dict[str, str],
        view: View | None,
        allowed: Counter[str],
        kept: tuple[dict[str, Any], dict[str, tuple[Any, Any]]],
    ) -> Difference | _Stop | None:
        """Run one step on both stores and compare; ``kept`` is what the history's earlier steps
        left: the reference's tables per scope as they stood, and each store's answer to the
        last ``export_dump`` step of each scope (what an ``earlier`` import restores)."""
        before, saved = kept
        op, scope, now = step["op"], scopes[step["scope"]], step["now"]
        answers: list[Any] = [None, None]

        def check(what: str, comparison: Comparison) -> Difference | None:
            allowed.update(comparison.allowed)
            if comparison.difference is None:
                return None
            rule, rows = explain(
                step,
                before.get(step["scope"], _NO_TABLES),
                _dumped(step, before, saved),
                reply=answers[0],
            )
            return Difference(
                number,
                op,
                what,
                comparison.difference,
                rule=rule,
                rows=tuple(_shown(row) for row in rows),
                reference=_shown(answers[0]),
                target=_shown(answers[1]),
            )

        sent = {"wire": WIRE_VERSION, "op": op, "scope": scope, "now": now, "args": step["args"]}

        if op == "import_dump":
            if step["args"].get("earlier"):
                # What each store answered at the earlier export step (compared there): the
                # scope may hold more since, which a restore of it must drop.
                dumps = saved[step["args"]["dump_of"]]
            else:
                source = scopes[step["args"]["dump_of"]]
                export = {"wire": WIRE_VERSION, "op": "export_dump", "scope": source, "now": now}
                ours, theirs = self._both({**export, "args": {}})
                answers[:] = ours, theirs
                self.report.operations += 1
                self.report.reached["export_dump"] += 1
                found = check(
                    "the export it imports", compare_replies(ours, theirs, strict=self.strict)
                )
                if found is not None:
                    return found
                dumps = ours.get("result"), theirs.get("result")
            named = scopes[step["args"]["source"]]
            base = {"wire": WIRE_VERSION, "op": op, "scope": scope, "now": now}
            ours, theirs = (
                store.call({**base, "args": {"dump": dump, "source_scope_id": named}, **_TABLES})
                for store, dump in zip((self.reference, self.target), dumps, strict=True)
            )
        else:
            request = {"wire": WIRE_VERSION, "op": op, "scope": scope, "now": now}
            ours, theirs = self._both({**request, "args": step["args"], **_TABLES})
        self.report.operations += 1
        self.report.reached[op] += 1
        ours_tables, theirs_tables = ours.pop("tables", None), theirs.pop("tables", None)
        answers[:] = ours, theirs
        replies = compare_replies(ours, theirs, strict=self.strict, request=sent)
        found = check("the replies differ", replies)
        if found is not None or replies.stop:
            return found or _STOPPED
        found = check(
            f"after it, the tables of scope {step['scope']} differ",
            compare_tables(ours_tables, theirs_tables, strict=self.strict),
        )
        if found is not None:
            return found
        if ours_tables is not None:
            before[step["scope"]] = ours_tables
            if view is not None:
                view.tables[step["scope"]] = ours_tables
        if op == "export_dump":
            saved[step["scope"]] = ours.get("result"), theirs.get("result")
        return None


_NO_TABLES: Final[dict[str, Any]] = {"runs": [], "steps": []}


def _dumped(
    step: Step, before: dict[str, Any], saved: dict[str, tuple[Any, Any]]
) -> dict[str, Any] | None:
    """The rows an import step imports, as the reference held them (None for any other step):
    those of its earlier export, or those of the scope it exports now."""
    if step["op"] != "import_dump":
        return None
    args = step["args"]
    if args.get("earlier"):
        dump: dict[str, Any] = saved[args["dump_of"]][0]
        return dump
    tables: dict[str, Any] = before.get(args["dump_of"], _NO_TABLES)
    return tables


_SHOWN_MAX: Final = 600


def _json_shown(value: Any) -> str:
    """Compact JSON to print: readable non-ASCII text, unless some character would not print as
    itself (a lone surrogate, a terminal's escape, a direction override; from a target's reply or
    a generated history), when every such character is escaped as JSON writes it."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text if text.isprintable() else json.dumps(value, separators=(",", ":"))


def _shown(value: Any) -> str:
    text = _json_shown(value)
    return text if len(text) <= _SHOWN_MAX else text[: _SHOWN_MAX - 3] + "..."


def _greet(target: Target) -> None:
    """Ask the target which wire it speaks before anything else, so a target that does not speak
    wire 1 is told apart from one that differs."""
    reply = target.call({"wire": WIRE_VERSION, "op": "hello"})
    result = reply.get("result")
    if not reply.get("ok") or not isinstance(result, dict) or result.get("wire") != WIRE_VERSION:
        raise TargetFailed(
            f"the target {target.name} does not speak wire {WIRE_VERSION}: it answered hello "
            f"with {json.dumps(reply)[:300]}"
        )


def _prefix() -> str:
    # Scope names unique to this kit run, so a long-lived URL target never mixes two runs' rows.
    return f"k{os.getpid():x}{os.urandom(3).hex()}-"


def run_conformance(
    target: str | Target,
    *,
    examples: int,
    seed: int | None = None,
    strict: bool = False,
    database: DatabaseFactory = ScopeDatabase,
    shrink: bool = True,
) -> ConformanceReport:
    """Drive ``examples`` generated histories through the reference (``database`` per scope) and
    ``target`` in lockstep; a report of what was compared and the first, shrunk, difference.
    ``shrink=False`` reports the first difference as it was found (a quick yes or no)."""
    if type(examples) is not int or examples < 1:
        raise ValueError(f"examples is {examples!r}; run at least 1 history")
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "big")
    try:
        opened = open_target(target) if isinstance(target, str) else target
    except TargetFailed as error:  # a target that failed as it started (workerd's hello)
        return ConformanceReport(target=str(target), strict=strict, seed=seed, failure=str(error))
    name = target if isinstance(target, str) else opened.name
    report = ConformanceReport(target=name, strict=strict, seed=seed)
    reference = LocalTarget(ReferenceStore(database=database), name="reference")
    lockstep = _Lockstep(reference, opened, strict, report, _prefix())
    found: list[tuple[Difference, list[Step]]] = []
    first_found = [0]

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        verbosity=Verbosity.quiet,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @hypothesis_seed(seed)
    @given(moves())
    def history(drawn: list[list[int]]) -> None:
        if found and report.histories - first_found[0] >= SHRINK_BUDGET:
            raise _Enough
        report.histories += 1
        record: list[Step] = []
        view = View()
        try:
            difference, allowed = lockstep.run(draw_steps(drawn, view), view, record)
        except TargetFailed as error:
            report.failure = str(error)
            raise _Abort from error
        report.add_history(record)
        report.allowed.update(allowed)
        report.exercised.update(view.exercised)
        if difference is not None:
            if not found:
                first_found[0] = report.histories
            found.append((difference, record))
            if not shrink:
                raise _Enough
            raise _Found(difference.line())

    try:
        _greet(opened)
        with seed_only():  # the histories of a seed, whatever else is loaded (sims/_seeded.py)
            history()
    except TargetFailed as error:
        report.failure = str(error)
    except (_Found, _Enough):
        # The smallest history that differed (Hypothesis's shrunk one, or the smallest within
        # the budget), then single steps deleted while it still differs.
        smallest = min(found, key=lambda pair: len(pair[1]))
        report.difference, report.history = smallest
        try:
            if shrink:
                report.difference, report.history = _quiet(lockstep, *_trim(lockstep, *smallest))
        except TargetFailed as error:
            report.failure = str(error)
    except Flaky:
        # The target answered a history differently when it ran again: still a difference
        # (a store must answer the same requests the same way), reported as first seen.
        if not found:
            raise
        report.difference, report.history = found[0]
        report.flaky = True
    except _Abort:
        pass
    finally:
        if isinstance(target, str):
            opened.close()
        reference.close()
    return report


def _trim(
    lockstep: _Lockstep, difference: Difference, history: list[Step]
) -> tuple[Difference, list[Step]]:
    """Delete single steps from Hypothesis's shrunk history while it still differs.

    Hypothesis shrinks the moves it drew; a concrete step it could not delete (a move whose
    choices other moves' choices lean on) may still be unneeded as a request. Each candidate is
    replayed whole, so what is printed is exactly what was last seen to differ. The passes
    repeat until one deletes nothing (a fixpoint): deleting a late step can make an earlier one
    unneeded, and one pass would keep it."""
    deleted = True
    while deleted:
        deleted = False
        index = 0
        while index < len(history) and len(history) > 1:
            candidate = history[:index] + history[index + 1 :]
            if not _exports_precede(candidate):
                index += 1  # the export step an earlier import restores: it stays
                continue
            record: list[Step] = []
            found, _allowed = lockstep.run(iter(candidate), None, record)
            if found is not None:
                difference, history, deleted = found, record, True
            else:
                index += 1
    return difference, history


#: Values that carry nothing a rule reads, by where they sit in a step: what ``_quiet`` tries.
_QUIET_VALUES: Final[tuple[tuple[tuple[str, ...], Any], ...]] = (
    (("args", "row", "payload"), "{}"),
    (("args", "row", "subject_id"), None),
    (("args", "row", "cursor"), None),
    (("args", "row", "counters"), "{}"),
    (("args", "patch", "cursor"), None),
    (("args", "patch", "counters"), "{}"),
    (("args", "patch", "last_error"), None),
    (("args", "result"), None),
    (("args", "last_error"), None),
)


def _quieted(step: Step, path: tuple[str, ...], value: Any) -> Step | None:
    """``step`` with the value at ``path`` replaced by ``value``; None when there is no such
    value or it is already that."""
    holder: Any = step
    for name in path[:-1]:
        holder = holder.get(name) if isinstance(holder, dict) else None
    if not isinstance(holder, dict) or path[-1] not in holder or holder[path[-1]] == value:
        return None
    quiet = json.loads(json.dumps(step))
    target = quiet
    for name in path[:-1]:
        target = target[name]
    target[path[-1]] = value
    return dict(quiet)


def _quiet(
    lockstep: _Lockstep, difference: Difference, history: list[Step]
) -> tuple[Difference, list[Step]]:
    """Replace what does not matter with plain values (a payload with ``{}``, a subject with
    null, ...) while the history still differs at the same operation in the same way, so the
    printed history keeps only what the difference needs."""
    for index in range(len(history)):
        for path, value in _QUIET_VALUES:
            quiet = _quieted(history[index], path, value)
            if quiet is None:
                continue
            candidate = [*history[:index], quiet, *history[index + 1 :]]
            record: list[Step] = []
            found, _allowed = lockstep.run(iter(candidate), None, record)
            if found is not None and (found.op, found.what) == (difference.op, difference.what):
                difference, history = found, record
    return difference, history


def _checked_history(history: Any) -> list[Step]:
    if not isinstance(history, list) or not history:
        raise ValueError("a history is a non-empty JSON array of steps")
    for number, step in enumerate(history, start=1):
        if not isinstance(step, dict) or set(step) != {"op", "scope", "now", "args"}:
            raise ValueError(f"step {number} must be an object with op, scope, now and args")
        if step["scope"] not in _SCOPES:
            raise ValueError(
                f"step {number}'s scope is {step['scope']!r}; a history names 'a' or 'b'"
            )
        if step["op"] == "import_dump":
            _check_import(number, step["args"], history[: number - 1])
    return history


def _check_import(number: int, args: Any, earlier: list[Any]) -> None:
    """An import step's args name scopes, and an ``earlier`` import follows an export of its
    scope (whose answer it restores)."""
    if not (
        isinstance(args, dict)
        and set(args) - {"earlier"} == {"dump_of", "source"}
        and args.get("earlier", True) is True
        and {args["dump_of"], args["source"]} <= set(_SCOPES)
    ):
        raise ValueError(
            f"step {number} imports: its args are {{'dump_of': 'a'|'b', 'source': 'a'|'b'}}, "
            "with 'earlier': true to import the dump of the last export_dump step of 'dump_of' "
            "before it"
        )
    exported = any(
        step["op"] == "export_dump" and step["scope"] == args["dump_of"] for step in earlier
    )
    if args.get("earlier") and not exported:
        raise ValueError(
            f"step {number} imports an earlier dump of {args['dump_of']!r}, but no export_dump "
            f"step of scope {args['dump_of']!r} comes before it; add one, or drop 'earlier'"
        )


def _exports_precede(history: list[Step]) -> bool:
    """Whether each import of an earlier dump still follows an export of its scope: deleting
    that export leaves a history with nothing to restore, which no replay takes."""
    exported: set[Any] = set()
    for step in history:
        args = step.get("args") or {}
        if step.get("op") == "export_dump":
            exported.add(step.get("scope"))
        elif (
            step.get("op") == "import_dump"
            and args.get("earlier")
            and args.get("dump_of") not in exported
        ):
            return False
    return True


def replay_history(
    history: list[Step],
    *,
    target: str | Target,
    strict: bool = False,
    database: DatabaseFactory = ScopeDatabase,
) -> ConformanceReport:
    """Run one history (as the kit prints it) through the reference and ``target``."""
    steps = _checked_history(history)
    try:
        opened = open_target(target) if isinstance(target, str) else target
    except TargetFailed as error:
        return ConformanceReport(target=str(target), strict=strict, failure=str(error))
    name = target if isinstance(target, str) else opened.name
    report = ConformanceReport(target=name, strict=strict, histories=1)
    reference = LocalTarget(ReferenceStore(database=database), name="reference")
    record: list[Step] = []
    try:
        _greet(opened)
        lockstep = _Lockstep(reference, opened, strict, report, _prefix())
        difference, allowed = lockstep.run(iter(steps), None, record)
        report.allowed.update(allowed)
        if difference is not None:
            report.difference, report.history = difference, record
    except TargetFailed as error:
        report.failure = str(error)
    finally:
        if isinstance(target, str):
            opened.close()
        reference.close()
    return report


def load_history(text: str) -> list[Step]:
    """``--replay``'s value: the history's JSON, or ``@FILE`` holding it."""
    source = text
    if text.startswith("@"):
        try:
            source = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as error:
            raise ValueError(
                f"--replay {text}: cannot read {text[1:]} ({error.strerror}); name a file that "
                "holds a history the kit printed"
            ) from None
    try:
        return _checked_history(json.loads(source))
    except json.JSONDecodeError as error:
        raise ValueError(f"the history is not JSON: {error}") from error
