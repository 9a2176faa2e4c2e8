"""Jobs whose bugs hide where the search did not look: in the services' own time, behind three
faults in a chain, and on a pass of a drive the clean world never used for the run. Each has its
fix beside it, which the default search must leave clean. Handlers import nothing from ``sims``:
they call services through ``ctx.call_service``, as on a real host.

``keys-forgotten``: the card provider keeps idempotency keys for a minute (``times_ms`` declares
it), and the job's retries last longer. A charge whose answer is lost, then the provider down until
past the minute: the retry after it charges again under a key the provider has forgotten.
``keys-forgotten-looks-first`` asks the provider's records (``find``), which it keeps for good,
before charging again.

``client-gives-up``: the bank's client gives up after 8 s (in the job's own code, not a call's
``timeout_ms``: the search cannot read it off a call) and the job pays through a second rail. A
reply held past 8 s pays twice. ``client-gives-up-asks-again`` asks the bank again with the same
key.

``ledger-chain``: a charge's answer lost makes the job look the charge up; the lookup's answer
lost makes it book what the ledger's search finds, under the intent's reference rather than the
charge's; a crash right after that booking makes the retry book the charge's reference too: two
bookings of one payment. Every pair of those faults leaves one booking. ``ledger-chain-same-ref``
books the charge's reference on every path.
"""

from __future__ import annotations

from typing import Any

import trio

from driver import (
    JobDefinition,
    JobPassContext,
    JobPassResult,
    RetryPolicy,
    ServiceTimedOut,
)
from sims import DriveSpec, Operation, Service, Trace, World, WorldSetup, scenario

SCOPE = "s"
TICKS_MS = 600_000
#: An answer in doubt: the call may have run. (A refusal is honest: it did not run, and the
#: step fails, to be retried.)
IN_DOUBT = ServiceTimedOut


def _effects(trace: Trace, op: str) -> list[dict[str, Any]]:
    return [e for e in trace.of("svc.exec") if e.get("effect") and e["op"] == op]


async def _two_drives(
    world: World, job: JobDefinition, orders: tuple[str, ...], every_ms: float = 1000.0
) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_drive(DriveSpec(name="alarm"))
    world.register(job)
    for order in orders:
        await world.start(
            "cron", SCOPE, job.module_id, job.job, instance=order, payload={"order": order}
        )
    world.every("cron", SCOPE, every_ms=every_ms, first_ms=0, until_ms=TICKS_MS)
    world.every("alarm", SCOPE, every_ms=every_ms, first_ms=every_ms / 2, until_ms=TICKS_MS)
    await world.settle((SCOPE,), horizon_ms=TICKS_MS, poll_ms=500)


# -- keys-forgotten ------------------------------------------------------------------------------

KEYS_KEPT_MS = 60_000.0


