"""Jobs written the way users write them, each with one bug the default search must find.

Each scenario runs one job on two drives (a cron on whole seconds, an alarm on half seconds) with
a one-second lease, and checks what the job promises with a check of its own. None of the bugs
shows without faults; each needs the spec's at-least-once window, a crash inside a pass, or a
world that is not a function of its seed.
"""

from __future__ import annotations

import random
from typing import Any

import trio

from sims import (
    DriveSpec,
    JobPassContext,
    JobPassResult,
    Trace,
    World,
    WorldSetup,
    effect_key,
    effects_in,
    record_effect,
    scenario,
    sometimes,
)

SCOPE = "mail"


async def _two_drives(world: World, job: str, handler: Any, *, payload: Any = None) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_drive(DriveSpec(name="alarm"))
    world.add_job("mail", job, handler)
    await world.start("cron", SCOPE, "mail", job, payload=payload)
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=30_000)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=30_000)
    await world.settle((SCOPE,), horizon_ms=30_000, poll_ms=500)


def sent_once(trace: Trace) -> list[str]:
    """Every mail of every run is sent exactly once."""
    landed = effects_in(trace)
    return [
        f"run {e['run']}: mail {name} sent {landed[effect_key(e['run'], name)]} times"
        for e in trace.of("world.start")
        for name in ("a", "b", "c")
        if landed[effect_key(e["run"], name)] != 1
    ]


# -- check-then-act across two scope calls ------------------------------------------------------


async def check_then_send(ctx: JobPassContext) -> JobPassResult:
    for name in ("a", "b", "c"):

        async def send(name: str = name) -> str:
            door = await ctx.scope()
            rows: list[dict[str, Any]] = await door.invoke("items", {"kind": "effect"})
            if not any(row["key"] == effect_key(ctx.run.id, name) for row in rows):
                await record_effect(ctx, name)
            return "sent"

        await ctx.step(f"send-{name}", send)
    return JobPassResult(done=True)


@scenario("check-then-send", setup=WorldSetup(scopes=(SCOPE,)), checks=[sent_once])
async def check_then_send_world(world: World) -> None:
    """Looks for its own earlier mail, then sends: two scope calls, a race."""
    await _two_drives(world, "check-then-send", check_then_send)


# -- an effect outside any step -----------------------------------------------------------------


async def effect_outside_a_step(ctx: JobPassContext) -> JobPassResult:
    start = int(ctx.cursor or 0)
    names = ("a", "b", "c")
    for name in names[start:]:
        await record_effect(ctx, name)  # THE BUG: no step, so nothing remembers it happened
        await ctx.step(f"mark-{name}", lambda: "marked")
    return JobPassResult(cursor=len(names), done=True)


@scenario("effect-outside-a-step", setup=WorldSetup(scopes=(SCOPE,)), checks=[sent_once])
async def effect_outside_a_step_world(world: World) -> None:
    """Sends each mail before, not inside, the step that marks it."""
    await _two_drives(world, "effect-outside", effect_outside_a_step)


# -- state kept in process memory across passes -------------------------------------------------

_SENT_IN_THIS_PROCESS: set[str] = set()


async def remembers_in_memory(ctx: JobPassContext) -> JobPassResult:
    for name in ("a", "b", "c"):
        key = effect_key(ctx.run.id, name)
        if key in _SENT_IN_THIS_PROCESS:  # THE BUG: memory is not the scope
            continue

        async def send(name: str = name, key: str = key) -> str:
            await record_effect(ctx, name)
            _SENT_IN_THIS_PROCESS.add(key)
            return "sent"

        await ctx.step(f"send-{name}", send)
    return JobPassResult(done=True)


@scenario("remembers-in-memory", setup=WorldSetup(scopes=(SCOPE,)), checks=[sent_once])
async def remembers_in_memory_world(world: World) -> None:
    """Keeps what it sent in a module-level set, which outlives the world."""
    await _two_drives(world, "remembers", remembers_in_memory)


