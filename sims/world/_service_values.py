"""What a service's state and a call's idempotency key must be: values, compared as written.

The world finds a service call's effect by copying the service's state before the call and
comparing it after (docs/decisions.md, "An effect is a change"). So the state must copy, and its
copy must be equal to it: an object that cannot be copied (a lock, a socket, a connection) fails
every call, and one that compares by identity makes every call, reads too, an effect. Such a state
is refused where the service is declared, naming the service, where in the state the value is,
its type and the remedy, and again before a call, should an operation have put one there.

An idempotency key given as an argument (``Operation(fn, idempotency_key="ARG")``) is compared
as it is written: a dict in another key order, ``5`` and ``"5"``, ``None`` or ``""`` would be
other keys (or none at all), and a repeat would run again. A key must be a non-empty str, as
``ctx.call_service(..., idempotency_key=KEY)`` requires (``driver.service_call``).
"""

from __future__ import annotations

import copy
from typing import Any

from driver import ServiceCall, ValidationFailed
from driver._services import IDEMPOTENCY_KEY_MAX

#: What a state may hold, said in each refusal.
_PLAIN = (
    "keep plain data in a service's state (dicts, lists, str, numbers, True, False, None), or "
    "values of classes that compare and copy by value (@attrs.frozen, @dataclass)"
)
_LEAVES = (str, bytes, int, float, bool, type(None))


def check_state(name: str, factory: object, state: object) -> None:
    """Refuse ``state``, what ``factory`` made for service ``name``, unless it copies and its
    copy is equal to it."""
    problem = state_problem(state)
    if problem is not None:
        raise ValueError(f"Service({name!r}, state={_name_of(factory)}): {problem}")


def copied_state(name: str, operation: str, state: Any) -> Any:
    """A copy of service ``name``'s state before a call of ``operation``, refused as
    :func:`check_state` refuses it, should an earlier operation have put such a value there."""
    try:
        copied = copy.deepcopy(state)
        same = copied == state
    except Exception:
        same = False
    if not same:
        problem = state_problem(state) or "does not compare or copy by value"
        raise ValueError(f"service {name!r}, before its {operation} call: {problem}")
    return copied


def state_problem(state: object) -> str | None:
    """Why ``state`` cannot be a service's state (where in it, what, and the remedy), or None."""
    found = _problem(state, "state", set())
    if found is None:
        return None
    path, why = found
    return (
        f"{path} {why}; the world copies a service's state before each call and compares the "
        f"copy after it, to tell an effect from a read: {_PLAIN}"
    )


def _problem(value: object, path: str, seen: set[int]) -> tuple[str, str] | None:
    """The first value in ``value`` that does not copy, or is not equal to its copy."""
    if isinstance(value, float) and value != value:
        return path, "is nan, which is not equal to itself, so every call would be an effect"
    if isinstance(value, _LEAVES) or id(value) in seen:
        return None
    seen.add(id(value))
    if type(value) in (dict, list, tuple):
        return _inner_problem(value, path, seen)
    kind = f"a {type(value).__module__}.{type(value).__qualname__}"
    try:
        same = copy.deepcopy(value) == value
    except Exception as error:
        return path, f"is {kind}, which cannot be copied ({error})"
    if same is not True:
        return path, (
            f"is {kind}, which is not equal to a copy of itself (it compares by identity), so "
            "every call, reads too, would be an effect"
        )
    return None


def _inner_problem(value: Any, path: str, seen: set[int]) -> tuple[str, str] | None:
    """The first problem of a dict's keys and values, or of a list's or a tuple's items."""
    if isinstance(value, dict):
        for key in value:
            found = _problem(key, f"{path} (its key {key!r})", seen)
            if found is not None:
                return found
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        found = _problem(item, f"{path}[{key!r}]", seen)
        if found is not None:
            return found
    return None


def _name_of(factory: object) -> str:
    return str(getattr(factory, "__qualname__", None) or repr(factory))


def check_key_argument(argument: str | None, call: ServiceCall) -> None:
    """Refuse ``call`` when its idempotency key, its argument ``argument``, is no non-empty str."""
    if argument is None or argument not in call.args:
        return
    key = call.args[argument]
    if isinstance(key, str) and 0 < len(key) <= IDEMPOTENCY_KEY_MAX:
        return
    raise ValidationFailed.at(
        f"call_service({call.service!r}, {call.operation!r}).args[{argument!r}]",
        f"is {key!r}, the call's idempotency key (Operation(..., idempotency_key={argument!r})); "
        f"a key is a non-empty str of at most {IDEMPOTENCY_KEY_MAX} characters, compared as it "
        "is written (a dict in another order, 5 and '5' are other keys): build it from what "
        "names the effect, the same in every pass, such as f'{ctx.run.id}/STEP' (the run's id "
        "and the step's name) or the order's id",
    )


def new_empty_container(before: Any, after: Any, path: str = "state") -> str | None:
    """Where ``after`` differs from ``before`` only by a new empty container (a dict or list
    ``setdefault`` made): its path, such as ``state['charges']``; None when anything else
    changed too, or nothing did."""
    if before == after:
        return None
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return None
    found = None
    for key in before.keys() | after.keys():
        if key not in before:
            if after[key] not in ({}, []) or found is not None:
                return None
            found = f"{path}[{key!r}]"
        elif key not in after:
            return None
        elif before[key] != after[key]:
            inner = new_empty_container(before[key], after[key], f"{path}[{key!r}]")
            if inner is None or found is not None:
                return None
            found = inner
    return found
