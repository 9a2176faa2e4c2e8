"""An incident becomes a world: the rows a real host left when it was killed mid-pass, read from
its data folder, restored in a world with their times moved to the world's clock, and driven on
by the same handler; the search explores it from where it stands."""

from __future__ import annotations

from pathlib import Path

import pytest

from driver import parse_iso_ms
from scopehost import DEFAULT_EPOCH_MS, read_scope_file
from sims import WorldError, explore_plans, simulate
from sims.world._incident import latest_ms, moved

from .test_check import record_in_a_process

ROOT = Path(__file__).parents[2]
WORLD = "tests/sims/worlds/incident.py:resume"


@pytest.fixture
def incident(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real host killed the moment its store committed step 'one' of its run's pass."""
    assert record_in_a_process(tmp_path, database="DiesAfterStepOne", runs="1") == 9
    dump = read_scope_file(tmp_path / "scopes" / "s.sqlite3")
    saved = tmp_path / "incident.json"
    saved.write_text(dump.to_json(), encoding="utf-8")
    monkeypatch.setenv("INCIDENT_DUMP", str(saved))
    monkeypatch.chdir(ROOT)
    return saved


def test_the_folder_holds_the_half_done_run(incident: Path, tmp_path: Path) -> None:
    dump = read_scope_file(tmp_path / "scopes" / "s.sqlite3")
    assert dump.scope_id == "s"
    (run,) = dump.runs
    assert (run.status, run.lease_owner is not None) == ("running", True)
    assert [step.step for step in dump.steps] == ["one"]


def test_the_world_goes_on_from_where_the_host_stopped(incident: Path) -> None:
    simulation = simulate(WORLD, 1)
    assert simulation.report.ok, simulation.report.verdict()
    events = simulation.outcome.trace.events
    # The run the host left is taken over once its lease (moved to the world's clock) runs out;
    # its step 'one' is the ledger's memo, not run again, and 'two' runs.
    assert [e["step"] for e in events if e["ev"] == "hx.fn"] == ["two"]
    assert [e["step"] for e in events if e["ev"] == "step.memo"] == ["one"]
    assert any(e["ev"] == "claim.won" and e["takeover"] for e in events)
    (run,) = simulation.outcome.runs["s"]
    assert run.status == "done"


def test_the_incident_is_explored_from_where_it_stands(incident: Path) -> None:
    assert explore_plans(WORLD, max_examples=50) is None


def test_a_file_that_is_not_a_scopes_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"is not a file; give a scope's \.sqlite3 file$"):
        read_scope_file(tmp_path / "none.sqlite3")
    (tmp_path / "text.sqlite3").write_text("not a database")
    with pytest.raises(ValueError, match=r"does not read as a scope's file \(file is not a data"):
        read_scope_file(tmp_path / "text.sqlite3")


def test_restoring_a_service_the_world_lacks_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    with pytest.raises(WorldError, match=r"no service 'card' in this world \(its services: none\)"):
        simulate("tests/sims/worlds/incident.py:no-such-service", 1)


def test_times_keep_their_distance_from_the_moment_of_the_incident(
    incident: Path, tmp_path: Path
) -> None:
    # The moment is the latest time something happened (here the step's record), never a time
    # the dump points to ahead (the lease's expiry): the lease keeps what it had left.
    dump = read_scope_file(tmp_path / "scopes" / "s.sqlite3")
    (run,) = dump.runs
    assert run.next_attempt_at is not None
    (step,) = dump.steps
    assert latest_ms(dump) == parse_iso_ms(step.recorded_at)
    left = parse_iso_ms(run.next_attempt_at) - latest_ms(dump)
    assert left > 0
    restored = moved(dump, "elsewhere", DEFAULT_EPOCH_MS - latest_ms(dump))
    assert restored.scope_id == "elsewhere"
    assert parse_iso_ms(restored.runs[0].next_attempt_at or "") - DEFAULT_EPOCH_MS == left


def test_a_restore_after_the_drives_began_is_refused(incident: Path) -> None:
    with pytest.raises(WorldError, match=r"world.restore\('s', ...\) after the world's drives"):
        simulate("tests/sims/worlds/incident.py:restore-late", 1)


def test_new_code_that_renames_a_step_the_ledger_holds_is_reported_with_the_remedy(
    incident: Path,
) -> None:
    # The same code carries the ledger; the next version, its step 'one' renamed 'first', would
    # run the step's effect again; one that reads a payload field the old runs lack cannot go on.
    assert simulate(WORLD, 1).report.ok
    (finding,) = simulate("tests/sims/worlds/incident.py:deploy-renamed", 1).report.violations
    assert finding.check == "carries-the-ledger"
    assert finding.text.endswith(
        "the ledger holds 'one' from a pass of the old code, and the new code called 'first' "
        "before 'one': a step called under a new name, or out of its order, runs its effect "
        "again; keep the old step name, or register the new code as a new job (version it)"
    )
    raised = simulate("tests/sims/worlds/incident.py:deploy-raises", 1).report.violations
    assert [f.check for f in raised if f.check == "carries-the-ledger"] == ["carries-the-ledger"]
    (said,) = [f.text for f in raised if f.check == "carries-the-ledger"]
    assert "the new code raised TypeError at incident.py:" in said
