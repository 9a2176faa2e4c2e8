"""An operator read's limit past every number JavaScript or JSON has is refused by path, where it
used to end in a raw ``OverflowError`` from the clamp; any other number is clamped, as the spec
says."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from driver import JobRunFilter, ValidationFailed
from scopehost import StoreClock, open_scope_host

from .support import SCOPE, Trace, drive, start


async def test_a_limit_of_four_hundred_digits_is_refused_by_path(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        await one.start_job_run(SCOPE, start())
        with pytest.raises(
            ValidationFailed,
            match=r"^filter\.limit is an int of 401 digits, past any number JSON carries; pass a "
            r"limit of up to 500 rows, or None for the default$",
        ):
            await one.job_runs(SCOPE, JobRunFilter(limit=10**400))
        # As large as a float may be, it is clamped.
        assert len(await one.job_runs(SCOPE, JobRunFilter(limit=10**300))) == 1
