"""What a start's payload costs its caller: ``python -m bench.bench_payload_cap``.

A start checks its payload in the caller's task (the event loop's thread, which every scope of
the host shares), so a payload of millions of items stalls them all while it is read. Printed,
for payloads past the cap: how long the refusal took with the count the start keeps while it
checks (the driver as it is), and with a whole check, a whole encoding and then a size (as
before); and, for a payload under the cap, the check with and without the count, the price
every start pays. Best of a few rounds, as ratios within one run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from driver import JOB_PAYLOAD_MAX_BYTES
from driver._json import SizeCap, dumps, queue_safety_errors
from driver._limits import size_errors

_CAP = SizeCap(JOB_PAYLOAD_MAX_BYTES, "a payload's JSON")


def _counted(payload: object) -> bool:
    """Refused as a start refuses it now: the count while checking, then the encoded size."""
    if queue_safety_errors(payload, "payload", cap=_CAP):
        return True
    text = dumps(payload)
    return bool(size_errors(text, JOB_PAYLOAD_MAX_BYTES, "payload", _CAP.what))


def _whole(payload: object) -> bool:
    """Refused as a start refused it before: check all of it, encode all of it, measure."""
    if queue_safety_errors(payload, "payload"):
        return True
    text = dumps(payload)
    return bool(size_errors(text, JOB_PAYLOAD_MAX_BYTES, "payload", _CAP.what))


def _best(work: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    over: dict[str, object] = {
        "5,000,000 zeros": [0] * 5_000_000,
        "5,000 lists of 1,000 zeros": [[0] * 1_000 for _ in range(5_000)],
        "1,000,000 objects of one key": [{"k": 1} for _ in range(1_000_000)],
    }
    print(f"payload cap: {JOB_PAYLOAD_MAX_BYTES} bytes; best of 3, ms")
    for name, payload in over.items():
        assert _counted(payload)
        assert _whole(payload)
        counted = _best(partial(_counted, payload), 3)
        whole = _best(partial(_whole, payload), 3)
        print(
            f"refused, {name:<29} counted {counted * 1000:8.1f}   whole {whole * 1000:8.1f}   "
            f"{counted / whole:.3f} of whole"
        )
    under = {"ids": list(range(100_000)), "names": [f"n{index}" for index in range(20_000)]}
    assert not _counted(under)
    check = _best(lambda: queue_safety_errors(under, "payload"), 15)
    count = _best(lambda: queue_safety_errors(under, "payload", cap=_CAP), 15)
    print(
        f"taken, 120,000 items ({len(dumps(under))} bytes): check {check * 1000:.1f}, with the "
        f"count {count * 1000:.1f}, {count / check:.2f} of the check"
    )


if __name__ == "__main__":
    main()
