"""A CRM as a service: an upsert written as a read and a write, racing a stale pass.

The job syncs a new customer to the CRM in a step. The CRM is a ``Service`` of the world with
``find`` (a contact by email), ``create`` (a new contact, a new id every time), ``update`` and
``upsert`` (find-or-create and update, in ONE call, by email: the CRM's own atomic upsert).

``sync-find-then-create`` upserts by hand: it looks the email up, then creates the contact when
the look found none, in two calls. Between the two, another pass can create it. Hold the answer to
the cron's look until another drive has written: the cron's pass outlives its lease, the alarm
takes the run over, finds no contact and creates one; then the cron's held answer arrives, still
saying "no contact" (it was true when the cron looked), and the stale pass creates a second
contact for the same email, every seed:

    python -m sims run examples/crm.py:sync-find-then-create --plan \
        "FaultPlan((HoldLeg(drive='cron', operation='crm.find', nth=1, leg='reply', \
        until='effect'),))"

``sync-upsert`` is the fix: one ``upsert`` call, in which the CRM looks and writes at once, and
which changes nothing when it runs again with the same fields. The fix makes no ``find`` call for
that plan to hold, so its plan holds the fix's one call the same way: the cron's upsert stays on
the wire until the alarm has written, then lands as the stale pass's write. One contact:

    python -m sims run examples/crm.py:sync-upsert --plan \
        "FaultPlan((HoldLeg(drive='cron', operation='crm.upsert', nth=1, leg='request', \
        until='effect'),))"

``explore`` finds the hold on its own and shrinks it to that one fault; on ``sync-upsert`` it finds
nothing in 3000 worlds:

    python -m sims explore examples/crm.py:sync-find-then-create
    python -m sims explore examples/crm.py:sync-upsert --examples 3000

The check is the user's own: ``at_most_once("crm.create", key="email")`` would see the bug, but
not a duplicate made by an upsert, so ``one_contact_per_email`` counts the contacts each call
says it created, whichever call it was.
"""

from __future__ import annotations

from typing import Any

from sims import (
    DriveSpec,
    JobPassContext,
    JobPassResult,
    Service,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    call_service,
    scenario,
)

SCOPE = "signups"


# -- the CRM: its contacts by id, each call a function over them --------------------------------


def _contact(contact_id: str, contact: dict[str, Any], created: bool) -> dict[str, Any]:
    return {"id": contact_id, "email": contact["email"], "created": created}


def find(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any] | None:
    for contact_id, contact in state.get("contacts", {}).items():
        if contact["email"] == args["email"]:
            return _contact(contact_id, contact, created=False)
    return None


def create(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    contacts = state.setdefault("contacts", {})
    contact_id = f"c-{len(contacts) + 1}"
    contacts[contact_id] = {"email": args["email"], **args["fields"]}
    return _contact(contact_id, contacts[contact_id], created=True)


def update(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    contact = state["contacts"][args["id"]]
    contact.update(args["fields"])
    return _contact(args["id"], contact, created=False)


def upsert(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    found = find(state, args)
    if found is None:
        return create(state, args)
    return update(state, {"id": found["id"], "fields": args["fields"]})


CRM = Service(
    "crm",
    operations={"find": find, "create": create, "update": update, "upsert": upsert},
    latency_ms=(5.0, 80.0),
)


# -- the job, two ways --------------------------------------------------------------------------


async def sync_find_then_create(ctx: JobPassContext) -> JobPassResult:
    """THE BUG: look, then create, in two calls; another pass can create between them."""
    email, fields = ctx.payload["email"], ctx.payload["fields"]

    async def sync() -> str:
        found = await call_service(ctx, "crm", "find", {"email": email}, timeout_ms=5_000)
        if found is None:
            made = await call_service(
                ctx, "crm", "create", {"email": email, "fields": fields}, timeout_ms=5_000
            )
            return str(made["id"])
        await call_service(
            ctx, "crm", "update", {"id": found["id"], "fields": fields}, timeout_ms=5_000
        )
        return str(found["id"])

    await ctx.step("sync-contact", sync)
    return JobPassResult(done=True)


async def sync_upsert(ctx: JobPassContext) -> JobPassResult:
    """The fix: one upsert by email, atomic at the CRM, and a no-op when it runs again."""
    email, fields = ctx.payload["email"], ctx.payload["fields"]

    async def sync() -> str:
        made = await call_service(
            ctx, "crm", "upsert", {"email": email, "fields": fields}, timeout_ms=5_000
        )
        return str(made["id"])

    await ctx.step("sync-contact", sync)
    return JobPassResult(done=True)


# -- the check: one contact per email ------------------------------------------------------------


def one_contact_per_email(trace: Trace) -> list[UserFinding]:
    """No email has two contacts: every call that created one (a create, an upsert that found
    none) says so in its result."""
    made: dict[str, list[dict[str, Any]]] = {}
    for event in trace.of("svc.exec"):
        result = event.get("result")
        if event["effect"] and isinstance(result, dict) and result.get("created"):
            made.setdefault(result["email"], []).append(event)
    return [
        UserFinding(
            f"{email} has {len(events)} contacts, made by "
            + " and ".join(f"{e['op']} of {e['drive']} at {e['t']} ms" for e in events),
            at_ms=events[1]["t"],
            run=events[1]["run"],
        )
        for email, events in made.items()
        if len(events) > 1
    ]


# -- the world ----------------------------------------------------------------------------------


SETUP = WorldSetup(scopes=(SCOPE,), services=(CRM,), lease_ms=2_000)


async def _drive(world: World, handler: Any) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=2.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=2.0, reply_ms=2.0))
    world.add_job("crm-sync", "contact", handler)
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=120_000)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=120_000)
    payload = {"email": "ada@example.com", "fields": {"name": "Ada", "plan": "pro"}}
    await world.start("cron", SCOPE, "crm-sync", "contact", payload=payload)
    await world.settle((SCOPE,), horizon_ms=120_000, poll_ms=500)


@scenario("sync-find-then-create", setup=SETUP, checks=[one_contact_per_email])
async def sync_find_then_create_world(world: World) -> None:
    """Sync a signup to the CRM by a look and a create in two calls: a stale pass's look, held
    past its lease, makes a second contact."""
    await _drive(world, sync_find_then_create)


@scenario("sync-upsert", setup=SETUP, checks=[one_contact_per_email])
async def sync_upsert_world(world: World) -> None:
    """Sync a signup to the CRM with its one atomic upsert: one contact, whichever pass lands
    last."""
    await _drive(world, sync_upsert)
