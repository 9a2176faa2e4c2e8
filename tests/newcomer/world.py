"""The invoice job (newcomer/invoices.py) in simulated worlds: the very handlers serve.py runs.

python -m sims run newcomer/world.py:invoices
python -m sims explore newcomer/world.py:deploy-number        # bug B: found
python -m sims explore newcomer/world.py:deploy-number-fixed  # clean
python -m sims explore newcomer/world.py:deploy-rekey         # bug A: found
python -m sims explore newcomer/world.py:deploy-rekey-fixed   # clean
INVOICE_INCIDENT=DIR python -m sims run newcomer/world.py:incident
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import attrs

# Loaded by path (a world file, a script): the repository's root on the path, as examples/shop's.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from driver import JobDefinition
from scopehost import read_scope_file
from sims import (
    DriveSpec,
    Operation,
    Service,
    Trace,
    UserFinding,
    World,
    WorldSetup,
    at_most_once,
    carries_the_ledger,
    scenario,
)
from tests.newcomer.invoices import (
    INVOICE_V1,
    INVOICE_V2_NUMBER,
    INVOICE_V2_NUMBER_FIXED,
    INVOICE_V2_REKEY,
    INVOICE_V2_REKEY_FIXED,
    JOB,
    MODULE,
    invoices,
)
from tests.newcomer.providers import read_records

SCOPE = "billing"
HORIZON_MS = 120_000


def send(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    sent = state.setdefault("sent", [])
    sent.append({"invoice": args["invoice"], "to": args["to"], "subject": args["subject"]})
    return {"message": len(sent)}


def store(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    state.setdefault("archived", {})[args["invoice"]] = args["total"]
    return {"archived": args["invoice"]}


def allocate(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    numbers = state.setdefault("numbers", [])
    numbers.append(args["invoice"])
    return {"number": len(numbers)}


MAIL = Service("mail", operations={"send": Operation(send, idempotent=True)}, latency_ms=(5, 40))
ARCHIVE = Service(
    "archive", operations={"store": Operation(store, idempotent=True)}, latency_ms=(5, 40)
)
NUMBERS = Service(
    "numbers", operations={"allocate": Operation(allocate, idempotent=True)}, latency_ms=(5, 40)
)
SETUP = WorldSetup(scopes=(SCOPE,), lease_ms=5_000, services=(MAIL, ARCHIVE, NUMBERS))


def _effects(trace: Trace, op: str) -> dict[str, list[float]]:
    """When each invoice got an effect of ``op`` (a call that changed the service)."""
    sent = {(e["drive"], e["seq"]): e["args"] for e in trace.of("svc.send")}
    out: dict[str, list[float]] = {}
    for e in trace.of("svc.exec"):
        if e["op"] == op and e["effect"]:
            out.setdefault(sent[(e["drive"], e["seq"])]["invoice"], []).append(e["t"])
    return out


def mailed_once(trace: Trace) -> list[UserFinding]:
    """No invoice is mailed twice."""
    return [
        UserFinding(f"invoice {inv} was mailed {len(ts)} times", at_ms=ts[1])
        for inv, ts in sorted(_effects(trace, "mail.send").items())
        if len(ts) > 1
    ]


def numbered_before_mailed(trace: Trace) -> list[UserFinding]:
    """An invoice's number is reserved before its mail goes out, never after."""
    mailed = _effects(trace, "mail.send")
    return [
        UserFinding(
            f"invoice {inv} got number at {ts[0]:.3f} ms, after it was mailed without one at "
            f"{mailed[inv][0]:.3f} ms",
            at_ms=ts[0],
        )
        for inv, ts in sorted(_effects(trace, "numbers.allocate").items())
        if inv in mailed and mailed[inv][0] < ts[0]
    ]


CHECKS = [mailed_once, numbered_before_mailed, at_most_once("mail.send", key="invoice")]


async def _invoices(world: World, job: JobDefinition, count: int = 2) -> None:
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=15.0, reply_ms=40.0))
    world.register(job)
    for order in invoices(count):
        await world.start("cron", SCOPE, MODULE, JOB, instance=order["invoice"], payload=order)
    world.every("cron", SCOPE, every_ms=500, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=500, first_ms=250, until_ms=HORIZON_MS)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


@scenario("invoices", setup=SETUP, checks=CHECKS)
async def plain(world: World) -> None:
    """Two invoices on release 1, two drives."""
    await _invoices(world, INVOICE_V1)


