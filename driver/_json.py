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

import attrs

from ._constants import JOB_JSON_MAX_DEPTH, JOB_JSON_MAX_INT_DIGITS
from ._errors import FieldError, ValidationFailed

#: A value JSON can carry unchanged.
JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None

_REMEDY = "a run carries ids and configuration, never bytes, class instances or functions"
#: What to pass instead, for the values JSON has no form of but an obvious neighbour.
_INSTEAD: Final = {
    "set": "pass a list",
    "frozenset": "pass a list",
    "tuple": "pass a list",
    "bytes": "pass an id that finds the bytes, or text",
    "bytearray": "pass an id that finds the bytes, or text",
}


#: Built once (as ``_DECODER`` below): ``json.dumps`` with any keyword builds an encoder per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: Any) -> str:
    """The one compact spelling every JSON column is written in."""
    return _ENCODER.encode(value)


class StoredJsonError(ValueError):
    """Stored text the store does not read as JSON within its limits; the message says why."""


def nesting_depth(text: str) -> int:
    """How deep ``text`` nests brackets (``[`` and ``{``) outside its strings, found without
    recursion, so text of any depth is measured. A quote opens or closes a string; inside one a
    backslash escapes the next character. Text that is not JSON is measured the same way, so every
    reader of a column agrees on its depth."""
    if text.count("[") + text.count("{") <= JOB_JSON_MAX_DEPTH:
        return 0  # cannot nest past the limit: the common case costs two counts
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}" and depth > 0:
            depth -= 1
    return deepest


def _constant(name: str) -> Any:
    raise StoredJsonError(f"holds {name}, which JSON does not have")


def _read_int(digits: str) -> int | float:
    # Past Python's own int-text limit the value is read as JavaScript reads it: a float.
    return int(digits) if len(digits) <= JOB_JSON_MAX_INT_DIGITS else float(digits)


#: Built once: ``json.loads`` with any keyword builds a fresh decoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_constant, parse_int=_read_int)


def _depth_problem(text: str) -> str | None:
    if nesting_depth(text) > JOB_JSON_MAX_DEPTH:
        return (
            f"nests lists and objects more than {JOB_JSON_MAX_DEPTH} levels deep, more than a "
            "run's JSON carries — flatten it"
        )
    return None


def loads(text: str) -> Any:
    """Stored JSON text read as JSON itself reads it: ``NaN``, ``Infinity`` and ``-Infinity`` are
    not JSON (Python's parser would accept them; a JavaScript store does not), and text nesting
    past ``JOB_JSON_MAX_DEPTH`` is refused before the parser could run out of stack. Both raise
    ``StoredJsonError``, a ``ValueError``, as text that is not JSON at all does."""
    problem = _depth_problem(text)
    if problem is not None:
        raise StoredJsonError(problem)
    return _DECODER.decode(text)


class _LongInt(ValueError):
    """An int past the limit, met by the fast reading of :func:`json_text_problem`."""


def _refuse_long_int(digits: str) -> int:
    if len(digits.lstrip("-")) > JOB_JSON_MAX_INT_DIGITS:
        raise _LongInt(digits)
    return 0


class _Overflow(ValueError):
    """A number whose text overflows to infinity (``1e309``), met by the fast reading."""


