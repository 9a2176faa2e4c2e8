"""A bug in a user's handler, found and shrunk by the simulator: a step body that is not
idempotent, a "fix" that is not one either, and the fix that is.

The job charges a customer's card in a step. The charge is a real effect outside the run. The
spec says a step body runs at least once: when a pass loses its step record (its request is lost,
or the lease runs out between the effect and the record), the next pass runs the body again.

``double-charge`` charges unconditionally. With no faults the world is fine, so a plain run shows
nothing; ``explore`` searches fault plans for one that makes the scenario's own check fail, and
shrinks it to the smallest:

    python -m sims run examples/double_charge.py:double-charge
    python -m sims explore examples/double_charge.py:double-charge

The spec's own checks call the second charge explained (it is inside the at-least-once window);
the user's check (each card charged once) is what fails, because the handler is wrong.

``charge-look-first`` is the "fix" that looks right and is not: the body reads the scope's
``items`` for an earlier charge, and charges only when it finds none. That is check-then-act over
TWO scope calls. Hold the answer to the cron's look past its lease: the alarm takes the run over,
looks, finds no charge and charges; then the cron's answer arrives, saying what was true when it
looked (no charge yet), and the cron charges too. This plan breaks it, every seed:

    python -m sims run examples/double_charge.py:charge-look-first --plan \
        "FaultPlan((DelayLeg(drive='cron', operation='invoke', nth=1, leg='reply', ms=1500.0),))"

``charge-once`` is the fix: the body records the charge with ``record_effect_once``, ONE scope
call in which the scope looks for the run's charge and writes it only if it is new, in one
transaction that nothing can split. It stands for a payment provider that dedupes by an
idempotency key. It holds under that plan, and under every fault to the run's passes.

It does not hold when the run is STARTED twice: its key is the run's (``RUN/charge``), and a start
its caller sends again after the run ended makes a second run, which charges again. ``explore``
finds that with one fault (``RepeatStart(drive='cron', nth=1, after_ms=21.0)``). A charge keyed by
what the job is for, the order, holds there too: ``examples/payment_provider.py`` keys it so.
"""

from __future__ import annotations

from typing import Any

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
    record_effect_once,
    scenario,
)

SCOPE = "payments"


async def charge(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: the charge step's body charges again whenever it runs again."""

    async def charge_card() -> str:
        await record_effect(ctx, "charge", data={"cents": ctx.payload["cents"]})
        return "charged"

    await ctx.step("charge", charge_card)

    async def receipt() -> str:
        return "sent"

    await ctx.step("receipt", receipt)
    return JobPassResult(done=True)


async def charge_look_first(ctx: JobPassContext) -> JobPassResult:
    """NOT A FIX: the body looks for an earlier charge, then charges, in two scope calls; another
    pass's charge can land between the look and the charge."""

    async def charge_card() -> str:
        door = await ctx.scope()
        made: list[dict[str, Any]] = await door.invoke("items", {"kind": "effect"})
        if not any(row["key"] == effect_key(ctx.run.id, "charge") for row in made):
            await record_effect(ctx, "charge", data={"cents": ctx.payload["cents"]})
        return "charged"

    await ctx.step("charge", charge_card)

    async def receipt() -> str:
        return "sent"

    await ctx.step("receipt", receipt)
    return JobPassResult(done=True)


async def charge_once(ctx: JobPassContext) -> JobPassResult:
    """The fix: one call charges only if this run's charge is new, as a provider that dedupes by
    an idempotency key does (the look and the write are one transaction)."""

    async def charge_card() -> str:
        await record_effect_once(ctx, "charge", data={"cents": ctx.payload["cents"]})
        return "charged"

    await ctx.step("charge", charge_card)

    async def receipt() -> str:
        return "sent"

    await ctx.step("receipt", receipt)
    return JobPassResult(done=True)


def charged_once(trace: Trace) -> list[str]:
    """Each run key (module, job, instance: the work a start names) charges its card exactly once,
    over all its runs: a start tried again after its reply was lost makes a second run of the same
    work when the first had already ended, and the runs of one key are judged together."""
    landed = effects_in(trace)
    runs: dict[str, list[str]] = {}
    for event in trace.of("world.end"):
        for rows in event["runs"].values():
            for row in rows:
                key = f"{row['module_id']}/{row['job']}/{row['instance']}"
                runs.setdefault(key, []).append(str(row["id"]))
    charged = {
        key: sum(landed[effect_key(run, "charge")] for run in ids) for key, ids in runs.items()
    }
    return [
        f"{key} (run {', '.join(runs[key])}) charged the card {times} times"
        for key, times in charged.items()
        if times != 1
    ]


async def _drive(world: World, handler: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=1.0, reply_ms=1.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=1.0, reply_ms=1.0))
    world.add_job("payments", "charge", handler)
    await world.start("cron", SCOPE, "payments", "charge", payload={"cents": 4_999})
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=20_000)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=20_000)
    await world.settle((SCOPE,), horizon_ms=20_000, poll_ms=500)


@scenario("double-charge", setup=WorldSetup(scopes=(SCOPE,)), checks=[charged_once])
async def double_charge(world: World) -> None:
    """Charge a card in a step whose body is not idempotent; fine until a fault makes the body
    run twice (python -m sims explore finds one)."""
    await _drive(world, charge)


@scenario("charge-look-first", setup=WorldSetup(scopes=(SCOPE,)), checks=[charged_once])
async def charge_look_first_world(world: World) -> None:
    """The same charge, "fixed" by looking for an earlier charge first, in a second scope call:
    racy (a held reply lets another pass charge between the look and the charge)."""
    await _drive(world, charge_look_first)


@scenario("charge-once", setup=WorldSetup(scopes=(SCOPE,)), checks=[charged_once])
async def charge_once_world(world: World) -> None:
    """The same charge, made idempotent in one scope call: record_effect_once charges only if
    this run's charge is new."""
    await _drive(world, charge_once)
