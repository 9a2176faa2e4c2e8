"""``python -m sims``: list scenarios, run one, sweep one over seeds, replay a trace, explore plans.

Every subcommand takes a built-in scenario by name (``late-begin``) or a user's scenario as
``FILE.py:NAME``. Exit codes: 0 clean, 1 a finding (a violation, a mismatch, a differing replay),
2 a usage error, told in one line on stderr — never a traceback for a user's mistake.

Each subcommand is an ``_add_*`` function that declares its arguments and a ``_*`` function that
runs it: the ``_add_*`` functions are in ``_arguments.py`` (``_ADDERS``), the commands here
(``_COMMANDS``); a new subcommand adds one of each.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from .._numbers import plural
from .._seeds import MAX_SEED, parse_seed, parse_seeds
from .._trace import BadTraceLine, Trace, calls_by_drive
from ..faults._check import unfired_line
from ..faults._plan import FaultPlan, plan_from_text
from ..mutants._catalog import MUTANTS
from ..oracle._checks import check_trace
from ..runners._failures import with_failures
from ..runners._lifeline import workers_end_on_sigterm, workers_end_with_this_process
from ..runners._outcome import STORE, Simulation, python_replay_call
from ..runners._run import ON_FILES_ENV
from ..runners._simulate import simulate, with_user_checks
from ..runners._sweep import progress_bar, sweep
from ..runners._words import one_line, python_name, shell_line, shell_word
from ..scenarios._registry import (
    SCENARIOS,
    SIMPLEST,
    Scenario,
    ScenarioRef,
    display_path,
    file_sha256,
    find_scenario,
    load_file,
)
from ..search._explore import SearchReport, search
from ..search._findings import findings_folder
from ..timeline._render import render_terminal, write_timeline
from ..timeline._story import story_lines
from ._arguments import (
    CTRL_C_WORDS,
    UsageError,
    budget_words,
    build_parser,
    checked_budget,
    checked_inputs,
    checked_jobs,
    checked_mutant,
    checked_output,
    checked_plan,
    checked_positive,
    glue_seeds,
)
from ._before_deploy import before_deploy_command
from ._check import check_command
from ._conformance import conformance_command
from ._findings import findings_command
from ._interrupt import stop_on_ctrl_c
from ._output import writing


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments, unknown = parser.parse_known_args(glue_seeds(sys.argv[1:] if argv is None else argv))
    if unknown:
        arguments.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        code = _COMMANDS[arguments.command](arguments)
        sys.stdout.flush()  # inside the try: a closed pipe is noticed here, not at exit
        return code
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as command-line tools do, and keep
        # Python from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except ValueError as error:
        # ValueError is how the simulator refuses input (a scenario, a plan, a seed range, a
        # file); its message is written to be read as it is.
        print(f"error: {error}", file=sys.stderr)
        return 2


# -- list -----------------------------------------------------------------------------------------


def _list(arguments: argparse.Namespace) -> int:
    if arguments.file is None:
        scenarios: list[Scenario] = list(SCENARIOS.values())
    else:
        scenarios = list(load_file(arguments.file).values())
        if not scenarios:
            raise UsageError(
                f"{display_path(str(arguments.file))} defines no scenario; decorate a drive "
                "function with @sims.scenario(NAME)"
            )
    width = max(len(s.name) for s in scenarios)
    # One line per scenario, the name first, for scripts; on a terminal the summary wraps under
    # itself so a person reads it without the line running off the screen.
    columns = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 0
    for found in scenarios:
        line = f"{found.name:<{width}}  {found.summary or '(no docstring)'}"
        if columns:
            line = "\n".join(
                textwrap.wrap(line, width=max(40, columns - 1), subsequent_indent=" " * (width + 2))
            )
        print(line)
    return 0


# -- run ------------------------------------------------------------------------------------------


def _run(arguments: argparse.Namespace) -> int:
    scenario = find_scenario(arguments.scenario)
    plan = checked_plan(arguments.plan)
    inputs = checked_inputs(arguments.inputs)
    mutant = checked_mutant(arguments.mutant)
    seed = parse_seed(arguments.seed)
    _on_files(arguments)
    if arguments.story_lines < 0:
        raise UsageError(f"--story-lines {arguments.story_lines} must be 0 or more")
    trace_path = checked_output(arguments.trace, "--trace")
    timeline_path = checked_output(arguments.timeline, "--timeline")
    _traced(scenario, seed, ("--trace", trace_path), ("--timeline", timeline_path))
    progress = _RunProgress(sys.stderr) if sys.stderr.isatty() else None
    simulation = simulate(
        arguments.scenario,  # as typed, which the trace records (see ScenarioRef.recorded)
        seed,
        plan=plan,
        mutant=mutant,
        observe=progress.observe if progress is not None else None,
        inputs=inputs,
    )
    if progress is not None:
        progress.done()
    trace = simulation.outcome.trace
    if trace_path:
        with writing(trace_path, "--trace"):
            trace.write(trace_path)
    if timeline_path:
        _write_timeline(simulation, scenario, timeline_path, plan_replaced=plan is not None)
    _tell(simulation, scenario, story_limit=arguments.story_lines, whole=arguments.whole_values)
    if trace_path:
        print(
            f"trace: {trace_path} ({plural(len(trace.events), 'event')}, sha256 {trace.digest()})"
        )
    if timeline_path:
        print(f"timeline: {timeline_path}")
    return 0 if simulation.ok else 1


def _write_timeline(
    simulation: Simulation, scenario: Scenario, path: Path, *, plan_replaced: bool
) -> None:
    with writing(path, "--timeline"):
        write_timeline(
            simulation.outcome.trace,
            path,
            title=_title(simulation),
            report=simulation.report,
            # A replaced plan is not held to what the scenario documents, only to its faults
            # firing (when the scenario says they must), which is then its one mismatch.
            mismatches=(simulation.mismatches or None) if plan_replaced else simulation.mismatches,
            replay=simulation.replay_command,
            plan=simulation.outcome.setup.plan,
            plan_replaced=plan_replaced,
            mutant=simulation.mutant,
            summary=scenario.summary,
        )


def _traced(scenario: Scenario, seed: int, *outputs: tuple[str, Path | None]) -> None:
    """Refuse an output drawn from the trace when the world keeps none: it would be an empty file
    (a trace replay cannot read, a page with nothing on it) written as if it were the world's."""
    # As simulate decides: the setup says, and a scenario's own checks read the trace, so keep it.
    if scenario.checks or scenario.setup(seed).trace:
        return
    for option, path in outputs:
        if path is not None:
            what = (
                "an empty file that replay cannot use" if option == "--trace" else "an empty page"
            )
            raise UsageError(
                f"{scenario.ref} keeps no trace (its setup says WorldSetup(trace=False); its "
                f"checks run live as it goes), so {option} {path} would be {what}; leave out "
                f"{option}: run prints the verdict and the command that runs this world again"
            )


