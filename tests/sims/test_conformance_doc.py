"""docs/conformance.md's generated part (the SQL and the refusals) is what the source says, and
its refusal requests reach every refusal the store's operations raise."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from scopehost import _database
from sims.conformance._reference_doc import (
    BEGIN_MARK,
    END_MARK,
    generated_reference,
    refusal_replies,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
#: Refusals no wire request can reach: the constructor's (the wire names every scope), the
#: module-operation call (not an operation of the wire), and a dump that is not a JobRunDump
#: (the wire always builds one).
_UNREACHABLE_FUNCTIONS = {"__init__", "invoke"}


def test_the_page_holds_the_generated_reference() -> None:
    page = PAGE.read_text(encoding="utf-8")
    start, end = page.index(BEGIN_MARK), page.index(END_MARK) + len(END_MARK)
    assert page[start:end] == generated_reference(), (
        "docs/conformance.md is behind the source: run "
        "python -m sims.conformance.write_reference docs/conformance.md"
    )


def _refusal_lines() -> set[int]:
    """The lines of scopehost/_database.py that raise ValidationFailed, outside the functions
    no wire request reaches."""
    tree = ast.parse(Path(_database.__file__).read_text(encoding="utf-8"))
    lines: set[int] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or function.name in _UNREACHABLE_FUNCTIONS:
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Raise) and "ValidationFailed" in ast.unparse(node):
                if "JobRunDump" in ast.unparse(function) and "isinstance(dump" in (
                    ast.unparse(node.exc) if node.exc else ""
                ):
                    continue
                lines.add(node.lineno)
    # A wire request's dump and patch are always built as a JobRunDump and a JobRunPatch (the
    # wire refuses anything else itself): the store's refusal of another value is Python's only.
    python_only = ("pass the JobRunDump", "pass a driver.JobRunPatch")
    return lines - {
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise) and any(words in ast.unparse(node) for words in python_only)
    }


def test_the_refusal_requests_reach_every_refusal_of_the_store() -> None:
    path = _database.__file__
    reached: set[int] = set()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != path:
            return None
        if event == "line":
            reached.add(frame.f_lineno)
        return trace

    sys.settrace(trace)
    try:
        replies = refusal_replies()
    finally:
        sys.settrace(None)
    assert all(reply["ok"] is False for reply in replies), replies
    expected = _refusal_lines()
    assert expected
    assert sorted(expected - reached) == []
