"""The swarm's draw strikes the job's outside world when it is told the world's services, and draws
exactly the plan it always drew when it is not."""

from __future__ import annotations

import hashlib
import random
from collections import Counter

import pytest

from sims import (
    DelayLeg,
    DropLeg,
    EvictAfter,
    FaultPlan,
    LateRequest,
    ServiceOutage,
    draw_plan,
)
from sims.faults._check import check_plan
from sims.faults._plan import EVENT_KINDS, FAULT_KINDS

DRIVES = ("cron", "alarm")
SERVICES = {"bank": ("pay", "refund"), "mailer": ("send",)}


def _draw(seed: int, kinds: tuple[type, ...] | None = None, **services: object) -> FaultPlan:
    return draw_plan(
        random.Random(seed),
        drives=DRIVES,
        scopes=("s-1", "s-2"),
        lease_ms=1000,
        margin_ms=250,
        horizon_ms=30_000,
        kinds=kinds,
        **services,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("kinds", "digest"),
    [
        (None, "25b5d30847b3cc34b84c4cfabff771d6fbb002de80fdae156092a7f805d3f7f0"),
        (EVENT_KINDS, "3b093b807fedaecb4fe13fd6af430f2eae10d62ab9cd43bc45f89487fcb9bf08"),
        (FAULT_KINDS, "b9f1865447ac6d299d004f1937f1af85ac53c67c0862fa8d9b85e892b04200ba"),
    ],
)
def test_without_services_every_seed_draws_the_plan_it_always_drew(
    kinds: tuple[type, ...] | None, digest: str
) -> None:
    # The digests of 300 seeds' plans as draw_plan drew them before it knew of services: a
    # sweep's seed names the same world it named then.
    plans = "".join(repr(_draw(seed, kinds)) for seed in range(300))
    assert hashlib.sha256(plans.encode()).hexdigest() == digest


def test_with_services_the_draw_strikes_service_calls_and_outages_that_fit_the_world() -> None:
    seen: Counter[str] = Counter()
    for seed in range(300):
        for kinds in (None, EVENT_KINDS, FAULT_KINDS):
            plan = _draw(seed, kinds, services=SERVICES)
            check_plan(plan, drives=DRIVES, scopes=("s-1", "s-2"), services=SERVICES)
            for fault in plan.faults:
                operation = str(getattr(fault, "operation", ""))
                if "." in operation:
                    assert not isinstance(fault, EvictAfter)  # a service call runs in no scope
                    seen[f"{type(fault).__name__} {operation}"] += 1
                elif isinstance(fault, ServiceOutage):
                    assert fault.service in SERVICES
                    assert 0 <= fault.from_ms < fault.to_ms
                    seen["ServiceOutage"] += 1
    for kind in (DelayLeg, DropLeg, LateRequest):
        for call in ("bank.pay", "bank.refund", "mailer.send"):
            assert seen[f"{kind.__name__} {call}"] > 0, (kind, call)
    assert seen["HoldLeg bank.pay"] > 0
    assert seen["CrashAfter mailer.send"] > 0
    assert seen["ServiceOutage"] > 50


def test_an_outage_is_drawn_by_default_only_for_a_world_with_services() -> None:
    with_services = {type(f) for seed in range(100) for f in _draw(seed, services=SERVICES).faults}
    without = {type(f) for seed in range(100) for f in _draw(seed).faults}
    assert ServiceOutage in with_services
    assert ServiceOutage not in without
    # Narrowed kinds are the caller's: no outage unless named.
    narrowed = _draw(3, (DelayLeg,), services=SERVICES)
    assert all(isinstance(f, DelayLeg) for f in narrowed.faults)


def test_services_that_name_no_operations_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^services=\{'bank': 'pay'\}; give each service's "):
        _draw(1, services={"bank": "pay"})
    with pytest.raises(ValueError, match=r"^services=\{'bank': \(\)\}; give each service's "):
        _draw(1, services={"bank": ()})