class _RunProgress:
    """On a terminal, one line that says how far a long world has got, in virtual time."""

    EVERY = 20_000

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.events = 0
        self.shown = False

    def observe(self, event: dict[str, Any]) -> None:
        self.events += 1
        if self.events % self.EVERY == 0:
            self.stream.write(
                f"\r  running: {event['t'] / 1000:,.1f} s of virtual time, {self.events:,} events"
            )
            self.stream.flush()
            self.shown = True

    def done(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def _title(simulation: Simulation) -> str:
    mutant = f", mutant {simulation.mutant}" if simulation.mutant else ""
    return f"{simulation.scenario} — seed {simulation.seed}{mutant}"


def _tell(
    simulation: Simulation, scenario: Scenario, *, story_limit: int, whole: bool = False
) -> None:
    print(_title(simulation))
    if scenario.summary:
        print(
            textwrap.fill(scenario.summary, width=100, initial_indent="  ", subsequent_indent="  ")
        )
    plan = simulation.outcome.setup.plan
    faults = repr(plan) if len(plan) else "none"
    if simulation.plan is not None:
        print(f"  faults (--plan, replacing the scenario's own plan): {faults}")
    else:
        print(f"  faults: {faults}")
    if simulation.inputs is not None:
        print(f"  inputs: {simulation.inputs}")
    if simulation.mutant:
        print(f"  store: mutant {simulation.mutant} (a guard of the spec removed on purpose)")
    print("\nstory:")
    if not simulation.outcome.trace.enabled:
        print(
            "  this world keeps no trace (it is too big to hold), so it has no story and no "
            "timeline; its checks ran live as it went"
        )
    for line in story_lines(simulation.outcome.trace.events, limit=story_limit, whole_values=whole):
        print(line)
    if simulation.outcome.trace.events:
        print("\ntimeline:")
        print(render_terminal(simulation.outcome.trace))
    print("\nruns at the end:")
    for scope, runs in simulation.outcome.runs.items():
        for run in runs:
            print(
                f"  {scope} run {run.id}: {run.status}, cursor {run.cursor!r}, "
                f"counters {run.counters}, attempts {run.attempts}, "
                f"last error {run.last_error!r}"
            )
    print("\nchecks:")
    report = simulation.report
    for line in report.check_lines():
        print(textwrap.fill(line, width=100, subsequent_indent="    ", break_on_hyphens=False))
    if report.findings:
        print("\nfindings:")
    for finding in report.findings:
        print(f"  {finding.line()}")
    print("\nverdict:")
    for mismatch in simulation.mismatches:
        print(f"  NOT AS DOCUMENTED: {mismatch}")
    unfired = simulation.outcome.unfired
    made = calls_by_drive(simulation.outcome.trace)
    told = unfired_line(unfired, given=simulation.plan is not None, made=made)
    if unfired and told not in simulation.mismatches:
        print(f"  {told}")
    if simulation.plan is not None:
        fired = ", and that its faults fired" if scenario.faults_must_fire else ""
        print(
            "  the scenario's own plan was replaced by --plan, so what it documents was not "
            f"asserted; only the checks were{fired}"
        )
    if simulation.ok:
        held = "no invariant violated"
        print(f"  {'as documented; ' if simulation.plan is None else ''}{held}")
    else:
        violations = plural(simulation.report.violation_count, "violation")
        if simulation.plan is None:
            mismatches = plural(len(simulation.mismatches), "mismatch", "mismatches")
            print(f"  {violations}, {mismatches} with what the scenario documents")
        elif simulation.mismatches:
            # Not asserted against the scenario's documents (see above): what failed it is
            # that the given plan's faults did not all fire.
            print(f"  {violations}, and faults of the given plan that never fired")
        else:
            print(f"  {violations}")
    # The one sentence every verdict shares (a sweep, a test's failure, the page): the spec's
    # findings apart from the user's own check's.
    print(f"  checks: {report.verdict()}")
    print(f"  replay with: {simulation.replay_command}")


# -- sweep ----------------------------------------------------------------------------------------


def _on_files(arguments: argparse.Namespace) -> None:
    """``--on-files``: every world of this process and of its workers runs on SQLite files, in a
    folder of its own (``WorldSetup(on_files=True)``); its trace is the one in memory."""
    if not arguments.on_files:
        return
    if getattr(arguments, "scheduler", None):
        raise UsageError(
            "--on-files runs the worlds of this machine's processes; the Dask workers of "
            "--scheduler do not see it: sweep with --jobs, or set WorldSetup(on_files=True)"
        )
    os.environ[ON_FILES_ENV] = "1"


def _sweep(arguments: argparse.Namespace) -> int:
    scenario = find_scenario(arguments.scenario)
    seeds = parse_seeds(arguments.seeds)
    mutant = checked_mutant(arguments.mutant)
    jobs = checked_jobs(arguments.jobs)
    if arguments.show < 0:
        raise UsageError(f"--show {arguments.show} must be 0 or more (how many seeds to list)")
    plan = checked_plan(arguments.plan)
    _on_files(arguments)
    # The first Ctrl-C takes no more seeds, and the report of those done is printed (exit 130);
    # a second stops the sweep at once, as explore's does.
    with stop_on_ctrl_c() as stop, workers_end_on_sigterm():  # its workers end with it
        try:
            report = sweep(
                scenario.ref,
                seeds,
                jobs=jobs,
                scheduler=arguments.scheduler,
                mutant=mutant,
                progress=progress_bar(sys.stderr) if sys.stderr.isatty() else None,
                plan=plan,
                stop=stop,
            )
        except KeyboardInterrupt:
            print(
                "\nsweep: stopped by a second Ctrl-C, before it could say what it swept",
                file=sys.stderr,
                flush=True,
            )
            return 130
    if report.interrupted_of is not None and sys.stderr.isatty():
        print(file=sys.stderr)  # the progress bar's line, left unended
    # None: the report's own default (shown for a built-in world, hidden for a user's).
    spec_probes = True if arguments.spec_probes else None
    for line in report.lines(show=arguments.show, spec_probes=spec_probes):
        print(line)
    if stop.is_set():
        return 130  # as a shell says of a command Ctrl-C stopped
    return 0 if not report.failing else 1


# -- replay ---------------------------------------------------------------------------------------


def _read_trace(path: Path) -> Trace:
    if path.is_dir():
        raise UsageError(f"{path} is a folder; name a trace file written by run --trace")
    if not path.is_file():
        raise UsageError(f"no file {path}; name a trace file written by run --trace")
    try:
        recorded = Trace.read(path)
    except BadTraceLine as error:
        raise UsageError(f"{path} is not a trace: {error}; write traces with run --trace") from None
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError):
        # RecursionError: a line nesting thousands of lists exhausts the JSON decoder's stack.
        raise UsageError(
            f"{path} is not a trace (JSON lines){_first_bad_line(path)}; write traces with "
            "run --trace"
        ) from None
    begin = recorded.events[0] if recorded.events else None
    if begin is None or begin.get("ev") != "world.begin" or "scenario" not in begin:
        raise UsageError(
            f"{path} does not start with a world.begin event; write traces with run --trace"
        )
    _check_recorded_seed(path, begin)
    return recorded


