"""Stored times: ISO-8601 UTC with milliseconds and ``Z``, so string order is time order.

Every time the kernel writes is an integer count of milliseconds since the Unix epoch turned into
that one spelling; ``parse_iso_ms`` is its exact inverse. Nothing here reads a clock.

Both directions are plain integer arithmetic on the proleptic Gregorian calendar (the civil-date
algorithms of H. Hinnant) rather than ``datetime``: every store operation parses and formats a
few of these, and ``strptime`` alone cost a third of a claim.
"""

from __future__ import annotations

import math
import re

_ISO_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z$")
_DAY_MS = 86_400_000


def _days_from_civil(year: int, month: int, day: int) -> int:
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + (3 if shifted_month < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def iso_from_ms(ms: float) -> str:
    """``1_791_115_200_000`` -> ``'2026-10-04T12:00:00.000Z'``; fractional ms round down."""
    if not math.isfinite(ms):
        raise ValueError(f"time {ms!r} ms is not finite; pass a number of milliseconds")
    whole = math.floor(ms)
    days, in_day = divmod(whole, _DAY_MS)
    year, month, day = _civil_from_days(days)
    if not 0 <= year <= 9999:
        raise ValueError(f"time {ms!r} ms falls outside the years 0000 to 9999")
    seconds, millis = divmod(in_day, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"


def parse_iso_ms(text: str) -> int:
    """The inverse of :func:`iso_from_ms`; refuses any other spelling, and impossible dates."""
    match = _ISO_RE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            f"time {text!r} is not ISO-8601 UTC with milliseconds and Z "
            "(like '2026-10-04T12:00:00.000Z')"
        )
    year, month, day, hour, minute, second, millis = map(int, match.groups())
    days = _days_from_civil(year, month, day)
    if _civil_from_days(days) != (year, month, day) or hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"time {text!r} is not a real moment; check the date and the clock")
    return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis


def add_ms(iso: str, ms: float) -> str:
    """``iso`` moved by ``ms`` milliseconds (rounded down), in the same spelling."""
    return iso_from_ms(parse_iso_ms(iso) + math.floor(ms))
