"""The kit catches a one-line slip on each corner it aims at for null owners, imports, the largest
admission backoff and a step that returned JSON null, on every seed from 0 to 9 at its default
size, at the corner's operation and by the corner's rule (the adapters:
``conformance_corner_slips.py``). That each corner is reached and counted on every seed is
``test_kit_trial35.py``'s ``test_new_corners_are_counted_on_every_seed``.

Beside them: an ``earlier`` import step restores the export each store answered at an earlier
step (and a history without that export is refused), and each difference's sentence names the
new rule where it decides the step."""

from __future__ import annotations

import json
import re
from typing import Any, Final

import pytest

from scopehost import ScopeDatabase
from sims.conformance import (
    DEFAULT_EXAMPLES,
    LocalTarget,
    ReferenceStore,
    load_history,
    replay_history,
    run_conformance,
)
from sims.conformance._explain import explain
from sims.conformance._history import EPOCH

from .conformance_corner_slips import (
    BackoffCappedAtFourMinutes,
    CopyReplaces,
    CopySkipsHeldIds,
    ImportTrustsTheDump,
    JsonNullResultAsNone,
    NullOwnerPatchesAny,
    PatchOwnerEquals,
)
from .kit_trial35_adapters import ADAPTERS

SEEDS: Final = range(10)