def _charge_keeping_keys_a_minute(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """A provider that answers a repeated key with its first answer, for a minute."""
    now_ms = trio.current_time() * 1000.0
    kept = state.setdefault("keys", {})
    key = args["key"]
    if key in kept and now_ms - kept[key]["at_ms"] < KEYS_KEPT_MS:
        return dict(kept[key]["answer"])
    charges = state.setdefault("charges", [])
    answer = {"id": f"ch-{len(charges) + 1}", "order": args["order"]}
    charges.append(answer)
    kept[key] = {"at_ms": now_ms, "answer": answer}
    return answer


def _find(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any] | None:
    found = [c for c in state.get("charges", []) if c["order"] == args["order"]]
    return found[0] if found else None


CARD_KEEPING_KEYS = Service(
    "card",
    operations={"charge": _charge_keeping_keys_a_minute, "find": _find},
    latency_ms=(5.0, 40.0),
    times_ms={"idempotency keys kept": KEYS_KEPT_MS},
)
#: Retries 10 s, 20 s, 40 s, 60 s and 60 s apart: the schedule outlasts the provider's minute.
SLOW_RETRIES = RetryPolicy(max_attempts=6, base_delay_ms=10_000, max_delay_ms=60_000)


async def charge_by_key(ctx: JobPassContext) -> JobPassResult:
    async def charge() -> str:
        order = ctx.payload["order"]
        answer = await ctx.call_service(
            "card", "charge", {"order": order, "key": order}, timeout_ms=5_000
        )
        return str(answer["id"])

    await ctx.step("charge", charge)
    return JobPassResult(done=True)


async def charge_after_looking(ctx: JobPassContext) -> JobPassResult:
    async def charge() -> str:
        order = ctx.payload["order"]
        found = await ctx.call_service("card", "find", {"order": order}, timeout_ms=5_000)
        if found is not None:
            return str(found["id"])
        answer = await ctx.call_service(
            "card", "charge", {"order": order, "key": order}, timeout_ms=5_000
        )
        return str(answer["id"])

    await ctx.step("charge", charge)
    return JobPassResult(done=True)


def one_charge(trace: Trace) -> list[str]:
    charged = _effects(trace, "card.charge")
    return [f"the order was charged {len(charged)} times"] if len(charged) > 1 else []


#: Drives that tick every 5 s: the retries are tens of seconds apart.
KEYS_SETUP = WorldSetup(scopes=(SCOPE,), services=(CARD_KEEPING_KEYS,), lease_ms=10_000)


@scenario("keys-forgotten", setup=KEYS_SETUP, checks=[one_charge])
async def keys_forgotten(world: World) -> None:
    job = JobDefinition("shop", "charge", charge_by_key, retry=SLOW_RETRIES, services=("card",))
    await _two_drives(world, job, ("o-1",), every_ms=5_000)


@scenario("keys-forgotten-looks-first", setup=KEYS_SETUP, checks=[one_charge])
async def keys_forgotten_looks_first(world: World) -> None:
    job = JobDefinition(
        "shop", "charge", charge_after_looking, retry=SLOW_RETRIES, services=("card",)
    )
    await _two_drives(world, job, ("o-1",), every_ms=5_000)


# -- client-gives-up -----------------------------------------------------------------------------

GIVES_UP_S = 8.0


def _pay(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    state.setdefault("paid", []).append(args["order"])
    return {"ok": True, "order": args["order"]}


BANK = Service(
    "bank",
    operations={"pay": Operation(_pay, idempotent=True)},
    latency_ms=(5.0, 50.0),
    times_ms={"the bank client gives up": GIVES_UP_S * 1000.0},
)
RAIL = Service("rail", operations={"pay": Operation(_pay, idempotent=True)}, latency_ms=(5.0, 50.0))


def _settle(ask_again: bool) -> Any:
    async def settle(ctx: JobPassContext) -> JobPassResult:
        async def pay() -> str:
            order = {"order": ctx.payload["order"]}
            key = ctx.payload["order"]
            with trio.move_on_after(GIVES_UP_S):
                await ctx.call_service("bank", "pay", order, idempotency_key=key)
                return "bank"
            if ask_again:  # the payment may have run: ask again, with the same key
                await ctx.call_service("bank", "pay", order, idempotency_key=key)
                return "bank"
            # THE BUG: a client that gave up says nothing of the bank, and the rail pays again
            await ctx.call_service("rail", "pay", order, idempotency_key=key)
            return "rail"

        await ctx.step("pay", pay)
        return JobPassResult(done=True)

    return settle


def one_payment(trace: Trace) -> list[str]:
    paid = _effects(trace, "bank.pay") + _effects(trace, "rail.pay")
    return [f"the order was paid {len(paid)} times"] if len(paid) > 1 else []


#: A lease far shorter than the client's patience: ten leases (the longest a held reply waits)
#: are still shorter than 8 s, and a takeover's pass asks the bank again, under the same key.
BANK_SETUP = WorldSetup(scopes=(SCOPE,), services=(BANK, RAIL), lease_ms=700)


@scenario("client-gives-up", setup=BANK_SETUP, checks=[one_payment])
async def client_gives_up(world: World) -> None:
    job = JobDefinition("shop", "settle", _settle(False), services=("bank", "rail"))
    await _two_drives(world, job, ("o-1",))


@scenario("client-gives-up-asks-again", setup=BANK_SETUP, checks=[one_payment])
async def client_gives_up_asks_again(world: World) -> None:
    job = JobDefinition("shop", "settle", _settle(True), services=("bank", "rail"))
    await _two_drives(world, job, ("o-1",))


# -- ledger-chain --------------------------------------------------------------------------------


def _charge(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    charges = state.setdefault("charges", [])
    n = len(charges) + 1
    charge = {"id": f"ch-{n}", "intent": f"pi-{n}", "order": args["order"]}
    charges.append(charge)
    return charge


def _book(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """Books a payment under its reference; a reference booked already is not booked again."""
    booked = state.setdefault("booked", {})
    if args["ref"] not in booked:
        booked[args["ref"]] = args["order"]
    return {"ref": args["ref"]}


def _book_from_search(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The ledger searches the card's settlement file for the order and books what it found,
    under the reference given in ``field`` of the settlement's record."""
    booked = state.setdefault("booked", {})
    ref = f"{args['field']}-of-{args['order']}"
    if ref not in booked:
        booked[ref] = args["order"]
    return {"ref": ref}


CARD = Service(
    "card",
    operations={"charge": Operation(_charge, idempotent=True), "find": _find},
    latency_ms=(5.0, 40.0),
)
LEDGER = Service(
    "ledger",
    operations={"book": _book, "book_from_search": _book_from_search},
    latency_ms=(5.0, 40.0),
)


def _pay_and_book(same_ref: bool) -> Any:
    async def pay_and_book(ctx: JobPassContext) -> JobPassResult:
        async def pay() -> str:
            order = ctx.payload["order"]
            try:
                charge = await ctx.call_service(
                    "card", "charge", {"order": order}, idempotency_key=order, timeout_ms=5_000
                )
            except IN_DOUBT:
                try:
                    found = await ctx.call_service(
                        "card", "find", {"order": order}, timeout_ms=5_000
                    )
                    # Not found: the charge never ran (or has not yet): charge, same key.
                    charge = found or await ctx.call_service(
                        "card", "charge", {"order": order}, idempotency_key=order, timeout_ms=5_000
                    )
                except IN_DOUBT:
                    # The card cannot say: book what the ledger's own search finds. THE BUG:
                    # under the intent's reference, where every other path books the charge's.
                    field = "ch" if same_ref else "pi"
                    booked = await ctx.call_service(
                        "ledger",
                        "book_from_search",
                        {"order": order, "field": field},
                        timeout_ms=5_000,
                    )
                    return str(booked["ref"])
            ref = f"ch-of-{charge['order']}"
            await ctx.call_service("ledger", "book", {"order": order, "ref": ref}, timeout_ms=5_000)
            return ref

        await ctx.step("pay", pay)
        return JobPassResult(done=True)

    return pay_and_book


def one_booking(trace: Trace) -> list[str]:
    refs = {str(e["result"]["ref"]) for e in _effects(trace, "ledger.book")}
    refs |= {str(e["result"]["ref"]) for e in _effects(trace, "ledger.book_from_search")}
    return [f"one payment booked under {len(refs)} references"] if len(refs) > 1 else []


LEDGER_SETUP = WorldSetup(scopes=(SCOPE,), services=(CARD, LEDGER), lease_ms=10_000)


@scenario("ledger-chain", setup=LEDGER_SETUP, checks=[one_booking])
async def ledger_chain(world: World) -> None:
    job = JobDefinition("shop", "pay", _pay_and_book(False), services=("card", "ledger"))
    await _two_drives(world, job, ("o-1",))


@scenario("ledger-chain-same-ref", setup=LEDGER_SETUP, checks=[one_booking])
async def ledger_chain_same_ref(world: World) -> None:
    job = JobDefinition("shop", "pay", _pay_and_book(True), services=("card", "ledger"))
    await _two_drives(world, job, ("o-1",))
