"""Stored times: the one spelling, its exact inverse, and what is refused, whatever was met before
(the conversions remember recent answers, so every property is asked twice)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver import add_ms, iso_from_ms, parse_iso_ms

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_FIRST_MS = (dt.datetime(1, 1, 1, tzinfo=dt.UTC) - _EPOCH) // dt.timedelta(milliseconds=1)
_LAST_MS = (dt.datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=dt.UTC) - _EPOCH) // dt.timedelta(
    milliseconds=1
)


def _reference(ms: int) -> str:
    m = _EPOCH + dt.timedelta(milliseconds=ms)
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}."
        f"{m.microsecond // 1000:03d}Z"
    )


@given(st.integers(_FIRST_MS, _LAST_MS))
def test_a_moment_is_spelled_as_datetime_spells_it_and_read_back_exactly(ms: int) -> None:
    for _ in range(2):
        assert iso_from_ms(ms) == _reference(ms)
        assert parse_iso_ms(_reference(ms)) == ms


@given(st.floats(_FIRST_MS, _LAST_MS, allow_nan=False))
def test_fractional_milliseconds_round_down(ms: float) -> None:
    assert iso_from_ms(ms) == _reference(int(ms // 1))


def test_an_impossible_date_is_refused_even_next_to_a_real_one_just_read() -> None:
    assert parse_iso_ms("2026-02-28T00:00:00.000Z") == parse_iso_ms("2026-03-01T00:00:00.000Z") - (
        24 * 3_600_000
    )
    for text in (
        "2026-02-29T00:00:00.000Z",
        "2026-02-30T12:00:00.000Z",
        "2026-13-01T00:00:00.000Z",
    ):
        for _ in range(2):
            with pytest.raises(ValueError, match="is not a real moment"):
                parse_iso_ms(text)
    with pytest.raises(ValueError, match="is not a real moment"):
        parse_iso_ms("2026-02-28T24:00:00.000Z")


@pytest.mark.parametrize(
    "text",
    [
        "٢٠٢٦-10-04T12:00:00.000Z",  # Arabic-Indic digits: int() reads them, string order does not
        "2026-10-04T12:00:00.000Z\n",
        "2026-10-04T12:00:00Z",
        "2026-10-04 12:00:00.000Z",
        "2026-10-04T12:00:00.000+00:00",
    ],
)
def test_any_other_spelling_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not ISO-8601 UTC with milliseconds and Z"):
        parse_iso_ms(text)


@pytest.mark.parametrize("ms", [float("nan"), float("inf"), -float("inf")])
def test_a_time_that_is_not_finite_is_refused(ms: float) -> None:
    for _ in range(2):
        with pytest.raises(ValueError, match="is not finite"):
            iso_from_ms(ms)


def test_a_time_outside_the_four_digit_years_is_refused() -> None:
    with pytest.raises(ValueError, match="falls outside the years 0000 to 9999"):
        iso_from_ms(_LAST_MS + 1)


def test_add_ms_moves_a_stored_time() -> None:
    assert add_ms("2026-10-04T23:59:59.999Z", 1.7) == "2026-10-05T00:00:00.000Z"
