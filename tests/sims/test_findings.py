"""Remembered findings: the failing plan explore found is kept and tried first next time, so a
bug once found is not lost to a smaller budget (docs/search.md, "Remembered findings")."""

from __future__ import annotations

from pathlib import Path

import pytest

from sims import DropLeg, FaultPlan
from sims.cli._main import main
from sims.search._explore import search
from sims.search._findings import findings, recall, remember

EXAMPLES = Path(__file__).parents[2] / "examples"
WORLD = f"{EXAMPLES / 'double_charge.py'}:double-charge"
#: Two clean worlds and one more: too few to find the double charge by searching.
SMALL = 3


def _search(folder: Path | None, worlds: int, jobs: int = 1) -> object:
    return search(
        WORLD, max_worlds=worlds, max_seconds=None, fresh_process=False, findings=folder, jobs=jobs
    )


def test_a_finding_is_tried_first_next_time_so_a_small_budget_still_finds_it(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "findings"
    assert search(WORLD, max_worlds=SMALL, max_seconds=None, fresh_process=False).found is None
    first = search(WORLD, max_worlds=120, max_seconds=None, fresh_process=False, findings=folder)
    assert first.found is not None
    assert not first.recalled
    assert first.remembered is not None
    assert first.remembered.parent == folder
    again = search(WORLD, max_worlds=SMALL, max_seconds=None, fresh_process=False, findings=folder)
    assert again.found is not None
    assert again.recalled
    assert again.found.plan == first.found.plan
    assert "it is the plan an earlier search of this world found, tried first." in list(
        again.lines()
    )
    # Not asked to remember: nothing read, nothing written.
    other = tmp_path / "other"
    assert (
        search(WORLD, max_worlds=SMALL, max_seconds=None, fresh_process=False, findings=None).found
        is None
    )
    assert not other.exists()


def test_a_remembered_plan_is_the_first_plan_whatever_the_number_of_jobs(tmp_path: Path) -> None:
    folder = tmp_path / "findings"
    found = search(WORLD, max_worlds=120, max_seconds=None, fresh_process=False, findings=folder)
    assert found.found is not None
    answers = []
    for jobs in (1, 2):
        report = search(
            WORLD,
            max_worlds=SMALL,
            max_seconds=None,
            fresh_process=False,
            findings=folder,
            jobs=jobs,
        )
        assert report.found is not None
        answers.append((report.found.plan, report.worlds, report.recalled))
    assert answers[0] == answers[1]


def test_a_remembered_plan_that_passes_now_is_forgotten_and_the_search_goes_on(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "findings"
    harmless = FaultPlan((DropLeg(drive="cron", operation="claim_due", nth=99, leg="reply"),))
    path = remember(folder, "late-claim", 1, None, harmless)
    assert path is not None
    report = search("late-claim", max_worlds=10, max_seconds=None, findings=folder)
    assert report.found is None
    assert report.worlds == 10
    assert not path.exists()


def test_the_file_is_text_keyed_by_the_world_and_never_run_as_code(tmp_path: Path) -> None:
    plan = FaultPlan((DropLeg(drive="cron", operation="begin", nth=1, leg="reply"),))
    path = remember(tmp_path, "late-claim", 7, "patch-owner", plan)
    assert path is not None
    assert path.read_text() == (
        f"scenario: late-claim\nseed: 7\nmutant: patch-owner\nplan: {plan!r}\n"
    )
    found = recall(tmp_path, "late-claim", 7, "patch-owner")
    assert found is not None
    assert found.plan == plan
    # Another seed, or no mutant, is another world.
    assert recall(tmp_path, "late-claim", 8, "patch-owner") is None
    assert recall(tmp_path, "late-claim", 7, None) is None
    # A plan that would run code is not read: the file is ignored, and listed as unreadable.
    marker = tmp_path / "ran"
    path.write_text(
        "scenario: late-claim\nseed: 7\nmutant: patch-owner\n"
        f"plan: __import__('pathlib').Path({str(marker)!r}).touch()\n"
    )
    assert recall(tmp_path, "late-claim", 7, "patch-owner") is None
    assert findings(tmp_path) == ([], [path])
    assert not marker.exists()
    # A world whose name holds a line break is not remembered (a field is one line).
    assert remember(tmp_path, "a\nb", 1, None, plan) is None


def test_the_command_line_remembers_lists_and_clears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "kept"
    monkeypatch.setenv("SIMS_FINDINGS", str(folder))
    assert main(["explore", WORLD, "--budget", "120", "--no-remember"]) == 1
    assert not folder.exists()
    capsys.readouterr()
    assert main(["explore", WORLD, "--budget", "120"]) == 1
    out = capsys.readouterr().out
    (path,) = folder.iterdir()
    assert (
        f"remembered in {path}: tried first when this world is explored again (python -m sims "
        "findings lists and clears what is remembered)"
    ) in out.splitlines()
    (plan,), unreadable = findings(folder)
    assert (plan.seed, plan.mutant, unreadable) == (1, None, [])
    other = remember(folder, "late-claim", 2, None, plan.plan)
    assert other is not None

    assert main(["findings"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"findings: 2 findings remembered in {folder}:",
        f"  {plan.scenario}, seed 1: {plan.plan!r}",
        f"    {path}",
        f"  late-claim, seed 2: {plan.plan!r}",
        f"    {other}",
    ]
    assert main(["findings", "clear", "late-claim"]) == 0
    assert capsys.readouterr().out == f"findings: cleared 1 finding of late-claim from {folder}\n"
    assert path.exists()
    assert not other.exists()
    assert main(["findings", "list", "late-claim"]) == 0
    assert capsys.readouterr().out == f"findings: none of late-claim remembered in {folder}\n"
    assert main(["findings", "clear"]) == 0
    assert capsys.readouterr().out == f"findings: cleared 1 finding from {folder}\n"
    assert list(folder.iterdir()) == []


def test_explore_keeps_its_findings_in_the_folder_it_runs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SIMS_FINDINGS")
    monkeypatch.chdir(tmp_path)
    assert main(["explore", WORLD, "--budget", "120"]) == 1
    (path,) = (tmp_path / ".sims" / "findings").iterdir()
    assert path.name.endswith(".plan")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".sims"]
    capsys.readouterr()
    assert main(["findings"]) == 0
    assert capsys.readouterr().out.startswith("findings: 1 finding remembered in .sims/findings:")
