"""Values as a trace writes them: plain JSON shapes, the same in every process."""

from __future__ import annotations

from typing import Any

import attrs

#: The field names of each attrs class met so far: ``attrs.fields`` builds a tuple per call, and a
#: trace describes the same few row and claim types hundreds of thousands of times.
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}

#: The types a trace writes as they are (exactly these: a subclass is described as its base).
_PLAIN = frozenset({type(None), str, int, float, bool})
#: Their bases, for a subclass (an enum of str, say); a tuple, since a union written in the call
#: (``bool | int | float | str``) is built anew on every call, and describing runs on every leg.
_PLAIN_BASES = (bool, int, float, str)
_SEQUENCES = (list, tuple)


def describe(value: Any) -> Any:
    """``value`` as JSON-ready data: attrs values as dicts, errors as ``"Type: message"``."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if isinstance(value, _PLAIN_BASES):
        return value
    names = _FIELD_NAMES.get(kind, ())
    if names == ():
        names = tuple(field.name for field in attrs.fields(kind)) if attrs.has(kind) else None
        _FIELD_NAMES[kind] = names
    # Most parts are plain (ids, times, counts): they are taken as they are, without a call each.
    if names is not None:
        return {
            name: part if type(part) in _PLAIN else describe(part)
            for name in names
            for part in (getattr(value, name),)
        }
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, _SEQUENCES):
        return [item if type(item) in _PLAIN else describe(item) for item in value]
    if isinstance(value, dict):
        return {
            str(key): item if type(item) in _PLAIN else describe(item)
            for key, item in value.items()
        }
    return repr(value)
