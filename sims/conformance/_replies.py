"""What the kit takes from a target: a reply read within bounds, and its text shown only as data.

A target is anything the user points the kit at, so every byte it sends is treated as hostile:
a reply must arrive whole within a deadline, fit a size cap and a nesting cap, and be a JSON
object of the wire's shape before the comparison walks it. Text a target sent (a reply that is
not JSON, an HTTP reason phrase, an adapter's stderr) is printed back quoted or escaped, never
as it is: a byte that moves a terminal's cursor or reverses a line's direction is shown, not
obeyed.
"""

from __future__ import annotations

import json
from typing import Any, Final

from ._wire import Reply


class TargetFailed(Exception):
    """The target stopped answering on the wire (it crashed, hung up, or replied with non-JSON)."""


#: The most a target may take to send one whole reply, in seconds (not per read: a target that
#: trickles a byte at a time must not hold the kit for ever).
REPLY_DEADLINE: Final = 30.0
#: The longest reply the kit reads. The reference's replies are kilobytes; this is far past any.
REPLY_MAX_BYTES: Final = 64 * 1024 * 1024
#: The deepest nesting a reply may have. The reference's replies nest five levels (reply, tables,
#: runs, row); the comparison walks replies recursively and must not run out of stack.
REPLY_MAX_DEPTH: Final = 64
#: How much of a reply that is not one the kit quotes in its report.
QUOTED_MAX: Final = 200


def quoted(text: str | bytes) -> str:
    """The start of a target's text as a Python literal: every character that does not print is
    escaped, so it reads as what was sent."""
    return repr(text[:QUOTED_MAX]) + ("..." if len(text) > QUOTED_MAX else "")


def escaped_lines(text: str) -> str:
    """A target's log (its stderr, workerd's log) kept readable as lines, with every other
    character that does not print (an escape sequence, a carriage return, a direction override)
    escaped as a Python literal would write it."""
    return "\n".join(
        "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in line)
        for line in text.split("\n")
    )


def _depth_past(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` levels (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _shape_fault(reply: dict[str, Any]) -> str | None:
    """What keeps a decoded reply from being a wire reply the comparison can walk, or None."""
    if not isinstance(reply.get("ok"), bool):
        return "its ok is not true or false"
    if reply["ok"] is False and not isinstance(reply.get("error"), dict):
        return "it refuses without an error object"
    if "tables" in reply and not isinstance(reply["tables"], dict):
        return "its tables are not an object"
    return None


def reply_of(text: str, source: str) -> Reply:
    """``text`` as a wire reply from ``source`` (which names the target in the report)."""
    try:
        reply = json.loads(text)
    except ValueError as error:
        raise TargetFailed(
            f"{source} replied with something that is not JSON: {quoted(text)}"
        ) from error
    except RecursionError:
        raise TargetFailed(
            f"{source} replied with JSON nested too deep to read (a wire reply nests at most "
            f"{REPLY_MAX_DEPTH} levels): {quoted(text)}"
        ) from None
    if _depth_past(reply, REPLY_MAX_DEPTH):
        raise TargetFailed(
            f"{source} replied with JSON nested deeper than {REPLY_MAX_DEPTH} levels, which no "
            f"wire reply does: {quoted(text)}"
        )
    if not isinstance(reply, dict):
        fault: str | None = "it is not an object"
    else:
        fault = _shape_fault(reply)
    if fault is not None:
        raise TargetFailed(f"{source} replied {quoted(text)}, which is not a wire reply: {fault}")
    checked: Reply = reply
    return checked
