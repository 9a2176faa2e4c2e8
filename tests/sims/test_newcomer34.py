"""The default search finds each of newcomer34's five bugs and leaves each fix clean."""

from __future__ import annotations

from pathlib import Path

import pytest

import sims

WORLDS = Path(__file__).parent / "worlds" / "newcomer34.py"

PAIRS = [
    ("start-key-by-run", "start-key-by-order"),  # 1. a start answered late: a second run
    ("keys-forgotten-retry", "keys-forgotten-find-first"),  # 2. the provider's own time
    ("booking-chain", "booking-chain-fixed"),  # 3. three faults in a chain
    ("mail-key-by-address", "mail-key-by-order"),  # 4. inputs: two orders, one address
    ("outage-skips-payment", "outage-retries"),  # 5. a branch only an outage reaches
]


@pytest.mark.parametrize(("bug", "fix"), PAIRS, ids=[bug for bug, _ in PAIRS])
def test_default_search_finds_the_bug_and_not_the_fix(bug: str, fix: str) -> None:
    found = sims.search(f"{WORLDS}:{bug}", findings=None)
    assert found.found is not None, f"{bug}: the default search found nothing"
    clean = sims.search(f"{WORLDS}:{fix}", findings=None)
    assert clean.found is None, f"{fix}: the default search found {clean.found}"
