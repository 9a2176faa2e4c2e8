"""The four packages import in one direction (docs/layout.md): the kernel does no I/O and knows
neither the host nor the production adapters; the adapters know nothing of the simulator; the
simulator does not need httpx."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: For each package, the top-level modules its code must never import.
FORBIDDEN: dict[str, set[str]] = {
    "driver": {"scopehost", "serviceclients", "sims", "trio", "sqlite3", "time", "random", "httpx"},
    "serviceclients": {"scopehost", "sims"},
    "scopehost": {"serviceclients", "sims", "httpx"},
    "sims": {"serviceclients", "httpx"},
}


def imported_tops(path: Path) -> set[str]:
    tops: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            tops.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            tops.add(node.module.split(".")[0])
    return tops


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_nothing_its_layer_forbids(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no source in {package}/"
    broken = {
        str(path.relative_to(ROOT)): sorted(imported_tops(path) & FORBIDDEN[package])
        for path in files
        if imported_tops(path) & FORBIDDEN[package]
    }
    assert broken == {}