#: Each slip, the operations it may be caught at, and the rule the difference must name.
SLIPS: Final[dict[str, tuple[type[ScopeDatabase], tuple[str, ...], str]]] = {
    "patch-owner-equals": (PatchOwnerEquals, ("patch", "commit_pass"), "rule patch-null-owner"),
    "null-owner-patches-any": (
        NullOwnerPatchesAny,
        ("patch", "commit_pass"),
        "rule patch-null-owner",
    ),
    "copy-replaces": (CopyReplaces, ("import_dump",), "rule copy-beside-held"),
    "import-trusts-the-dump": (ImportTrustsTheDump, ("import_dump",), "rule import-wrong-source"),
    "copy-skips-held-ids": (CopySkipsHeldIds, ("import_dump",), "rule copy-conflict"),
    "backoff-capped-at-four-minutes": (
        BackoffCappedAtFourMinutes,
        ("miss",),
        "rule miss-largest-backoff",
    ),
    "json-null-result-as-none": (
        JsonNullResultAsNone,
        ("record_step", "begin_step"),
        "rule step-result-json-null",
    ),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", SLIPS)
def test_each_slip_is_caught_on_every_seed_by_its_rule(name: str, seed: int) -> None:
    database, ops, rule = SLIPS[name]
    target = LocalTarget(ReferenceStore(database=database), name=name)
    report = run_conformance(target, examples=DEFAULT_EXAMPLES, seed=seed, shrink=False)
    assert report.failure is None, report.failure
    assert report.difference is not None, f"seed {seed} missed {name}"
    assert report.difference.op in ops, report.difference.line()
    assert rule in report.difference.rule, report.difference.rule


def _start(id: str) -> dict[str, Any]:
    row = {
        "id": id,
        "module_id": "m1",
        "job": "walk",
        "instance": "default",
        "payload": "{}",
        "subject_id": None,
        "status": "running",
        "cursor": None,
        "counters": "{}",
        "attempts": 0,
        "last_error": None,
        "started_at": EPOCH,
        "updated_at": EPOCH,
        "next_attempt_at": None,
        "ended_at": None,
        "lease_owner": None,
        "lease_began_at": None,
        "admission_misses": None,
    }
    key = {"module_id": "m1", "job": "walk", "instance": "default"}
    return {"op": "start_or_join", "scope": "a", "now": EPOCH, "args": {"key": key, "row": row}}


#: An export, then a run with a step row of its own, then the earlier export restored.
EARLIER_RESTORE: Final = [
    {"op": "export_dump", "scope": "a", "now": EPOCH, "args": {}},
    _start("r01"),
    {
        "op": "claim",
        "scope": "a",
        "now": EPOCH,
        "args": {"id": "r01", "owner": "o1", "lease_ms": 60_000},
    },
    {
        "op": "record_step",
        "scope": "a",
        "now": EPOCH,
        "args": {
            "run_id": "r01",
            "name": "fetch",
            "result": '"ok"',
            "attempts": 1,
            "last_error": None,
            "at": EPOCH,
            "owner": "o1",
            "lease_ms": 60_000,
        },
    },
    {
        "op": "import_dump",
        "scope": "a",
        "now": EPOCH,
        "args": {"dump_of": "a", "source": "a", "earlier": True},
    },
]


def test_an_earlier_import_restores_the_export_each_store_answered_then() -> None:
    agreed = replay_history(EARLIER_RESTORE, target=LocalTarget(ReferenceStore()))
    assert agreed.ok, agreed.difference
    stray = ADAPTERS["restore-keeps-stray-ledger"]
    report = replay_history(EARLIER_RESTORE, target=LocalTarget(ReferenceStore(database=stray)))
    assert report.difference is not None
    assert (report.difference.step, report.difference.op) == (5, "import_dump")
    assert report.difference.rule.endswith(
        "what the scope holds and the dump does not is deleted, not kept: run r01; step row "
        "r01/fetch (rule restore-earlier-dump)"
    )


def test_an_earlier_import_needs_an_export_of_its_scope_before_it() -> None:
    expected = (
        "step 4 imports an earlier dump of 'a', but no export_dump step of scope 'a' comes "
        "before it; add one, or drop 'earlier'"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        load_history(json.dumps(EARLIER_RESTORE[1:]))
    flagged = {**EARLIER_RESTORE[-1], "args": {"dump_of": "a", "source": "a", "earlier": 1}}
    with pytest.raises(ValueError, match=r"with 'earlier': true to import the dump"):
        load_history(json.dumps([*EARLIER_RESTORE[:-1], flagged]))


def _explained(op: str, args: dict[str, Any], tables: dict[str, Any]) -> str:
    rule, _rows = explain({"op": op, "scope": "a", "now": EPOCH, "args": args}, tables)
    return rule


def test_each_new_rule_is_named_where_it_decides_the_step() -> None:
    free = _start("r01")["args"]["row"]
    leased = {
        **free,
        "id": "r02",
        "lease_owner": "o1",
        "next_attempt_at": "2026-10-04T12:01:00.000Z",
    }
    tables = {"runs": [free, leased], "steps": []}
    patch = {"status": "running", "counters": "{}"}
    applies = _explained("patch", {"id": "r01", "patch": patch, "owner": None}, tables)
    assert applies.startswith(
        "the owner is null, which matches only a run no pass holds (lease_owner IS NULL: rule "
        "patch-null-owner); no pass holds run r01, so the patch must apply"
    )
    refused = _explained("commit_pass", {"id": "r02", "patch": patch, "owner": None}, tables)
    assert "run r02 is held by o1, not by None, so the commit_pass must return false" in refused
    record = {"run_id": "r02", "name": "fetch", "result": "null", "owner": "o1", "lease_ms": 1_000}
    assert _explained("record_step", record, tables).endswith(
        "whose result is the JSON text null, a step that returned nothing: completed, stored as "
        "the text 'null' and never as SQL NULL, which means not completed (rule "
        "step-result-json-null)"
    )
    missed = {**free, "lease_owner": "o1", "next_attempt_at": EPOCH, "admission_misses": 8}
    ninth = _explained("miss", {"id": "r01", "owner": "o1", "note": "n"}, {"runs": [missed]})
    assert ninth == (
        "this is admission miss 9 of 10, which releases the lease and backs the run off 256000 "
        "ms, until 12:04:16.000Z (min(300000, 1000 * 2^8)): the largest backoff a miss writes, "
        "since the tenth fails the run before the doubling reaches the cap (rule "
        "miss-largest-backoff)"
    )
    copy = {
        "op": "import_dump",
        "scope": "b",
        "now": EPOCH,
        "args": {"dump_of": "a", "source": "a"},
    }
    beside, _rows = explain(copy, {"runs": [leased], "steps": []}, {"runs": [free], "steps": []})
    assert beside.endswith(
        "the 1 run and 0 step rows the scope already holds stay beside them, untouched: a copy "
        "replaces nothing (rule copy-beside-held)"
    )
