"""The user's code, compiled with a probe at the start of each way of each of its branches.

Explore measures which branches of the user's code its worlds took (``sims.search._user_code``).
A tracer would do it without touching the code, but on Python 3.11 any trace function puts every
frame of the thread, the simulator's and Trio's too, in CPython's slow tracing mode: a world cost
3.5 to 4 times a plain one under coverage.py's (docs/decisions.md). So the user's files are
instrumented when they are compiled instead, as a coverage-guided fuzzer's compiler does: at the
start of each way of a branch, one statement, ``__sims_hits__[ID] = 1``, a store into a list the
module's globals hold (one list per file), which costs a few instructions and nothing anywhere
else.

The ways probed, each an arc ``(FROM, TO)`` of lines as coverage.py names them: a function's
entry (``-DEF`` to its first statement), both sides of every ``if`` (an ``else:`` holding only the
probe is added where there is none, so that the way past is seen too), a ``try``'s body and each
of its handlers, a loop's body and its way past (through its ``else:``, added likewise; a ``while
True`` has none), and each ``case`` of a ``match`` and the way past them all. Module-level code runs
once, at import, before any world: only the code inside functions is probed. A probe takes the
location of the statement it precedes (or of its branch's line), and no other node moves, so
tracebacks and a finding's ``FILE:LINE in FUNCTION`` name the user's lines as written.

The ids are the ways' places in the file's syntax tree, in order: the same file gives the same
ids in every process, whatever was imported before it.

Which files: the world file :func:`~._registry.load_file` loads, and the modules it imports while
it loads (:func:`loading_users_code`), when they are the user's: neither the project's packages
(``driver``, ``scopehost``, ``sims``, ``serviceclients``) nor Python's library or an installed
package. A module imported before, or after, is compiled as usual and not measured.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.machinery
import os
import re
import site
import sys
import sysconfig
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import CodeType, ModuleType

import attrs

#: The global each instrumented module holds its file's hits in.
HITS = "__sims_hits__"

#: coverage.py's default exclusion: a way whose lines carry it is not reported as untaken.
_NO_COVER = re.compile(r"#\s*(pragma|PRAGMA)[:\s]?\s*(no|NO)\s*(cover|COVER)")

#: The project's own packages, which sit side by side (this file is sims/scenarios/_instrument.py).
_ROOT = Path(__file__).resolve().parents[2]
_NOT_USERS = tuple(
    str(folder) + os.sep
    for folder in (
        *(_ROOT / name for name in ("driver", "scopehost", "sims", "serviceclients")),
        *(
            Path(place).resolve()
            for place in {
                *(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib")),
                sysconfig.get_paths()["platlib"],
                *site.getsitepackages(),
                site.getusersitepackages(),
            }
        ),
    )
)


def is_users(path: str | os.PathLike[str]) -> bool:
    """Whether the Python file at ``path`` is the user's code: not the project's, not Python's
    library, not an installed package."""
    resolved = str(Path(path).resolve())
    return resolved.endswith(".py") and not resolved.startswith(_NOT_USERS)


@attrs.frozen
class Way:
    """One way of a branch (or a function's entry): the arc it is, and the lines that say
    whether it is excluded (``# pragma: no cover`` on any of them)."""

    start: int
    to: int
    #: The first and last line of what introduces the way: the branch's line to the way's first.
    lines: tuple[int, int]


@attrs.frozen
class Instrumented:
    """A user's file as it was compiled: its ways, by probe id, and which of them ran."""

    path: str
    ways: tuple[Way, ...]
    #: One item per way, set to 1 by its probe: the list the module's ``__sims_hits__`` is.
    hits: list[int] = attrs.field(eq=False)

    def reset(self) -> None:
        self.hits[:] = [0] * len(self.ways)

    def taken(self) -> frozenset[tuple[int, int]]:
        ways = self.ways
        return frozenset((ways[i].start, ways[i].to) for i, hit in enumerate(self.hits) if hit)


#: The user's files instrumented in this process, by resolved path.
INSTRUMENTED: dict[str, Instrumented] = {}


def instrument(source: bytes, path: str) -> tuple[CodeType, list[int]]:
    """``source`` (the file at ``path``) compiled with its probes, and the list they set."""
    tree = ast.parse(source, path)
    ways = _Prober(insert=True).module(tree)
    code = compile(tree, path, "exec", dont_inherit=True)
    key = str(Path(path).resolve())
    known = INSTRUMENTED.get(key)
    if known is None or known.ways != ways:  # new, or changed and loaded again
        known = INSTRUMENTED[key] = Instrumented(key, ways, [0] * len(ways))
    return code, known.hits


def ways_of(path: str) -> tuple[Way, ...] | None:
    """The ways of the file at ``path``: as it was compiled in this process, else as it reads now
    (None: it is gone, or not Python)."""
    known = INSTRUMENTED.get(path)
    if known is not None:
        return known.ways
    try:
        return _Prober(insert=False).module(ast.parse(Path(path).read_bytes(), path))
    except (OSError, SyntaxError, ValueError):
        return None


def excluded(way: Way, lines: Sequence[str]) -> bool:
    first, last = way.lines
    return any(_NO_COVER.search(line) for line in lines[first - 1 : last])


class _Prober:
    """Finds the ways of a module's functions, in order, and (``insert``) puts their probes in."""

    def __init__(self, *, insert: bool) -> None:
        self.insert = insert
        self.ways: list[Way] = []
        self.depth = 0  # functions the statement is in: module-level code is not probed

    def module(self, tree: ast.Module) -> tuple[Way, ...]:
        self.block(tree.body, -1)
        return tuple(self.ways)

    def block(self, body: list[ast.stmt], after: int) -> None:
        """Probe inside ``body``, whose end goes on to line ``after`` (negative: out of the
        function)."""
        for index, statement in enumerate(list(body)):
            following = body[index + 1].lineno if index + 1 < len(body) else after
            self.statement(statement, following)

    def way(self, start: int, to: int, lines: tuple[int, int] | None = None) -> int | None:
        """A new way from line ``start`` to ``to``, introduced by ``lines`` (default: the lines
        from the branch's to the way's first), and its probe's id; None outside functions."""
        if not self.depth:
            return None
        self.ways.append(Way(start, to, lines if lines is not None else (start, to)))
        return len(self.ways) - 1

    def probe(self, body: list[ast.stmt], way: int | None, at: ast.AST, index: int = 0) -> None:
        """Put way ``way``'s probe in ``body`` at ``index``, placed at ``at``'s line."""
        if way is None or not self.insert:
            return
        store = ast.Assign(
            targets=[
                ast.Subscript(
                    value=ast.Name(id=HITS, ctx=ast.Load()),
                    slice=ast.Constant(value=way),
                    ctx=ast.Store(),
                )
            ],
            value=ast.Constant(value=1),
        )
        for node in ast.walk(store):
            ast.copy_location(node, at)
        body.insert(index, store)

    def statement(self, node: ast.stmt, following: int) -> None:
        match node:
            case ast.FunctionDef() | ast.AsyncFunctionDef():
                self.function(node)
            case ast.ClassDef():
                self.block(node.body, following)
            case ast.If():
                self.branch(node, node.body, node.orelse, following)
            case ast.For() | ast.AsyncFor() | ast.While():
                endless = (
                    isinstance(node, ast.While)
                    and isinstance(node.test, ast.Constant)
                    and bool(node.test.value)
                )
                self.branch(node, node.body, node.orelse, following, loop=True, endless=endless)
            case ast.Try() | ast.TryStar():
                body = self.way(node.lineno, node.body[0].lineno)
                handlers = [
                    self.way(node.lineno, handler.lineno, (handler.lineno, handler.body[0].lineno))
                    for handler in node.handlers
                ]
                self.block(node.body, following)
                for handler in node.handlers:
                    self.block(handler.body, following)
                self.block(node.orelse, following)
                self.block(node.finalbody, following)
                self.probe(node.body, body, node.body[0])
                for handler, way in zip(node.handlers, handlers, strict=True):
                    self.probe(handler.body, way, handler.body[0])
            case ast.With() | ast.AsyncWith():
                self.block(node.body, following)
            case ast.Match():
                self.match(node, following)
            case _:
                pass

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        body = node.body
        documented = (
            isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        )
        # The probe goes after a docstring, which must stay the body's first statement.
        first = body[1] if documented and len(body) > 1 else body[0]
        self.depth += 1
        try:
            way = self.way(-node.lineno, first.lineno, (node.lineno, first.lineno))
            self.block(body, -node.lineno)
            self.probe(body, way, first, 1 if documented else 0)
        finally:
            self.depth -= 1

    def branch(
        self,
        node: ast.If | ast.For | ast.AsyncFor | ast.While,
        body: list[ast.stmt],
        orelse: list[ast.stmt],
        following: int,
        *,
        loop: bool = False,
        endless: bool = False,
    ) -> None:
        """An ``if`` or a loop: the way into its body, and the way past it (its ``else:``, added
        where there is none)."""
        into = self.way(node.lineno, body[0].lineno)
        past = None
        if not endless:
            if orelse:
                # The ``else:`` line has no node: the lines after the body's end up to the first.
                else_line = (body[-1].end_lineno or node.lineno) + 1
                past = self.way(node.lineno, orelse[0].lineno, (else_line, orelse[0].lineno))
            else:
                past = self.way(node.lineno, following, (node.lineno, node.lineno))
        self.block(body, node.lineno if loop else following)
        self.block(orelse, following)
        self.probe(body, into, body[0])
        if orelse:
            self.probe(orelse, past, orelse[0])
        elif past is not None and self.insert:
            self.probe(orelse, past, node)

    def match(self, node: ast.Match, following: int) -> None:
        ways = [
            self.way(node.lineno, case.pattern.lineno, (case.pattern.lineno, case.body[0].lineno))
            for case in node.cases
        ]
        last = node.cases[-1]
        caught = (
            isinstance(last.pattern, ast.MatchAs)
            and last.pattern.pattern is None
            and not last.guard
        )
        past = None if caught else self.way(node.lineno, following, (node.lineno, node.lineno))
        for case in node.cases:
            self.block(case.body, following)
        for case, way in zip(node.cases, ways, strict=True):
            self.probe(case.body, way, case.body[0])
        if past is not None and self.insert:
            rest: list[ast.stmt] = []
            self.probe(rest, past, node)
            wildcard = ast.MatchAs(pattern=None, name=None)
            node.cases.append(ast.match_case(pattern=ast.copy_location(wildcard, node), body=rest))


class _Loader(importlib.machinery.SourceFileLoader):
    """Loads a user's file compiled with its probes, and never through a ``.pyc``: a cached
    instrumented file would be read by a later plain import, and a plain one would skip the
    probes."""

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        return instrument(self.get_data(path), path)[0]

    def exec_module(self, module: ModuleType) -> None:
        path = self.get_filename(module.__name__)
        code, hits = instrument(self.get_data(path), path)
        module.__dict__[HITS] = hits
        exec(code, module.__dict__)


def users_loader(name: str, path: str) -> importlib.machinery.SourceFileLoader:
    """The loader of a user's file at ``path``, as module ``name``: instrumented, if it is the
    user's."""
    if is_users(path):
        return _Loader(name, path)
    return importlib.machinery.SourceFileLoader(name, path)


class _UsersFinder:
    """Finds modules as the path finder does, and gives the user's its instrumenting loader."""

    @classmethod
    def find_spec(
        cls, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if (
            spec is None
            or type(spec.loader) is not importlib.machinery.SourceFileLoader
            or spec.origin is None
            or not is_users(spec.origin)
        ):
            return None  # the finders after this one find it again, as if it were not here
        spec.loader = _Loader(fullname, spec.origin)
        return spec


@contextlib.contextmanager
def loading_users_code() -> Iterator[None]:
    """Instrument the user's modules imported inside the block. The finder goes just before the
    path finder, after any other (pytest's assertion rewriting, an editable install's), and
    only for the block: a test module imported later is pytest's as usual."""
    if _UsersFinder in sys.meta_path:  # a world file loaded while another loads
        yield
        return
    place = next(
        (i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
        len(sys.meta_path),
    )
    sys.meta_path.insert(place, _UsersFinder)
    try:
        yield
    finally:
        sys.meta_path.remove(_UsersFinder)
