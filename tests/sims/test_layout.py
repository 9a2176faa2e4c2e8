"""The parts of ``sims`` import in one direction, as each package's docstring says.

Each rule is read from the source (every ``import`` and ``from ... import``, relative ones
resolved), so a new module is held to its package's rule the day it is written. The two rules
that matter most: the oracle takes nothing from the code it judges (no decision code of
``driver``, nothing of ``scopehost``), and the timeline reads only the trace (none of the world,
the runners, the store or the kernel), so a trace from anywhere draws the same page.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SIMS = Path(__file__).parents[2] / "sims"

#: The modules every part may use: how a trace is kept, how numbers and seeds read, and how
#: Hypothesis draws from a seed alone.
FOUNDATIONS = {"_trace", "_numbers", "_seeds", "_seeded"}

#: For each part, the other parts of ``sims`` it may import (its own is always allowed).
MAY_IMPORT: dict[str, set[str]] = {
    "oracle": {"_trace", "_numbers"},
    "faults": set(),
    "mutants": set(),
    "world": FOUNDATIONS | {"faults"},
    "timeline": {"_trace", "_numbers", "oracle", "faults", "mutants"},
    "scenarios": FOUNDATIONS | {"world", "faults", "runners", "oracle", "mutants"},
    "runners": FOUNDATIONS | {"world", "faults", "oracle", "mutants", "scenarios", "timeline"},
    "search": FOUNDATIONS | {"world", "faults", "oracle", "mutants", "scenarios", "runners"},
    "deploys": FOUNDATIONS | {"world", "faults", "oracle", "scenarios", "runners"},
    "conformance": {"_numbers", "_seeded"},
}

#: The ISO time spelling, both ways: how stored times are written is part of the contract.
TIME_SPELLING = {"parse_iso_ms", "iso_from_ms"}

#: Parts that may take from ``driver`` only the time spelling, and nothing from ``scopehost`` or
#: Trio: they judge or draw what the code did, so they must not run its code, nor read its numbers
#: (the oracle states the spec's constants itself, in ``sims/oracle/_spec.py``).
APART_FROM_THE_CODE = {"oracle", "timeline"}


def imports_of(source: str, module: str) -> list[tuple[str, str | None]]:
    """Every (absolute module, imported name or None) in ``source``, written in ``module``."""
    package = module.rsplit(".", 1)[0]
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                # ``from . import x`` may import a module x: count it as one.
                found.append((target, alias.name))
    return found


def broken_rules(part: str, source: str, module: str) -> list[str]:
    broken = []
    for target, name in imports_of(source, module):
        top, _, rest = target.partition(".")
        if top == "sims":
            other = (rest or name or "").split(".")[0]
            if other and other != part and other not in MAY_IMPORT[part]:
                broken.append(f"sims.{other}")
        elif part in APART_FROM_THE_CODE:
            if top in {"scopehost", "trio"}:
                broken.append(target)
            elif top == "driver" and name not in TIME_SPELLING:
                broken.append(f"driver.{name}")
    return broken


def modules_of(part: str) -> list[Path]:
    return sorted((SIMS / part).glob("*.py"))


@pytest.mark.parametrize("part", sorted(MAY_IMPORT))
def test_every_part_is_a_package(part: str) -> None:
    init = SIMS / part / "__init__.py"
    assert init.is_file()
    doc = " ".join((ast.get_docstring(ast.parse(init.read_text())) or "").split())
    # The package says what it does and what it may and must not import.
    assert "may import" in doc
    assert "must not import" in doc


def test_no_part_is_left_unruled() -> None:
    packages = {p.parent.name for p in SIMS.glob("*/__init__.py")}
    assert packages - {"cli"} == set(MAY_IMPORT)


@pytest.mark.parametrize(
    "path",
    [path for part in sorted(MAY_IMPORT) for path in modules_of(part)],
    ids=lambda path: f"{path.parent.name}/{path.name}",
)
def test_a_module_imports_only_what_its_part_may(path: Path) -> None:
    part = path.parent.name
    module = f"sims.{part}.{path.stem}"
    assert broken_rules(part, path.read_text(), module) == []


def test_the_oracle_and_the_timeline_are_found() -> None:
    assert {"_oracle.py", "_model.py", "_kernel.py", "_checks.py"} <= {
        p.name for p in modules_of("oracle")
    }
    assert {"_page.py", "_reader.py", "_story.py"} <= {p.name for p in modules_of("timeline")}


def test_the_import_check_sees_decision_code_in_the_oracle() -> None:
    source = (
        "from driver import JOB_LEASE_MS, admission_backoff_ms\n"
        "import scopehost\n"
        "from scopehost._database import ScopeDatabase\n"
        "from ..world._world import World\n"
        "from ._records import Row\n"
        "from .._trace import Trace\n"
    )
    assert broken_rules("oracle", source, "sims.oracle._checks") == [
        "driver.JOB_LEASE_MS",
        "driver.admission_backoff_ms",
        "scopehost",
        "scopehost._database",
        "sims.world",
    ]


def test_the_import_check_sees_the_timeline_reach_for_the_world() -> None:
    source = (
        "import trio\n"
        "from sims.runners._run import run_world\n"
        "from .. import world\n"
        "from ..oracle._checks import check_trace\n"
        "from ._model import Timeline\n"
    )
    assert broken_rules("timeline", source, "sims.timeline._page") == [
        "trio",
        "sims.runners",
        "sims.world",
    ]
