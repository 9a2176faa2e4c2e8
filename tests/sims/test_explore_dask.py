"""Explore on a real Dask cluster (a scheduler and two worker processes on loopback, as
test_dask_sweep starts them): the same answer as in one process, finding or clean."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sims import SearchReport, search

from .test_dask_sweep import cluster  # noqa: F401  (the fixture: a scheduler and its workers)

RACY = Path(__file__).parent / "worlds" / "racy_jobs.py"


def _answer(report: SearchReport) -> list[str]:
    timing = re.compile(rf" in [0-9.]+ s of {re.escape(report.where)}")
    return [timing.sub(" in T", line) for line in report.lines()]


@pytest.mark.parametrize(("name", "worlds"), [("check-then-send", 300), ("at-least-once", 80)])
def test_explore_on_a_cluster_answers_as_one_process_does(
    cluster: str,  # noqa: F811
    name: str,
    worlds: int,
) -> None:
    scenario = f"{RACY}:{name}"
    here = search(scenario, max_worlds=worlds, max_seconds=None, fresh_process=False)
    there = search(
        scenario, max_worlds=worlds, max_seconds=None, fresh_process=False, scheduler=cluster
    )
    assert _answer(there) == _answer(here)
    assert there.coverage == here.coverage
    assert there.where == f"wall-clock time on the cluster at {cluster}"
