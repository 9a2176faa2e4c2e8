"""The store's clocks: UTC wall time for an embedded host, virtual time for a simulation.

Every lease time is the STORE's (docs/protocol.md, "The lease and the claim"): the claim's due
test and expiry, BEGIN's margin, each renewal. A clock is read inside an actor message, never by
a caller.

- ``WallClock`` is what ``open_scope_host`` uses unless told otherwise. A host embedded in a
  service, or reopened on its directory after a crash, must agree with the times it wrote before,
  with other processes on the same files, and with the ULIDs it mints: only the wall clock does.
- ``StoreClock`` is the simulator's: a fixed epoch plus Trio's clock, with optional skew and drift
  so a world can make the store disagree with its drives. Trio's clock has a random origin per
  process unless it is a ``MockClock``, so it is only meaningful under one: tests and worlds pass
  it explicitly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol

import attrs
import trio

from driver import iso_from_ms, parse_iso_ms

#: 2026-10-04T12:00:00.000Z: where a world's stored times start unless told otherwise.
DEFAULT_EPOCH_MS = parse_iso_ms("2026-10-04T12:00:00.000Z")


class Clock(Protocol):
    """What a scope host reads the store's time from."""

    def now_ms(self) -> int: ...

    def now(self) -> str: ...


@attrs.define(kw_only=True)
class StoreClock:
    """The virtual store clock: ``now_ms() = epoch_ms + skew_ms + virtual_ms * (1 + drift)``,
    rounded down to whole ms, where ``virtual_ms`` is Trio's clock (a ``MockClock`` in a test or a
    world)."""

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


@attrs.define
class WallClock:
    """UTC wall time in whole milliseconds, which never steps back for one clock.

    A system clock can be set back (by hand or by time sync). Stored times compare as strings and
    ids are minted from the store's time, so a backward step would let a lease written later
    expire earlier; instead the clock holds at the latest time it has read until the wall clock
    passes it again.
    """

    #: Reads the wall clock in ns since the Unix epoch (a test substitutes its own readings).
    read_ns: Callable[[], int] = attrs.field(default=time.time_ns, kw_only=True, repr=False)
    _latest_ms: int = attrs.field(default=0, init=False, repr=False)

    def now_ms(self) -> int:
        wall_ms = self.read_ns() // 1_000_000
        if wall_ms > self._latest_ms:
            self._latest_ms = wall_ms
        return self._latest_ms

    def now(self) -> str:
        return iso_from_ms(self.now_ms())
