"""A seed means one set of draws: the kit's histories and explore's plans are the same from the
command line and from the Python API, whatever else the process loaded, and neither writes into
the folder it runs in.

What broke it: Hypothesis mixes the literals of the project's loaded modules ("local constants")
into its draws and caches them under ``.hypothesis/constants/`` in the working folder
(``sims/_seeded.py``). Each test below loads a module of its own full of small numbers first, the
kind of constant a draw of ``integers(0, 255)`` would take.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sims.conformance import run_conformance
from sims.search._explore import search

REPOSITORY = Path(__file__).parents[2]
#: The reference served on the wire: the kit's target that needs nothing installed.
REFERENCE = f"{sys.executable} -m sims.conformance"


@pytest.fixture
def extra_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module of the 'project' loaded into this process only, holding many small integers."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    numbers = ", ".join(str(n) for n in range(0, 256, 3))
    (folder / "many_small_numbers.py").write_text(f"NUMBERS = ({numbers})\n")
    monkeypatch.syspath_prepend(str(folder))
    importlib.import_module("many_small_numbers")


def _in_empty_folder(tmp_path: Path, *arguments: str) -> tuple[str, list[str]]:
    """``python -m sims ARGUMENTS`` in an empty folder: its stdout, and what it left there."""
    folder = tmp_path / "empty"
    folder.mkdir()
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    environment.pop("SIMS_FINDINGS", None)
    done = subprocess.run(
        [sys.executable, "-m", "sims", *arguments],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.mark.usefixtures("extra_module")
def test_a_seed_gives_the_kit_the_same_histories_from_the_cli_and_the_api(
    tmp_path: Path,
) -> None:
    out, left = _in_empty_folder(
        tmp_path, "conformance", "--target", REFERENCE, "--examples", "12", "--seed", "8"
    )
    found = re.search(r"(\d+) operations,.*; histories digest ([0-9a-f]{16})$", out, re.M)
    assert found is not None, out
    report = run_conformance(REFERENCE, examples=12, seed=8)
    assert report.ok
    assert (report.operations, report.digest) == (int(found[1]), found[2])
    assert left == []


def test_the_digest_tells_two_seeds_apart() -> None:
    # Otherwise the test above could pass on a digest that reads nothing.
    one, other = (run_conformance(REFERENCE, examples=3, seed=seed) for seed in (8, 9))
    assert one.digest != other.digest


def _without_seconds(lines: list[str]) -> list[str]:
    return [re.sub(r"in [0-9.]+ s of CPU", "in _ s of CPU", line) for line in lines]


@pytest.mark.usefixtures("extra_module")
def test_a_seed_gives_explore_the_same_search_from_the_cli_and_the_api(tmp_path: Path) -> None:
    # 150 worlds of late-claim reach the plans Hypothesis draws (after 34 single faults and
    # their pairs); what the summary counts depends on every plan drawn.
    out, left = _in_empty_folder(tmp_path, "explore", "late-claim", "--budget", "150")
    report = search("late-claim", max_worlds=150, max_seconds=None, fresh_process=False)
    assert report.worlds == 150
    assert _without_seconds(out.splitlines()) == _without_seconds(list(report.lines()))
    assert left == []


#: The plans of explore's Hypothesis stage for late-claim, as a digest: its first 300.
_DRAWN = """
import hashlib
from sims.search._drawn import Drawn, Tried
from sims.search._shape import world_shape

drawn = Drawn(world_shape("late-claim", seed=1), 4, 300, Tried(), lambda: None)
text = "\\n".join(repr(plan) for plan in drawn.plans())
print(hashlib.blake2b(text.encode(), digest_size=8).hexdigest())
"""


@pytest.mark.usefixtures("extra_module")
def test_explores_hypothesis_stage_draws_the_same_plans_in_any_process(tmp_path: Path) -> None:
    # A process that loads only what drawing needs, and this one, which loaded the test suite's
    # modules and one more of small numbers.
    folder = tmp_path / "empty"
    folder.mkdir()
    fresh = subprocess.run(
        [sys.executable, "-c", _DRAWN],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    here: dict[str, str] = {}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(_DRAWN, here)
    assert out.getvalue().strip() == fresh
    assert list(folder.iterdir()) == []
