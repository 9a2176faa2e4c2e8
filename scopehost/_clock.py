"""The store's clock: virtual time plus an epoch, with optional skew and drift.

Every lease time is the STORE's (docs/protocol.md, "The lease and the claim"), so the simulator
needs a store clock that can disagree with the drives' clocks: ``skew_ms`` shifts it, ``drift``
makes it run fast (> 0) or slow (< 0) relative to virtual time. It is read inside an actor
message, never by a caller.
"""

from __future__ import annotations

import math

import attrs
import trio

from driver import iso_from_ms, parse_iso_ms

#: 2026-10-04T12:00:00.000Z: where a world's stored times start unless told otherwise.
DEFAULT_EPOCH_MS = parse_iso_ms("2026-10-04T12:00:00.000Z")


@attrs.define(kw_only=True)
class StoreClock:
    """``now_ms() = epoch_ms + skew_ms + virtual_ms * (1 + drift)``, rounded down to whole ms."""

    epoch_ms: int = DEFAULT_EPOCH_MS
    skew_ms: float = 0.0
    drift: float = 0.0

    def __attrs_post_init__(self) -> None:
        if not math.isfinite(self.skew_ms):
            raise ValueError(f"skew_ms {self.skew_ms!r} is not finite; pass milliseconds")
        if not (math.isfinite(self.drift) and self.drift > -1):
            raise ValueError(
                f"drift {self.drift!r} must be a finite number above -1 (0 runs at virtual speed)"
            )

    def now_ms(self) -> int:
        virtual_ms = trio.current_time() * 1000.0
        return math.floor(self.epoch_ms + self.skew_ms + virtual_ms * (1.0 + self.drift))

    def now(self) -> str:
        return iso_from_ms(self.now_ms())
