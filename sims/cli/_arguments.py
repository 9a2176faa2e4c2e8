"""The command line's arguments: the parser of every subcommand, its help, and the checks an
argument passes before a world runs (a mutant that exists, a plan that builds, a file that can be
written), each refused with a :class:`UsageError` that names the value."""

from __future__ import annotations

import argparse
import importlib.metadata
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._numbers import whole_number
from ..faults._plan import FAULT_KINDS, FaultPlan, plan_from_text
from ..mutants._catalog import MUTANTS
from ..runners._sweep import SHOWN_SEEDS
from ..scenarios._registry import SIMPLEST, inputs_from_text
from ..search._explore import DEFAULT_SECONDS, DEFAULT_WORLDS
from ..timeline._calls import STORY_CHARS
from ._before_deploy import add_before_deploy_command
from ._check import add_check_command
from ._conformance import add_conformance_command
from ._findings import add_findings_command


class UsageError(ValueError):
    """A user's mistake: told in one line, exit 2."""


# -- help ---------------------------------------------------------------------------------------

_SCENARIO_HELP = "a built-in scenario's NAME (see list) or FILE.py:NAME, a scenario in your file"
_SEED_HELP = "the world's seed, a whole number from 0 to 2**64 - 1 (default 1)"


def _first_paragraph(kind: type) -> str:
    return " ".join((kind.__doc__ or "").strip().split("\n\n")[0].split()).replace("``", "")


def _mutants_help() -> str:
    lines = []
    for name, kind in MUTANTS.items():
        lines += textwrap.wrap(
            _first_paragraph(kind),
            width=98,
            initial_indent=f"  {name:<18} ",
            subsequent_indent=" " * 21,
        )
    return "\n".join(lines)


def _fault_kinds_help() -> str:
    lines = []
    for kind in FAULT_KINDS:
        lines += textwrap.wrap(
            _first_paragraph(kind),
            width=98,
            initial_indent=f"  {kind.__name__:<16} ",
            subsequent_indent=" " * 19,
        )
    return "\n".join(lines)


