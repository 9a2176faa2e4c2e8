"""A user's world with its own check, as a newcomer writes one: a job that sends an email in a
step whose body is not idempotent, and a check that the email went out once.

With the record of the send's step dropped (``DROP_RECORD``), the next pass sends again: the
spec's checks explain the second email (the at-least-once window of a step body), and the user's
check fails, at the moment the second email landed. ``plain-email-twice`` is the same world with a
check that returns plain strings, placed at the world's end.
"""

from __future__ import annotations

from sims import (
    DriveSpec,
    DropLeg,
    FaultPlan,
    JobPassContext,
    JobPassResult,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    effects_at,
    record_effect,
    scenario,
)

SCOPE = "mail"

#: The fault that makes the body run twice: the first record of the send step never arrives.
DROP_RECORD = FaultPlan(
    faults=(DropLeg(drive="cron", operation="record_step", nth=1, leg="request"),)
)


async def send(ctx: JobPassContext) -> JobPassResult:
    async def send_email() -> str:
        await record_effect(ctx, "email")
        return "sent"

    await ctx.step("email", send_email)
    return JobPassResult(done=True)


def no_email_twice(trace: Trace) -> list[UserFinding]:
    """Each run sends its email once; a second one is a finding at the time it landed."""
    return [
        UserFinding(
            f"the email of run {key.split('/')[0]} was sent {len(times)} times",
            at_ms=times[1],
            run=key.split("/")[0],
        )
        for key, times in effects_at(trace).items()
        if len(times) > 1
    ]


def plain_no_email_twice(trace: Trace) -> list[str]:
    return [text.text for text in no_email_twice(trace)]


async def _drive(world: World) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=1.0, reply_ms=1.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=1.0, reply_ms=1.0))
    world.add_job("mail", "send", send)
    await world.start("cron", SCOPE, "mail", "send")
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=3_000)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=3_000)
    await world.settle((SCOPE,), horizon_ms=3_000, poll_ms=500)


@scenario(
    "email-twice", setup=WorldSetup(scopes=(SCOPE,), plan=DROP_RECORD), checks=[no_email_twice]
)
async def email_twice(world: World) -> None:
    """Send an email in a step whose body is not idempotent, with its step's record lost."""
    await _drive(world)


@scenario(
    "plain-email-twice",
    setup=WorldSetup(scopes=(SCOPE,), plan=DROP_RECORD),
    checks=[plain_no_email_twice],
)
async def plain_email_twice(world: World) -> None:
    """The same world, its check returning plain strings."""
    await _drive(world)


@scenario("email-once", setup=WorldSetup(scopes=(SCOPE,)), checks=[no_email_twice])
async def email_once(world: World) -> None:
    """The same job with no fault: the check holds."""
    await _drive(world)
