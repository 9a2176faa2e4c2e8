"""How a number of milliseconds reads in a finding or a story line: plain digits, never ``e+06``.

A world runs for up to an hour of virtual time, 3.6 million ms, where ``{:g}`` switches to an
exponent; the trace keeps times to the microsecond (three decimals of a ms), so that is the most
a sentence ever shows.
"""

from __future__ import annotations


def ms(value: float) -> str:
    """``2229460.0`` -> ``'2229460'``, ``1203.25`` -> ``'1203.25'``, ``0.1234`` -> ``'0.123'``."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text