def _check_recorded_seed(path: Path, begin: dict[str, Any]) -> None:
    """A trace's seed is what run --trace wrote, a whole number >= 0: a tampered one (null, a
    str, 2.5) is refused here, in one line, before anything reads it as a number."""
    seed = begin.get("seed")
    if type(seed) is not int or seed < 0:
        raise UsageError(
            f"{path} records its seed as {seed!r}, which is not a seed (a whole number >= 0); "
            "write traces with run --trace"
        )
    if seed > MAX_SEED:
        # A trace's JSON holds ints of up to some 4,300 digits, which read better by their length.
        shown = seed if seed < 10**30 else f"an int of {len(str(seed))} digits"
        raise UsageError(
            f"{path} records its seed as {shown}, past the largest seed (seeds are whole numbers "
            f"from 0 to {MAX_SEED}, 2**64 - 1); write traces with run --trace"
        )


def _first_bad_line(path: Path) -> str:
    """Where a file of JSON lines stops being one, when most of it is: a trace cut off by a full
    disk or a killed writer reads well up to its last line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        return ""
    for number, line in enumerate(lines, 1):
        try:
            if line.strip():
                json.loads(line)
        except (ValueError, RecursionError):
            if number == 1:
                return ""
            if number == len(lines):
                return f": its last line, line {number}, is cut off"
            return f": line {number} is not JSON"
    return ""


def _replay(arguments: argparse.Namespace) -> int:
    path: Path = arguments.file
    recorded = _read_trace(path)
    begin = recorded.events[0]
    plan = _recorded_plan(path, begin)
    ref = _trusted_world(path, begin, arguments.world)
    # Found before any advice names it: a scenario the simulator has, not any text of the trace.
    scenario = find_scenario(ref)
    mutant = _recorded_mutant(path, begin, ref, plan)
    # Named as the trace names it, so that the new trace's world.begin spells it the same.
    # The inputs as the trace recorded them (JSON values already; a trace without runs on the
    # scenario's simplest, as it was written before inputs were recorded).
    inputs = begin.get("inputs", SIMPLEST)
    simulation = simulate(ref, int(begin["seed"]), plan=plan, mutant=mutant, inputs=inputs)
    _tell(simulation, scenario, story_limit=200)
    # The file's own bytes, not its events written out again: a trace whose line ends, spacing
    # or last newline were changed holds the same events in different bytes.
    replayed = simulation.outcome.trace.to_bytes()
    original = path.read_bytes()
    same = replayed == original
    print(f"\nreplay: the new trace is {'byte-identical to' if same else 'DIFFERENT from'} {path}")
    if not same:
        for line in _first_difference(original, replayed):
            print(f"replay: {line}")
    # The scenario's own checks too: the re-run's verdict above includes them.
    rechecked = with_failures(
        with_user_checks(check_trace(recorded), scenario, recorded),
        recorded,
        expected=scenario.failures_expected,
    )
    print(
        "replay: the recorded trace, checked again: "
        f"{plural(rechecked.violation_count, 'violation')}"
    )
    return 0 if same and simulation.ok else 1


def _recorded_plan(path: Path, begin: dict[str, Any]) -> FaultPlan | None:
    """The plan given in place of the scenario's own (None: its own). The plan's text is checked
    whether or not it was given: run --trace always writes text, so anything else is a tampered
    trace, refused rather than replayed and reported as a world that came out differently."""
    text = begin.get("plan")
    if ("plan" in begin or begin.get("plan_overridden")) and not isinstance(text, str):
        raise UsageError(
            f"{path} records its plan as {text!r}, which is not a plan's text; write traces with "
            "run --trace"
        )
    return plan_from_text(text) if begin.get("plan_overridden") and text is not None else None


def _recorded_mutant(
    path: Path, begin: dict[str, Any], ref: ScenarioRef, plan: FaultPlan | None
) -> str | None:
    """The mutant the trace's world ran on (None: the real store). A store of the caller's own
    is refused with the Python call that replays it: the trace's text is data, so the call names
    the store only when the trace names it by a plain Python name, and the plan is written as the
    plan it was read as, never as the trace spelled it."""
    mutant = begin.get("mutant")
    if mutant is None or (isinstance(mutant, str) and mutant in MUTANTS):
        return mutant
    seed, planned = int(begin["seed"]), None if plan is None else repr(plan)
    told = f"{path} is a world that ran on a store of its caller's own"
    compare = "and compare its trace's bytes with the file's"
    if isinstance(mutant, str) and python_name(mutant):
        call = python_replay_call(ref.recorded, seed, mutant, plan=planned)
        raise UsageError(
            f"{told}, {mutant}, which no command line can name; replay it in Python, {call}, "
            f"{compare}"
        )
    call = python_replay_call(ref.recorded, seed, STORE, plan=planned)
    raise UsageError(
        f"{told}, which it names {mutant!r}, not a plain Python name, so no command or call "
        f"here names it; replay it in Python, {call} with {STORE} the store it ran on, {compare}"
    )


def _as_data(text: str) -> str:
    """Text of a trace in a sentence: as one shell word (so it reads as the word to type), or as
    a Python literal when no one-line command can show it."""
    return shell_word(text) if one_line(text) else repr(text)


def _world_option(path: Path, file: str) -> str:
    """``replay PATH --world FILE`` as a command to type, or in words when no one-line command
    can show the file's name."""
    if one_line(str(path)) and one_line(file):
        return f"replay {shell_line([str(path), '--world', file])}"
    return "replay the trace with --world naming that file"


