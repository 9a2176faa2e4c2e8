"""Values as a trace writes them: plain JSON shapes, the same in every process."""

from __future__ import annotations

from typing import Any

import attrs

#: The field names of each attrs class met so far: ``attrs.fields`` builds a tuple per call, and a
#: trace describes the same few row and claim types hundreds of thousands of times.
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def describe(value: Any) -> Any:
    """``value`` as JSON-ready data: attrs values as dicts, errors as ``"Type: message"``."""
    kind = type(value)
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    if isinstance(value, bool | int | float | str):
        return value
    names = _FIELD_NAMES.get(kind, ())
    if names == ():
        names = tuple(field.name for field in attrs.fields(kind)) if attrs.has(kind) else None
        _FIELD_NAMES[kind] = names
    if names is not None:
        return {name: describe(getattr(value, name)) for name in names}
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, list | tuple):
        return [describe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): describe(item) for key, item in value.items()}
    return repr(value)