def _epilog() -> str:
    return f"""\
checks:
  Every world's trace is read by the invariant checks: the handler runs if and only if BEGIN
  wrote; two passes of a run overlap only inside a window the spec documents (each overlap is
  classified); one live run per key; no write after a pass lost its lease; attempts charged as
  the spec says; admission misses consecutive; one pass in the step ledger; with bounded faults
  every run ends. A scenario adds its own checks (scenario(..., checks=...)). Details and what
  each guards: docs/checks.md.

mutants (--mutant M: a store with one of the spec's guards removed, to show a check notices):
{_mutants_help()}
  More: docs/mutants.md.

fault plans (--plan): a FaultPlan of faults, written as Python values, e.g.
  --plan "FaultPlan((DelayLeg(drive='cron', operation='begin', nth=1, leg='reply', ms=1250),))"
  One fault alone, or a list of faults, is the plan of them. A call is named as a drive's nth
  call of an operation. The kinds:
{_fault_kinds_help()}
  Grammar: docs/fault-plans.md.

the spec, and the words above: docs/protocol.md (the job-run protocol, with a glossary).
your own jobs: docs/simulating-your-jobs.md (python -m sims run examples/FILE.py:NAME).
exit codes: 0 clean, 1 a finding, 2 a usage error, 130 stopped by Ctrl-C (explore first says
  what it searched)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sims",
        description="Deterministic simulations of the job-run system: seeded worlds, faults, "
        "traces, invariant checks and timelines.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _ADDERS:
        add(commands)
    for command in commands.choices.values():
        # A word the command does not know is reported with that command's usage, not the
        # top-level one (see main).
        command.set_defaults(command_parser=command)
    return parser


def _version() -> str:
    try:
        return importlib.metadata.version("jobrun-sim")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout never installed
        return "(not installed)"


def _command(
    commands: Any, name: str, help: str, *, epilog: str | None = None
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def _add_list(commands: Any) -> None:
    list_ = _command(
        commands,
        "list",
        "list the built-in scenarios, or those a file defines: one line each, the name first "
        "(on a terminal, long lines wrap)",
    )
    list_.add_argument("file", nargs="?", type=Path, help="a Python file that defines scenarios")


_ON_FILES_HELP = (
    "run each world on SQLite files with the output gate on, in a temporary folder of its own "
    "(removed after); the trace is the one in memory, the world about ten times slower"
)


def _add_run(commands: Any) -> None:
    run = _command(
        commands, "run", "run one scenario with one seed and tell its story", epilog=_epilog()
    )
    run.add_argument("scenario", metavar="NAME|FILE.py:NAME", help=_SCENARIO_HELP)
    run.add_argument("--seed", default="1", help=_SEED_HELP)
    run.add_argument("--trace", type=Path, help="write the trace here, as JSON lines")
    run.add_argument("--timeline", type=Path, help="write the timeline here, as HTML")
    run.add_argument("--plan", help="a FaultPlan(...) to use instead of the scenario's own")
    run.add_argument("--inputs", metavar="JSON", help=_INPUTS_HELP)
    run.add_argument("--mutant", metavar="M", help="run on a deliberately broken store")
    run.add_argument("--on-files", action="store_true", help=_ON_FILES_HELP)
    run.add_argument(
        "--story-lines", type=whole_number, default=200, help="most story lines to print"
    )
    run.add_argument(
        "--whole-values",
        action="store_true",
        help="write each service call's arguments and result, and each service's state at the "
        f"world's end, whole in the story (by default cut to {STORY_CHARS} characters)",
    )


def _add_sweep(commands: Any) -> None:
    sweep_ = _command(commands, "sweep", "run one scenario over a range of seeds")
    sweep_.add_argument("scenario", metavar="NAME|FILE.py:NAME", help=_SCENARIO_HELP)
    sweep_.add_argument(
        "--seeds",
        required=True,
        metavar="N|A..B",
        help="N (that one seed) or A..B (A to B, both included); seeds are whole numbers from 0 "
        "to 2**64 - 1",
    )
    where = sweep_.add_mutually_exclusive_group()
    where.add_argument(
        "--jobs",
        type=whole_number,
        default=1,
        help=f"worker processes, 1 to {MAX_JOBS} (default 1); they end when the sweep does",
    )
    where.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="run the seeds as tasks on this Dask distributed cluster (needs the dask extra)",
    )
    sweep_.add_argument("--mutant", metavar="M", help="sweep a deliberately broken store")
    sweep_.add_argument("--on-files", action="store_true", help=_ON_FILES_HELP)
    sweep_.add_argument(
        "--plan",
        metavar="PLAN",
        help="a FaultPlan(...) to run every seed under, instead of the scenario's own",
    )
    sweep_.add_argument(
        "--show",
        type=whole_number,
        default=SHOWN_SEEDS,
        metavar="N",
        help=f"list at most N failing seeds with their commands (default {SHOWN_SEEDS}); the "
        "counts by check cover every seed",
    )
    sweep_.add_argument(
        "--spec-probes",
        action="store_true",
        help="list the spec's coverage probes for a scenario of your file too (hidden there by "
        "default: your sometimes marks are listed; a built-in scenario always lists them)",
    )


def _add_replay(commands: Any) -> None:
    replay = _command(
        commands, "replay", "re-run the world a trace file records, and check it is the same"
    )
    replay.add_argument("file", type=Path, help="a trace written by run --trace")
    replay.add_argument(
        "--world",
        type=Path,
        metavar="FILE.py",
        help="the world file a trace of your own world was written from: replay runs no Python a "
        "trace names unless you name it here (the file the trace names, or one with the content "
        "hash it records)",
    )


def _add_explore(commands: Any) -> None:
    explore = _command(
        commands,
        "explore",
        "search fault plans for one that makes a check fail, and shrink it to the smallest",
    )
    explore.add_argument("scenario", metavar="NAME|FILE.py:NAME", help=_SCENARIO_HELP)
    explore.add_argument("--seed", default="1", help=_SEED_HELP)
    explore.add_argument("--mutant", metavar="M", help="explore a deliberately broken store")
    explore.add_argument(
        "--budget",
        metavar="N|Ts",
        help="how much to search: N worlds, or T seconds of CPU (--budget 60s; of wall-clock "
        "time with --jobs or --scheduler); by default "
        f"{DEFAULT_WORLDS} worlds or {DEFAULT_SECONDS:g} s, whichever ends first; "
        "Ctrl-C stops it and says what it searched",
    )
    explore.add_argument(
        "--examples",
        type=whole_number,
        help=f"most worlds to run, 1 to {MAX_WORLDS:,} (the same as --budget N)",
    )
    explore.add_argument(
        "--plan",
        metavar="PLAN",
        help="shrink this failing plan instead of searching (a sweep prints it for each failing "
        "seed): FaultPlan((DelayLeg(...), ...))",
    )
    explore.add_argument(
        "--inputs",
        metavar="JSON",
        help="with --plan: the inputs the failing world ran on (explore printed them with the "
        "plan); without, the search starts from the scenario's simplest inputs",
    )
    explore.add_argument(
        "--max-faults", type=whole_number, default=4, help="most faults in one plan (default 4)"
    )
    explore.add_argument(
        "--no-remember",
        action="store_true",
        help="neither try first nor keep a failing plan in .sims/findings (by default the plan a "
        "search finds is kept there and tried first when the same world is explored again; "
        "python -m sims findings lists and clears them)",
    )
    where = explore.add_mutually_exclusive_group()
    where.add_argument(
        "--jobs",
        type=whole_number,
        default=1,
        help=f"worker processes that run the search's worlds, 1 to {MAX_JOBS} (default 1: this "
        "process); the answer for a world budget is the same for any number",
    )
    where.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="run the search's worlds as tasks on this Dask distributed cluster (needs the dask "
        "extra)",
    )


_ADDERS: list[Callable[[Any], None]] = [
    _add_list,
    _add_run,
    _add_sweep,
    _add_replay,
    _add_explore,
    add_conformance_command,
    add_findings_command,
    add_check_command,
    add_before_deploy_command,
]


def glue_seeds(argv: Sequence[str]) -> list[str]:
    """``--seeds -5..2`` as ``--seeds=-5..2``: argparse takes a value that starts with ``-`` and is
    not a plain number for an option, and would answer only "expected one argument"; glued to its
    option, the value reaches the seed check, which names it and says what a seed is."""
    glued: list[str] = []
    for token in argv:
        if (
            glued
            and glued[-1] in ("--seed", "--seeds")
            and token[:1] == "-"
            and token[1:2].isdigit()
        ):
            glued[-1] = f"{glued[-1]}={token}"
        else:
            glued.append(token)
    return glued


# -- checks that run before a world does ----------------------------------------------------------


def checked_mutant(name: str | None) -> str | None:
    if name is not None and name not in MUTANTS:
        raise UsageError(f"no mutant {name!r}; the mutants are: {', '.join(MUTANTS)}")
    return name


def checked_plan(text: str | None) -> FaultPlan | None:
    if text is None:
        return None
    if not text.strip():
        raise UsageError(
            "the plan is empty; write FaultPlan((...,)) with at least one fault, or leave out "
            "--plan to run the scenario's own"
        )
    try:
        return plan_from_text(text)
    except TypeError as error:
        # A fault built with a missing or unknown keyword.
        raise UsageError(f"plan {text!r} does not build: {error}") from None


#: What --inputs is, said in run's help.
_INPUTS_HELP = (
    "the scenario's inputs, as JSON (what explore prints with a finding); by default the "
    "simplest its inputs strategy draws"
)


def checked_inputs(text: str | None) -> Any:
    """The inputs ``--inputs`` gives (``SIMPLEST`` when it is left out), refused in a line that
    says what to write when they are not JSON."""
    if text is None:
        return SIMPLEST
    try:
        return inputs_from_text(text)
    except ValueError as error:
        raise UsageError(str(error)) from None


def checked_output(path: Path | None, option: str) -> Path | None:
    """An output file's folder must exist before a world runs for minutes."""
    if path is None:
        return None
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder; name a file to write")
    folder = path.parent
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: the folder {folder} does not exist; create it first")
    if not path.exists():
        # A folder can exist and still refuse new files (permissions, a read-only or virtual
        # file system): find out now by creating the file, not after the world has run.
        try:
            path.touch()
        except OSError as error:
            raise UsageError(f"{option} {path}: cannot write there ({error.strerror})") from None
        path.unlink()
    return path