def _recorded_hash(path: Path, begin: dict[str, Any]) -> str | None:
    recorded = begin.get("world_sha256")
    if recorded is not None and not (
        isinstance(recorded, str) and re.fullmatch(r"[0-9a-f]{64}", recorded)
    ):
        raise UsageError(
            f"{path} records its world file's sha256 as {recorded!r}, which is not one (64 hex "
            "digits); write traces with run --trace"
        )
    return recorded


def _trusted_world(path: Path, begin: dict[str, Any], world: Path | None) -> ScenarioRef:
    """The scenario to re-run for the trace at ``path``, refusing to run a file of Python the
    user did not name. A trace is data (attached to bug reports, kept by CI): the world file it
    names runs only when ``--world`` names that very file, or a file with the content hash the
    trace recorded. A built-in scenario is the simulator's own code and needs no ``--world``."""
    spelled = begin["scenario"]
    try:
        named = ScenarioRef.parse(spelled) if isinstance(spelled, str) else None
    except ValueError:
        named = None
    if named is None:
        raise UsageError(
            f"{path} names its scenario {spelled!r}, which is neither NAME nor FILE.py:NAME; "
            "write traces with run --trace"
        )
    if named.path is None:
        named.load()  # a built-in scenario, so its name is one the simulator gave it
        if world is not None:
            raise UsageError(
                f"{path} is a world of the built-in scenario {named.name}, which runs no file of "
                "yours; drop --world (it names the world file of a trace of your own world)"
            )
        return named
    # As the trace spelled it: relative to the folder the trace was written from, or absolute.
    file = spelled.rpartition(":")[0]
    recorded_hash = _recorded_hash(path, begin)
    if world is None:
        raise UsageError(
            f"{path} names a world file of its own, {_as_data(file)}, and replay runs no Python "
            f"a trace names unless you name it: read that file, then {_world_option(path, file)}"
        )
    if world.is_dir():
        raise UsageError(f"--world {world} is a folder; name the world file, a .py file")
    if not world.is_file():
        raise UsageError(
            f"no file {world} (--world); name the world file the trace was written from"
        )
    given_hash = file_sha256(world)
    same_file = Path(file).resolve() == world.resolve()
    if recorded_hash is not None and given_hash != recorded_hash and not same_file:
        raise UsageError(
            f"--world {world} is not the world file {path} was written from: its content's "
            f"sha256 is {given_hash}, the trace records {recorded_hash}; name the file the trace "
            f"names, {_as_data(file)}, or a copy of it as it was"
        )
    if recorded_hash is None and not same_file:
        version = begin.get("format", 1)
        raise UsageError(
            f"{path} records no hash of its world file (a trace of format "
            f"{version if type(version) is int else repr(version)}), so only the file it names "
            f"can be replayed: --world {_as_data(file)}"
        )
    if recorded_hash is not None and given_hash != recorded_hash:
        print(
            f"replay: warning: {world} has changed since the trace was written (its sha256 is "
            f"{given_hash}, the trace records {recorded_hash}); replaying it as it is now",
            file=sys.stderr,
        )
    # The file the user named, recorded as the trace spelled it so that the bytes can match.
    return ScenarioRef(name=named.name, path=str(world.resolve()), spelled=spelled)


