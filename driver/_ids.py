"""ULIDs minted from an injected clock and random source, so a seeded world mints the same ids.

26 Crockford base-32 characters: 48 bits of milliseconds, 80 random bits. Within one millisecond a
mint increments the previous random part, so ids from one mint are strictly increasing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class BitSource(Protocol):
    """The injected random source (a ``random.Random`` does)."""

    def getrandbits(self, k: int, /) -> int: ...


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


class UlidMint:
    """``mint()`` returns the next ULID; ``now_ms`` and ``rng`` are injected."""

    def __init__(self, now_ms: Callable[[], float], rng: BitSource) -> None:
        self._now_ms = now_ms
        self._rng = rng
        self._last_ms = -1
        self._last_random = 0

    def __call__(self) -> str:
        ms = max(int(self._now_ms()), self._last_ms)
        if ms == self._last_ms:
            self._last_random = (self._last_random + 1) % (1 << 80)
        else:
            self._last_random = self._rng.getrandbits(80)
        self._last_ms = ms
        return _encode(ms, 10) + _encode(self._last_random, 16)
