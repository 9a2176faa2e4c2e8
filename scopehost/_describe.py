"""Values as a trace writes them: plain JSON shapes, the same in every process."""

from __future__ import annotations

from typing import Any

import attrs


def describe(value: Any) -> Any:
    """``value`` as JSON-ready data: attrs values as dicts, errors as ``"Type: message"``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if attrs.has(type(value)):
        return {
            field.name: describe(getattr(value, field.name)) for field in attrs.fields(type(value))
        }
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, list | tuple):
        return [describe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): describe(item) for key, item in value.items()}
    return repr(value)
