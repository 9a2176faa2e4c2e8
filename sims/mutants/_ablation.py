"""Source ablations: one line of the real code changed, for the length of one world.

A mutant that re-implements a store method or a kernel function tests the re-implementation as
much as the checks. An ablation instead takes the module's own source, replaces exactly one
fragment (which must occur exactly once), compiles it, and swaps the changed functions' code into
the live function objects — methods included — so every caller, wherever it imported the name
from, runs the broken line. Changed module-level values (a constant, an SQL statement) are swapped
wherever a ``driver`` or ``scopehost`` module holds them. Everything is put back on exit.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FunctionType, ModuleType
from typing import Any

import attrs


@attrs.frozen
class Ablation:
    """Replace ``old`` (found exactly once) by ``new`` in module ``module``'s source."""

    module: str
    old: str
    new: str


def _functions(value: Any) -> Iterator[tuple[str, FunctionType]]:
    if isinstance(value, FunctionType):
        yield "", value
    elif isinstance(value, type):
        for name, member in vars(value).items():
            inner = member.__func__ if isinstance(member, staticmethod | classmethod) else member
            if isinstance(inner, property):
                for part in ("fget", "fset"):
                    function = getattr(inner, part)
                    if isinstance(function, FunctionType):
                        yield f"{name}.{part}", function
            elif isinstance(inner, FunctionType):
                yield name, inner


def _apply(ablation: Ablation, undo: list[tuple[Any, str, Any]]) -> None:
    module = importlib.import_module(ablation.module)
    source = inspect.getsource(module)
    found = source.count(ablation.old)
    if found != 1:
        raise ValueError(
            f"ablation of {ablation.module}: {ablation.old!r} occurs {found} times; it must "
            "occur exactly once"
        )
    namespace: dict[str, Any] = {
        "__name__": module.__name__,
        "__package__": module.__package__,
        "__file__": module.__file__,
    }
    exec(
        compile(source.replace(ablation.old, ablation.new), str(module.__file__), "exec"), namespace
    )
    for name, new in namespace.items():
        old = module.__dict__.get(name)
        if old is None or name.startswith("__"):
            continue
        if isinstance(old, FunctionType | type) and type(old) is type(new):
            olds = dict(_functions(old))
            for key, function in _functions(new):
                target = olds.get(key)
                if target is not None and target.__code__ != function.__code__:
                    undo.append((target, "__code__", target.__code__))
                    target.__code__ = function.__code__
        elif isinstance(old, str | int | float) and old != new:
            for holder in _holders(old):
                for attr, value in list(vars(holder).items()):
                    if value is old:
                        undo.append((holder, attr, value))
                        setattr(holder, attr, new)


def _holders(value: Any) -> list[ModuleType]:
    return [
        module
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in ("driver", "scopehost") and module is not None
    ]


@contextmanager
def ablated(*ablations: Ablation) -> Iterator[None]:
    """The code with every ablation applied, restored afterwards (even on error)."""
    undo: list[tuple[Any, str, Any]] = []
    try:
        for ablation in ablations:
            _apply(ablation, undo)
        yield
    finally:
        for target, attr, value in reversed(undo):
            setattr(target, attr, value)
