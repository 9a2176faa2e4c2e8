"""The invoice job on the REAL scope host, two drives, against newcomer/providers.py over HTTP.

    python serve.py --data DIR --invoices N [--variant v1] [--record DIR/history]
                    [--archive-down] [--drop-mail N] [--kill-after-mail N] [--stop-in-flight]

Scope files in DIR/scopes (the host's folder), the services' records in DIR/services.sqlite3.
It starts one run per invoice (only invoices it has no run for yet: a serve started again on the
same DIR goes on), drives until every run has ended, and prints a summary. Exit 0 when every run
ended done and every invoice was mailed exactly once; 1 otherwise.

``--stop-in-flight``: stop as soon as every run has failed a pass (each waits for its retry),
leaving the runs in flight for ``python -m sims before-deploy``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import trio

# Loaded by path (a world file, a script): the repository's root on the path, as examples/shop's.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from driver import JobDriver, StartJobRunInput
from scopehost import RecordingJobDriver, ScopeHost, open_scope_host
from serviceclients import HttpServices
from tests.newcomer.invoices import JOB, MODULE, VARIANTS, invoices
from tests.newcomer.providers import Services

SCOPE = "billing"
TICK_S = 0.05


def arguments(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="serve.py", description=__doc__)
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--invoices", required=True, type=int)
    p.add_argument("--variant", choices=tuple(VARIANTS), default="v1")
    p.add_argument("--record", type=Path)
    p.add_argument("--archive-down", action="store_true")
    p.add_argument("--drop-mail", type=int, default=0)
    p.add_argument("--kill-after-mail", type=int, default=0)
    p.add_argument("--stop-in-flight", action="store_true")
    p.add_argument("--deadline-s", type=float, default=120.0)
    return p.parse_args(argv)


async def _runs(host: ScopeHost) -> list[Any]:
    return list((await host.stub(SCOPE).export_dump()).runs)


def _finished(runs: list[Any], options: argparse.Namespace) -> bool:
    if len(runs) < options.invoices:
        return False
    if options.stop_in_flight:
        return all(r.status == "running" and r.last_error for r in runs)
    return all(r.status != "running" for r in runs)


async def _drive(drive: JobDriver, host: ScopeHost, options: argparse.Namespace) -> None:
    while not _finished(await _runs(host), options):
        await drive.run_due_jobs(SCOPE, max_passes=4)
        await trio.sleep(TICK_S)


async def serve(options: argparse.Namespace) -> int:
    folder: Path = options.data
    (folder / "scopes").mkdir(parents=True, exist_ok=True)
    if options.record is not None:
        options.record.mkdir(parents=True, exist_ok=True)
    services = Services(
        folder,
        archive_down=options.archive_down,
        drop_mail=options.drop_mail,
        kill_after_mail=options.kill_after_mail,
    )
    services.start()
    try:
        async with (
            open_scope_host(folder / "scopes", record=options.record, observe_direct=False) as host,
            HttpServices(services.endpoints()) as port,
        ):
            cls = JobDriver if options.record is None else RecordingJobDriver
            drives = [cls(host, name=name, services=port) for name in ("cron", "alarm")]
            for drive in drives:
                drive.register(VARIANTS[options.variant])
            have = {r.instance for r in await _runs(host)}
            for order in invoices(options.invoices):
                if order["invoice"] not in have:
                    start = StartJobRunInput(
                        module_id=MODULE, job=JOB, instance=order["invoice"], payload=order
                    )
                    await drives[0].start_job_run(SCOPE, start)
            with trio.move_on_after(options.deadline_s):
                async with trio.open_nursery() as nursery:
                    for drive in drives:
                        nursery.start_soon(_drive, drive, host, options)
            runs = await _runs(host)
        mailed = services.mails_by_invoice()
    finally:
        services.close()
    statuses: dict[str, int] = {}
    for r in runs:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    twice = sorted(i for i, n in mailed.items() if n > 1)
    print(f"invoices: {options.invoices}, variant {options.variant}, data in {folder}")
    print(f"  runs: {statuses}")
    print(f"  mailed: {sum(mailed.values())} mails for {len(mailed)} invoices; twice: {twice}")
    for r in runs:
        if r.last_error:
            print(f"  {r.instance} {r.status} attempts={r.attempts} last_error={r.last_error!r}")
    if options.stop_in_flight:
        return 0 if _finished(runs, options) else 1
    ok = all(r.status == "done" for r in runs) and not twice and len(mailed) == options.invoices
    return 0 if ok else 1


def main() -> int:
    return trio.run(serve, arguments(sys.argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
