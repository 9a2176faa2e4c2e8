"""``simulate(scenario, seed)``: one scenario, one seed, checked — what ``run``, ``sweep``,
``explore``, the pytest helper and the tests all call."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from scopehost import DatabaseFactory

from .._numbers import ms
from .._seeds import require_seed
from .._trace import Trace, calls_by_drive
from ..faults._check import PlanError, unfired_line
from ..faults._plan import FaultPlan
from ..mutants._catalog import MUTANTS
from ..oracle._report import CheckReport, Finding
from ..scenarios import _catalog  # noqa: F401  (registers the scenarios)
from ..scenarios._registry import (
    SCENARIOS,
    SIMPLEST,
    Scenario,
    ScenarioRef,
    display_path,
    find_scenario,
    inputs_text,
    loaded_world_sha256,
    returned_findings,
    returned_lines,
    world_inputs,
)
from ._failures import with_failures
from ._outcome import Simulation
from ._run import run_world
from ._watchdog import allowance


def _mutant_name(database: DatabaseFactory | None) -> str | None:
    """``database``'s name in ``MUTANTS``; None for the real store or one of the caller's own."""
    for name, mutant in MUTANTS.items():
        if mutant is database:
            return name
    return None


def _custom_store_name(database: DatabaseFactory | None) -> str | None:
    """The Python name of a store factory of the caller's own; None for none or a mutant."""
    if database is None or _mutant_name(database) is not None:
        return None
    return getattr(database, "__qualname__", None) or repr(database)


def scenario_names() -> list[str]:
    """The built-in scenarios' names."""
    return list(SCENARIOS)


def simulate(
    scenario: str | ScenarioRef,
    seed: int,
    *,
    plan: FaultPlan | None = None,
    mutant: str | None = None,
    database: DatabaseFactory | None = None,
    keep_trace: bool | None = None,
    observe: Callable[[dict[str, Any]], None] | None = None,
    inputs: Any = SIMPLEST,
) -> Simulation:
    """Run ``scenario`` (``NAME``, ``FILE.py:NAME`` or a :class:`ScenarioRef`) with ``seed``.

    ``plan`` replaces the scenario's fault plan (its documented expectation is then not asserted,
    only the invariants and the scenario's own checks). ``mutant`` names a deliberately broken
    store from ``MUTANTS`` (``database`` swaps in any store factory; a world on one of your own
    has no command line, so its ``replay_command`` is the Python call). ``observe`` sees every
    event as it happens, kept or not. ``inputs`` are the scenario's inputs for this world
    (``world.inputs``; by default the simplest its ``inputs`` strategy draws), refused for a
    scenario that takes none."""
    seed = require_seed(seed)
    ref = scenario if isinstance(scenario, ScenarioRef) else ScenarioRef.parse(scenario)
    found = find_scenario(ref)
    if mutant is not None:
        if mutant not in MUTANTS:
            raise ValueError(f"no mutant {mutant!r}; the mutants are: {', '.join(MUTANTS)}")
        if database is not None and database is not MUTANTS[mutant]:
            raise ValueError(f"mutant={mutant!r} and a database were both given; pass one")
        database = MUTANTS[mutant]
    setup = found.setup(seed)
    inputs = world_inputs(found, inputs)
    if found.inputs is not None:
        setup = attrs.evolve(setup, inputs=inputs)
    if plan is not None:
        setup = attrs.evolve(setup, plan=plan)
    if database is not None:
        setup = attrs.evolve(setup, database=database)
    if keep_trace is not None:
        setup = attrs.evolve(setup, trace=keep_trace)
    if found.checks:
        # The user's checks read the trace, so it is kept.
        setup = attrs.evolve(setup, trace=True)
    if observe is not None:
        setup = attrs.evolve(setup, listeners=(*setup.listeners, observe))
    shown = str(ref)
    mutant_name = _mutant_name(database)
    custom_store = _custom_store_name(database)
    meta = {
        "scenario": ref.recorded,
        "plan_overridden": plan is not None,
        # A trace names a custom store too: replaying it is refused by that name, rather than
        # run on another store and reported as a world that came out differently.
        "mutant": mutant_name if custom_store is None else custom_store,
    }
    if found.inputs is not None:
        # Recorded only for a scenario that takes inputs: every other world's trace is as it was.
        meta["inputs"] = inputs
    if ref.path is not None:
        # What replay holds a file to before it runs it: a trace is data, and names a file.
        meta["world_sha256"] = loaded_world_sha256(ref.path)
    with _users_code(found, seed):
        outcome = run_world(seed, setup, found.drive, settles=found.settles, meta=meta)
        # The checks are the user's code too: a loop in one is stopped as a world's would be.
        with allowance(setup.cpu_allowance_s):
            report = with_user_checks(outcome.report, found, outcome.trace)
    report = with_failures(report, outcome.trace, expected=found.failures_expected)
    simulation = Simulation(
        shown,
        seed,
        outcome,
        report,
        mutant=mutant_name,
        plan=repr(plan) if plan is not None else None,
        custom_store=custom_store,
        inputs=None if found.inputs is None else inputs_text(inputs),
    )
    # A replaced plan is not held to the scenario's documented outcome. Its faults are held to
    # firing all the same, by the one rule every entry point (run, sweep, sims_worlds) shares: a
    # plan given to a test or to run names what the world is to test, and a fault of it that
    # never fired is a world that did not test it. Only a scenario that declares
    # faults_must_fire=False (its worlds differ by seed, so a fault may miss) lets one pass.
    mismatches: list[str] = []
    if plan is None:
        # The expect is the user's code too: what it raises, or a return that is not its lines,
        # is told as the world's error, not as a traceback out of the simulator.
        with _users_code(found, seed):
            mismatches = returned_lines("expect", found.expect, found.expect(simulation))
    if found.faults_must_fire and outcome.unfired:
        mismatches.append(
            unfired_line(
                outcome.unfired, given=plan is not None, made=calls_by_drive(outcome.trace)
            )
        )
    return attrs.evolve(simulation, mismatches=tuple(mismatches))


