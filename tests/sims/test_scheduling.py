"""Seeded scheduling leans on trio's private hooks: they are checked, and a move says so."""

from __future__ import annotations

import re

import pytest
import trio

from sims import seed_scheduler
from sims.world._scheduling import TESTED_TRIO, TrioHooksMoved, check_trio_hooks


def interleaving(seed: int) -> list[int]:
    order: list[int] = []

    async def main() -> None:
        async def task(index: int) -> None:
            for _ in range(3):
                order.append(index)
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            for index in range(6):
                nursery.start_soon(task, index)

    seed_scheduler(seed)
    trio.run(main)
    return order


def test_the_installed_trio_has_the_hooks_and_a_seed_decides_the_interleaving() -> None:
    check_trio_hooks()
    assert interleaving(3) == interleaving(3)
    assert len({tuple(interleaving(seed)) for seed in range(8)}) > 1


@pytest.mark.parametrize("hook", ["_ALLOW_DETERMINISTIC_SCHEDULING", "_r"])
def test_a_moved_hook_stops_seeding_with_a_clear_message(
    monkeypatch: pytest.MonkeyPatch, hook: str
) -> None:
    monkeypatch.delattr(trio._core._run, hook)
    check_trio_hooks.cache_clear()
    try:
        with pytest.raises(
            TrioHooksMoved,
            match=rf"^trio {re.escape(trio.__version__)} moved the private hooks seeded "
            r"scheduling relies on: .* — install "
            rf"trio{re.escape(TESTED_TRIO)} \(the tested range\), "
            r"or port sims/world/_scheduling\.py",
        ):
            seed_scheduler(1)
    finally:
        check_trio_hooks.cache_clear()


def test_the_tested_range_is_what_pyproject_pins() -> None:
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'"trio{TESTED_TRIO}"' in pyproject
