"""Sweeps on a real Dask cluster: a scheduler and two worker processes on loopback, started as a
user starts them, and the CLI pointed at them prints the report a local sweep prints."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import distributed
import pytest

from sims import sweep
from sims.cli._main import main

from .test_sweep import assert_reports_every_raise, raising_worlds

# The dask command beside this interpreter: the one a user of this virtual environment runs.
DASK = str(Path(sys.executable).parent / "dask")
SEEDS = "0..23"


def _without_timings(report: str) -> str:
    return re.sub(r" in [0-9.]+ s \([0-9.]+ seeds/s\)", " in T s (R seeds/s)", report)


def _sims(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sims", *args], capture_output=True, text=True, timeout=300
    )


def _wait_for(path: Path, *, what: str, process: subprocess.Popen[bytes]) -> None:
    # Real processes start in real time; this waits on them, it does not time anything.
    deadline = time.monotonic() + 60
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what} did not start (exit code {process.poll()})")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("dask")
    scheduler_file = folder / "scheduler.json"
    scheduler = subprocess.Popen(
        [
            DASK,
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(scheduler_file),
        ],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers = None
    try:
        _wait_for(scheduler_file, what="the dask scheduler", process=scheduler)
        workers = subprocess.Popen(
            [
                DASK,
                "worker",
                "--scheduler-file",
                str(scheduler_file),
                "--nworkers",
                "2",
                "--nthreads",
                "2",
                "--host",
                "127.0.0.1",
                "--no-dashboard",
            ],
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        yield str(address)
    finally:
        for process in (workers, scheduler):
            if process is not None:
                process.terminate()
                process.wait(timeout=60)


def test_a_cluster_sweep_prints_what_a_local_sweep_prints(cluster: str) -> None:
    # Two worker processes with two threads each: the worlds still run one at a time per
    # process, so every verdict is the one a local sweep reaches.
    on_cluster = _sims("sweep", "random", "--seeds", SEEDS, "--scheduler", cluster)
    local = _sims("sweep", "random", "--seeds", SEEDS, "--jobs", "2")
    assert on_cluster.returncode == local.returncode == 0, on_cluster.stderr
    assert _without_timings(on_cluster.stdout) == _without_timings(local.stdout)
    assert on_cluster.stdout.startswith("sweep random: 24 seeds in ")


def test_a_cluster_sweep_finds_what_a_local_sweep_finds(cluster: str) -> None:
    # A broken store: the failing seeds, their replay commands and their words are the same.
    on_cluster = sweep("random", range(40), scheduler=cluster, mutant="begin-margin")
    local = sweep("random", range(40), jobs=1, mutant="begin-margin")
    assert on_cluster.failing, "the mutant should be caught on the cluster too"
    assert on_cluster.seeds == local.seeds
    assert list(on_cluster.lines())[1:] == list(local.lines())[1:]


def test_worlds_that_raise_are_findings_on_the_cluster_as_they_are_locally(
    cluster: str, tmp_path: Path
) -> None:
    # An exception group, a user's exception pickle cannot rebuild, one it cannot pickle at all:
    # each comes back from a Dask worker as its seed's finding, and the report is printed.
    path = raising_worlds(tmp_path)
    on_cluster = sweep(f"{path}:raises-by-seed", range(4), scheduler=cluster)
    assert_reports_every_raise(on_cluster, path)
    local = sweep(f"{path}:raises-by-seed", range(4), jobs=2)
    assert list(on_cluster.lines())[1:] == list(local.lines())[1:]


def test_an_unknown_scenario_fails_on_the_cluster_as_it_does_locally(cluster: str) -> None:
    with pytest.raises(ValueError, match=r"^no scenario 'nowhere'; the scenarios are: "):
        sweep("nowhere", range(2), scheduler=cluster)


def test_a_scheduler_nobody_runs_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Port 9 on loopback: nothing listens there on these machines (discard is not served). The
    # refusal is noticed by a plain connection first: Dask's client would retry it for 30 s.
    def no_client(*args: object, **kwargs: object) -> None:
        raise AssertionError("a refused port must be reported before Dask's client retries it")

    monkeypatch.setattr(distributed, "Client", no_client)
    assert main(["sweep", "random", "--seeds", "0..1", "--scheduler", "tcp://127.0.0.1:9"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: cannot reach the Dask scheduler at tcp://127.0.0.1:9: ")
    assert error.rstrip().endswith(
        "start one with `dask scheduler` and workers with `dask worker ADDRESS`"
    )


def test_a_malformed_scheduler_address_is_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sweep", "random", "--seeds", "0..1", "--scheduler", "127.0.0.1:8786"]) == 2
    assert capsys.readouterr().err == (
        "error: scheduler '127.0.0.1:8786' is not a Dask address; write it as tcp://HOST:PORT "
        "(the address `dask scheduler` prints)\n"
    )


def test_jobs_and_a_scheduler_do_not_go_together() -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "random", "--seeds", "0..1", "--jobs", "2", "--scheduler", "tcp://h:1"])
    assert exit_.value.code == 2
    with pytest.raises(ValueError, match=r"^jobs=2 with scheduler='tcp://h:1'; a cluster sets"):
        sweep("random", range(1), jobs=2, scheduler="tcp://h:1")
