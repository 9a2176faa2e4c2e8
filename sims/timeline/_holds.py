"""A held leg's release in words: what released it, from ``fault.release``'s ``why``, ``by`` and
``by_op`` (the drive whose event it was, and the call that made it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._calls import is_service_op, shorten_ids

#: What another drive did that let a held leg go (the HoldLeg's ``until``), said of a trace too
#: old to name the drive.
DONE = {
    "takeover": "took a run over",
    "step": "recorded a step",
    "effect": "made an effect (through the scope's door, or at a service)",
    "commit": "committed a pass",
    "tick": "started a drive call",
}


def released_words(event: dict[str, Any], short: Callable[[str], str]) -> str:
    """``released when alarm's bank.pay ran (an effect)``, ``released at its max_ms: …``."""
    why = str(event.get("why"))
    if why == "max_ms":
        return "released at its max_ms: nothing it waited for happened in its longest hold"
    by, what = event.get("by"), str(event.get("by_op") or "")
    if not by:
        return f"released because another drive {DONE.get(why, why)}"
    if why == "effect" and is_service_op(what):
        return f"released when {by}'s {what} ran (an effect)"
    if why == "effect":
        return f"released when {by} wrote {shorten_ids(what, short)} (an effect)"
    if why == "takeover":
        return f"released when {by} took a run over"
    if why == "step":
        return f"released when {by} recorded a step"
    if why == "commit":
        return f"released when {by} committed a pass"
    if why == "tick":
        return f"released when {by} started a drive call"
    return f"released when {by} did {why}" + (f" ({what})" if what else "")
