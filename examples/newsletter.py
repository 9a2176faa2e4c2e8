"""A mail provider with a rate limit and batches it may take only part of: a newsletter, sent once.

The job sends an issue of a newsletter to a list of recipients (its payload), four recipients a
step. The mail provider is a ``Service`` of the world whose ``send_batch`` takes a list of
recipients, ``to``, and mails them, as a provider's batch endpoint does:

- it may take only a leading part of the list, and its answer says which recipients it took
  (``Operation(send_batch, batch="to", batch_max=4)``: at most four a call, fewer when it is
  busy: a ``PartialBatch`` fault);
- it lets at most 4 requests in a second (``Service(rate_limit=(4, 1_000.0))``) and refuses the
  rest with ``ServiceUnavailable``, whose ``retry_after_ms`` says when one would pass (a
  ``RateLimited`` fault turns a request away for a second, as a provider under load does);
- it honours an idempotency key: a call that repeats one is answered with the first call's
  answer, and mails nobody again.

Nothing goes wrong without faults: every variant mails every recipient once. The check,
``mailed_once``, reads the provider's outbox at the world's end (``sims.service_states``): every
recipient got the issue exactly once (at most once when the run failed).

``newsletter-assume-whole`` takes a batch's answer for "all sent": it never reads which
recipients the provider took. Let the provider take two of the first four, and the other two are
never mailed, every seed:

    python -m sims run examples/newsletter.py:newsletter-assume-whole --plan \
        "FaultPlan((PartialBatch(operation='mail.send_batch', nth=1, taken=2),))"

``newsletter-no-wait`` sends the rest of a partial batch, but meets a rate limit by trying again
at once, three times, ignoring ``retry_after_ms``, and then skips the batch so that the others
still go out. A second of rate limiting outlasts three tries made at once: the skipped
recipients are never mailed, every seed:

    python -m sims run examples/newsletter.py:newsletter-no-wait --plan \
        "FaultPlan((RateLimited(service='mail', nth=1, retry_after_ms=1000.0),))"

``newsletter`` is the fix. It reads the answer and sends the recipients the provider did not
take; it honours ``retry_after_ms`` with ``trio.sleep`` (trio's clock is the world's: the wait
costs no real time) and lets the step fail when the provider is down or says "not soon" (the run
is tried again later); and it sends every call with an idempotency key made from the issue, the
batch and the call's number in it, so a body that runs again (its step record lost, its pass
retried after a timeout) repeats the same calls and is answered from their keys. It mails every
recipient once under both plans:

    python -m sims run examples/newsletter.py:newsletter --plan \
        "FaultPlan((PartialBatch(operation='mail.send_batch', nth=1, taken=2),))"
    python -m sims run examples/newsletter.py:newsletter --plan \
        "FaultPlan((RateLimited(service='mail', nth=1, retry_after_ms=1000.0),))"

``explore`` draws the provider's own faults (a partial batch, a rate limit) at every request of
the clean world and finds each bug with one fault; on ``newsletter`` it finds none:

    python -m sims explore examples/newsletter.py:newsletter-assume-whole
    python -m sims explore examples/newsletter.py:newsletter-no-wait
    python -m sims explore examples/newsletter.py:newsletter --examples 3000
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any

import trio

# The job's code ships: it imports only the service port's names, from ``driver``.
from driver import JobHandler, JobPassContext, JobPassResult, ServiceUnavailable

# The provider, the check and the world are the simulation's: they import ``sims``.
from sims import (
    DriveSpec,
    Operation,
    Service,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    run_keys,
    scenario,
    service_states,
)

SCOPE = "news"
ISSUE = "2024-06"
RECIPIENTS = [f"reader-{n:02}@example.com" for n in range(1, 11)]
#: Recipients a step: the most the provider takes in one call.
BATCH = 4
TIMEOUT_MS = 5_000.0
#: The longest a step waits for the provider's retry-after; a longer one fails the step, and the
#: run is tried again later (a pass must not outlive its lease while it waits).
MAX_WAIT_MS = 5_000.0
HORIZON_MS = 300_000


# -- the provider --------------------------------------------------------------------------------


def send_batch(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    # It gets only the recipients it takes (the world cuts the list): it mails each, and says who.
    for to in args["to"]:
        state["outbox"].append({"issue": args["issue"], "to": to})
    return {"sent": list(args["to"])}


def _empty_outbox() -> dict[str, Any]:
    return {"outbox": []}


MAIL = Service(
    "mail",
    operations={
        "send_batch": Operation(send_batch, idempotent=True, batch="to", batch_max=BATCH),
    },
    state=_empty_outbox,
    latency_ms=(10.0, 60.0),
    rate_limit=(4, 1_000.0),
)


# -- the job, three ways -------------------------------------------------------------------------


def _batches(recipients: list[str]) -> list[list[str]]:
    return [recipients[at : at + BATCH] for at in range(0, len(recipients), BATCH)]


async def _send(ctx: JobPassContext, batch: int, call: int, to: list[str]) -> list[str]:
    """One call of ``send_batch``: the recipients the provider took. Its key names the call (the
    issue, the batch, the call's number in it): the same in every pass that makes it."""
    issue = ctx.payload["issue"]
    answer = await ctx.call_service(
        "mail",
        "send_batch",
        {"issue": issue, "to": to},
        timeout_ms=TIMEOUT_MS,
        idempotency_key=f"{issue}/batch-{batch}/{call}",
    )
    return list(answer["sent"])


async def batch_assume_whole(ctx: JobPassContext, batch: int, to: list[str]) -> int:
    """THE BUG: the answer is taken for "all sent"; it says which were."""
    await _send(ctx, batch, 1, to)
    return len(to)


async def batch_no_wait(ctx: JobPassContext, batch: int, to: list[str]) -> int:
    """THE BUG: a rate limit is met by trying again at once, then by skipping the batch."""
    left, calls, refused = list(to), 0, 0
    while left:
        try:
            sent = await _send(ctx, batch, calls + 1, left)
        except ServiceUnavailable:
            refused += 1
            if refused > 3:
                return len(to) - len(left)  # "the provider is busy": the rest go out without them
            continue  # at once: its retry_after_ms is not read
        calls += 1
        left = [address for address in left if address not in sent]
    return len(to)


async def batch_once(ctx: JobPassContext, batch: int, to: list[str]) -> int:
    """The fix: the rest of a partial batch sent again, the retry-after waited out, every call
    keyed."""
    left, calls = list(to), 0
    while left:
        try:
            sent = await _send(ctx, batch, calls + 1, left)
        except ServiceUnavailable as refused:
            wait_ms = refused.retry_after_ms
            if wait_ms is None or wait_ms > MAX_WAIT_MS:
                raise  # down, or not soon: the step fails, and the run is tried again later
            await trio.sleep(wait_ms / 1000)
            continue
        calls += 1
        left = [address for address in left if address not in sent]
    return len(to)


def newsletter_job(send: Any) -> JobHandler:
    """The job: one step per batch of recipients, each sending its batch with ``send``."""

    async def newsletter(ctx: JobPassContext) -> JobPassResult:
        for batch, to in enumerate(_batches(ctx.payload["to"]), start=1):
            await ctx.step(f"batch-{batch}", partial(send, ctx, batch, to))
        return JobPassResult(done=True)

    return newsletter


# -- the check: every recipient mailed once ------------------------------------------------------


def mailed_once(trace: Trace) -> list[UserFinding]:
    """Every recipient got the issue exactly once, by the provider's outbox at the world's end;
    at most once when the newsletter's run ended without being done (the provider down past its
    attempts)."""
    outbox = service_states(trace)["mail"]["outbox"]
    mailed = Counter(mail["to"] for mail in outbox if mail["issue"] == ISSUE)
    _, status = run_keys(trace)
    ended = status.get(f"newsletter/send/{ISSUE}", "never started")
    found = []
    for to in [*RECIPIENTS, *sorted(set(mailed) - set(RECIPIENTS))]:
        times = mailed[to]
        if times == 1 or (times == 0 and ended != "done"):
            continue
        found.append(
            UserFinding(
                f"{to} got the {ISSUE} newsletter {times} times, not once (its run ended {ended})"
            )
        )
    return found


# -- the world -----------------------------------------------------------------------------------


SETUP = WorldSetup(scopes=(SCOPE,), services=(MAIL,), lease_ms=15_000)


async def _drive(world: World, send: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=2.0, reply_ms=2.0))
    world.add_job("newsletter", "send", newsletter_job(send))
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=HORIZON_MS)
    payload = {"issue": ISSUE, "to": RECIPIENTS}
    await world.start("cron", SCOPE, "newsletter", "send", payload=payload, instance=ISSUE)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("newsletter-assume-whole", setup=SETUP, checks=[mailed_once])
async def newsletter_assume_whole_world(world: World) -> None:
    """Send a newsletter in batches, taking each batch's answer for all sent: a partial batch
    leaves recipients never mailed."""
    await _drive(world, batch_assume_whole)


@scenario("newsletter-no-wait", setup=SETUP, checks=[mailed_once])
async def newsletter_no_wait_world(world: World) -> None:
    """Send a newsletter in batches, trying again at once when rate limited, then skipping the
    batch: its recipients are never mailed."""
    await _drive(world, batch_no_wait)


@scenario("newsletter", setup=SETUP, checks=[mailed_once])
async def newsletter_world(world: World) -> None:
    """Send a newsletter in batches: the rest of a partial batch sent again, a retry-after waited
    out, every call keyed: every recipient mailed once."""
    await _drive(world, batch_once)
