"""What a seed is: a whole number >= 0, read from the command line or checked at every entry.

A negative seed is refused rather than used. Python's ``random.Random`` seeds from the absolute
value of an int, so seed -5 would build world 5 while every report, trace and replay command
called it -5: a world whose name lies.
"""

from __future__ import annotations

import operator
import re
from typing import Any


def require_seed(seed: Any) -> int:
    """``seed`` as an ``int`` if it is a whole number >= 0 (an integer type, not a ``bool``);
    else a ``ValueError`` that names it."""
    try:
        number = None if isinstance(seed, bool) else operator.index(seed)
    except TypeError:
        number = None
    if number is None:
        raise ValueError(f"seed={seed!r} is not a whole number; seeds are whole numbers >= 0")
    if number < 0:
        raise ValueError(
            f"seed={number} is negative; seeds are whole numbers >= 0 (Python's random would "
            f"build world {-number} under its name)"
        )
    return number


def parse_seeds(text: str) -> range:
    """``"A..B"`` (both included) or ``"N"``, that one seed; seeds are whole numbers >= 0."""
    if re.fullmatch(r"-?\d+(?:\.\.-?\d+)?", text.strip()) and "-" in text:
        raise ValueError(f"seeds {text!r} include a negative number; seeds are whole numbers >= 0")
    match = re.fullmatch(r"(\d+)(?:\.\.(\d+))?", text.strip())
    if match is None:
        raise ValueError(
            f"seeds {text!r} must be N (that one seed) or A..B (A to B, both included), "
            "in whole numbers >= 0"
        )
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if last < first:
        raise ValueError(f"seeds {text!r} run backwards; write the smaller number first")
    return range(first, last + 1)


def parse_seed(text: str) -> int:
    """One seed, ``"N"``: a whole number >= 0, as :func:`parse_seeds` reads them."""
    if re.fullmatch(r"-\d+", text.strip()):
        raise ValueError(f"seed {text!r} is negative; seeds are whole numbers >= 0")
    if not re.fullmatch(r"\d+", text.strip()):
        raise ValueError(f"seed {text!r} is not a whole number; seeds are whole numbers >= 0")
    return int(text)