def _first_difference(recorded: bytes, replayed: bytes) -> list[str]:
    """Where two traces' bytes part, as a line number and both lines (their reprs when the two
    would print alike: a carriage return, a trailing space)."""
    old_lines = recorded.split(b"\n")
    new_lines = replayed.split(b"\n")
    for number, (old, new) in enumerate(zip(old_lines, new_lines, strict=False), start=1):
        if old != new:
            old_text, new_text = _shown(old), _shown(new)
            if (
                old_text.strip() == new_text.strip()
                or not old_text.isprintable()
                or not new_text.isprintable()
            ):
                # Alike in print, or holding what does not print (a trace's text is data).
                old_text, new_text = repr(old_text), repr(new_text)
            return [
                f"first difference at line {number}",
                f"  recorded: {old_text}",
                f"  replayed: {new_text}",
            ]
    if recorded + b"\n" == replayed:
        return ["the recorded trace lacks the newline that ends its last line"]
    number = min(len(old_lines), len(new_lines)) + 1
    longer, which = (
        (old_lines, "recorded") if len(old_lines) > len(new_lines) else (new_lines, "replayed")
    )
    rest = _shown(longer[number - 1])
    return [
        f"first difference at line {number}: only the {which} trace goes on",
        f"  {which}: {rest if rest.isprintable() else repr(rest)}",
    ]


