"""A count of the world's tasks still under way, and a wait for it to reach none: what the
services' own work and their callbacks on the wire each keep, so that the world's end waits."""

from __future__ import annotations

import trio


class Outstanding:
    """Tasks begun and not yet ended; true while any is."""

    def __init__(self) -> None:
        self.count = 0
        self._idle: trio.Event | None = None

    def __bool__(self) -> bool:
        return self.count > 0

    def begin(self) -> None:
        self.count += 1

    def end(self) -> None:
        self.count -= 1
        if self._idle is not None and self.count == 0:
            self._idle.set()

    async def wait(self) -> None:
        """Until none is under way (one begun meanwhile is waited for too)."""
        while self.count:
            self._idle = trio.Event()
            await self._idle.wait()
        self._idle = None
