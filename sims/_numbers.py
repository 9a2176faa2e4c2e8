"""How numbers read in a finding, a story line or a report: milliseconds in plain digits, never
``e+06``; counts with their noun in the right number; and how a whole number is read from the
command line.

A world runs for up to an hour of virtual time, 3.6 million ms, where ``{:g}`` switches to an
exponent; the trace keeps times to the microsecond (three decimals of a ms), so that is the most
a sentence ever shows.
"""

from __future__ import annotations

import argparse
import re


def ms(value: float) -> str:
    """``2229460.0`` -> ``'2229460'``, ``1203.25`` -> ``'1203.25'``, ``0.1234`` -> ``'0.123'``."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 seed``, ``2 seeds``, ``0 seeds`` (``nouns`` when adding an s is wrong)."""
    return f"{count} {noun}" if count == 1 else f"{count} {nouns or noun + 's'}"


def whole_number(text: str) -> int:
    """An argparse type for a count: ``--jobs x`` is told what a value must look like. A minus
    sign is let through, so that the option's own check says which values it takes."""
    if not re.fullmatch(r"-?[0-9]+", text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; write digits, e.g. 2")
    if len(text.strip().lstrip("-0")) > _MOST_DIGITS:
        # Past some 4,300 digits int() refuses it in words of its own; no count is that long.
        raise argparse.ArgumentTypeError(
            f"{text.strip()[:20]!r}… ({len(text.strip()):,} characters) is past any count; "
            "write a whole number of fewer digits"
        )
    return int(text)


#: The most digits a count of the command line is read with.
_MOST_DIGITS = 1000
