"""What every test shares: explore's remembered findings kept apart, per test.

``python -m sims explore`` keeps the failing plan it finds in ``.sims/findings`` of the folder it
runs in and tries it first the next time (docs/search.md). A test that runs it would otherwise
leave findings in the checkout, and a later test (or a later run of the suite) would start from
them: each test gets a folder of its own, which a subprocess it starts inherits.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _findings_apart(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not the test's own tmp_path: a test may hold that folder's contents.
    folder: Path = tmp_path_factory.mktemp("findings")
    monkeypatch.setenv("SIMS_FINDINGS", str(folder))
