"""An incident restored in a world: the rows a killed host left behind, driven on by the same
handler the host ran. ``INCIDENT_DUMP`` names the dump's JSON (``JobRunDump.to_json``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from driver import JobPassResult
from scopehost import JobRunDump
from sims import DriveSpec, World, WorldSetup, carries_the_ledger, scenario
from tests.sims.test_check import handler

SCOPE = "s"
#: The host's runs hold the default lease (15 minutes), and a restored lease keeps what it had
#: left: the world drives past it, ticking every 10 s of its time.
HORIZON_MS = 1_200_000
EVERY_MS = 10_000


async def renamed(ctx: Any) -> JobPassResult:
    """The handler's next version, its first step renamed: a deploy over the incident's run."""
    one = await ctx.step("first", lambda: 1)
    await ctx.step("two", lambda: one + 1)
    return JobPassResult(done=True)


async def raises_on_the_payload(ctx: Any) -> JobPassResult:
    """A next version that reads a payload field the old runs never had."""
    customer = ctx.payload["customer"]
    await ctx.step("one", lambda: customer)
    return JobPassResult(done=True)


@scenario("resume", setup=WorldSetup(scopes=(SCOPE,)), checks=[carries_the_ledger])
async def resume(world: World) -> None:
    """The incident's scope, restored; two drives tick until its runs have ended."""
    await _resume(world, handler)


@scenario("deploy-renamed", setup=WorldSetup(scopes=(SCOPE,)), checks=[carries_the_ledger])
async def deploy_renamed(world: World) -> None:
    """The incident's run, driven on by the next version with its first step renamed."""
    await _resume(world, renamed)


@scenario("deploy-raises", setup=WorldSetup(scopes=(SCOPE,)), checks=[carries_the_ledger])
async def deploy_raises(world: World) -> None:
    """The incident's run, driven on by a next version that cannot read its payload."""
    await _resume(world, raises_on_the_payload)


async def _resume(world: World, version: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=10.0, reply_ms=20.0))
    world.add_job("m", "j", version)
    dump = JobRunDump.from_json(Path(os.environ["INCIDENT_DUMP"]).read_text(encoding="utf-8"))
    await world.restore(SCOPE, dump)
    world.every("cron", SCOPE, every_ms=EVERY_MS, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=EVERY_MS, first_ms=EVERY_MS / 2, until_ms=HORIZON_MS)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=EVERY_MS)


@scenario("no-such-service", setup=WorldSetup(scopes=(SCOPE,)))
async def no_such_service(world: World) -> None:
    """Restores a service the world does not have."""
    world.restore_service("card", {})


@scenario("restore-late", setup=WorldSetup(scopes=(SCOPE,)))
async def restore_late(world: World) -> None:
    """Restores after its drives began."""
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "j", handler)
    await world.tick("cron", SCOPE)
    dump = JobRunDump.from_json(Path(os.environ["INCIDENT_DUMP"]).read_text(encoding="utf-8"))
    await world.restore(SCOPE, dump)
