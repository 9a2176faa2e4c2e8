"""Release 1 of the payout job on the REAL scope host, left with its run in flight.

    python newcomer2/inflight.py STATE DATA [--record DIR]

STATE is where the run is left (its scope file in DATA/scopes/payroll.sqlite3):

- ``committed``: one pass committed (cursor 2, payees p0 and p1 paid), the next not yet run.
- ``timeout``: pass 1 committed; pass 2 paid p2, then p3's transfer ran at the bank but its answer
  came after the 2 s timeout (``ServiceTimedOut``): the pass failed, waiting for its retry, its
  ledger holding ``pay p2`` done and ``pay p3`` attempted and failed.
- ``unavailable``: as ``timeout``, but the bank refused p3's transfer (``ServiceUnavailable``: it
  did not run).
- ``killed``: pass 1 committed; pass 2 paid p2, then the process is SIGKILLed while p3's transfer
  is at the bank (it ran there; no answer, no record of the step). The parent process does the kill:
  this process writes DATA/at-the-bank when p3's transfer ran, and waits.
- ``all``: the run driven to its end (with the p3 timeout and its retry on the way); with
  ``--record DIR`` the history is recorded, for ``python -m sims check DIR``.

The bank is ``serviceclients.InProcessServices``, which answers a repeated key with the first
answer; DATA/bank.json lists the transfers it made (what the real bank would show).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import trio

# Run as a script: the repository's root on the path, as examples/shop's serve is.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from driver import JobDriver, ServiceUnavailable, StartJobRunInput
from scopehost import RecordingJobDriver, open_scope_host
from serviceclients import InProcessServices
from tests.newcomer2.payouts import JOB, MODULE, V1, batch_payload

SCOPE = "payroll"


class Bank:
    def __init__(self, state: str, data: Path) -> None:
        self.state = state
        self.data = data
        self.transfers: list[dict[str, Any]] = []
        self.struck = False

    def _save(self) -> None:
        (self.data / "bank.json").write_text(json.dumps(self.transfers))

    async def transfer(self, args: dict[str, Any]) -> dict[str, Any]:
        strike = args["payee"] == "p3" and not self.struck
        if strike and self.state == "unavailable":
            self.struck = True
            raise ServiceUnavailable("the bank is down for maintenance")
        self.transfers.append({"payee": args["payee"], "cents": args["cents"]})
        self._save()
        answer = {"transfer": f"t-{len(self.transfers)}"}
        if strike and self.state in ("timeout", "all"):
            self.struck = True
            await trio.sleep(3)  # past the caller's 2 s: it ran, its caller sees a timeout
        if strike and self.state == "killed":
            (self.data / "at-the-bank").write_text("p3")
            await trio.sleep_forever()  # the parent kills the process here
        return answer


async def leave(state: str, data: Path, record: Path | None) -> None:
    scopes = data / "scopes"
    scopes.mkdir(parents=True, exist_ok=True)
    bank = Bank(state, data)
    services = InProcessServices({"bank": {"transfer": bank.transfer}})
    async with open_scope_host(scopes, record=record) as host:
        if record is not None:
            drive: JobDriver = RecordingJobDriver(host, name="cron", services=services)
        else:
            drive = JobDriver(host, name="cron", services=services)
        drive.register(V1)
        start = StartJobRunInput(module_id=MODULE, job=JOB, instance="B7", payload=batch_payload())
        run = await drive.start_job_run(SCOPE, start)
        passes = {"committed": 1, "timeout": 2, "unavailable": 2, "killed": 2}.get(state)
        done = 0
        while run.status == "running" and (passes is None or done < passes):
            report = await drive.run_due_jobs(SCOPE, max_passes=1)
            done += report.attempted
            if report.attempted == 0:
                await trio.sleep(0.1)
            [run] = [r for r in await drive.job_runs(SCOPE) if r.id == run.id]
        print(
            f"{state}: run {run.id} {run.status}, cursor {run.cursor!r}, attempts "
            f"{run.attempts}, counters {run.counters}, last error {run.last_error!r}"
        )
        print(f"bank: {len(bank.transfers)} transfers: {[t['payee'] for t in bank.transfers]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("state", choices=("committed", "timeout", "unavailable", "killed", "all"))
    parser.add_argument("data", type=Path)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    trio.run(leave, args.state, args.data.resolve(), args.record)


if __name__ == "__main__":
    main()
