"""The oracle stands apart from the code it checks: its modules take constants and the ISO time
spelling from ``driver``, and nothing else from ``driver`` or ``scopehost``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SIMS = Path(__file__).parents[2] / "sims"
ORACLE_MODULES = sorted([SIMS / "_oracle.py", *SIMS.glob("_model*.py")])
#: What the oracle may import besides the standard library: its own modules, attrs, and how a
#: number of ms is written in a sentence.
OWN = {"_model", "_probes", "_numbers"}
#: The ISO time spelling, both ways: how stored times are written is part of the contract.
TIME_SPELLING = {"parse_iso_ms", "iso_from_ms"}


def forbidden_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in {"driver", "scopehost"}]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level and not any(module.startswith(own) for own in OWN):
                found.append(f".{module}")
            elif module.split(".")[0] == "scopehost":
                found.append(module)
            elif module.split(".")[0] == "driver":
                found += [
                    f"driver.{a.name}"
                    for a in node.names
                    if not (a.name.isupper() or a.name in TIME_SPELLING)
                ]
    return found


def test_the_oracle_modules_are_all_found() -> None:
    names = {path.name for path in ORACLE_MODULES}
    assert {"_oracle.py", "_model.py", "_model_kernel.py", "_model_drive.py"} <= names


@pytest.mark.parametrize("path", ORACLE_MODULES, ids=lambda path: path.name)
def test_an_oracle_module_imports_no_decision_code(path: Path) -> None:
    assert forbidden_imports(path.read_text()) == []


def test_the_import_check_sees_decision_code() -> None:
    source = (
        "from driver import JOB_LEASE_MS, admission_backoff_ms\n"
        "import scopehost\n"
        "from scopehost._database import ScopeDatabase\n"
        "from ._world import World\n"
        "from ._model_records import Row\n"
    )
    assert forbidden_imports(source) == [
        "driver.admission_backoff_ms",
        "scopehost",
        "scopehost._database",
        "._world",
    ]
