"""What a refusal said, as the tests compare it: each offending path with its message."""

from __future__ import annotations

import pytest

from driver import ValidationFailed


def refusal(caught: pytest.ExceptionInfo[ValidationFailed]) -> list[tuple[str, str]]:
    """The (path, message) of each error of the ``ValidationFailed`` that ``caught`` holds."""
    return [(error.path, error.message) for error in caught.value.errors]
