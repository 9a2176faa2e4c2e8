"""The host's own calls refuse what they cannot use where it is passed, by name."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from driver import ValidationFailed
from scopehost import DoorHeld, StoreClock, open_scope_host


@pytest.mark.parametrize(
    ("module_id", "message"),
    [
        ("", "module_id is ''; it must be a non-empty str"),
        (None, "module_id is None; it must be a non-empty str"),
        (7, "module_id is 7; it must be a non-empty str"),
    ],
)
async def test_a_door_is_held_released_and_opened_only_for_a_module_id(
    autojump_clock: trio.testing.MockClock, module_id: object, message: str
) -> None:
    # Held under "" or None, a door used to be "held" for no module at all, silently.
    async with open_scope_host(clock=StoreClock()) as host:
        for call in (host.hold_door, host.release_door, host.door):
            with pytest.raises(ValidationFailed) as caught:
                call("s1", module_id)  # type: ignore[arg-type]
            assert str(caught.value) == message
        host.hold_door("s1", "crm")
        with pytest.raises(DoorHeld):
            host.door("s1", "crm")
        host.release_door("s1", "crm")
        assert host.door("s1", "crm").module_id == "crm"


async def test_a_stub_over_something_that_is_not_a_link_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        with pytest.raises(
            ValidationFailed,
            match=r"^link is 'lan'; pass a scopehost.Link \(e.g. Link\(request_ms=3, "
            r"reply_ms=3\)\), or None for the host's zero-latency link$",
        ):
            host.stub("s1", link="lan")  # type: ignore[arg-type]
