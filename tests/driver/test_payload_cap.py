"""A payload past its cap is refused while it is read, not after it was all read and encoded: a
payload of millions of items used to cost the caller's task (and every scope it shares a thread
with) the whole walk and the whole encoding before the size was known."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import example, given
from hypothesis import strategies as st

import driver._start
from driver import JOB_PAYLOAD_MAX_BYTES, ValidationFailed
from driver._json import SizeCap, dumps, queue_safety_errors
from scopehost import StoreClock, open_scope_host

from ..refusals import refusal
from .support import SCOPE, Trace, drive, start


def over_cap(where: str) -> str:
    return (
        f"is more than the {JOB_PAYLOAD_MAX_BYTES} bytes of UTF-8 a payload's JSON may take: its "
        f"JSON is past them by {where}, where reading stopped (a row holds at most about 2 MB) — "
        "keep large data outside the run and store a reference to it"
    )


@pytest.fixture
def never_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A start that encodes its payload fails the test: a refused one must not get that far."""

    def encode(value: Any) -> str:
        raise AssertionError("the payload was encoded")

    monkeypatch.setattr(driver._start, "dumps", encode)


async def test_five_million_items_are_refused_before_a_single_one_is_read(
    autojump_clock: trio.testing.MockClock, never_encoded: None
) -> None:
    # The last item is not queue-safe: were the items read, it would be reported too.
    payload: list[object] = [0] * 5_000_000
    payload[-1] = b"bytes"
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        with pytest.raises(ValidationFailed) as caught:
            await one.start_job_run(SCOPE, start(payload))
        # Their commas alone are past the cap.
        assert refusal(caught) == [("payload", over_cap("payload"))]
        assert await one.job_runs(SCOPE) == []


async def test_nested_items_are_read_only_about_a_caps_worth(
    autojump_clock: trio.testing.MockClock, never_encoded: None
) -> None:
    # 5,000 lists of 1,000 zeros: 5,000,000 items, and one bad one at the very end.
    payload: list[list[object]] = [[0] * 1_000 for _ in range(5_000)]
    payload[-1][-1] = b"bytes"
    payload[2][5] = float("nan")  # read before the cap: still reported
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        with pytest.raises(ValidationFailed) as caught:
            await one.start_job_run(SCOPE, start(payload))
    # The outer list counts 2 * 5,000 + 1 bytes, each inner one 2 * 1,000 + 1: the 495th inner
    # list (index 494) is the one whose count passes the cap.
    assert (JOB_PAYLOAD_MAX_BYTES - 10_001) // 2_001 == 494
    assert refusal(caught) == [
        (
            "payload.2.5",
            "is nan, which JSON cannot carry — pass None, or the number as a str",
        ),
        ("payload", over_cap("payload.494")),
    ]


async def test_a_payload_under_the_count_and_over_the_cap_is_measured_once_encoded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Two bytes of UTF-8 a character: the count (a byte each) stays under the cap.
    payload = {"text": "é" * (JOB_PAYLOAD_MAX_BYTES // 2)}
    size = len(dumps(payload).encode())
    async with open_scope_host(clock=StoreClock()) as host:
        one = drive(host, Trace())
        with pytest.raises(ValidationFailed) as caught:
            await one.start_job_run(SCOPE, start(payload))
        assert refusal(caught) == [
            (
                "payload",
                f"is {size} bytes of UTF-8, more than the {JOB_PAYLOAD_MAX_BYTES} a payload's "
                "JSON may take (a row holds at most about 2 MB) — keep large data outside the run "
                "and store a reference to it",
            )
        ]
        # At the cap exactly, a payload of many items is carried.
        items = [1] * ((JOB_PAYLOAD_MAX_BYTES - 1) // 2)
        items[-1] = 10
        assert len(dumps(items)) == JOB_PAYLOAD_MAX_BYTES
        run = await one.start_job_run(SCOPE, start(items))
        assert run.payload == items


#: Text UTF-8 carries (no surrogates), of one to three bytes a character.
_TEXT = st.characters(max_codepoint=0xD7FF)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(_TEXT, max_size=8),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(_TEXT, max_size=4), children)
    ),
    max_leaves=40,
)


@given(value=_JSON, short=st.integers(min_value=1, max_value=200))
@example(value=["a", {"k": [""]}], short=1)  # containers and ASCII keys: counted exactly
def test_the_count_never_refuses_a_value_its_cap_holds(value: object, short: int) -> None:
    # Followed by an empty list, so that the count is checked once more after all of the value.
    wrapped = [value, []]
    size = len(dumps(wrapped).encode("utf-8"))
    assert queue_safety_errors(wrapped, "v", cap=SizeCap(size, "it")) == []
    # Under its size: refused by the count (the rest unread), or read whole and left to the
    # caller to measure once encoded; never another error.
    errors = queue_safety_errors(wrapped, "v", cap=SizeCap(max(0, size - short), "it"))
    assert [error.path for error in errors] in ([], ["v"])
    assert all(error.message.startswith("is more than the ") for error in errors)
