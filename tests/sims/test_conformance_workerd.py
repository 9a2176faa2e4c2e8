"""The repository's first target: the JavaScript worker in workerd agrees with the reference.

It needs Node and npm (``.ci/run`` installs the worker's pinned packages with ``npm ci``). It does
not skip when they are missing: a conformance check that quietly did not run would say nothing.
"""

from __future__ import annotations

import json
import re

from scopehost import _sql
from sims.conformance import WORKERD_FOLDER, run_conformance

#: CI compares at least this many histories against workerd on every run.
HISTORIES = 300


def test_workerd_agrees_with_the_reference_on_300_histories() -> None:
    report = run_conformance("workerd", examples=HISTORIES, seed=20261201)
    print("\n".join(report.lines()))
    assert report.ok, "\n".join(report.lines())
    assert report.histories >= HISTORIES
    assert report.operations >= 5 * HISTORIES


def test_the_worker_runs_the_spec_sql_character_for_character() -> None:
    source = (WORKERD_FOLDER / "spec-sql.js").read_text(encoding="utf-8")
    spelled = {
        name: json.loads(text)
        for name, text in re.findall(r'^export const (\w+) = (".*");$', source, re.MULTILINE)
    }
    names = [name for name in dir(_sql) if name.startswith("JOB_")]
    assert sorted(spelled) == sorted(names)
    for name in names:
        assert spelled[name] == getattr(_sql, name), name
