"""The file layer is judged by the swarm: in a world on files, the power goes, operators touch the
files through SQLite and their metadata, and another scope's file is put in place; a slip in the
scope's identity, the output gate's syncs or the watch is a violation of the rule it breaks.

Each slip below is one a new user wrote from docs/protocol.md alone; before the swarm touched its
files, the plain 200-seed sweep caught none of them."""

from __future__ import annotations

from typing import Any

import pytest

from scopehost import _gate, _host, _watch
from scopehost._files import Stamp
from sims import simulate
from sims._trace import HIDDEN_FOLDER, Trace, hide_world_folders
from sims.oracle._files import FileRules
from sims.runners._raised import WorldRaised

#: Seeds of the swarm drawn on files whose worlds lose power, touch their files from outside and
#: copy one scope's file over the other's.
ON_FILES = (18, 25)


def _violations(seed: int) -> set[str]:
    sim = simulate("random", seed)
    return {finding.check for finding in sim.report.findings if finding.verdict == "violation"}


@pytest.mark.parametrize("seed", ON_FILES)
def test_a_swarm_world_on_files_does_everything_to_its_files_and_holds(seed: int) -> None:
    sim = simulate("random", seed)
    assert sim.ok, sim.report
    events = sim.outcome.trace.events
    touched = {e["ev"] for e in events if e["ev"].startswith("file.")}
    assert touched >= {"file.power", "file.outside"}
    # The gate synced every write before its reply: the power took nothing.
    assert all(cut == 0 for e in events if e["ev"] == "file.power" for cut in e["cut"].values())
    assert all(e["refused"] is None for e in events if e["ev"] == "file.outside")
    probes = dict(sim.report.probes)
    assert probes.get("file.power")
    assert probes.get("file.outside")


def test_a_file_of_another_scope_served_is_a_file_identity_violation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copied = [seed for seed in ON_FILES if _copies(seed)]
    assert copied
    # The slip: the file's recorded scope is never read, so a copy of another's is served.
    monkeypatch.setattr(_host, "recorded_scope", lambda connection: None)
    assert "file-identity" in _violations(copied[0])


def _copies(seed: int) -> bool:
    return any(e["ev"] == "file.copied" for e in simulate("random", seed).outcome.trace.events)


def test_a_gate_that_syncs_only_the_first_write_loses_writes_to_the_power(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sync = _gate.ScopeFiles.sync

    def only_the_first(files: _gate.ScopeFiles) -> None:
        if files.synced < 0:
            sync(files)

    monkeypatch.setattr(_gate.ScopeFiles, "sync", only_the_first)
    assert "durable-writes" in _violations(ON_FILES[0])


def test_a_watch_that_judges_by_the_files_times_stops_a_scope_anyone_touches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def by_times(self: Any, file: Stamp, index: Any) -> str | None:
        return None if file == self._sight.file else "its times moved"

    monkeypatch.setattr(_watch.FileWatch, "_judge_file", by_times)
    found = set().union(*(_violations(seed) for seed in ON_FILES))
    assert "file-outside" in found


def test_a_world_folder_never_reaches_the_trace_or_the_verdict() -> None:
    trace = Trace(now=lambda: 0.0, hidden="/tmp/sims-world-abc")
    trace.record("x.y", {"error": "file /tmp/sims-world-abc/scope-1.sqlite3", "n": [1, "a"]})
    assert trace.events[0]["error"] == f"file {HIDDEN_FOLDER}/scope-1.sqlite3"
    assert trace.events[0]["n"] == [1, "a"]
    text = "moved to /tmp/sims-world-x_1y/scope-1.sqlite3-wal.kept; move '/var/t/sims-world-q/a'"
    assert hide_world_folders(text) == (
        f"moved to {HIDDEN_FOLDER}/scope-1.sqlite3-wal.kept; move '{HIDDEN_FOLDER}/a'"
    )
    raised = WorldRaised.of(1, OSError("no room in /tmp/sims-world-zz9/scope-2.sqlite3"))
    assert raised.message == f"no room in {HIDDEN_FOLDER}/scope-2.sqlite3"


def test_a_copy_the_watch_cannot_tell_apart_is_said_and_not_judged() -> None:
    found: list[tuple[Any, ...]] = []
    rules = FileRules(lambda *finding: found.append(finding), lambda probe: None)
    served = {"t": 1.0, "scope": "scope-1", "from": "scope-2", "refused": None}
    rules.on_written({**served, "alike": True})
    assert found == []
    rules.on_written({**served, "alike": False})
    rules.on_written({**served, "alike": False, "refused": "ScopeFileChanged"})
    assert [finding[0] for finding in found] == ["file-behind"]
    rules.on_refused({"t": 2.0, "scope": "scope-1", "refused": "ScopeFileChanged"})
    assert found[-1][0] == "file-outside"
