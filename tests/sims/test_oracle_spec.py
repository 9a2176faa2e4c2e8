"""The oracle states the spec's constants itself; ``driver`` must agree with every one.

The oracle does not import them from ``driver``, so that a changed constant in the code is judged
by the spec's value rather than followed. This test is the other half: a deliberate change to a
constant has to be made in both places, and an accidental one fails here (and in a sweep).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import driver
from sims.oracle import _spec

SPEC_NAMES = sorted(_spec.DRIVER_NAMES)


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_driver_holds_the_oracle_s_value(name: str) -> None:
    assert getattr(driver, _spec.DRIVER_NAMES[name]) == getattr(_spec, name)


def test_every_constant_the_oracle_states_is_named_for_driver() -> None:
    stated = {n for n in vars(_spec) if n.isupper() and n != "DRIVER_NAMES"}
    assert stated == set(_spec.DRIVER_NAMES)


def test_the_oracle_states_its_constants_and_does_not_import_them() -> None:
    # Read from the source: the values are literals, not names bound to driver's.
    source = Path(_spec.__file__).read_text()
    tree = ast.parse(source)
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"__future__", "typing"}
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import)]
    literal = {
        target.id
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(target := node.target, ast.Name)
        if isinstance(node.value, ast.Constant)
    }
    assert set(SPEC_NAMES) <= literal