# -- a resource given back only by code that runs ------------------------------------------------


async def lock_then_send(ctx: JobPassContext) -> JobPassResult:
    door = await ctx.scope()
    locks: list[dict[str, Any]] = await door.invoke("items", {"kind": "lock"})
    held = sum(1 for row in locks if row["data"] == "take") - sum(
        1 for row in locks if row["data"] == "give"
    )
    sometimes(held > 0, "a pass found the lock taken")
    if held > 0:
        return JobPassResult(done=False)  # someone else is sending: come back later
    await door.invoke("record", {"kind": "lock", "key": ctx.run.id, "data": "take"})
    for name in ("a", "b", "c"):

        async def send(name: str = name) -> None:
            await record_effect(ctx, name)

        await ctx.step(f"send-{name}", send)
    # THE BUG: given back only if this line runs; a killed pass never runs it.
    await door.invoke("record", {"kind": "lock", "key": ctx.run.id, "data": "give"})
    return JobPassResult(done=True)


@scenario("lock-then-send", setup=WorldSetup(scopes=(SCOPE,)), checks=[sent_once])
async def lock_then_send_world(world: World) -> None:
    """Takes a lock row, sends, gives the lock back: a crash between leaves it taken forever."""
    await _two_drives(world, "lock-then-send", lock_then_send)


# -- the fix: one atomic call --------------------------------------------------------------------


async def sent_in_one_call(ctx: JobPassContext) -> JobPassResult:
    for name in ("a", "b", "c"):

        async def send(name: str = name) -> None:
            await record_effect(ctx, name)

        await ctx.step(f"send-{name}", send)
    return JobPassResult(done=True)


def sent_at_least_once(trace: Trace) -> list[str]:
    """Every mail of every run that ended done was sent. (A run whose every pass was killed ends
    failed once its attempts are used: the spec promises its steps nothing.)"""
    landed = effects_in(trace)
    done = {
        str(run["id"])
        for end in trace.of("world.end")
        for runs in end["runs"].values()
        for run in runs
        if run["status"] == "done"
    }
    return [
        f"run {e['run']}: mail {name} never sent"
        for e in trace.of("world.start")
        if e["run"] in done
        for name in ("a", "b", "c")
        if landed[effect_key(e["run"], name)] < 1
    ]


@scenario("at-least-once", setup=WorldSetup(scopes=(SCOPE,)), checks=[sent_at_least_once])
async def at_least_once_world(world: World) -> None:
    """Every mail sent at least once: what the spec promises, and what holds."""
    await _two_drives(world, "at-least-once", sent_in_one_call)


def all_sent(trace: Trace) -> list[str]:
    """Every mail of every run is sent at least once (none lost)."""
    return sent_at_least_once(trace)


# -- work marked done before it is done ---------------------------------------------------------


async def marked_done_first(ctx: JobPassContext) -> JobPassResult:
    door = await ctx.scope()
    marks: list[dict[str, Any]] = await door.invoke("items", {"kind": "done"})
    if any(row["key"] == ctx.run.id for row in marks):
        return JobPassResult(done=True)
    # THE BUG: the run is marked done in the scope before the mails go out.
    await door.invoke("record", {"kind": "done", "key": ctx.run.id})
    for name in ("a", "b", "c"):

        async def send(name: str = name) -> None:
            await record_effect(ctx, name)

        await ctx.step(f"send-{name}", send)
    return JobPassResult(done=True)


@scenario("marked-done-first", setup=WorldSetup(scopes=(SCOPE,)), checks=[all_sent])
async def marked_done_first_world(world: World) -> None:
    """Writes its own 'done' row first, then sends: a pass that dies in between loses the mail."""
    await _two_drives(world, "marked-done-first", marked_done_first)


# -- a cursor that skips an item after a failed step ---------------------------------------------


