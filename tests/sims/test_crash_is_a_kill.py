"""A crash is a kill: what a killed drive's ``finally:`` or ``except`` still runs never reaches the
world, while an ordinary cancellation's cleanup does, and a restarted drive works as before.

The handler below holds a printer (a lock row in the scope) for 250 ms and releases it in a
``finally:`` with a shielded call: the "fix" users write for a crash. Before the fence, a crash was
a Trio cancellation, so that ``finally:`` released the printer and the user's check passed; a real
kill runs no ``finally:``, and the printer stays held. The check must now fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sims import CrashDrive, DelayLeg, DriveKilled, FaultPlan, Upstream, simulate
from sims.world._fence import Incarnation, living_as

WORLD = '''
import trio

from sims import (
    DriveSpec, JobPassResult, RetryPolicy, World, WorldSetup, effect_key, effects_in,
    record_effect, scenario,
)

SERVICES = {}


async def print_report(ctx):
    async def work():
        await record_effect(ctx, "lock")
        try:
            if ctx.payload.get("deadline_s") is not None:
                with trio.move_on_after(ctx.payload["deadline_s"]):
                    await trio.sleep(0.25)  # the pass holds the printer
            else:
                await trio.sleep(0.25)
        finally:
            # The "fix" for a crash: release in a finally, shielded from the cancellation.
            with trio.CancelScope(shield=True):
                await record_effect(ctx, "unlock")
            SERVICES["upstream"].fetch(0)  # tell the print service the job is over
        return "printed"

    await ctx.step("print", work)
    return JobPassResult(done=True)


def printer_released(trace):
    """Every pass that took the printer released it."""
    landed = effects_in(trace)
    return [
        f"run {e['run']} took the printer {landed[effect_key(e['run'], 'lock')]} times and "
        f"released it {landed[effect_key(e['run'], 'unlock')]} times"
        for e in trace.of("world.start")
        if landed[effect_key(e["run"], "lock")] != landed[effect_key(e["run"], "unlock")]
    ]


async def _print(world, payload):
    SERVICES["upstream"] = world.upstream
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("office", "print", print_report, retry=RetryPolicy(max_attempts=5))
    await world.start("cron", "office", "office", "print", payload=payload)
    world.every("cron", "office", every_ms=1_000, first_ms=0, until_ms=10_000)
    await world.settle(("office",), horizon_ms=10_000, poll_ms=500)


@scenario("printer", setup=WorldSetup(scopes=("office",)), checks=[printer_released])
async def printer(world: World) -> None:
    """A pass holds the printer 250 ms and releases it in a shielded finally."""
    await _print(world, {})


@scenario("printer-deadline", setup=WorldSetup(scopes=("office",)), checks=[printer_released])
async def printer_deadline(world: World) -> None:
    """The same pass, whose work is cut short by its own deadline (an ordinary cancellation)."""
    await _print(world, {"deadline_s": 0.1})
'''

#: The cron's pass takes the printer at about 5 ms and holds it until about 255 ms.
KILL_WHILE_PRINTING = FaultPlan((CrashDrive(drive="cron", at_ms=100.0, down_ms=1_500.0),))


@pytest.fixture
def world_file(tmp_path: Path) -> Path:
    path = tmp_path / "printer_world.py"
    path.write_text(WORLD)
    return path


def test_a_killed_drives_finally_does_not_release_what_it_held(world_file: Path) -> None:
    simulation = simulate(f"{world_file}:printer", 1, plan=KILL_WHILE_PRINTING)

    # The user's check fails, as it would after a real kill: the dead pass never released.
    assert [finding.text for finding in simulation.report.violations] == [
        f"run {simulation.facts.only_run('office').id} took the printer 2 times and released it "
        "1 times"
    ]
    fenced = list(simulation.facts.of("fault.fence"))
    assert [(e["drive"], e["op"], e["leg"]) for e in fenced] == [("cron", "invoke", "request")]
    (crash,) = simulation.facts.of("fault.crash")
    assert crash["working"] is True
    assert fenced[0]["t"] == crash["t"]
    # The kill propagated from the fenced call: the rest of the finally (its upstream call) never
    # ran, so the upstream heard only the restarted drive's pass.
    assert simulation.outcome.fetched[0] == 1
    # The restarted drive is a new incarnation whose calls go through: it finished the run.
    assert simulation.facts.only_run("office").status == "done"


def test_without_a_kill_the_finally_releases(world_file: Path) -> None:
    simulation = simulate(f"{world_file}:printer", 1)
    assert simulation.ok
    assert simulation.facts.count("fault.fence") == 0
    assert simulation.outcome.fetched[0] == 1


def test_an_ordinary_cancellation_still_runs_its_cleanup_into_the_world(world_file: Path) -> None:
    # The pass's own deadline cancels its work; its finally releases, as cancellation means.
    simulation = simulate(f"{world_file}:printer-deadline", 1)
    assert simulation.ok
    assert simulation.facts.count("fault.fence") == 0
    assert simulation.outcome.fetched[0] == 1


def test_a_reply_in_flight_to_a_killed_drive_is_not_delivered(world_file: Path) -> None:
    # The unlock's reply is held 300 ms; the drive is killed meanwhile. Before the fence, the
    # shielded call got its answer and the finally went on; now the answer reaches nobody.
    held_unlock = DelayLeg(drive="cron", operation="invoke", nth=2, leg="reply", ms=300.0)
    kill = CrashDrive(drive="cron", at_ms=400.0, down_ms=1_500.0)
    simulation = simulate(f"{world_file}:printer-deadline", 1, plan=FaultPlan((held_unlock, kill)))

    fenced = list(simulation.facts.of("fault.fence"))
    assert [(e["drive"], e["op"], e["leg"]) for e in fenced] == [("cron", "invoke", "reply")]
    # The operation ran in the scope (a dropped reply's did), so both releases landed...
    assert simulation.ok
    executed = {(e["link"], e["seq"]) for e in simulation.facts.of("rpc.exec")}
    assert ("cron", fenced[0]["seq"]) in executed
    # ...but the code after the call, the upstream call, never ran in the killed incarnation.
    assert simulation.outcome.fetched[0] == 1


def test_a_killed_incarnation_reaches_no_upstream_and_a_living_one_does() -> None:
    upstream = Upstream(3)
    with (
        living_as(Incarnation("cron", 1, killed=True)),
        pytest.raises(DriveKilled, match=r"^drive cron was killed \(incarnation 1\): its upstream"),
    ):
        upstream.fetch(0)
    assert (upstream.calls["any"], upstream.fetched[0]) == (0, 0)  # it never left the process
    with living_as(Incarnation("cron", 2)):
        assert upstream.fetch(0) == {"object": 0}
    assert upstream.fetch(1) == {"object": 1}  # code outside any drive (the scenario's own)