@scenario(
    "deploy-number", setup=attrs.evolve(SETUP, versions={"v2": INVOICE_V2_NUMBER}), checks=CHECKS
)
async def deploy_number(world: World) -> None:
    """Release 1; release 2 (a numbering step put first) deployed while the invoices run."""
    await _invoices(world, INVOICE_V1)


@scenario(
    "deploy-number-fixed",
    setup=attrs.evolve(SETUP, versions={"v2": INVOICE_V2_NUMBER_FIXED}),
    checks=CHECKS,
)
async def deploy_number_fixed(world: World) -> None:
    """Release 1; release 2 numbering only its own runs, deployed while the invoices run."""
    await _invoices(world, INVOICE_V1)


@scenario(
    "deploy-rekey", setup=attrs.evolve(SETUP, versions={"v2": INVOICE_V2_REKEY}), checks=CHECKS
)
async def deploy_rekey(world: World) -> None:
    """Release 1; release 2 (the mail's idempotency key built another way) deployed mid-run."""
    await _invoices(world, INVOICE_V1)


@scenario(
    "deploy-rekey-fixed",
    setup=attrs.evolve(SETUP, versions={"v2": INVOICE_V2_REKEY_FIXED}),
    checks=CHECKS,
)
async def deploy_rekey_fixed(world: World) -> None:
    """Release 1; release 2 with the old mail key kept, deployed mid-run."""
    await _invoices(world, INVOICE_V1)


# -- an incident: what a killed serve.py left in $INVOICE_INCIDENT ---------------------------

INCIDENT_VARIABLE = "INVOICE_INCIDENT"


def incident_folder() -> Path:
    folder = os.environ.get(INCIDENT_VARIABLE)
    if not folder or not (Path(folder) / "scopes" / f"{SCOPE}.sqlite3").is_file():
        raise ValueError(f"{INCIDENT_VARIABLE}={folder!r}: name the --data folder serve.py left")
    return Path(folder)


def _restore_services(world: World, folder: Path) -> None:
    rec = read_records(folder)
    answered = rec["answered"]

    def by(prefix: str, op: str) -> dict[tuple[str, str], Any]:
        return {(op, k[len(prefix) :]): v for k, v in answered.items() if k.startswith(prefix)}

    world.restore_service(
        "mail",
        {"sent": [{"invoice": i, "to": t, "subject": s} for i, t, s, _ in rec["mails"]]},
        answered=by("mail/send:", "send"),
    )
    world.restore_service(
        "archive", {"archived": dict(rec["archive"])}, answered=by("archive/store:", "store")
    )
    world.restore_service(
        "numbers",
        {"numbers": [inv for _, inv in rec["numbers"]]},
        answered=by("numbers/allocate:", "allocate"),
    )


def mailed_once_from_the_incident(trace: Trace) -> list[UserFinding]:
    """The incident's mails count: one more for the same invoice in this world is a double."""
    before: dict[str, int] = {}
    for inv, *_ in read_records(incident_folder())["mails"]:
        before[inv] = before.get(inv, 0) + 1
    return [
        UserFinding(
            f"invoice {inv} was mailed {before.get(inv, 0) + len(ts)} times: "
            f"{before.get(inv, 0)} before the incident, {len(ts)} in this world",
            at_ms=ts[0],
        )
        for inv, ts in sorted(_effects(trace, "mail.send").items())
        if before.get(inv, 0) + len(ts) > 1
    ]


async def _incident(world: World, job: JobDefinition) -> None:
    folder = incident_folder()
    world.add_drive(DriveSpec(name="cron", request_ms=2.0, reply_ms=3.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=15.0, reply_ms=40.0))
    world.register(job)
    await world.restore(SCOPE, read_scope_file(folder / "scopes" / f"{SCOPE}.sqlite3"))
    _restore_services(world, folder)
    world.every("cron", SCOPE, every_ms=500, first_ms=0, until_ms=HORIZON_MS)
    world.every("alarm", SCOPE, every_ms=500, first_ms=250, until_ms=HORIZON_MS)
    await world.settle((SCOPE,), horizon_ms=HORIZON_MS, poll_ms=500)


INCIDENT_CHECKS = [mailed_once_from_the_incident, carries_the_ledger]


@scenario("incident", setup=SETUP, checks=INCIDENT_CHECKS)
async def incident(world: World) -> None:
    """The incident in $INVOICE_INCIDENT, driven on by release 1."""
    await _incident(world, INVOICE_V1)


@scenario("incident-rekey", setup=SETUP, checks=INCIDENT_CHECKS)
async def incident_rekey(world: World) -> None:
    """The incident in $INVOICE_INCIDENT, driven on by release 2 with its new mail key."""
    await _incident(world, INVOICE_V2_REKEY)
