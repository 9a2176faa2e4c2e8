"""A user's own job, simulated: a three-step nightly invoice over two drives.

The job fetches a customer's orders, prices them and posts one invoice, each as a ledger step, so
a pass that is retried skips the steps already done. Two drives (a cron and an alarm, on wires of
their own latency) drive one scope; the fault plan drops the reply of the cron's first claim. The
scenario's own check says the invoice is posted exactly once per run, whatever happened on the
wire. Posting is idempotent — it looks for its own earlier effect first — so the check holds even
where the spec lets a step body run twice.

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
    scenario,
)

SHOP = "shop-1"
ORDERS = {"customer-7": [120, 80, 45]}


async def nightly_invoice(ctx: JobPassContext) -> JobPassResult:
    """One pass does the whole invoice: fetch, price, post."""
    customer = ctx.payload["customer"]

    async def fetch() -> list[int]:
        return list(ORDERS[customer])

    orders = await ctx.step("fetch", fetch)

    async def price() -> int:
        return int(sum(orders)) + 15  # shipping

    total = await ctx.step("price", price)

    async def post() -> int:
        # Idempotent: a body that runs again (its step record was lost) finds its own invoice.
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
    """Each run's invoice lands exactly once."""
    started = {event["run"] for event in trace.of("world.start")}
    landed = effects_in(trace)
    return [
        f"run {run}'s invoice was posted {landed[effect_key(run, 'post')]} times, not once"
        for run in sorted(started)
        if landed[effect_key(run, "post")] != 1
    ]


def expect_done(simulation: Simulation) -> list[str]:
    run = simulation.facts.only_run(SHOP)
    return [] if run.status == "done" else [f"the run ends done, it is {run.status}"]


@scenario(
    "nightly-invoice",
    setup=WorldSetup(
        scopes=(SHOP,),
        lease_ms=2_000,
        plan=FaultPlan((DropLeg(drive="cron", operation="claim", nth=1, leg="reply"),)),
    ),
    expect=expect_done,
    checks=[invoice_posted_once],
)
async def nightly(world: World) -> None:
    """A three-step invoice job on two drives with their own latency; the cron's first claim
    reply is lost, the alarm takes the run once the lease runs out, and the invoice is posted
    exactly once."""
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=15.0, reply_ms=40.0))
    world.add_job("billing", "nightly-invoice", nightly_invoice, retry=RetryPolicy(max_attempts=3))
    payload = {"customer": "customer-7"}
    await world.start("cron", SHOP, "billing", "nightly-invoice", payload=payload)
    world.every("cron", SHOP, every_ms=1_000, first_ms=0, until_ms=30_000)
    world.every("alarm", SHOP, every_ms=1_000, first_ms=500, until_ms=30_000)
    await world.settle((SHOP,), horizon_ms=30_000, poll_ms=500)