def _refuse_overflow(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Overflow(text)
    return value


#: Reads JSON text once to vet it, built once (see ``_DECODER``); any doubt goes to the careful
#: reading, which tells "not JSON at all" from "JSON with something the store refuses".
_VETTER = json.JSONDecoder(
    parse_constant=_constant, parse_int=_refuse_long_int, parse_float=_refuse_overflow
)

_OVERFLOW_PROBLEM = (
    "holds a number too large for JSON's numbers, which reads as Infinity — store a number JSON "
    "carries, or a str"
)


def json_text_problem(text: str) -> str | None:
    """Why a JSON column's text may not enter the store, or None when it may.

    Text that is JSON within the limits enters, and so does text that is not JSON at all: it travels
    verbatim and every reader treats it as not JSON (the operator read shows the column empty, and
    erasure finds no envelope in it). Refused is text the readers could disagree on or could not
    read: nesting past ``JOB_JSON_MAX_DEPTH`` (measured on any text), ``NaN``/``Infinity``/
    ``-Infinity`` in text that is JSON but for them, an int of more than
    ``JOB_JSON_MAX_INT_DIGITS`` digits in JSON text, and a number whose text overflows to
    infinity (``1e309``), which JavaScript and Python both read as Infinity."""
    problem = _depth_problem(text)
    if problem is not None:
        return problem
    try:
        _VETTER.decode(text)
    except (_LongInt, _Overflow, StoredJsonError):
        return _careful_problem(text)  # something refused, or not JSON further on: which?
    except ValueError:
        return None  # not JSON at all: it travels verbatim
    return None  # JSON within the limits, the common case, read once


def _careful_problem(text: str) -> str | None:
    """What :func:`json_text_problem` says of text within the depth limit, found by reading it
    whole: an int past the limit counts only in text that is JSON, a constant only in text that
    is JSON but for its constants."""
    long_ints: list[str] = []
    overflows: list[str] = []

    def read_int(digits: str) -> int:
        if len(digits.lstrip("-")) > JOB_JSON_MAX_INT_DIGITS:
            long_ints.append(digits)
        return 0

    def read_float(digits: str) -> float:
        if not math.isfinite(float(digits)):
            overflows.append(digits)
        return 0.0

    try:
        json.loads(text, parse_constant=_constant, parse_int=read_int, parse_float=read_float)
    except StoredJsonError:
        pass  # a constant: whether the text is JSON but for it is decided below
    except ValueError:
        return None  # not JSON at all: it travels verbatim
    else:
        if long_ints:
            return (
                f"holds an int of more than {JOB_JSON_MAX_INT_DIGITS} digits, more than a run's "
                "JSON carries — store a number that large as a str"
            )
        if overflows:
            return _OVERFLOW_PROBLEM
        return None
    try:
        json.loads(text, parse_int=lambda digits: 0)
    except ValueError:
        return None  # not JSON even with the constants: it travels verbatim
    return (
        "holds NaN, Infinity or -Infinity, which JSON does not have — store a number JSON "
        "carries, or null"
    )


def round_trip(value: Any) -> Any:
    """What a reader of the stored JSON gets back; a handler sees only this."""
    return loads(dumps(value))


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
    if text.isascii():
        return None  # ids, times and owners mostly: nothing to encode to know
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


@attrs.frozen
class SizeCap:
    """The most bytes of UTF-8 a value's JSON may take (``max_bytes``), and what the value is
    called in a refusal (``what``: "a payload's JSON")."""

    max_bytes: int
    what: str


class _OverCap(Exception):
    """Raised inside the walk when the JSON counted so far passes the cap: the walk stops there."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


class _Budget:
    """The bytes left under a cap as the walk counts them. Each part is counted at the FEWEST
    bytes its compact JSON can take, so a value is never refused for less than it is: a container
    its brackets, the separators between its items and one byte for each item (no value is
    written in fewer), an object's keys with their quotes and colons, and a str its characters
    beyond that one byte (a character is one byte of UTF-8 or more; escaping only adds). Numbers,
    booleans and null cost nothing beyond their byte, which keeps the count cheap. The count is
    checked where the walk would read on: at each container and each key."""

    __slots__ = ("left",)

    def __init__(self, max_bytes: int) -> None:
        self.left = max_bytes


def _over_cap(cap: SizeCap, where: str) -> str:
    return (
        f"is more than the {cap.max_bytes} bytes of UTF-8 {cap.what} may take: its JSON is past "
        f"them by {where}, where reading stopped (a row holds at most about 2 MB) — keep large "
        "data outside the run and store a reference to it"
    )


def queue_safety_errors(
    value: object, path: str, *, step_result: bool = False, cap: SizeCap | None = None
) -> list[FieldError]:
    """Every part of ``value`` that is not queue-safe, by dotted path (list items by index:
    ``payload.steps.0``), empty when all is well. Beyond JSON's own shapes: no int longer than
    ``JOB_JSON_MAX_INT_DIGITS`` digits, no nesting deeper than ``JOB_JSON_MAX_DEPTH``, no str
    (value or key) holding a lone surrogate. ``step_result`` admits what a step's value may hold
    beyond that: datetimes (stored as ISO text) and tuples (stored as JSON arrays, so they come
    back as lists, on the first run as on replay).

    With ``cap``, the bytes the value's JSON must take are counted as it is read, and a value
    whose count passes ``cap.max_bytes`` is refused there (an error at ``path``), the rest of it
    unread: a payload of millions of items costs its caller only the part within the cap. A value
    under the count can still be over the cap once encoded; the caller measures that text."""
    errors: list[FieldError] = []
    budget = None if cap is None else _Budget(cap.max_bytes)
    try:
        _check(value, path, errors, set(), 0, step_result, budget)
    except _OverCap as over:
        assert cap is not None
        errors.append(FieldError(path, _over_cap(cap, over.where)))
    return errors


def _check(
    value: object,
    path: str,
    errors: list[FieldError],
    seen: set[int],
    depth: int,
    step_result: bool,
    budget: _Budget | None,
) -> None:
    if value is None or type(value) is bool:
        return
    if isinstance(value, str):
        if budget is not None:
            # Its quotes and characters (past the byte its container counted for it, when it is
            # an item). Counted, not checked here: a str is one part however long, measured
            # exactly once encoded; the count stops the walk where reading on would cost, at
            # the next container or key.
            budget.left -= len(value) + (1 if depth else 2)
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
            errors.append(
                FieldError(
                    path,
                    f"is {value!r}, which JSON cannot carry — pass None, or the number as a str",
                )
            )
        return
    if type(value) is list or type(value) is dict or (step_result and type(value) is tuple):
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
        if budget is not None:
            # Brackets, a comma between two items and a byte for each (its key counted with
            # it), less the byte its own container counted for it when it is an item.
            budget.left -= (2 * len(value) + 1 if value else 2) - (1 if depth else 0)
            if budget.left < 0:
                raise _OverCap(path)
        seen.add(id(value))
        if type(value) is list or type(value) is tuple:
            for index, item in enumerate(value):
                _check(item, f"{path}.{index}", errors, seen, depth + 1, step_result, budget)
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
                if budget is not None:
                    budget.left -= len(key) + 3  # its quotes and its colon
                    if budget.left < 0:
                        raise _OverCap(f"{path}.{key}")
                _check(item, f"{path}.{key}", errors, seen, depth + 1, step_result, budget)
        seen.discard(id(value))
        return
    if step_result and type(value).__module__ == "datetime" and hasattr(value, "isoformat"):
        return
    instead = _INSTEAD.get(type(value).__name__) if type(value).__module__ == "builtins" else None
    remedy = _REMEDY if instead is None else f"{instead}; {_REMEDY}"
    errors.append(FieldError(path, f"{_describe(value)} — {remedy}"))


def assert_queue_safe(value: object, path: str = "payload") -> None:
    """Refuse ``value`` unless it survives a queue message unchanged; the error names each path."""
    errors = queue_safety_errors(value, path)
    if errors:
        raise ValidationFailed(errors)
