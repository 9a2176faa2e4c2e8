"""A newcomer's invoice job, held by the project's tools.

Real host (serve.py, subprocesses) -> `python -m sims check` on its recorded history; a SIGKILLed
serve -> the incident restored in a world; two deploy bugs of our own (invoices.py) -> `explore`
with its default budget, and `before-deploy` over runs a real v1 host left in flight.

Every path is relative to this file; nothing sleeps in real time in this process (the real host
runs in subprocesses, on its own wall clock).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sims import DeployAfter, FaultPlan, check_deploy, simulate
from tests.newcomer.invoices import (
    INVOICE_V1,
    INVOICE_V2_NUMBER,
    INVOICE_V2_NUMBER_FIXED,
    INVOICE_V2_REKEY,
    INVOICE_V2_REKEY_FIXED,
)

HERE = Path(__file__).resolve().parent
WORLD = HERE / "world.py"
PY = sys.executable


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, *args],
        cwd=HERE,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sims(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run("-m", "sims", *args, env=env)


def serve(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run("serve.py", "--data", str(data), *args, timeout=300)


def show(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


# -- 1. a real history, recorded and judged ---------------------------------------------------


def test_a_recorded_history_is_judged_with_the_oracles_models(tmp_path: Path) -> None:
    data = tmp_path / "data"
    served = serve(data, "--invoices", "8", "--drop-mail", "3", "--record", str(data / "history"))
    assert served.returncode == 0, show(served)
    assert "twice: []" in served.stdout

    checked = sims("check", str(data / "history"))
    assert checked.returncode == 0, show(checked)
    assert "the oracle's models of the store and the kernel followed the history" in checked.stdout
    assert "every check held" in checked.stdout
    # both drives recorded their side: the history is of two drives
    history = "".join(p.read_text() for p in (data / "history").glob("history-*.jsonl"))
    assert '"drive":"cron"' in history.replace(" ", "")
    assert '"drive":"alarm"' in history.replace(" ", "")


# -- 2. an incident becomes a world -----------------------------------------------------------


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A serve killed by SIGKILL right after its third mail was sent, before it was answered."""
    data = tmp_path_factory.mktemp("incident")
    served = serve(
        data, "--invoices", "6", "--kill-after-mail", "3", "--record", str(data / "history")
    )
    assert served.returncode == -signal.SIGKILL, show(served)
    return data


def test_the_killed_history_is_judged(incident: Path) -> None:
    checked = sims("check", str(incident / "history"))
    assert checked.returncode == 0, show(checked)
    said = checked.stdout.replace("\n    ", " ")  # its long lines unwrapped
    assert "the process was killed or stopped recording there" in said


def test_the_incident_goes_on_in_a_world_and_its_double_mail_shows(incident: Path) -> None:
    env = {"INVOICE_INCIDENT": str(incident)}
    fine = sims("run", f"{WORLD}:incident", env=env)
    assert fine.returncode == 0, show(fine)
    assert "your check mailed-once-from-the-incident: held" in fine.stdout
    assert "mail.send for run" in fine.stdout
    assert "a repeat, answered by its idempotency key" in fine.stdout

    explored = sims("explore", f"{WORLD}:incident", "--budget", "60", "--no-remember", env=env)
    assert explored.returncode == 0, show(explored)
    assert "no check failed in 60 worlds" in explored.stdout

    # release 2's new mail key, driven over the incident, mails the killed pass's invoice again
    rekeyed = sims("run", f"{WORLD}:incident-rekey", env=env)
    assert rekeyed.returncode == 1, show(rekeyed)
    assert "was mailed 2 times: 1 before the incident, 1 in this world" in rekeyed.stdout


# -- 3a. deploy bugs, found by explore with its DEFAULT budget --------------------------------


@pytest.mark.parametrize(
    ("scenario", "finding"),
    [
        ("deploy-number", "numbered-before-mailed"),
        ("deploy-rekey", "mailed-once"),
    ],
)
def test_explore_finds_the_deploy_bug(scenario: str, finding: str) -> None:
    explored = sims("explore", f"world.py:{scenario}", "--no-remember")
    assert explored.returncode == 1, show(explored)
    assert "DeployAfter(version='v2'" in explored.stdout
    assert f"[violation] {finding}" in explored.stdout
    assert "a fresh process reproduced it byte for byte" in explored.stdout


