"""A pass deadline on the host's deterministic timer.

The kernel imports no event loop, so the host is what cancels a handler that ran past its job's
``deadline_ms``. The deadline is an entry in the host's network heap rather than a Trio deadline:
Trio breaks ties between equal deadlines by memory address, and a simulated world must order a
deadline against every leg and sleep due at the same instant by (due time, sequence), as it does
the rest (see ``_network``).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import trio

from ._network import Network, withdraw


async def run_within(network: Network, ms: float, body: Callable[[], Awaitable[None]]) -> bool:
    """Run ``body``, cancelling it once ``ms`` milliseconds of the host's time have passed. True
    when it finished first; False when the deadline fell, even if ``body`` caught the cancel and
    returned: a handler that outlived its deadline is not trusted with its pass."""
    if not (ms > 0 and math.isfinite(ms)):
        raise ValueError(f"a deadline of {ms!r} ms is not a finite number > 0")
    with trio.CancelScope() as scope:
        entry = network.after(ms / 1000.0, scope.cancel)
        try:
            await body()
        finally:
            withdraw(entry)
    return not scope.cancel_called