@contextmanager
def _users_code(scenario: Scenario, seed: int) -> Iterator[None]:
    """What a user's scenario raises inside, as a :class:`WorldError`."""
    try:
        yield
    except PlanError:
        # A plan that does not fit its world is the plan's mistake, not a crash of the user's
        # code: said in the one line a built-in scenario's plan gets (docs/fault-plans.md).
        raise
    except Exception as error:
        if scenario.source is None:
            raise  # the simulator's own scenario: a bug of ours, and its traceback is wanted
        raise WorldError(scenario, seed, error) from error
    except BaseException as error:
        # sys.exit() or a KeyboardInterrupt raised by the user's own file is the world's error
        # too. A real Ctrl-C is raised in Trio's signal handler or at one of its checkpoints,
        # never on a line of the user's file, so it stays a Ctrl-C.
        inner = _innermost(error)
        if scenario.source is None or not isinstance(inner, SystemExit | KeyboardInterrupt):
            raise
        frames = _frames(inner)
        if not frames or frames[-1][0] != scenario.source:
            raise
        raise WorldError(scenario, seed, error) from error


class WorldError(ValueError):
    """A user's scenario raised (its drive function or one of its checks): said in one line, with
    the place in the user's file; the original exception is chained, and is ``error`` (None once
    the error has crossed from a sweep's worker process, where only its line travels)."""

    error: BaseException | None

    def __init__(self, scenario: Scenario, seed: int, error: BaseException) -> None:
        subject = f"scenario {scenario.ref}"
        if isinstance(error, CheckRaised):
            # A check that raised is named: the scenario's drive ran, its world is whole.
            subject = f"check {error.name} of scenario {scenario.ref}"
            error = error.error
        self.error = _innermost(error)
        where = ""
        if scenario.source is not None:
            lines = [line for file, line in _frames(self.error) if file == scenario.source]
            if lines:
                where = f" at {display_path(scenario.source)}:{lines[-1]}"
        super().__init__(
            f"{subject} raised{where} with seed {seed}: {type(self.error).__name__}: {self.error}"
        )


def _innermost(error: BaseException) -> BaseException:
    """A lone exception out of Trio's nurseries, unwrapped from its exception groups."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _frames(error: BaseException) -> list[tuple[str, int]]:
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return frames


def with_user_checks(report: CheckReport, scenario: Scenario, trace: Trace) -> CheckReport:
    """``report`` with what ``scenario``'s own checks find in ``trace`` added, each finding
    marked as the user's and placed where its :class:`UserFinding` says (a plain string at the
    world's end)."""
    if not scenario.checks:
        return report
    end = trace.events[-1]["t"] if trace.events else 0.0
    found: list[Finding] = []
    names: list[str] = []
    for check in scenario.checks:
        name = check_name(check)
        names.append(name)
        try:
            returned = check(trace)
        except Exception as error:
            raise CheckRaised(name, error) from error
        for item in returned_findings("check", check, returned):
            if isinstance(item, str):
                found.append(Finding(name, "violation", None, end, item, by_user=True))
                continue
            at = end if item.at_ms is None else item.at_ms
            if at > end:
                raise ValueError(
                    f"check {name} returned UserFinding(at_ms={item.at_ms!r}), after the world "
                    f"ended at {ms(end)} ms; give the time of the event that broke the rule "
                    "(its event['t'])"
                )
            found.append(Finding(name, "violation", item.run, at, item.text, by_user=True))
    # evolve, not a new report: the probes (and anything else the checks found) are kept.
    return attrs.evolve(
        report, findings=(*report.findings, *found), user_checks=(*report.user_checks, *names)
    )


def check_name(check: Callable[..., Any]) -> str:
    """How a user's check is named in its findings: its function's name, dashed; a ready-made
    check says its own name (``bank.pay_once-at-most-once-per-order``), which keeps the call's
    spelling."""
    named = getattr(check, "check_name", None)
    if isinstance(named, str):
        return named
    return str(getattr(check, "__name__", "user-check")).replace("_", "-")


class CheckRaised(Exception):
    """A user's check raised: carries the check's name to :class:`WorldError`, which names it."""

    def __init__(self, name: str, error: Exception) -> None:
        super().__init__(name, error)
        self.name = name
        self.error = error