@pytest.mark.parametrize("scenario", ["deploy-number-fixed", "deploy-rekey-fixed"])
def test_explore_finds_nothing_in_the_fixed_release(scenario: str) -> None:
    explored = sims("explore", f"world.py:{scenario}", "--no-remember")
    assert explored.returncode == 0, show(explored)
    assert "no check failed in 300 worlds" in explored.stdout
    assert "a pass over the steps another version ran" in explored.stdout


def test_the_plan_explore_found_for_bug_b_replays_in_process() -> None:
    plan = FaultPlan(
        faults=(DeployAfter(version="v2", drive="cron", operation="record_step", nth=2),)
    )
    bad = simulate(f"{WORLD}:deploy-number", 1, plan=plan)
    assert not bad.report.ok
    assert "numbered-before-mailed" in str(bad.report.violations)
    good = simulate(f"{WORLD}:deploy-number-fixed", 1, plan=plan)
    assert good.ok, good.report.violations


def test_release_1_alone_is_clean_over_seeds(sims_worlds) -> None:  # type: ignore[no-untyped-def]
    sims_worlds(f"{WORLD}:invoices", seeds=range(10))


# -- 3b. before-deploy over runs a real v1 host left in flight --------------------------------


@pytest.fixture(scope="module")
def archive_down(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """v1 runs in flight: rendered and mailed, their archive refused (503), waiting to retry."""
    data = tmp_path_factory.mktemp("archive-down")
    served = serve(data, "--invoices", "4", "--archive-down", "--stop-in-flight")
    assert served.returncode == 0, show(served)
    assert "running': 4" in served.stdout
    return data


@pytest.fixture(scope="module")
def mail_lost(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """v1 runs in flight: every mail sent, its answer lost (ServiceTimedOut), waiting to retry."""
    data = tmp_path_factory.mktemp("mail-lost")
    served = serve(data, "--invoices", "4", "--drop-mail", "1000", "--stop-in-flight")
    assert served.returncode == 0, show(served)
    return data


def test_before_deploy_reports_the_new_step_put_first(archive_down: Path) -> None:
    found = sims(
        "before-deploy",
        "invoices.py:INVOICE_V2_NUMBER",
        "--runs",
        str(archive_down),
        "--world",
        "world.py:invoices",
    )
    assert found.returncode == 1, show(found)
    assert "step 'number'" in found.stdout
    assert "4 runs in flight; 0 can go on under the new code; 4 cannot" in found.stdout

    fixed = sims(
        "before-deploy",
        "invoices.py:INVOICE_V2_NUMBER_FIXED",
        "--runs",
        str(archive_down),
        "--world",
        "world.py:invoices",
    )
    assert fixed.returncode == 0, show(fixed)
    assert "4 runs in flight; 4 can go on under the new code; 0 cannot" in fixed.stdout


def test_check_deploy_from_python(archive_down: Path) -> None:
    world = f"{WORLD}:invoices"
    assert not check_deploy(INVOICE_V2_NUMBER, [str(archive_down)], world=world).ok
    verdict = check_deploy(INVOICE_V2_NUMBER_FIXED, [str(archive_down)], world=world)
    assert verdict.ok, "\n".join(verdict.lines())


def test_before_deploy_reports_the_changed_mail_key_given_the_old_code(mail_lost: Path) -> None:
    # Each run's ledger holds 'email' attempted and failed (the mail WAS sent, its answer lost);
    # the new code repeats 'email' by the same name under a new key. The ledger keeps no keys:
    # without the old code the check says so, and with it (--old) it compares the two repeats.
    world = f"{WORLD}:invoices"
    alone = check_deploy(INVOICE_V2_REKEY, [str(mail_lost)], world=world)
    assert alone.ok, "\n".join(alone.lines())
    said = " ".join(alone.lines()).replace("\n    ", " ")  # its long lines unwrapped
    assert "whether the new code repeats what the old code attempted under the same" in said
    found = check_deploy(INVOICE_V2_REKEY, [str(mail_lost)], world=world, old=INVOICE_V1)
    assert not found.ok, "\n".join(found.lines())
    assert {finding.rule for finding in found.findings} == {"key-changed"}
    assert "the old code repeats its mail.send under idempotency key " in found.findings[0].text
    fixed = check_deploy(INVOICE_V2_REKEY_FIXED, [str(mail_lost)], world=world, old=INVOICE_V1)
    assert fixed.ok, "\n".join(fixed.lines())
