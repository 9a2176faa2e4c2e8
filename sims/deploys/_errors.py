"""The one error of ``before-deploy``'s input."""

from __future__ import annotations


class DeployInputError(ValueError):
    """Input ``before-deploy`` cannot use: one line naming the value and the remedy (exit 2)."""