def _shown(line: bytes) -> str:
    return line.decode("utf-8", errors="replace")


# -- explore --------------------------------------------------------------------------------------


def _explore(arguments: argparse.Namespace) -> int:
    scenario = find_scenario(arguments.scenario)
    mutant = checked_mutant(arguments.mutant)
    seed = parse_seed(arguments.seed)
    worlds, seconds = checked_budget(arguments.budget, arguments.examples)
    max_faults = checked_positive(arguments.max_faults, "--max-faults")
    start = checked_plan(arguments.plan)
    inputs = checked_inputs(arguments.inputs)
    jobs = checked_jobs(arguments.jobs)
    here = jobs == 1 and arguments.scheduler is None
    progress = _explore_progress(f"searching {budget_words(worlds, seconds, cpu=here)}")
    with stop_on_ctrl_c() as stop, workers_end_with_this_process(), workers_end_on_sigterm():
        try:
            report = search(
                scenario.ref,
                seed=seed,
                mutant=mutant,
                max_worlds=worlds,
                max_seconds=seconds,
                max_faults=max_faults,
                start=start,
                inputs=inputs,
                jobs=jobs,
                scheduler=arguments.scheduler,
                stop=stop,
                progress=progress,
                findings=None if arguments.no_remember else findings_folder(),
            )
            _print_explored(report)
        except KeyboardInterrupt:
            _tell_explore("stopped by a second Ctrl-C, before it could say what it searched")
            return 130
    if stop.is_set():
        return 130  # as a shell says of a command Ctrl-C stopped
    return 1 if report.failed else 0


def _print_explored(report: SearchReport) -> None:
    for line in report.lines():
        print(line)
    found = report.found
    if found is not None and report.nondeterminism is None:
        print("\nas a command:")
        print(f"  {found.command()}")
        print("\nas code:")
        print(textwrap.indent(found.code(), "  "))


def _tell_explore(line: str) -> None:
    print(f"explore: {line}", file=sys.stderr, flush=True)


def _explore_progress(budget: str) -> Callable[[str], None]:
    """What explore is doing, on stderr, as it begins each stage (a long search is never silent),
    after its budget and how to stop it, once the search has begun (a usage error is one line)."""
    begun = False

    def tell(line: str) -> None:
        nonlocal begun
        if not begun:
            begun = True
            _tell_explore(f"{budget}; {CTRL_C_WORDS}")
        _tell_explore(line)

    return tell


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": _list,
    "run": _run,
    "sweep": _sweep,
    "replay": _replay,
    "explore": _explore,
    "conformance": conformance_command,
    "findings": findings_command,
    "check": check_command,
    "before-deploy": before_deploy_command,
}
