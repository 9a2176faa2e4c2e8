"""The SQL is the spec's, character for character.

``spec_sql.json`` holds every constant the spec declares with a literal value, copied once from the
original platform's declaration of its job-run module. The repository keeps that copy, so this
check needs nothing outside it; docs/protocol.md ("The SQL contract") explains the statements.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import driver
from scopehost import _sql

from .store_support import open_db

_FIXTURE = Path(__file__).with_name("spec_sql.json")
SPEC: dict[str, Any] = json.loads(_FIXTURE.read_text(encoding="utf-8"))["constants"]

SPEC_STATEMENTS = sorted(name for name in SPEC if name.endswith(("_SQL", "_DDL")))
#: Statements this implementation fixes that the spec only describes in prose.
DESIGN_STATEMENTS = {
    "JOB_RUN_DUE_SQL": (
        "SELECT id, module_id, job FROM _substrat_job_runs WHERE status = 'running' AND "
        "(next_attempt_at IS NULL OR next_attempt_at <= ?) "
        "ORDER BY COALESCE(next_attempt_at, started_at), id LIMIT ?"
    ),
    "JOB_RUN_LIVE_SQL": (
        "SELECT * FROM _substrat_job_runs WHERE module_id = ? AND job = ? AND instance = ? "
        "AND status = 'running' ORDER BY id DESC LIMIT 1"
    ),
}


def test_the_fixture_holds_all_eight_statements_of_the_spec() -> None:
    assert SPEC_STATEMENTS == [
        "JOB_RUN_BEGIN_SQL",
        "JOB_RUN_CLAIM_SQL",
        "JOB_RUN_DDL",
        "JOB_RUN_MISS_SETTLE_SQL",
        "JOB_RUN_MISS_SQL",
        "JOB_RUN_PATCH_SQL",
        "JOB_RUN_RENEW_SQL",
        "JOB_STEP_RECORD_SQL",
    ]


@pytest.mark.parametrize("name", SPEC_STATEMENTS)
def test_each_statement_is_the_spec_verbatim(name: str) -> None:
    assert getattr(_sql, name) == SPEC[name]


@pytest.mark.parametrize("name", sorted(DESIGN_STATEMENTS))
def test_each_design_read_is_the_design_verbatim(name: str) -> None:
    assert getattr(_sql, name) == DESIGN_STATEMENTS[name]


def test_every_statement_in_the_module_is_checked_here() -> None:
    in_module = {name for name in vars(_sql) if name.endswith(("_SQL", "_DDL"))}
    assert in_module == set(SPEC_STATEMENTS) | set(DESIGN_STATEMENTS)


def test_the_due_read_orders_by_the_spec_expression_the_index_spells() -> None:
    assert f"ORDER BY {SPEC['JOB_RUN_DUE_AT']}, id" in _sql.JOB_RUN_DUE_SQL
    assert f"(status, {SPEC['JOB_RUN_DUE_AT']}, id)" in _sql.JOB_RUN_DDL


@pytest.mark.parametrize(
    "name", sorted(name for name in SPEC if not name.endswith(("_SQL", "_DDL")))
)
def test_each_value_constant_the_spec_declares_matches_the_driver(name: str) -> None:
    assert getattr(driver, name) == SPEC[name]


@pytest.mark.parametrize(
    "name", sorted(set(SPEC_STATEMENTS) - {"JOB_RUN_DDL"} | {*DESIGN_STATEMENTS})
)
def test_each_statement_prepares_against_the_schema(name: str) -> None:
    conn = open_db().connection
    params = getattr(_sql, name).count("?")
    try:
        conn.execute("EXPLAIN " + getattr(_sql, name), (None,) * params).fetchall()
    except sqlite3.Error as error:  # pragma: no cover - the assertion below says which
        pytest.fail(f"{name} does not prepare: {error}")
