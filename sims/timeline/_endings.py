"""How a pass ended, in the picture's words: every pass is closed, and says how.

A pass ends with its outcome, a refusal, a kill, or a drive call that gave up on it (a transport
error: no outcome is written, and the lease stays until it expires). One still open when the world
ended is drawn to the end and says so, rather than look like one that ran on for ever.
"""

from __future__ import annotations

import attrs

from ._model import Pass, short
from ._scale import fmt_ms

#: Outcomes a pass writes when all went to plan (drawn with a plain end cap, unlabelled).
_ORDINARY = frozenset({"completed", "advanced", "deferred"})


@attrs.frozen
class Ending:
    """``kind`` names the legend entry; ``label`` is drawn after the end (empty: none)."""

    kind: str
    label: str
    words: str


def pass_ending(found: Pass) -> Ending:
    outcome = found.outcome
    if found.given_up is not None:
        return Ending(
            "given-up",
            "gave up",
            f"the drive gave up on this pass at {fmt_ms(found.end(0.0))} ms ({found.given_up}): "
            "it wrote no outcome, and its lease stays until it expires; then a drive may claim "
            "the run again",
        )
    if outcome is None:
        return Ending(
            "open", "open at the end", "still open when the world ended: nothing closed it"
        )
    error = f" ({found.error})" if found.error else ""
    if outcome == "retrying":
        return Ending(
            "pass-failed",
            "FAILED · retried later",
            f"the pass FAILED{error} and wrote retrying: the run is tried again after its "
            "backoff, charged one attempt",
        )
    if outcome == "failed":
        return Ending("pass-failed", "FAILED · run failed", f"the pass FAILED the run{error}")
    if outcome == "killed":
        return Ending("end", "killed", "the drive was killed: the pass stopped where it was")
    if outcome == "superseded":
        return Ending(
            "end",
            "superseded",
            "its lease was gone: the store refused its outcome, nothing written",
        )
    if outcome in _ORDINARY:
        return Ending("end", "", f"ended {outcome}: outcome written")
    return Ending("end", "", f"ended: {outcome}")


def taken_over_words(found: Pass) -> str | None:
    if found.taken_over_at is None:
        return None
    return (
        f"its lease was taken over at {fmt_ms(found.taken_over_at)} ms by "
        f"{found.taken_over_by or 'another pass'} while it was still open"
    )


def ending_title(found: Pass) -> str:
    ending = pass_ending(found)
    return f"pass {short(found.owner)} of run {short(found.run)}: {ending.words}"
