"""A user's own job, simulated: a three-step nightly invoice over two drives.

The job fetches a customer's orders, prices them and posts one invoice, each as a ledger step, so
a pass that is retried skips the steps already done. Two drives (a cron and an alarm, on wires of
their own latency) drive one scope; the fault plan drops the reply of the cron's first claim. The
scenario's own check says the invoice is posted exactly once per run key (the runs a start made
again judged together), whatever happened on the wire.

``nightly-invoice`` posts with ``record_effect_once``: one scope call that posts only if this
run's invoice is new, the look and the write in one transaction, as a ledger that dedupes by
invoice number does. So the check holds even where the spec lets a step body run twice.

``nightly-invoice-look-first`` is the same job with the "fix" users write first, and the bug it
is: the post reads ``items`` for its own earlier invoice, and posts when it finds none, in a second
call. Its own plan passes. This one does not: the cron's first claim reply is lost, the alarm takes
the run once the lease runs out, and the answer to the alarm's look is held 2.1 s, past its lease;
the cron takes the run back, looks, posts; then the alarm's stale answer (no invoice) arrives and
it posts again:

    python -m sims run examples/nightly_invoice.py:nightly-invoice-look-first --plan \
        "FaultPlan((DropLeg(drive='cron', operation='claim', nth=1, leg='reply'), \
        DelayLeg(drive='alarm', operation='invoke', nth=1, leg='reply', ms=2100.0)))"

Under that plan ``nightly-invoice`` posts once.

    python -m sims list examples/nightly_invoice.py
    python -m sims run examples/nightly_invoice.py:nightly-invoice --seed 3
    python -m sims sweep examples/nightly_invoice.py:nightly-invoice --seeds 0..49
"""

from __future__ import annotations

from typing import Any

from sims import (
    DriveSpec,
    DropLeg,
    FaultPlan,
    JobPassContext,
    JobPassResult,
    RetryPolicy,
    Simulation,
    Trace,
    World,
    WorldSetup,
    effect_key,
    effects_in,
    record_effect,
    record_effect_once,
    scenario,
)

SHOP = "shop-1"
ORDERS = {"customer-7": [120, 80, 45]}


async def fetch_orders(customer: str) -> list[int]:
    return list(ORDERS[customer])


async def nightly_invoice(ctx: JobPassContext) -> JobPassResult:
    """One pass does the whole invoice: fetch, price, post (once, in one scope call)."""
    customer = ctx.payload["customer"]
    orders = await ctx.step("fetch", lambda: fetch_orders(customer))
    total = await ctx.step("price", lambda: int(sum(orders)) + 15)  # shipping

    async def post() -> int:
        # Idempotent in ONE call: the scope posts only if this run's invoice is new, in one
        # transaction, so a body that runs again (its step record was lost) posts nothing.
        await record_effect_once(ctx, "post", data={"customer": customer, "total": total})
        return int(total)

    await ctx.step("post", post)
    ctx.count("invoices")
    return JobPassResult(done=True)


async def nightly_invoice_look_first(ctx: JobPassContext) -> JobPassResult:
    """NOT IDEMPOTENT: the post looks for its invoice, then posts, in two scope calls; another
    pass's post can land between them (see the module's docstring for the plan)."""
    customer = ctx.payload["customer"]
    orders = await ctx.step("fetch", lambda: fetch_orders(customer))
    total = await ctx.step("price", lambda: int(sum(orders)) + 15)

    async def post() -> int:
        door = await ctx.scope()
        posted: list[dict[str, Any]] = await door.invoke("items", {"kind": "effect"})
        if any(row["key"] == effect_key(ctx.run.id, "post") for row in posted):
            return int(total)
        await record_effect(ctx, "post", data={"customer": customer, "total": total})
        return int(total)

    await ctx.step("post", post)
    ctx.count("invoices")
    return JobPassResult(done=True)


def invoice_posted_once(trace: Trace) -> list[str]:
    """Each run key's invoice (module, job, instance: the work a start names) lands exactly once,
    over all its runs: a start tried again after its reply was lost makes a second run of the same
    work when the first had already ended, and the runs of one key are judged together."""
    runs: dict[str, list[str]] = {}
    for event in trace.of("world.end"):
        for rows in event["runs"].values():
            for row in rows:
                key = f"{row['module_id']}/{row['job']}/{row['instance']}"
                runs.setdefault(key, []).append(str(row["id"]))
    landed = effects_in(trace)
    return [
        f"{key}'s invoice was posted {posted} times, not once, over run {', '.join(ids)}"
        for key, ids in sorted(runs.items())
        if (posted := sum(landed[effect_key(run, "post")] for run in ids)) != 1
    ]


def expect_done(simulation: Simulation) -> list[str]:
    run = simulation.facts.only_run(SHOP)
    return [] if run.status == "done" else [f"the run ends done, it is {run.status}"]


SETUP = WorldSetup(
    scopes=(SHOP,),
    lease_ms=2_000,
    plan=FaultPlan((DropLeg(drive="cron", operation="claim", nth=1, leg="reply"),)),
)


async def _drive(world: World, handler: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=15.0, reply_ms=40.0))
    world.add_job("billing", "nightly-invoice", handler, retry=RetryPolicy(max_attempts=3))
    payload = {"customer": "customer-7"}
    await world.start("cron", SHOP, "billing", "nightly-invoice", payload=payload)
    world.every("cron", SHOP, every_ms=1_000, first_ms=0, until_ms=30_000)
    world.every("alarm", SHOP, every_ms=1_000, first_ms=500, until_ms=30_000)
    await world.settle((SHOP,), horizon_ms=30_000, poll_ms=500)


@scenario("nightly-invoice", setup=SETUP, expect=expect_done, checks=[invoice_posted_once])
async def nightly(world: World) -> None:
    """A three-step invoice job on two drives with their own latency; the cron's first claim
    reply is lost, the alarm takes the run once the lease runs out, and the invoice is posted
    exactly once (record_effect_once: one atomic call)."""
    await _drive(world, nightly_invoice)


@scenario(
    "nightly-invoice-look-first", setup=SETUP, expect=expect_done, checks=[invoice_posted_once]
)
async def nightly_look_first(world: World) -> None:
    """The same invoice, posted after a look at items in a second call: passes its own plan,
    posts twice when the look's answer is held past the lease (see the file's docstring)."""
    await _drive(world, nightly_invoice_look_first)
