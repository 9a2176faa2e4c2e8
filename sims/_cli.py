"""``python -m sims``: list the scenarios, run one, sweep one over seeds, replay a trace."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ._checks import check_trace
from ._faults import plan_from_text
from ._mutants import MUTANTS
from ._outcome import Simulation
from ._scenarios import SCENARIOS
from ._simulate import simulate
from ._story import story_lines
from ._sweep import parse_seeds, progress_bar, sweep
from ._timeline import render_terminal, write_timeline
from ._trace import Trace


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sims",
        description="Deterministic simulations of the job-run system: seeded worlds, faults, "
        "traces, invariant checks and timelines.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("list", help="list the scenarios")

    run = commands.add_parser("run", help="run one scenario with one seed and tell its story")
    run.add_argument("name", help="a scenario name (see list)")
    run.add_argument("--seed", type=int, default=1, help="the world's seed (default 1)")
    run.add_argument("--trace", type=Path, help="write the trace here, as JSON lines")
    run.add_argument("--timeline", type=Path, help="write the timeline here, as HTML")
    run.add_argument("--plan", help="a FaultPlan(...) to use instead of the scenario's own")
    run.add_argument("--mutant", choices=sorted(MUTANTS), help="run on a deliberately broken store")
    run.add_argument("--story-lines", type=int, default=200, help="most story lines to print")

    sweep_ = commands.add_parser("sweep", help="run one scenario over a range of seeds")
    sweep_.add_argument("name", help="a scenario name (see list)")
    sweep_.add_argument("--seeds", required=True, help="A..B (both included), or N")
    where = sweep_.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    where.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="run the seeds as tasks on this Dask distributed cluster (needs the dask extra)",
    )
    sweep_.add_argument("--mutant", choices=sorted(MUTANTS), help="sweep a broken store")

    replay = commands.add_parser(
        "replay", help="re-run the world a trace file records, and check it is the same"
    )
    replay.add_argument("file", type=Path, help="a trace written by run --trace")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    try:
        if arguments.command == "list":
            return _list()
        if arguments.command == "run":
            return _run(arguments)
        if arguments.command == "sweep":
            return _sweep(arguments)
        return _replay(arguments.file)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _list() -> int:
    width = max(len(name) for name in SCENARIOS)
    for scenario in SCENARIOS.values():
        print(f"{scenario.name:<{width}}  {scenario.summary}")
    return 0


def _run(arguments: argparse.Namespace) -> int:
    plan = plan_from_text(arguments.plan) if arguments.plan else None
    database = MUTANTS[arguments.mutant] if arguments.mutant else None
    simulation = simulate(arguments.name, arguments.seed, plan=plan, database=database)
    trace = simulation.outcome.trace
    if arguments.trace:
        trace.write(arguments.trace)
    if arguments.timeline:
        write_timeline(trace, arguments.timeline, title=_title(simulation))
    _tell(simulation, story_limit=arguments.story_lines)
    if arguments.trace:
        print(f"trace: {arguments.trace} ({len(trace.events)} events, sha256 {trace.digest()})")
    if arguments.timeline:
        print(f"timeline: {arguments.timeline}")
    return 0 if simulation.ok else 1


def _title(simulation: Simulation) -> str:
    return f"{simulation.scenario} — seed {simulation.seed}"


def _tell(simulation: Simulation, *, story_limit: int) -> None:
    scenario = SCENARIOS[simulation.scenario]
    print(f"{_title(simulation)}")
    print(f"  {scenario.summary}")
    plan = simulation.outcome.setup.plan
    print(f"  faults: {plan!r}" if len(plan) else "  faults: none")
    print("\nstory:")
    for line in story_lines(simulation.outcome.trace.events, limit=story_limit):
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
    findings = simulation.report.findings
    if not findings:
        print("  every invariant held; nothing overlapped")
    for finding in findings:
        print(f"  {finding.line()}")
    print("\nverdict:")
    if simulation.mismatches:
        for mismatch in simulation.mismatches:
            print(f"  NOT AS DOCUMENTED: {mismatch}")
    if simulation.ok:
        print("  as documented; no invariant violated")
    else:
        print(f"  replay with: {simulation.replay_command}")


def _sweep(arguments: argparse.Namespace) -> int:
    if arguments.name not in SCENARIOS:
        raise ValueError(
            f"no scenario {arguments.name!r}; the scenarios are: {', '.join(SCENARIOS)}"
        )
    report = sweep(
        arguments.name,
        parse_seeds(arguments.seeds),
        jobs=arguments.jobs,
        scheduler=arguments.scheduler,
        mutant=arguments.mutant,
        progress=progress_bar(),
    )
    for line in report.lines():
        print(line)
    return 0 if not report.failing else 1


def _replay(path: Path) -> int:
    recorded = Trace.read(path)
    begin = next(recorded.of("world.begin"), None)
    if begin is None:
        raise ValueError(f"{path} has no world.begin event; write traces with run --trace")
    plan = plan_from_text(begin["plan"]) if begin.get("plan_overridden") else None
    mutant = begin.get("mutant")
    simulation = simulate(
        begin["scenario"],
        begin["seed"],
        plan=plan,
        database=MUTANTS[mutant] if mutant else None,
    )
    _tell(simulation, story_limit=200)
    same = simulation.outcome.trace.to_bytes() == recorded.to_bytes()
    print(f"\nreplay: the new trace is {'byte-identical to' if same else 'DIFFERENT from'} {path}")
    rechecked = check_trace(recorded)
    print(f"replay: the recorded trace, checked again: {len(rechecked.violations)} violation(s)")
    return 0 if same and simulation.ok else 1
