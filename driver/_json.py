"""JSON as the store keeps it, and the queue-safety rule a payload and a cursor are held to.

A value a run carries has to survive a trip through a queue message and a database column
unchanged, so it may only be JSON's own shapes: None, str, bool, finite int and float, lists, and
dicts with str keys — and only what the store can hold and read back: ints of at most
``JOB_JSON_MAX_INT_DIGITS`` digits, nesting at most ``JOB_JSON_MAX_DEPTH`` deep, text without lone
surrogates. Anything else is refused with the dotted path of the offending part (``payload.ids.0``),
before any row is written.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final, TypeAlias

from ._constants import JOB_JSON_MAX_DEPTH, JOB_JSON_MAX_INT_DIGITS
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


#: The smallest int with more digits than a run's JSON may carry.
_INT_BOUND: Final = 10**JOB_JSON_MAX_INT_DIGITS


def surrogate_message(text: str) -> str | None:
    """Why ``text`` cannot be stored (it holds a lone surrogate, which UTF-8 cannot encode), or
    None when it can."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return (
            f"holds a lone surrogate ({text[err.start]!r} at index {err.start}), which UTF-8 "
            "cannot carry — decode the text properly before passing it"
        )
    return None


def text_errors(value: str, path: str) -> list[FieldError]:
    """A one-error list when the str ``value`` cannot be stored, else empty."""
    message = surrogate_message(value)
    return [] if message is None else [FieldError(path, message)]


def queue_safety_errors(
    value: object, path: str, *, allow_datetime: bool = False
) -> list[FieldError]:
    """Every part of ``value`` that is not queue-safe, by dotted path (list items by index:
    ``payload.steps.0``), empty when all is well. Beyond JSON's own shapes: no int longer than
    ``JOB_JSON_MAX_INT_DIGITS`` digits, no nesting deeper than ``JOB_JSON_MAX_DEPTH``, no str
    (value or key) holding a lone surrogate. ``allow_datetime`` admits the datetime values a step
    result may hold (stored as ISO text)."""
    errors: list[FieldError] = []
    _check(value, path, errors, set(), 0, allow_datetime)
    return errors


def _check(
    value: object,
    path: str,
    errors: list[FieldError],
    seen: set[int],
    depth: int,
    allow_datetime: bool,
) -> None:
    if value is None or type(value) is bool:
        return
    if isinstance(value, str):
        errors += text_errors(value, path)
        return
    if type(value) is int:
        if -_INT_BOUND < value < _INT_BOUND:
            return
        errors.append(
            FieldError(
                path,
                f"is an int of more than {JOB_JSON_MAX_INT_DIGITS} digits, more than a run's "
                "JSON carries — pass a number that large as a str",
            )
        )
        return
    if type(value) is float:
        if not math.isfinite(value):
            errors.append(FieldError(path, f"is {value!r}, which JSON cannot carry — {_REMEDY}"))
        return
    if type(value) is list or type(value) is dict:
        if depth >= JOB_JSON_MAX_DEPTH:
            errors.append(
                FieldError(
                    path,
                    f"nests lists and objects more than {JOB_JSON_MAX_DEPTH} levels deep, more "
                    "than a run's JSON carries — flatten it",
                )
            )
            return
        if id(value) in seen:
            errors.append(FieldError(path, f"refers back to itself (a cycle) — {_REMEDY}"))
            return
        seen.add(id(value))
        if type(value) is list:
            for index, item in enumerate(value):
                _check(item, f"{path}.{index}", errors, seen, depth + 1, allow_datetime)
        else:
            assert isinstance(value, dict)
            for key, item in value.items():
                if not isinstance(key, str):
                    errors.append(
                        FieldError(path, f"has the key {key!r}, which is not a str — {_REMEDY}")
                    )
                    continue
                key_problem = surrogate_message(key)
                if key_problem is not None:
                    errors.append(FieldError(path, f"has the key {key!r}, which {key_problem}"))
                    continue
                _check(item, f"{path}.{key}", errors, seen, depth + 1, allow_datetime)
        seen.discard(id(value))
        return
    if allow_datetime and type(value).__module__ == "datetime" and hasattr(value, "isoformat"):
        return
    errors.append(FieldError(path, f"{_describe(value)} — {_REMEDY}"))


def assert_queue_safe(value: object, path: str = "payload") -> None:
    """Refuse ``value`` unless it survives a queue message unchanged; the error names each path."""
    errors = queue_safety_errors(value, path)
    if errors:
        raise ValidationFailed(errors)
