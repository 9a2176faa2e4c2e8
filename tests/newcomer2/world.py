"""The payout job (payouts.py) in simulated worlds, with its releases deployed under it.

python -m sims explore newcomer2/world.py:cursor --no-remember         # bug 1 found
python -m sims explore newcomer2/world.py:cursor-fixed --no-remember   # clean
python -m sims explore newcomer2/world.py:rekey --no-remember          # bug 2 found
python -m sims explore newcomer2/world.py:rekey-fixed --no-remember    # clean
python -m sims explore newcomer2/world.py:restart --no-remember        # bug 3 found
python -m sims explore newcomer2/world.py:restart-fixed --no-remember  # clean
python -m sims explore newcomer2/world.py:cursor-half --no-remember    # v1 reads v2's dict
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs

# Loaded by path (a world file): the repository's root on the path, as examples/shop's world is.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from sims import (
    DriveSpec,
    Operation,
    Service,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    at_most_once,
    scenario,
)
from tests.newcomer2.payouts import (
    JOB,
    MODULE,
    V1,
    V2_CURSOR,
    V2_CURSOR_FIXED,
    V2_CURSOR_HALF,
    V2_REKEY,
    V2_REKEY_FIXED,
    V2_RESTART,
    V2_RESTART_FIXED,
    batch_payload,
)

SCOPE = "payroll"
HORIZON_MS = 120_000


def transfer(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    done = state.setdefault("transfers", [])
    done.append({"payee": args["payee"], "cents": args["cents"]})
    return {"transfer": f"t-{len(done)}"}


BANK = Service(
    "bank", operations={"transfer": Operation(transfer, idempotent=True)}, latency_ms=(5.0, 40.0)
)
SETUP = WorldSetup(scopes=(SCOPE,), lease_ms=5_000, services=(BANK,))


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def counted_right(trace: Trace) -> list[UserFinding]:
    """A batch that ended done says it paid exactly its payees (counter ``paid``)."""
    found = []
    for event in trace.of("world.end"):
        for rows in event["runs"].values():
            for row in rows:
                if row["job"] != JOB or row["status"] != "done":
                    continue
                want = len(_json(row["payload"])["payees"])
                got = (_json(row["counters"]) or {}).get("paid")
                if got != want:
                    found.append(
                        UserFinding(
                            f"batch {row['instance']} ended done saying it paid {got} payees "
                            f"of {want}",
                            run=row["id"],
                        )
                    )
    return found


CHECKS = [at_most_once("bank.transfer", key="payee"), counted_right]


async def _batch(world: World) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=10.0, reply_ms=20.0))
    world.register(V1)  # the world starts on release 1
    await world.start("cron", SCOPE, MODULE, JOB, instance="B7", payload=batch_payload("B7", 5))
    world.every("cron", SCOPE, every_ms=500, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=500, first_ms=250, until_ms=HORIZON_MS)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


def _deploying(version: Any) -> WorldSetup:
    return attrs.evolve(SETUP, versions={"v2": version})


@scenario("v1", setup=SETUP, checks=CHECKS)
async def v1(world: World) -> None:
    """Release 1 alone: five payees, two a pass."""
    await _batch(world)


@scenario("cursor", setup=_deploying(V2_CURSOR), checks=CHECKS)
async def cursor(world: World) -> None:
    """Release 2 reads a dict cursor; v1 wrote an int (bug 1)."""
    await _batch(world)


@scenario("cursor-half", setup=_deploying(V2_CURSOR_HALF), checks=CHECKS)
async def cursor_half(world: World) -> None:
    """Release 2 reads both cursor shapes but writes the dict, which v1 drives cannot read."""
    await _batch(world)


@scenario("cursor-fixed", setup=_deploying(V2_CURSOR_FIXED), checks=CHECKS)
async def cursor_fixed(world: World) -> None:
    """Release 2 reads both cursor shapes and writes v1's int."""
    await _batch(world)


@scenario("rekey", setup=_deploying(V2_REKEY), checks=CHECKS)
async def rekey(world: World) -> None:
    """Release 2 keys each transfer by its chunk too (bug 2)."""
    await _batch(world)


@scenario("rekey-fixed", setup=_deploying(V2_REKEY_FIXED), checks=CHECKS)
async def rekey_fixed(world: World) -> None:
    """Release 2 keeps v1's key for the runs v1 started."""
    await _batch(world)


@scenario("restart", setup=_deploying(V2_RESTART), checks=CHECKS)
async def restart(world: World) -> None:
    """Release 2 reads v1's int cursor as 'start over' (bug 3)."""
    await _batch(world)


@scenario("restart-fixed", setup=_deploying(V2_RESTART_FIXED), checks=CHECKS)
async def restart_fixed(world: World) -> None:
    """Release 2 reads v1's int cursor as its offset."""
    await _batch(world)
