"""Comparing two stores' replies and tables, and the named allowances the comparison knows.

Two values are the same when they are the same JSON: same types (``true`` is not ``1``), same
numbers, same text, same keys, same order in arrays. Where the reference and a real runtime differ
ON PURPOSE, the difference is an ALLOWANCE: it has a name and a reason (docs/conformance.md lists
them), every use of one is counted and reported, and ``--strict`` turns each into a difference.
Nothing is skipped silently.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Final

import attrs

#: Integers past this magnitude are not exact in a JavaScript number (a double).
_EXACT_INT: Final = 2**53


@attrs.frozen
class Allowance:
    name: str
    reason: str


ALLOWANCES: Final = {
    allowance.name: allowance
    for allowance in (
        Allowance(
            "refusal-message",
            "two refusals with the same code and the same paths but other words: a refusal's "
            "message is each adapter's own prose, the code and the paths are the contract",
        ),
        Allowance(
            "lone-surrogate",
            "the reference refused text holding a lone surrogate (UTF-8, and so its SQLite, cannot "
            "hold one) and the target stored it, as a JavaScript runtime's SQLite does; the two "
            "stores then hold different rows on purpose, so the history ends there",
        ),
        Allowance(
            "wide-integer",
            "an integer past 2**53 that is equal as a double: a JavaScript runtime's numbers are "
            "doubles, on the wire and in its SQLite binding alike",
        ),
    )
}


@attrs.define
class Comparison:
    """One comparison's first difference (None when the values agreed) and the allowances used."""

    difference: str | None = None
    allowed: Counter[str] = attrs.field(factory=Counter)
    #: The stores now differ on purpose (an allowance that ends the history): compare no further.
    stop: bool = False


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "array"
    return "object"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def _key(value: Any) -> str:
    """A key or a code as it is when it is a plain name, else quoted as data."""
    return value if isinstance(value, str) and value.isidentifier() else _show(value)


def _walk(path: str, reference: Any, target: Any, strict: bool, out: Comparison) -> bool:
    """Whether the two agree (allowances counted into ``out``); on the first difference, ``out``
    says where and what, and the walk stops."""
    where = path or "the value"
    kind = _kind(reference)
    if kind != _kind(target):
        out.difference = (
            f"at {where} the reference has {_show(reference)} and the target {_show(target)}"
        )
        return False
    if kind == "object":
        missing = [key for key in reference if key not in target]
        # The target's keys are its text: shown as data unless they are plain names.
        extra = [_key(key) for key in target if key not in reference]
        if missing or extra:
            out.difference = (
                f"at {where} the target's fields differ"
                + (f"; it lacks {', '.join(missing)}" if missing else "")
                + (f"; it has more: {', '.join(extra)}" if extra else "")
            )
            return False
        return all(
            _walk(f"{path}.{key}" if path else str(key), reference[key], target[key], strict, out)
            for key in reference
        )
    if kind == "array":
        if len(reference) != len(target):
            out.difference = (
                f"at {where} the reference has {len(reference)} items and the target "
                f"{len(target)}: {_show(reference)} against {_show(target)}"
            )
            return False
        return all(
            _walk(f"{path}.{i}", a, b, strict, out)
            for i, (a, b) in enumerate(zip(reference, target, strict=True))
        )
    # 3 and 3.0 compare equal here, as they must: the wire's JSON does not tell them apart.
    if reference != target:
        if (
            kind == "number"
            and not strict
            and isinstance(reference, int)
            and abs(reference) > _EXACT_INT
            and float(reference) == float(target)
        ):
            out.allowed["wide-integer"] += 1
            return True
        out.difference = (
            f"at {where} the reference has {_show(reference)} and the target {_show(target)}"
        )
        return False
    return True


def _same_json(reference: Any, target: Any) -> bool:
    # The fast path for the common case: identical JSON text is identical JSON (no bool/number
    # confusion, key order included, since both sides' objects keep the wire's field order).
    try:
        return json.dumps(reference, separators=(",", ":")) == json.dumps(
            target, separators=(",", ":")
        )
    except (TypeError, ValueError):
        return False


def compare_values(reference: Any, target: Any, *, strict: bool) -> Comparison:
    out = Comparison()
    if _same_json(reference, target):
        return out
    _walk("", reference, target, strict, out)
    return out


