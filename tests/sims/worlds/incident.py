"""An incident restored in a world: the rows a killed host left behind, driven on by the same
handler the host ran. ``INCIDENT_DUMP`` names the dump's JSON (``JobRunDump.to_json``)."""

from __future__ import annotations

import os
from pathlib import Path

from scopehost import JobRunDump
from sims import DriveSpec, World, WorldSetup, scenario
from tests.sims.test_check import handler

SCOPE = "s"
#: The host's runs hold the default lease (15 minutes), and a restored lease keeps what it had
#: left: the world drives past it, ticking every 10 s of its time.
HORIZON_MS = 1_200_000
EVERY_MS = 10_000


@scenario("resume", setup=WorldSetup(scopes=(SCOPE,)))
async def resume(world: World) -> None:
    """The incident's scope, restored; two drives tick until its runs have ended."""
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=10.0, reply_ms=20.0))
    world.add_job("m", "j", handler)
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
