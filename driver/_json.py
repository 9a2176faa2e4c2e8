"""JSON as the store keeps it, and the queue-safety rule a payload and a cursor are held to.

A value a run carries has to survive a trip through a queue message and a database column
unchanged, so it may only be JSON's own shapes: None, str, bool, finite int and float, lists, and
dicts with str keys. Anything else is refused with the dotted path of the offending part, before
any row is written.
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeAlias

from ._errors import FieldError, ValidationFailed

#: A value JSON can carry unchanged.
JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None

_REMEDY = "a run carries ids and configuration, never bytes, class instances or functions"


def dumps(value: Any) -> str:
    """The one compact spelling every JSON column is written in."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def loads(text: str) -> Any:
    return json.loads(text)


def round_trip(value: Any) -> Any:
    """What a reader of the stored JSON gets back; a handler sees only this."""
    return json.loads(dumps(value))


def _describe(value: object) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return f"is {kind.__name__}"
    return f"is an instance of {kind.__module__}.{kind.__qualname__}"


def queue_safety_errors(value: object, path: str) -> list[FieldError]:
    """Every part of ``value`` that is not queue-safe, by dotted path (empty when all is well)."""
    errors: list[FieldError] = []
    _check(value, path, errors, set())
    return errors


def _check(value: object, path: str, errors: list[FieldError], seen: set[int]) -> None:
    if value is None or isinstance(value, str | bool):
        return
    if isinstance(value, int) and type(value) is int:
        return
    if type(value) is float:
        if not math.isfinite(value):
            errors.append(FieldError(path, f"is {value!r}, which JSON cannot carry — {_REMEDY}"))
        return
    if type(value) is list or type(value) is dict:
        if id(value) in seen:
            errors.append(FieldError(path, f"refers back to itself (a cycle) — {_REMEDY}"))
            return
        seen.add(id(value))
        if type(value) is list:
            for index, item in enumerate(value):
                _check(item, f"{path}[{index}]", errors, seen)
        else:
            assert isinstance(value, dict)
            for key, item in value.items():
                if not isinstance(key, str):
                    errors.append(
                        FieldError(path, f"has the key {key!r}, which is not a str — {_REMEDY}")
                    )
                    continue
                _check(item, f"{path}.{key}", errors, seen)
        seen.discard(id(value))
        return
    errors.append(FieldError(path, f"{_describe(value)} — {_REMEDY}"))


def assert_queue_safe(value: object, path: str = "payload") -> None:
    """Refuse ``value`` unless it survives a queue message unchanged; the error names each path."""
    errors = queue_safety_errors(value, path)
    if errors:
        raise ValidationFailed(errors)
