"""``python -m sims findings [list|clear] [NAME]``: the failing plans explore remembers."""

from __future__ import annotations

import argparse
from typing import Any

from .._numbers import plural
from ..search._findings import FOLDER_VARIABLE, findings, findings_folder, forget


def add_findings_command(commands: Any) -> None:
    """Add the subcommand to ``python -m sims``'s subparsers."""
    command = commands.add_parser(
        "findings",
        help="list or clear the failing plans explore remembers, each tried first when its "
        "world is explored again",
        description="List or clear the failing plans explore remembers: one per world (a "
        "scenario, a seed, a mutant), kept in .sims/findings in the folder explore ran in (or "
        f"in ${FOLDER_VARIABLE}), each tried first when its world is explored again. Details: "
        "docs/search.md.",
    )
    command.add_argument(
        "action", nargs="?", choices=("list", "clear"), default="list", help="default: list"
    )
    command.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help="only this scenario's findings (NAME or FILE.py:NAME, as explore's report names it)",
    )


def findings_command(arguments: argparse.Namespace) -> int:
    folder = findings_folder()
    kept, unreadable = findings(folder, arguments.name)
    of = "" if arguments.name is None else f" of {arguments.name}"
    if arguments.action == "clear":
        for finding in kept:
            forget(finding)
        if arguments.name is None:
            for path in unreadable:
                path.unlink(missing_ok=True)
        cleared = plural(len(kept), "finding")
        print(f"findings: cleared {cleared}{of} from {folder}")
        return 0
    if not kept:
        print(f"findings: none{of} remembered in {folder}")
    else:
        print(f"findings: {plural(len(kept), 'finding')}{of} remembered in {folder}:")
        for finding in kept:
            print(f"  {finding.line()}")
            print(f"    {finding.path}")
    for path in unreadable:
        print(f"  {path} does not read as a finding: explore ignores it; `clear` removes it")
    return 0
