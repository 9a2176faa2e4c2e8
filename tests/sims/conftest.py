"""Simulations log admission misses through the kernel's logger; keep the test output readable."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _quiet_drive_log() -> Iterator[None]:
    logger = logging.getLogger("driver")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)
