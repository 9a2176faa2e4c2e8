"""What a seed is: a whole number from 0 to 2**64 - 1, read from the command line or checked at
every entry.

A negative seed is refused rather than used. Python's ``random.Random`` seeds from the absolute
value of an int, so seed -5 would build world 5 while every report, trace and replay command
called it -5: a world whose name lies. A seed past 2**64 - 1 is refused too: no world needs more
than 64 bits of seed, and a seed of thousands of digits is past what Python reads from text, so
the command line would meet it as Python's own error instead of as a seed.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Iterable, Sequence
from typing import Any

#: The most seeds one sweep takes. A sweep keeps every seed's summary for its report, about 2 KB
#: each (the probes it hit, above all), so a million seeds hold some 2 GB; a bigger search is run
#: as several sweeps over consecutive ranges.
MAX_SWEEP_SEEDS = 1_000_000

#: The largest seed, 2**64 - 1.
MAX_SEED = 2**64 - 1
_RANGE = "seeds are whole numbers from 0 to 18446744073709551615 (2**64 - 1)"


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
    if number > MAX_SEED:
        shown = number if number < 10**30 else f"an int of {number.bit_length()} bits"
        raise ValueError(f"seed={shown} is past the largest seed; {_RANGE}")
    return number


def require_seeds(seeds: Any) -> Iterable[int]:
    """``seeds`` unchanged if it can be a collection of seeds (a range, a list, any iterable but a
    str or bytes, whose characters would be read as seeds); else a ``ValueError`` that names it.
    Each seed is checked where it is used (:func:`require_seed`)."""
    try:
        iter(seeds)
    except TypeError:
        iterable = False
    else:
        iterable = not isinstance(seeds, str | bytes | bytearray)
    if not iterable:
        raise ValueError(
            f"seeds={seeds!r} is not a collection of seeds; pass a range (e.g. range(10)) or a "
            "list of whole numbers >= 0"
        )
    return seeds  # type: ignore[no-any-return]


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
    named = f"seeds {_shown(text)} go"
    first = _seed_of(match.group(1), named)
    last = _seed_of(match.group(2), named) if match.group(2) is not None else first
    if last < first:
        raise ValueError(f"seeds {text!r} run backwards; write the smaller number first")
    return range(first, last + 1)


def parse_seed(text: str) -> int:
    """One seed, ``"N"``: a whole number >= 0, as :func:`parse_seeds` reads them."""
    if re.fullmatch(r"-\d+", text.strip()):
        raise ValueError(f"seed {text!r} is negative; seeds are whole numbers >= 0")
    if not re.fullmatch(r"\d+", text.strip()):
        raise ValueError(f"seed {text!r} is not a whole number; seeds are whole numbers >= 0")
    return _seed_of(text.strip(), f"seed {_shown(text)} goes")


def _seed_of(digits: str, named: str) -> int:
    """``digits`` as a seed (``named``: the words that name it, with their verb, for a refusal);
    a number past :data:`MAX_SEED` is refused before Python reads it (past some 4,300 digits,
    ``int()`` refuses it in words of its own)."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(MAX_SEED)) or int(significant) > MAX_SEED:
        raise ValueError(f"{named} past the largest seed; {_RANGE}")
    return int(significant)


def _shown(text: str) -> str:
    """A number as typed, as a refusal quotes it: cut, with its length, when long."""
    text = text.strip()
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}… ({len(text):,} characters)"


def sweep_seeds(seeds: Iterable[int]) -> Sequence[int]:
    """``seeds`` checked for a sweep: every one a seed, at most :data:`MAX_SWEEP_SEEDS` of them.

    A range is checked by its ends and its length, so ``0..99999999999999999999`` is refused at
    once instead of being spelt out in memory; any other iterable is read only one seed past the
    limit."""
    seeds = require_seeds(seeds)
    if isinstance(seeds, range):
        try:
            count = len(seeds)
        except OverflowError:  # more than sys.maxsize seeds
            count = MAX_SWEEP_SEEDS + 1
        if count > MAX_SWEEP_SEEDS:
            shown = f"seeds {seeds.start}..{seeds.stop - 1}" if seeds.step == 1 else repr(seeds)
            raise ValueError(_too_many(shown))
        for end in (seeds[0], seeds[-1]) if count else ():
            require_seed(end)
        return seeds
    taken = list(itertools.islice(seeds, MAX_SWEEP_SEEDS + 1))
    if len(taken) > MAX_SWEEP_SEEDS:
        raise ValueError(_too_many("the seeds given"))
    return [require_seed(seed) for seed in taken]


def _too_many(shown: str) -> str:
    part = MAX_SWEEP_SEEDS
    return (
        f"{shown}: more than {part:,} seeds; a sweep keeps every seed's summary for its report "
        f"(about 2 KB each), so it takes at most {part:,} — sweep the range in parts "
        f"(--seeds 0..{part - 1}, then {part}..{2 * part - 1}, and so on)"
    )
