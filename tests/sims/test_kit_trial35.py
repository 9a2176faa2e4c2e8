"""A new user's five one-bug store adapters (``kit_trial35_adapters.py``): the kit's default run
catches each on every seed, and reaches the corners three of them slip on, and the corners added
after them (``test_conformance_corner_slips.py`` holds a slip on each of those).

- ``record-keeps-first``: a step recorded again keeps its first row (caught at ``record_step``).
- ``commit-drops-all-ledgers``: a commit drops every run's ledger (caught at ``commit_pass``).
- ``erasure-skips-lists``: an erasure misses an envelope inside a JSON array (rule
  ``erase-inside-list``, caught at ``shred_subject``).
- ``list-by-started-at``: the operator read orders by ``started_at``, not by id (rule
  ``list-id-not-start``, caught at ``list``).
- ``restore-keeps-stray-ledger``: a restore keeps the step rows of runs its dump does not hold
  (rule ``restore-earlier-dump``, caught at ``import_dump``). An import of the dump its scope
  exports at that moment holds every run the scope has, so it cannot show the slip: the kit's
  ``earlier`` import restores the dump of an earlier ``export_dump`` step, after the scope gained
  a run with step rows of its own.
"""

from __future__ import annotations

import pytest

from scopehost import ScopeDatabase
from sims.conformance import (
    DEFAULT_EXAMPLES,
    ConformanceReport,
    LocalTarget,
    ReferenceStore,
    run_conformance,
)
from tests.sims.kit_trial35_adapters import ADAPTERS

SEEDS = range(10)
#: Each adapter the kit catches, with the operation it is caught at.
CAUGHT = {
    "record-keeps-first": "record_step",
    "commit-drops-all-ledgers": "commit_pass",
    "erasure-skips-lists": "shred_subject",
    "list-by-started-at": "list",
}
NEW_CORNERS = (
    "erase-inside-list",
    "list-id-not-start",
    "restore-earlier-dump",
    "copy-beside-held",
    "import-wrong-source",
    "patch-null-owner",
    "step-result-json-null",
    "miss-largest-backoff",
)


def _run(database: type[ScopeDatabase], name: str, seed: int) -> ConformanceReport:
    target = LocalTarget(ReferenceStore(database=database), name=name)
    return run_conformance(target, examples=DEFAULT_EXAMPLES, seed=seed, shrink=False)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_each_adapter_is_caught_on_every_seed(name: str, seed: int) -> None:
    report = _run(ADAPTERS[name], name, seed)
    assert report.failure is None, report.failure
    assert report.difference is not None, f"{name} slipped through on seed {seed}"
    assert report.difference.op == CAUGHT[name], report.difference.line()


@pytest.mark.parametrize("seed", SEEDS)
def test_restore_keeps_stray_ledger_is_caught(seed: int) -> None:
    name = "restore-keeps-stray-ledger"
    report = _run(ADAPTERS[name], name, seed)
    assert report.failure is None, report.failure
    assert report.difference is not None, f"{name} slipped through on seed {seed}"
    assert report.difference.op == "import_dump", report.difference.line()
    assert "rule restore-earlier-dump" in report.difference.rule, report.difference.rule


@pytest.mark.parametrize("seed", SEEDS)
def test_new_corners_are_counted_on_every_seed(seed: int) -> None:
    report = _run(ScopeDatabase, "reference", seed)
    assert report.ok, report.difference.line() if report.difference else report.failure
    for corner in NEW_CORNERS:
        assert report.exercised[corner] >= 1, f"seed {seed} did not reach {corner}"
    text = "\n".join(report.lines())
    for corner in NEW_CORNERS:
        assert f"  {corner} x{report.exercised[corner]}: " in text
