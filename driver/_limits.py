"""The row limit: how many bytes each stored text may take, and how far ahead a time may lie.

The platform caps a row near 2 MB (``JOB_ROW_MAX_BYTES``); a value past it would be accepted here
and refused there, so every door refuses it here too, by path, before anything is written. What
the kernel produces itself (an error's text) is cut to fit rather than refused, so that a pass's
outcome write is never the thing that fails.
"""

from __future__ import annotations

from typing import Final

from ._constants import JOB_ERROR_MAX_BYTES, JOB_TIME_AHEAD_MAX_MS
from ._errors import FieldError
from ._time import parse_iso_ms


def utf8_size(text: str) -> int:
    """The bytes ``text`` takes in UTF-8 (a lone surrogate counted as UTF-8 would spell it)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", errors="surrogatepass"))


def size_problem(text: object, cap: int, what: str) -> str | None:
    """Why ``text`` is too big to store as ``what`` (None when it fits, or is not text)."""
    if not isinstance(text, str) or len(text) <= cap // 4:
        return None  # four bytes a character at most: fits without measuring
    size = len(text) if len(text) > cap else utf8_size(text)
    if size <= cap:
        return None
    return (
        f"is {size} bytes of UTF-8, more than the {cap} {what} may take (a row holds at most "
        "about 2 MB) — keep large data outside the run and store a reference to it"
    )


def size_errors(text: object, cap: int, path: str, what: str) -> list[FieldError]:
    problem = size_problem(text, cap, what)
    return [] if problem is None else [FieldError(path, problem)]


_CUT_NOTE: Final = " … (cut: the whole text was {size} bytes)"


def stored_error(text: str) -> str:
    """``text`` cut to fit ``JOB_ERROR_MAX_BYTES``, saying so: an exception's message is the
    handler's, and a huge one must not make the pass's outcome write fail."""
    size = utf8_size(text)
    if size <= JOB_ERROR_MAX_BYTES:
        return text
    note = _CUT_NOTE.format(size=size)
    room = JOB_ERROR_MAX_BYTES - utf8_size(note)
    cut = text.encode("utf-8", errors="surrogatepass")[:room].decode("utf-8", errors="ignore")
    return cut + note


def time_ahead_problem(value: str, now_ms: int) -> str | None:
    """Why the (well-spelled) time ``value`` lies too far past the store's now, or None."""
    if parse_iso_ms(value) - now_ms <= JOB_TIME_AHEAD_MAX_MS:
        return None
    return (
        f"is more than {JOB_TIME_AHEAD_MAX_MS} ms (two years) past the store's now; a running "
        "run due that late would block its key for as long — write a time within a lease or a "
        "backoff of now"
    )
