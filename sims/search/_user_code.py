"""Which lines and branches of the user's own code a world ran, and which branches no world took.

The windows and marks say what a world did to the job; they do not say which of the user's own
paths ran: the ``except ServiceTimeout`` of a handler, the ``if found is None`` of a step body,
the refusal of a service operation. A search that counts those can prefer the plans that open a
new one, and its clean result can name the branches it never took, as a coverage-guided fuzzer
does.

What is measured is the user's code: the world file, and the user's modules it imports as it
loads (the ones its handlers, step bodies, service operations and checks come from, as a rule),
never the project's own (``driver``, ``scopehost``, ``sims``, ``serviceclients``), Python's
library or an installed package. A built-in scenario's code is all the project's, so its worlds
are not measured at all.

The measuring is a probe at the start of each way of each branch, put in as the file is compiled
(:mod:`sims.scenarios._instrument`; docs/decisions.md says why not coverage.py's tracer): a world
is measured by clearing the probes' lists as it starts and reading them as it ends, and costs
little more than a plain one (bench/README.md). A module the process imported before it loaded
the world file was compiled without probes, and is not measured; a world file imported so is
said to be, in the report, rather than measured as if none of its code ran.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import attrs

from ..scenarios._instrument import INSTRUMENTED, excluded, ways_of
from ..scenarios._registry import ScenarioRef, display_path, find_scenario

#: The prefix of a feature that names one way of the user's code a world took:
#: ``code:PATH:FROM->TO`` (an arc of lines; a negative FROM is a function's entry, a negative TO
#: the way out of one).
CODE = "code:"
#: The feature of a world that was not measured, and why (the words after the prefix).
UNMEASURED = "code-unmeasured:"
_IMPORTED_BEFORE = (
    "the world file was imported as a module before it was loaded as FILE.py:NAME, so it was "
    "compiled without probes"
)

Plan = TypeVar("Plan")
Made = TypeVar("Made")

#: How many of the branches no world took a report lists, before "and N more".
SHOWN_BRANCHES = 10


@attrs.define
class UserCodeReached:
    """What one world ran of the user's code: filled in when the world ends."""

    #: The arcs taken, by the file's absolute path.
    arcs: dict[str, frozenset[tuple[int, int]]] = attrs.field(factory=dict)
    #: Why the world was not measured (None: it was, or it ran no code of the user's).
    unmeasured: str | None = None

    def features(self) -> frozenset[str]:
        """The arcs as a search's features (``code:PATH:FROM->TO``), or why none were taken."""
        if self.unmeasured is not None:
            return frozenset({UNMEASURED + self.unmeasured})
        return frozenset(
            f"{CODE}{path}:{start}->{end}"
            for path, arcs in self.arcs.items()
            for start, end in arcs
        )


@contextlib.contextmanager
def measuring(scenario: ScenarioRef | str) -> Iterator[UserCodeReached]:
    """Measure the user's code the world of ``scenario`` runs inside the block: the result is
    filled in as the block ends, however it ends."""
    reached = UserCodeReached()
    try:
        source = find_scenario(scenario).source  # loads (and instruments) the file the first time
    except ValueError:  # the world raises it as its own error, which is not the measuring's
        source = None
    if source is None:  # a built-in scenario: all the project's code
        yield reached
        return
    if str(Path(source).resolve()) not in INSTRUMENTED:
        reached.unmeasured = _IMPORTED_BEFORE
        yield reached
        return
    files = list(INSTRUMENTED.values())
    for file in files:
        file.reset()
    try:
        yield reached
    finally:
        taken = {file.path: file.taken() for file in files}
        reached.arcs = {path: arcs for path, arcs in sorted(taken.items()) if arcs}


# -- the report ------------------------------------------------------------------------------


@attrs.frozen
class UntakenBranch:
    """One way of a branch of the user's code that some world came to and none took."""

    path: str
    line: int
    #: The line the untaken way goes to; negative: out of the function (or loop's code object).
    to: int
    #: The branch's own line, as written.
    source: str
    #: The line the untaken way goes to, as written ("" for a way out of the function).
    target: str = ""

    def words(self) -> str:
        """Where the branch is, and where the way no world took would have gone: the line to
        open is the target's, the one that never ran."""
        if self.to <= 0:
            way = "the way out of the function"
        elif self.target:
            way = f"the way to line {self.to} (`{self.target}`)"
        else:
            way = f"the way to line {self.to}"
        return f"{display_path(self.path)}:{self.line}: `{self.source}`: {way} never taken"


def code_arcs(features: Iterable[str]) -> dict[str, set[tuple[int, int]]]:
    """The arcs of the user's code among ``features``, by file."""
    arcs: dict[str, set[tuple[int, int]]] = {}
    for feature in features:
        if feature.startswith(CODE):
            path, _, arc = feature[len(CODE) :].rpartition(":")
            start, _, end = arc.partition("->")
            arcs.setdefault(path, set()).add((int(start), int(end)))
    return arcs


def untaken_branches(taken: Mapping[str, Iterable[tuple[int, int]]]) -> list[UntakenBranch]:
    """The ways of the user's branches that no world took, of the branches some world took
    another way of.

    A branch no world came to at all lies behind one of these (or in a function no world called,
    another scenario's, say), so these are the frontier: the first places where every world went
    the same way. Ways whose lines say ``# pragma: no cover`` are left out, as coverage.py leaves
    them out."""
    untaken: list[UntakenBranch] = []
    for path in sorted(taken):
        ways = ways_of(path)
        if ways is None:  # gone or changed since: nothing to say
            continue
        went = set(taken[path])
        branches: dict[int, list[tuple[int, int]]] = {}
        for way in ways:
            if way.start > 0:  # a branch's way, not a function's entry
                branches.setdefault(way.start, []).append((way.start, way.to))
        try:
            lines = Path(path).read_text().splitlines()
        except (OSError, ValueError):
            continue
        skipped = {(way.start, way.to) for way in ways if excluded(way, lines)}
        for line, arcs in sorted(branches.items()):
            if len(arcs) < 2 or went.isdisjoint(arcs):
                continue
            for arc in sorted(set(arcs) - went - skipped):
                source = lines[line - 1].strip() if line <= len(lines) else ""
                target = lines[arc[1] - 1].strip() if 0 < arc[1] <= len(lines) else ""
                untaken.append(UntakenBranch(path, line, arc[1], _short(source), _short(target)))
    return untaken


def _short(source: str, most: int = 60) -> str:
    return source if len(source) <= most else source[: most - 1] + "…"


def new_code_first(
    firsts: Mapping[Plan, Made], reached: Mapping[Plan, frozenset[str]], clean: frozenset[str]
) -> dict[Plan, Made]:
    """``firsts`` (single faults, in the order their stage ran them) with those whose world took
    an arc of the user's code that neither the clean world nor an earlier one of them took put
    first, each group in its own order: a fault that opened a new path of the user's code is the
    likeliest ground for a second one. Depends on the worlds' results alone, never on timing."""
    seen = {feature for feature in clean if feature.startswith(CODE)}
    opened: dict[Plan, Made] = {}
    others: dict[Plan, Made] = {}
    for plan, value in firsts.items():
        taken = {feature for feature in reached.get(plan, ()) if feature.startswith(CODE)}
        (opened if taken - seen else others)[plan] = value
        seen |= taken
    return {**opened, **others}
