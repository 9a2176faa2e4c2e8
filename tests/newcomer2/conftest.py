"""The fixture of these tests: release 1 left in flight on the real host, by state."""

from tests.newcomer2.helpers import inflight

__all__ = ["inflight"]
