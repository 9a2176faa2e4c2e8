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
from typing import TypeVar

#: ASCII digits only (``re.ASCII``): ``\d`` alone also takes other scripts' digits, which ``int``
#: reads alike but which sort apart from ASCII ones, and string order must be time order.
_ISO_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z", re.ASCII)
_DAY_MS = 86_400_000
_K = TypeVar("_K")
_V = TypeVar("_V")

#: The last few thousand conversions each way. A store turns the same few moments (its clock's
#: reading, the leases and backoffs it wrote) back and forth many times per operation, and a cache
#: hit costs a twentieth of the arithmetic. Both functions are pure, so a hit is the same answer;
#: a failed conversion raises and is never cached. Each conversion also teaches the other
#: direction its answer: there is one spelling per whole millisecond.
_CACHE_SIZE = 4096
_ISO_OF_MS: dict[float, str] = {}
_MS_OF_ISO: dict[str, int] = {}
#: A moment not met lately still shares its day with many: the date's spelling and its day number
#: are remembered apart, and the time of day is spelled from tables.
_DATE_OF_DAYS: dict[int, str] = {}
_DAYS_OF_DATE: dict[str, int] = {}
_PAD2 = tuple(f"{n:02d}" for n in range(60))
_PAD3 = tuple(f"{n:03d}" for n in range(1000))


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


def _remember(cache: dict[_K, _V], key: _K, value: _V) -> _V:
    """``value``, kept in ``cache`` under ``key``; a full cache starts afresh (the moments a store
    meets move on with its clock, so the oldest are the least likely to come back)."""
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[key] = value
    return value


def iso_from_ms(ms: float) -> str:
    """``1_791_115_200_000`` -> ``'2026-10-04T12:00:00.000Z'``; fractional ms round down."""
    iso = _ISO_OF_MS.get(ms)
    if iso is None:
        iso = _remember(_ISO_OF_MS, ms, _iso_from_ms(ms))
        # Read back next, as a rule (the store parses the now it is handed): already known.
        _remember(_MS_OF_ISO, iso, math.floor(ms))
    return iso


def _iso_from_ms(ms: float) -> str:
    if not math.isfinite(ms):
        raise ValueError(f"time {ms!r} ms is not finite; pass a number of milliseconds")
    days, in_day = divmod(math.floor(ms), _DAY_MS)
    date = _DATE_OF_DAYS.get(days)
    if date is None:
        year, month, day = _civil_from_days(days)
        if not 0 <= year <= 9999:
            raise ValueError(f"time {ms!r} ms falls outside the years 0000 to 9999")
        date = _remember(_DATE_OF_DAYS, days, f"{year:04d}-{month:02d}-{day:02d}")
    seconds, millis = divmod(in_day, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{date}T{_PAD2[hour]}:{_PAD2[minute]}:{_PAD2[second]}.{_PAD3[millis]}Z"


def parse_iso_ms(text: str) -> int:
    """The inverse of :func:`iso_from_ms`; refuses any other spelling, and impossible dates."""
    if type(text) is not str:
        return _parse_iso_ms(text)  # refused, or a str subclass: not remembered
    ms = _MS_OF_ISO.get(text)
    if ms is None:
        ms = _remember(_MS_OF_ISO, text, _parse_iso_ms(text))
        _remember(_ISO_OF_MS, ms, text)  # the one spelling, so it is also ms's
    return ms


def _parse_iso_ms(text: str) -> int:
    match = _ISO_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            f"time {text!r} is not ISO-8601 UTC with milliseconds and Z "
            "(like '2026-10-04T12:00:00.000Z')"
        )
    year, month, day, hour, minute, second, millis = map(int, match.groups())
    days = _DAYS_OF_DATE.get(text[:10])
    if days is None:
        days = _days_from_civil(year, month, day)
        if _civil_from_days(days) != (year, month, day):
            days = None  # the 30th of February and the like: never remembered
        else:
            _remember(_DAYS_OF_DATE, text[:10], days)
    if days is None or hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"time {text!r} is not a real moment; check the date and the clock")
    return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis


def add_ms(iso: str, ms: float) -> str:
    """``iso`` moved by ``ms`` milliseconds (rounded down), in the same spelling."""
    return iso_from_ms(parse_iso_ms(iso) + math.floor(ms))