def checked_positive(value: int, option: str) -> int:
    if value < 1:
        raise UsageError(f"{option} {value} must be 1 or more")
    return value


#: The most worker processes ``--jobs`` starts (each holds a pipe of this process's; past a few
#: hundred, a machine runs out of them, or of memory, before it runs a world).
MAX_JOBS = 256

#: The most worlds a search runs: the world budget of a time budget, more than any search runs.
MAX_WORLDS = 1_000_000_000
_UNCOUNTED = MAX_WORLDS


def checked_jobs(value: int) -> int:
    """``--jobs N``: from 1 to :data:`MAX_JOBS`."""
    if checked_positive(value, "--jobs") > MAX_JOBS:
        raise UsageError(
            f"--jobs {_shown(value)} is more worker processes than this starts; give 1 to "
            f"{MAX_JOBS}, or run on a Dask cluster with --scheduler"
        )
    return value


def _checked_worlds(value: int, option: str) -> int:
    if checked_positive(value, option) > MAX_WORLDS:
        raise UsageError(
            f"{option} {_shown(value)} is more worlds than a search runs; give 1 to "
            f"{MAX_WORLDS:,}, or a time budget (--budget 60s)"
        )
    return value


def _shown(value: int) -> str:
    """A count as a refusal names it: its digits, or their number when there are too many."""
    return str(value) if value < 10**30 else f"(a number of {len(str(value)):,} digits)"