async def skips_on_failure(ctx: JobPassContext) -> JobPassResult:
    names = ("a", "b", "c")
    start = int(ctx.cursor or 0)
    for index in range(start, len(names)):

        async def send(name: str = names[index]) -> None:
            await record_effect(ctx, name)

        try:
            await ctx.step(f"send-{names[index]}", send)
        except Exception:  # THE BUG: a failed send is passed over, and the cursor moves on
            continue
    return JobPassResult(cursor=len(names), done=True)


@scenario("skips-on-failure", setup=WorldSetup(scopes=(SCOPE,)), checks=[all_sent])
async def skips_on_failure_world(world: World) -> None:
    """Catches a failed step and moves its cursor past it: the item is never sent."""
    await _two_drives(world, "skips-on-failure", skips_on_failure)


# -- a step name that is not stable across passes ------------------------------------------------


async def unstable_step_name(ctx: JobPassContext) -> JobPassResult:
    started = int(trio.current_time())
    for name in ("a", "b", "c"):

        async def send(name: str = name) -> None:
            await record_effect(ctx, name)

        # THE BUG: the time the pass started is part of the name, so a pass after a takeover
        # finds no memo of the steps an earlier pass completed.
        await ctx.step(f"send-{name}-{started}", send)
    return JobPassResult(done=True)


@scenario("unstable-step-name", setup=WorldSetup(scopes=(SCOPE,)), checks=[sent_once])
async def unstable_step_name_world(world: World) -> None:
    """Names its steps with the pass's start time: a retried pass sends every mail again."""
    await _two_drives(world, "unstable-step-name", unstable_step_name)


# -- a two-phase job whose second phase is lost in a takeover ------------------------------------


async def two_phases(ctx: JobPassContext) -> JobPassResult:
    door = await ctx.scope()
    if ctx.cursor == "send":
        for name in ("a", "b", "c"):

            async def send(name: str = name) -> None:
                await record_effect(ctx, name)

            await ctx.step(f"send-{name}", send)
        return JobPassResult(done=True)
    collected: list[dict[str, Any]] = await door.invoke("items", {"kind": "collected"})
    if any(row["key"] == ctx.run.id for row in collected):
        # THE BUG: "collected already" is read as "all done", though the send phase never ran.
        return JobPassResult(done=True)
    await door.invoke("record", {"kind": "collected", "key": ctx.run.id})
    return JobPassResult(cursor="send", done=False)


@scenario("two-phases", setup=WorldSetup(scopes=(SCOPE,)), checks=[all_sent])
async def two_phases_world(world: World) -> None:
    """Collects, then sends in a second pass; a retried first pass takes 'collected' for done."""
    await _two_drives(world, "two-phases", two_phases)


# -- a handler that reads an unseeded random source ----------------------------------------------


async def jittery(ctx: JobPassContext) -> JobPassResult:
    # THE BUG (for a simulation): an unseeded random source, outside the world's seed.
    await trio.sleep(_UNSEEDED.random())
    await ctx.step("send-a", lambda: "sent")
    return JobPassResult(done=True)


_UNSEEDED = random.SystemRandom()


@scenario("jittery", setup=WorldSetup(scopes=(SCOPE,)))
async def jittery_world(world: World) -> None:
    """Sleeps a random while from the operating system's source: no two runs alike."""
    await _two_drives(world, "jittery", jittery)


# -- a world whose own code breaks under a fault --------------------------------------------------


def breaks_on_a_crash(trace: Trace) -> list[str]:
    """A check with a bug of its own: it cannot read a world where a drive crashed."""
    if any(True for _ in trace.of("fault.crash")):
        raise RuntimeError("this check never expected a crash")
    return []


@scenario("check-breaks", setup=WorldSetup(scopes=(SCOPE,)), checks=[breaks_on_a_crash])
async def check_breaks_world(world: World) -> None:
    """A correct job, and a check that raises once a drive has crashed."""
    await _two_drives(world, "check-breaks", sent_in_one_call)
