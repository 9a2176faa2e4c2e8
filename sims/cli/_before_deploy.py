"""``python -m sims before-deploy NEW_JOBS --runs SOURCE...``: new code checked against the runs
in flight on a real host, before it is deployed.

Exit 0 when every run in flight can go on under the new code (nothing in flight included), 1 when
one cannot (each finding names the scope, the run, the step and the remedy), 2 when the input
cannot be used (one line naming the value and the remedy, told by ``main``). docs/deploys.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..deploys import check_deploy


def add_before_deploy_command(commands: Any) -> None:
    """Add the subcommand to ``python -m sims``'s subparsers."""
    command = commands.add_parser(
        "before-deploy",
        help="check the code about to ship against the runs in flight on a real host: each "
        "run's next pass (and its retry) on the new code, in a world restored from the host's "
        "rows",
        description="Check the code about to ship against the runs in flight on a real host. "
        "Each run not ended whose job the new code defines is restored in a world with no "
        "faults, and its next pass (and that pass's retry, if it fails) runs on the new code; "
        "the command reports a step the run's ledger holds that the new code never calls, the "
        "new code raising over the run's payload or cursor, a new step called before one the "
        "ledger holds, and, given the code running now (--old), a step the old code attempted "
        "that the new code repeats under another idempotency key. Exit 0 when every run can go "
        "on, 1 when one cannot, 2 when the input cannot be used. Details: docs/deploys.md.",
    )
    command.add_argument(
        "new_jobs",
        metavar="NEW_JOBS",
        help="FILE.py:NAME, NAME a driver.JobDefinition or a tuple of them: the code about to ship",
    )
    command.add_argument(
        "--runs",
        action="append",
        required=True,
        metavar="SOURCE",
        help="the runs in flight: a scope's saved dump (JobRunDump.to_json), a scope's .sqlite3 "
        "file, a host's data folder (every scopes/*.sqlite3 in it), or a recorded history "
        "(history-*.jsonl, or its folder); give it once per source",
    )
    command.add_argument(
        "--old",
        metavar="FILE.py:NAME",
        help="the code running now (job definitions, as NEW_JOBS): the check then compares the "
        "idempotency keys each code's repeat of a step the old code attempted would use",
    )
    command.add_argument(
        "--world",
        metavar="FILE.py:NAME",
        help="a scenario whose WorldSetup(services=...) declares the services the new jobs call "
        "(its services and lease are the check's; required when a new job names services)",
    )


def before_deploy_command(arguments: argparse.Namespace) -> int:
    verdict = check_deploy(
        arguments.new_jobs, arguments.runs, world=arguments.world, old=arguments.old
    )
    for line in verdict.lines():
        print(line)
    return 0 if verdict.ok else 1
