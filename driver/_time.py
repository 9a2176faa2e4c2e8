"""Stored times: ISO-8601 UTC with milliseconds and ``Z``, so string order is time order.

Every time the kernel writes is an integer count of milliseconds since the Unix epoch turned into
that one spelling; ``parse_iso_ms`` is its exact inverse. Nothing here reads a clock.
"""

from __future__ import annotations

import datetime as _dt
import math
import re

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def iso_from_ms(ms: float) -> str:
    """``1_790_000_000_000`` -> ``'2026-09-21T...Z'``; fractional milliseconds round down."""
    if not math.isfinite(ms):
        raise ValueError(f"time {ms!r} ms is not finite; pass a number of milliseconds")
    whole = math.floor(ms)
    moment = _EPOCH + _dt.timedelta(milliseconds=whole)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{whole % 1000:03d}Z"


def parse_iso_ms(text: str) -> int:
    """The inverse of :func:`iso_from_ms`; refuses any other spelling."""
    if not _ISO_RE.match(text):
        raise ValueError(
            f"time {text!r} is not ISO-8601 UTC with milliseconds and Z "
            "(like '2026-10-04T12:00:00.000Z')"
        )
    moment = _dt.datetime.strptime(text[:-1] + "000", "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=_dt.UTC
    )
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def add_ms(iso: str, ms: float) -> str:
    """``iso`` moved by ``ms`` milliseconds (rounded down), in the same spelling."""
    return iso_from_ms(parse_iso_ms(iso) + math.floor(ms))
