"""``python -m sims conformance``: the kit's subcommand (its arguments and its verdict)."""

from __future__ import annotations

import argparse
from typing import Any

from .._numbers import whole_number
from ..conformance import DEFAULT_EXAMPLES, load_history, replay_history, run_conformance


def add_conformance_command(commands: Any) -> None:
    """Add the subcommand to ``python -m sims``'s subparsers."""
    conformance = commands.add_parser(
        "conformance",
        help="hold a store adapter against the reference, history by history",
        description="Drive generated histories of store operations through the reference and a "
        "target in lockstep; compare every reply and both tables after every operation. Exit 0 "
        "when nothing differed, 1 on a difference (printed shrunk, as a command and as a test).",
    )
    conformance.add_argument(
        "--target",
        required=True,
        help="workerd (the Durable Object worker in this repository), an http(s):// URL, or a "
        '"COMMAND" that speaks the wire on stdin and stdout',
    )
    conformance.add_argument(
        "--examples",
        type=whole_number,
        default=DEFAULT_EXAMPLES,
        help=f"histories to generate (default {DEFAULT_EXAMPLES}); Hypothesis may run more while "
        "it shrinks a difference",
    )
    conformance.add_argument("--seed", type=int, help="the generator's seed (default: random)")
    conformance.add_argument(
        "--strict", action="store_true", help="count every allowance as a difference"
    )
    conformance.add_argument(
        "--replay", metavar="HISTORY", help="run this one history (JSON, or @FILE) instead"
    )


def conformance_command(arguments: argparse.Namespace) -> int:
    if arguments.replay is not None:
        report = replay_history(
            load_history(arguments.replay), target=arguments.target, strict=arguments.strict
        )
    else:
        if arguments.examples < 1:
            raise ValueError(f"--examples is {arguments.examples}; run at least 1 history")
        report = run_conformance(
            arguments.target,
            examples=arguments.examples,
            seed=arguments.seed,
            strict=arguments.strict,
        )
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1