def _lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_lone_surrogate(item) for item in value.values())
    if isinstance(value, list):
        return any(_lone_surrogate(item) for item in value)
    return False


def _at(value: Any, path: str) -> Any:
    for name in path.split("."):
        if isinstance(value, dict):
            value = value.get(name)
        elif isinstance(value, list) and name.isdigit() and int(name) < len(value):
            value = value[int(name)]
        else:
            return None
    return value


def _refused_for_surrogate(reference: Any, request: Any) -> bool:
    """Whether the reference refused ``request`` BECAUSE of a lone surrogate: a validation
    refusal whose every path names a value of the request's arguments that holds one. A refusal
    for anything else (a bad time, a bad lease) is a refusal the target must share."""
    error = reference.get("error") if isinstance(reference, dict) else None
    if not isinstance(error, dict) or error.get("code") != "validation_failed":
        return False
    paths = error.get("paths")
    args = request.get("args") if isinstance(request, dict) else None
    if not isinstance(paths, list) or not paths or args is None:
        return False
    return all(isinstance(path, str) and _lone_surrogate(_at(args, path)) for path in paths)


def _outcome(reply: Any) -> str:
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        return f"answered {_show(reply)}"
    if reply["ok"]:
        return f"answered {_show(reply.get('result'))}"
    error = reply.get("error") or {}
    return f"refused ({_key(error.get('code'))}: {_show(error.get('message'))})"


def compare_replies(
    reference: Any, target: Any, *, strict: bool, request: Any = None
) -> Comparison:
    """Two replies to ``request``. Refusals agree on their code and paths; their messages are an
    allowance (``refusal-message``)."""
    ours_ok = isinstance(reference, dict) and reference.get("ok") is True
    theirs_ok = isinstance(target, dict) and target.get("ok") is True
    if ours_ok != theirs_ok:
        if not strict and not ours_ok and theirs_ok and _refused_for_surrogate(reference, request):
            return Comparison(allowed=Counter({"lone-surrogate": 1}), stop=True)
        return Comparison(
            difference=f"the reference {_outcome(reference)} and the target {_outcome(target)}"
        )
    if (
        isinstance(reference, dict)
        and isinstance(target, dict)
        and reference.get("ok") is False
        and target.get("ok") is False
    ):
        ours, theirs = reference.get("error") or {}, target.get("error") or {}
        out = compare_values(
            {"code": ours.get("code"), "paths": ours.get("paths")},
            {"code": theirs.get("code"), "paths": theirs.get("paths")},
            strict=strict,
        )
        if out.difference is not None:
            out.difference = f"the two refusals differ: {out.difference}"
            return out
        if ours.get("message") != theirs.get("message"):
            if strict:
                out.difference = (
                    f"the refusals' messages differ (--strict): the reference says "
                    f"{_show(ours.get('message'))} and the target {_show(theirs.get('message'))}"
                )
            else:
                out.allowed["refusal-message"] += 1
        return out
    return compare_values(reference, target, strict=strict)


def compare_tables(reference: Any, target: Any, *, strict: bool) -> Comparison:
    """Both tables of one scope. A difference names the run (or step) by its key, not its index."""
    out = compare_values(reference, target, strict=strict)
    if out.difference is None or not (isinstance(reference, dict) and isinstance(target, dict)):
        return out
    keyed: dict[str, tuple[Any, Any]] = {}
    for table, key in (("runs", ("id",)), ("steps", ("run_id", "step"))):
        ours, theirs = reference.get(table), target.get(table)
        if isinstance(ours, list) and isinstance(theirs, list):
            keyed[table] = (_by_key(ours, key), _by_key(theirs, key))
    if not keyed:
        return out
    named = compare_values(
        {table: pair[0] for table, pair in keyed.items()},
        {table: pair[1] for table, pair in keyed.items()},
        strict=strict,
    )
    if named.difference is not None:
        named.difference = named.difference.replace(" fields differ", " rows differ")
        return named
    out.difference = f"the rows agree but come in another order ({out.difference})"
    return out


def _by_key(rows: list[Any], key: tuple[str, ...]) -> dict[str, Any]:
    return {
        "/".join(str(row.get(part)) for part in key) if isinstance(row, dict) else str(i): row
        for i, row in enumerate(rows)
    }
