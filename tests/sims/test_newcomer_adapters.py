"""The eight one-slip ports of tests/sims/newcomer_adapters.py against the conformance kit.

(a) Each slip's kept history differs from the reference when replayed through the kit against the
adapter's own wire program, and the clean port agrees on the same history: the difference is the
slip. (b) The kit's default run (100 histories, shrinking off to stay quick) catches each slip on
seeds 1 to 10, at the operation the slip is in, with a rule that names what the slip breaks.
Where it does not (``SHORT``, measured), the cases are strict xfails: they pass once the kit does.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from sims.conformance import (
    DEFAULT_EXAMPLES,
    LocalTarget,
    ReferenceStore,
    replay_history,
    run_conformance,
)
from tests.sims.newcomer_adapters import ADAPTERS, SLIPS

_PROGRAM = Path(__file__).with_name("newcomer_adapters.py")
_NOTE = (
    "job m1/walk: claim not begun in time — leaseMs 1000, margin 250 ms, claim and begin took "
    "900 ms (admission miss 1 of 10)"
)


def _command(name: str) -> str:
    return f"{sys.executable} {_PROGRAM} {name}"


def _at(clock: str) -> str:
    return f"2026-10-04T{clock}Z"


def _step(op: str, clock: str, scope: str = "a", **args: Any) -> dict[str, Any]:
    return {"op": op, "scope": scope, "now": _at(clock), "args": args}


def _start(
    id: str, instance: str, clock: str, *, payload: str = "{}", counters: str = "{}"
) -> dict[str, Any]:
    row = {
        "id": id,
        "module_id": "m1",
        "job": "walk",
        "instance": instance,
        "payload": payload,
        "subject_id": None,
        "status": "running",
        "cursor": None,
        "counters": counters,
        "attempts": 0,
        "last_error": None,
        "started_at": _at(clock),
        "updated_at": _at(clock),
        "next_attempt_at": None,
        "ended_at": None,
        "lease_owner": None,
        "lease_began_at": None,
        "admission_misses": None,
    }
    key = {"module_id": "m1", "job": "walk", "instance": instance}
    return _step("start_or_join", clock, key=key, row=row)


def _patch(clock: str, *, next_attempt_at: str | None = None) -> dict[str, Any]:
    return {
        "status": "running",
        "cursor": None,
        "counters": "{}",
        "attempts": 0,
        "last_error": None,
        "updated_at": _at(clock),
        "next_attempt_at": None if next_attempt_at is None else _at(next_attempt_at),
        "ended_at": None,
    }


@attrs.frozen
class Kept:
    """A history that shows one slip, the step (1-based) and operation where it differs, and the
    pattern the kit's rule must match for the explanation to name the slip's rule."""

    history: list[dict[str, Any]]
    step: int
    op: str
    rule: str
    also: tuple[str, ...] = ()  # other operations the same rule is in


#: Each slip's history, first found by the kit (seed 1, shrunk) and kept here.
KEPT: dict[str, Kept] = {
    "list_limit_bool_as_number": Kept(
        [
            _start("r03", "k03", "12:00:00.000"),
            _start("r04", "k04", "12:00:00.000"),
            _step("list", "12:00:00.000", filter={"limit": True}),
        ],
        3,
        "list",
        r"the limit (true|false) is not a number: the default 50",
    ),
    "begin_keeps_misses": Kept(
        [
            _start("r05", "k05", "12:00:00.000"),
            _step("claim", "12:00:00.000", id="r05", owner="o01", lease_ms=1000),
            _step("miss", "12:00:00.000", id="r05", owner="o01", note=_NOTE),
            _step("claim", "12:00:01.000", id="r05", owner="o02", lease_ms=1002),
            _step("begin", "12:00:01.751", id="r05", owner="o02", margin_ms=250.5),
        ],
        5,
        "begin",
        r"clear admission_misses \(now \d+\) to null \(rule begin-clears-misses\)",
    ),
    "erase_declared_only": Kept(
        [
            _start(
                "r07",
                "k07",
                "12:00:01.751",
                payload='{"subjectId":"s1","piiClass":"email","n":"Ann"}',
            ),
            _step("shred_subject", "12:00:01.752", subject_id="s1"),
        ],
        2,
        "shred_subject",
        r"(its payload|only its cursor|only the result of step \S+) carries its envelope",
    ),
    "copy_drops_misses": Kept(
        [
            _start("r09", "k09", "12:00:03.759"),
            _step("claim", "12:00:03.759", id="r09", owner="o11", lease_ms=1000),
            _step("miss", "12:00:03.759", id="r09", owner="o11", note=_NOTE),
            _step("import_dump", "12:00:04.759", "b", dump_of="a", source="a"),
        ],
        4,
        "import_dump",
        r"a copy into another scope: .* added with every other column as exported",
    ),
    "commit_merges_counters": Kept(
        [
            _start("r11", "k11", "12:00:04.759", counters='{"walked":1}'),
            _step("claim", "12:00:04.759", id="r11", owner="o14", lease_ms=60000),
            _step(
                "commit_pass", "12:00:04.759", id="r11", patch=_patch("12:00:04.759"), owner="o14"
            ),
        ],
        3,
        "commit_pass",
        r"so the commit_pass must apply: the patch's columns as given \(its counters .* written "
        r"over the stored .*, never merged: rule commit-over-counters\)",
    ),
    "due_tie_newest_first": Kept(
        [
            _start("r10", "k10", "12:08:35.761"),
            _step("claim", "12:08:35.766", id="r10", owner="o23", lease_ms=1000),
            _start("r13", "k13", "12:08:36.766"),
            _step("due_keys", "12:08:36.766", now_param=_at("12:08:36.766"), max=500),
        ],
        4,
        "due_keys",
        r"a tie by id, lowest first \(rule due-tie\), at most \d+: ",
    ),
    "claim_strict_expiry": Kept(
        [
            _start("r01", "default", "12:00:00.000"),
            _step("claim", "12:00:00.000", id="r01", owner="o01", lease_ms=1000),
            _step(
                "commit_pass",
                "12:00:00.750",
                id="r01",
                patch=_patch("12:00:00.750", next_attempt_at="12:00:00.750"),
                owner="o01",
            ),
            _step("claim", "12:00:00.750", id="r01", owner="o02", lease_ms=1000),
        ],
        4,
        "claim",
        r"the run was due at (\S+), so the claim by \S+ at \1 takes it",
    ),
    "patch_paths_unprefixed": Kept(
        [
            _step(
                "commit_pass",
                "12:02:00.000",
                id="r01",
                patch={
                    **_patch("12:02:00.000", next_attempt_at="12:02:00.000"),
                    "status": "paused",
                },
                owner="o02",
            ),
        ],
        1,
        "commit_pass",
        r"^the reference refused this (patch|commit_pass) at its door \(validation_failed, with "
        r"the paths patch\.\w+\): .* \(rule door-refusals;",
        also=("patch",),
    ),
}


class RuleNotNamed(AssertionError):
    """The kit caught the slip at its operation, but explained it by another rule."""


#: What the default run measured when the slips were written (the CLI and the in-process run
#: alike, seeds 1..10, 100 histories): six slips caught on 10 of 10 seeds by their own rule, and
#: two short of it, since fixed in the kit: BEGIN-keeps-misses was caught on every seed but told
#: by BEGIN's margin test, never by the misses BEGIN clears; the patch's refusal paths were caught
#: on 3 seeds of 10, each told by what the request would have done had it been valid. Each case
#: below now asks for the slip's own rule by its name on every seed.
SHORT: dict[str, tuple[str, type[Exception] | None]] = {}


def test_every_slip_has_a_kept_history() -> None:
    assert sorted(KEPT) == sorted(SLIPS)


@pytest.mark.parametrize("name", SLIPS)
def test_kept_history_differs_from_the_reference(name: str) -> None:
    kept = KEPT[name]
    report = replay_history(kept.history, target=_command(name))
    assert report.failure is None
    assert report.difference is not None, f"{name}'s kept history agreed with the reference"
    assert (report.difference.step, report.difference.op) == (kept.step, kept.op)
    # The same history through the port without the slip agrees: the difference is the slip's.
    clean = replay_history(kept.history, target=_command("clean"))
    assert clean.failure is None
    assert clean.difference is None, clean.difference.line()


def test_the_clean_port_agrees_with_the_reference() -> None:
    target = LocalTarget(ReferenceStore(database=ADAPTERS["clean"]), name="clean")
    report = run_conformance(target, examples=DEFAULT_EXAMPLES, seed=1, shrink=False)
    assert report.failure is None
    assert report.difference is None, report.difference.line()


def _catch_cases() -> list[Any]:
    cases: list[Any] = []
    for name in SLIPS:
        marks = []
        if name in SHORT:
            reason, raises = SHORT[name]
            # Where only the rule was wrong, a miss or another operation still fails the test.
            marks.append(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
        cases.extend(pytest.param(name, seed, marks=marks) for seed in range(1, 11))
    return cases


@pytest.mark.parametrize(("name", "seed"), _catch_cases())
def test_default_run_catches_the_slip_by_its_rule(name: str, seed: int) -> None:
    kept = KEPT[name]
    target = LocalTarget(ReferenceStore(database=ADAPTERS[name]), name=name)
    report = run_conformance(target, examples=DEFAULT_EXAMPLES, seed=seed, shrink=False)
    assert report.failure is None
    assert report.difference is not None, f"seed {seed} missed {name}"
    assert report.difference.op in (kept.op, *kept.also)
    if not re.search(kept.rule, report.difference.rule):
        raise RuleNotNamed(f"{name} on seed {seed}: {report.difference.rule}")