def checked_budget(text: str | None, examples: int | None) -> tuple[int, float | None]:
    """``--budget``: (worlds, seconds of CPU or None) from ``N`` or ``Ts``; ``--examples N`` is
    ``--budget N``; neither gives the default, a world count and a time, whichever ends first."""
    if text is not None and examples is not None:
        raise UsageError("give --budget or --examples, not both")
    if examples is not None:
        return _checked_worlds(examples, "--examples"), None
    if text is None:
        return DEFAULT_WORLDS, DEFAULT_SECONDS
    spelled = text.strip()
    if spelled.endswith("s"):
        return _UNCOUNTED, _checked_seconds(text, spelled[:-1])
    if spelled.isdigit() and len(spelled.lstrip("0")) > len(str(MAX_WORLDS)):
        # Refused by its length: past some 4,300 digits int() refuses it in words of its own.
        raise UsageError(
            f"--budget {_spelled(text)} is more worlds than a search runs; give 1 to "
            f"{MAX_WORLDS:,}, or a time budget (--budget 60s)"
        )
    try:
        worlds = int(spelled)
    except ValueError:
        raise UsageError(_BUDGET_WORDS.format(_spelled(text))) from None
    return _checked_worlds(worlds, "--budget"), None


_BUDGET_WORDS = "--budget {}: give a number of worlds (300) or of seconds (60s)"


def _checked_seconds(text: str, number: str) -> float:
    try:
        seconds = float(number)
    except ValueError:
        raise UsageError(_BUDGET_WORDS.format(_spelled(text))) from None
    if seconds == float("inf"):
        raise UsageError(
            f"--budget {_spelled(text)} is more seconds than a number holds (it reads as "
            f"infinite); give a finite number of seconds > 0 (60s), or of worlds from 1 to "
            f"{MAX_WORLDS:,} (300)"
        )
    if not seconds > 0:  # as NaN is not
        raise UsageError(_BUDGET_WORDS.format(_spelled(text)))
    return seconds


def _spelled(text: str) -> str:
    """An option's text as a refusal quotes it: cut, with its length, when long."""
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}… ({len(text):,} characters)"


#: How explore says that Ctrl-C stops it (before it begins, and in its help).
CTRL_C_WORDS = "Ctrl-C stops it and says what it searched"


def budget_words(worlds: int, seconds: float | None, *, cpu: bool = True) -> str:
    """A budget from :func:`checked_budget` in words: "up to 300 worlds or 30 s of CPU, whichever
    ends first"."""
    if seconds is None:
        return f"up to {worlds} worlds"
    time = f"{seconds:g} s of {'CPU' if cpu else 'wall-clock time'}"
    if worlds >= _UNCOUNTED:
        return f"for up to {time}"
    return f"up to {worlds} worlds or {time}, whichever ends first"
