"""An effect recorded once, in one scope call, and a world's own module operations.

``record_effect_once`` writes its row only when the key is new; every count of effects (the user's
``effects_in``, the oracle's ``effects`` check, the timeline's effect marks) counts what it wrote,
never a call that found the key already there. ``WorldSetup(operations=...)`` gives the world's
scopes operations of its own, run in the scope's one transaction.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sims import Trace, WorldSetup, effect_key, effects_in, simulate
from sims.timeline._reader import build_timeline

WORLD = '''
import sqlite3

from sims import (
    DriveSpec, JobPassResult, RetryPolicy, World, WorldSetup, record_effect, record_effect_once,
    scenario,
)

async def twice(ctx):
    async def once_twice():
        await record_effect_once(ctx, "once", data={"n": 1})
        await record_effect_once(ctx, "once", data={"n": 2})
        return "ok"

    async def plain_twice():
        await record_effect(ctx, "plain")
        await record_effect(ctx, "plain")
        return "ok"

    await ctx.step("once", once_twice)
    await ctx.step("plain", plain_twice)
    return JobPassResult(done=True)


def reserve(conn: sqlite3.Connection, args: dict, now: str) -> dict:
    # A provider that hands out each seat once, the look and the write in one transaction.
    conn.execute("CREATE TABLE IF NOT EXISTS seats (seat TEXT PRIMARY KEY, run TEXT)")
    held = conn.execute("SELECT run FROM seats WHERE seat = ?", (args["seat"],)).fetchone()
    if held is not None:
        return {"seat": args["seat"], "run": held[0], "new": False}
    conn.execute("INSERT INTO seats VALUES (?, ?)", (args["seat"], args["run"]))
    return {"seat": args["seat"], "run": args["run"], "new": True}


async def book(ctx):
    async def take():
        door = await ctx.scope()
        return await door.invoke("reserve", {"seat": "12A", "run": ctx.run.id})

    await ctx.step("take", take)
    return JobPassResult(done=True)


async def _one_drive(world, handler):
    world.add_drive(DriveSpec(name="cron"))
    world.add_job("m", "j", handler, retry=RetryPolicy(max_attempts=1))
    await world.start("cron", "s", "m", "j")
    world.every("cron", "s", every_ms=1_000, first_ms=0, until_ms=5_000)
    await world.settle(("s",), horizon_ms=5_000, poll_ms=500)


@scenario("twice", setup=WorldSetup(scopes=("s",)))
async def twice_world(world: World) -> None:
    """One body records one effect once twice, another a plain effect twice."""
    await _one_drive(world, twice)


@scenario("book", setup=WorldSetup(scopes=("s",), operations={"reserve": reserve}))
async def book_world(world: World) -> None:
    """A world whose scope has a provider operation of its own."""
    await _one_drive(world, book)


@scenario("book-without", setup=WorldSetup(scopes=("s",)))
async def book_without(world: World) -> None:
    """The same job where the scope was not given the operation."""
    await _one_drive(world, book)
'''


def invoked(trace: Trace, operation: str) -> list[object]:
    """What each executed ``invoke`` of ``operation`` returned (the arguments are on the send)."""
    sent = {
        (event["link"], event["seq"]): event["args"]
        for event in trace.of("rpc.send")
        if event["op"] == "invoke"
    }
    return [
        event.get("result")
        for event in trace.of("rpc.exec")
        if event["op"] == "invoke" and sent[(event["link"], event["seq"])][0] == operation
    ]


@pytest.fixture
def world_file(tmp_path: Path) -> Path:
    path = tmp_path / "once_world.py"
    path.write_text(WORLD)
    return path


def test_an_effect_recorded_once_is_counted_once_everywhere_and_a_plain_one_each_time(
    world_file: Path,
) -> None:
    simulation = simulate(f"{world_file}:twice", 1)
    trace = simulation.outcome.trace
    run = simulation.facts.only_run("s").id
    once, plain = effect_key(run, "once"), effect_key(run, "plain")

    # What the body heard: the first call recorded, the second found the key.
    assert invoked(trace, "record_once") == [True, False]
    landed = effects_in(trace)
    assert (landed[once], landed[plain]) == (1, 2)
    assert simulation.outcome.effects["s"] == {once: 1, plain: 2}
    # The oracle's duplicate-effect check sees the plain key twice and the once key once.
    effect_findings = [f.text for f in simulation.report.findings if f.check == "effects"]
    assert any(plain in message for message in effect_findings)
    assert not any(once in message for message in effect_findings)
    # The timeline draws one mark for the once key, two for the plain one.
    marks = [(effect.key, effect.copy) for effect in build_timeline(trace).effects]
    assert sorted(marks) == sorted([(once, 1), (plain, 1), (plain, 2)])


def test_a_world_setup_gives_its_scopes_operations_of_their_own(world_file: Path) -> None:
    simulation = simulate(f"{world_file}:book", 1)
    run = simulation.facts.only_run("s")
    assert run.status == "done"
    assert invoked(simulation.outcome.trace, "reserve") == [
        {"seat": "12A", "run": run.id, "new": True}
    ]


def test_without_the_operation_the_scope_refuses_it_by_name(world_file: Path) -> None:
    simulation = simulate(f"{world_file}:book-without", 1)
    run = simulation.facts.only_run("s")
    assert run.status == "failed"
    assert "operation is 'reserve', which this scope does not have" in str(run.last_error)


@pytest.mark.parametrize(
    ("operations", "message"),
    [
        ([("x", print)], r"^WorldSetup\(operations=\[\('x', .*\)\]\); pass a dict of names"),
        ({"": print}, r"^WorldSetup\(operations=\.\.\.\) has the name ''; name each operation"),
        ({"x": 5}, r"^WorldSetup\(operations=\.\.\.\)\['x'\] is 5; an operation is a function"),
    ],
)
def test_bad_operations_are_refused_where_the_setup_is_written(
    operations: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        WorldSetup(operations=operations)  # type: ignore[arg-type]
