"""The shop on the real scope host, against real HTTP services: the handlers ``world.py`` explores.

    python -m examples.shop.serve --data DIR --orders N [--variant buggy|fixed|v1|v2|v2-fixed]

One SQLite file per scope in ``DIR/scopes`` (the output gate on: a reply leaves once its write is
synced), eight drives (``cron-1`` to ``cron-4`` and ``alarm-1`` to ``alarm-4``) driving the shop's
scope at once, each handing its handlers' service calls to ``serviceclients.HttpServices``, and a
card provider and a mailer started on localhost (``providers.py``), their state in ``DIR`` too. It
starts the month-end run, which fans out one order run per customer, drives until every run has
ended, and prints a summary. Exit 0 when every run ended and every order was charged exactly once (a
declined one never); 1 otherwise.

The provider drops the answer of a share of its requests after doing the work (``--drop-rate``,
0.2 by default) and answers another share late (``--late-ms``, past the client's timeout), as
real ones do. With ``--variant buggy`` (no idempotency key on the charge) the summary shows orders
charged twice: the bug ``python -m sims explore examples/shop/world.py:order-buggy`` finds.

Killed part-way (even with SIGKILL) and started again on the same ``DIR``, it goes on: the month-end
run is started only once, a run the killed process held is taken over when its lease (10 s)
expires, and the provider's keys outlive it, so the fixed variant still charges every order once.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

import trio

from driver import JobDriver, JobRunFilter, StartJobRunInput
from examples.shop.jobs import MODULE, ORDERS, customers, shop_jobs
from examples.shop.providers import LIMIT_CENTS, CardProvider, Mailer
from scopehost import RecordingJobDriver, ScopeDatabase, ScopeHost, open_scope_host
from serviceclients import HttpServices

SCOPE = "shop"
MONTH = "2026-11"
#: How often each drive looks for due runs, and how many runs it works on at once.
TICK_S = 0.05
WORKERS = 4


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m examples.shop.serve", description=__doc__)
    parser.add_argument("--data", required=True, type=Path, help="the data folder (made if new)")
    parser.add_argument("--orders", required=True, type=int, help="customers, one order each")
    parser.add_argument(
        "--variant",
        choices=tuple(ORDERS),
        default="fixed",
        help="the order job: buggy or fixed, or a release of the deploy example (v1, v2, v2-fixed)",
    )
    parser.add_argument(
        "--mail-down",
        action="store_true",
        help="the mailer refuses every request (an outage): each order is charged, its receipt "
        "step fails and its pass is retried, so the runs stay in flight with the charge in their "
        "ledger",
    )
    parser.add_argument("--drop-rate", type=float, default=0.2, help="answers the card drops")
    parser.add_argument("--late-ms", type=float, default=2_500.0, help="how late a late answer is")
    parser.add_argument("--seed", type=int, default=1, help="which answers go wrong")
    parser.add_argument("--deadline-s", type=float, default=300.0, help="give up after this long")
    parser.add_argument(
        "--record",
        type=Path,
        metavar="FOLDER",
        help="record the host's history there, for `python -m sims check FOLDER`",
    )
    parser.add_argument(
        "--mutant",
        metavar="NAME",
        help="serve on a deliberately broken store, one of the simulator's mutants (listed by "
        "`python -m sims --help`), to see `check` name the rule it breaks",
    )
    found = parser.parse_args(argv)
    if not 1 <= found.orders <= 10_000:
        parser.error(f"--orders {found.orders}: give a number of orders from 1 to 10000")
    if not 0 <= found.drop_rate < 0.5:
        parser.error(f"--drop-rate {found.drop_rate}: give a share from 0 up to (not) 0.5")
    if found.mutant is not None:
        from sims.mutants._catalog import MUTANTS  # only for --mutant: the shop needs no sims

        if found.mutant not in MUTANTS:
            parser.error(f"--mutant {found.mutant}: no such mutant; one of {', '.join(MUTANTS)}")
    return found


def _store(options: argparse.Namespace) -> tuple[Any, Any]:
    """The store's database class and the context it is served in: the real one, or a mutant
    (a class, and the source ablations it carries, applied for the serve's length)."""
    if options.mutant is None:
        return ScopeDatabase, contextlib.nullcontext()
    from sims.mutants._ablation import ablated
    from sims.mutants._catalog import MUTANTS

    mutant = MUTANTS[options.mutant]
    return mutant, ablated(*getattr(mutant, "ablations", ()))


async def serve(options: argparse.Namespace) -> int:
    folder: Path = options.data
    (folder / "scopes").mkdir(parents=True, exist_ok=True)
    faults = {"drop_rate": options.drop_rate, "late_ms": options.late_ms, "seed": options.seed}
    card, mail = CardProvider(folder, **faults), Mailer(folder, **faults, down=options.mail_down)
    card.start()
    mail.start()
    try:
        endpoints = {"card": card.url, "mail": mail.url}
        database, served = _store(options)
        async with (
            open_scope_host(
                folder / "scopes",
                database=database,
                record=options.record,
                # Only the drives' calls are the history: the reads this program polls the runs
                # with, over the host's own link, change nothing and would fill it.
                observe_direct=False,
            ) as host,
            HttpServices(endpoints) as services,
        ):
            # A recording host's drives record their side too (what each handler asked).
            drive_class = JobDriver if options.record is None else RecordingJobDriver
            # Each of the two processes' worth of drives works on several runs at once (a pass
            # waiting on a slow provider holds up no other): a drive per worker, each making one
            # call at a time, as a cron's or an alarm's invocation does; claims keep them apart.
            drives = [
                drive_class(host, name=f"{name}-{worker}", services=services)
                for name in ("cron", "alarm")
                for worker in range(1, WORKERS + 1)
            ]
            for drive in drives:
                for job in shop_jobs(options.variant):
                    drive.register(job)
            with served:
                await _start_month_end(drives[0], options.orders)
                with trio.move_on_after(options.deadline_s):
                    async with trio.open_nursery() as nursery:
                        for drive in drives:
                            nursery.start_soon(_drive_until_done, drive, host, options.orders)
                runs = await _runs(host)
        charged, mails = card.charges_by_order(), mail.mails()
        faults = {**card.faults, "mail_refused": mail.faults["refused"]}
    finally:
        card.close()
        mail.close()
    return _summary(options, runs, charged, mails, faults)


async def _start_month_end(drive: JobDriver, orders: int) -> None:
    """Once per data folder: a serve started again finds the run it started before."""
    started = await drive.job_runs(
        SCOPE, JobRunFilter(module_id=MODULE, job="month-end", instance=MONTH)
    )
    if not started:
        payload = {"month": MONTH, "customers": customers(orders)}
        start = StartJobRunInput(module_id=MODULE, job="month-end", instance=MONTH, payload=payload)
        await drive.start_job_run(SCOPE, start)


async def _drive_until_done(drive: JobDriver, host: ScopeHost, orders: int) -> None:
    while not _all_ended(await _runs(host), orders):
        await drive.run_due_jobs(SCOPE, limit=1)
        await trio.sleep(TICK_S)


async def _runs(host: ScopeHost) -> list[Any]:
    return list((await host.stub(SCOPE).export_dump()).runs)


def _all_ended(runs: list[Any], orders: int) -> bool:
    placed = [run for run in runs if run.job == "order"]
    return len(placed) >= orders and all(run.status != "running" for run in runs)


def _summary(
    options: argparse.Namespace,
    runs: list[Any],
    charged: dict[str, int],
    mails: int,
    faults: dict[str, int],
) -> int:
    wanted = {f"{MONTH}/{c['id']}": c["cents"] <= LIMIT_CENTS for c in customers(options.orders)}
    once = sum(1 for order, pay in wanted.items() if pay and charged.get(order) == 1)
    twice = sorted(order for order, count in charged.items() if count > 1)
    never = sorted(order for order, pay in wanted.items() if pay and order not in charged)
    declined_charged = sorted(o for o, pay in wanted.items() if not pay and o in charged)
    declined = sum(1 for pay in wanted.values() if not pay)
    statuses: dict[str, int] = {}
    for run in runs:
        statuses[f"{run.job} {run.status}"] = statuses.get(f"{run.job} {run.status}", 0) + 1
    ended = _all_ended(runs, options.orders)
    print(f"shop: {options.orders} orders, the {options.variant} order job, data in {options.data}")
    print(
        f"  charges:  {once} orders charged once, {len(twice)} charged more than once, "
        f"{len(never)} never charged, {declined} declined (over the limit)"
    )
    for order in twice[:10]:
        print(f"            order {order} was charged {charged[order]} times")
    print(f"  mails:    {mails} sent")
    print(f"  runs:     {', '.join(f'{n} {what}' for what, n in sorted(statuses.items()))}")
    print(
        f"  provider: {faults['dropped']} answers dropped after the work, "
        f"{faults['late']} answered late (this start)"
        + (
            f"; the mailer refused {refused} requests (down)"
            if (refused := faults["mail_refused"])
            else ""
        )
    )
    good = ended and not twice and not never and not declined_charged
    if good:
        print("  every run ended, and every order was charged exactly once")
    elif not ended:
        print(f"  NOT DONE: runs still running after {options.deadline_s:g} s")
    else:
        print("  WRONG: an order was not charged exactly once")
    return 0 if good else 1


def main(argv: list[str] | None = None) -> int:
    return trio.run(serve, arguments(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
