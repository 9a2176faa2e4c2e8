"""``check_deploy``: new code checked against the runs in flight, before it ships.

The stages, each a function of its own: the new code and its world (:mod:`._new_code`), the
sources' runs in flight (:mod:`._sources`), one world with no faults that runs each run's next
pass and its retry on the new code (:mod:`._drive`), and the verdict read from that world's trace
(:mod:`._judge`). docs/deploys.md says what it guarantees and what it does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path

import attrs

from driver import JobDefinition
from scopehost import JobRunDump

from ..runners._run import WorldOutcome, WorldSetup, run_world
from ..scenarios._registry import ScenarioRef
from ._compare import Done, compared, done_over
from ._drive import DRIVE, PassSeen, drive_next_passes, passes_over
from ._judge import judge_run
from ._new_code import SEED, CheckWorld, as_definitions, check_world, load_jobs
from ._sources import RunsSource, read_sources
from ._verdict import DeployVerdict, LedgerStep, RunInFlight, RunVerdict


def check_deploy(
    jobs: JobDefinition | Sequence[JobDefinition] | str,
    sources: Iterable[str | Path | JobRunDump],
    *,
    world: str | ScenarioRef | None = None,
    old: JobDefinition | Sequence[JobDefinition] | str | None = None,
) -> DeployVerdict:
    """Whether every run in flight in ``sources`` can go on under ``jobs``, the code about to
    ship (definitions, or ``"FILE.py:NAME"`` naming them). ``world`` is a scenario
    (``FILE.py:NAME``) whose setup declares the services the new jobs (and the old) call.
    ``old``, the code running now (in the same forms), makes the check differential: the new
    code's service calls are held to the old code's over the same runs (:mod:`._compare`).
    Input that cannot be used is refused with ``DeployInputError``, naming the value and the
    remedy."""
    definitions = load_jobs(jobs) if isinstance(jobs, str) else as_definitions(jobs, "jobs")
    before = _old_code(old)
    # One world setting for both codes: their worlds differ only in the code they run.
    setting = check_world((*definitions, *before), world)
    read = read_sources(sources)
    defined = {(job.module_id, job.job) for job in definitions}
    in_flight = [run for source in read for run in runs_in_flight(source)]
    checked = [run for run in in_flight if run.key in defined]
    verdict = DeployVerdict(
        sources=tuple(dict.fromkeys(source.label for source in read)),
        jobs=tuple(f"{job.module_id}/{job.job}" for job in definitions),
        not_checked=tuple(run for run in in_flight if run.key not in defined),
        old_jobs=tuple(f"{job.module_id}/{job.job}" for job in before),
    )
    if not checked:
        return verdict
    scopes = {run.scope for run in checked}
    dumps = tuple(source.dump for source in read if source.dump.scope_id in scopes)
    ids = frozenset(run.run for run in checked)
    outcome = _run_the_world(definitions, setting, dumps, ids)
    passes = passes_over(outcome.trace, ids)
    judged = _judged(outcome, checked, passes)
    if before:
        old_outcome = _run_the_world(before, setting, dumps, ids)
        old_done = done_over(old_outcome.trace, passes_over(old_outcome.trace, ids))
        judged = _held_to_the_old_code(judged, old_done, done_over(outcome.trace, passes))
    return attrs.evolve(verdict, runs=judged)


def _old_code(
    old: JobDefinition | Sequence[JobDefinition] | str | None,
) -> tuple[JobDefinition, ...]:
    """The code running now, as given (none: nothing is held to it)."""
    if old is None:
        return ()
    return load_jobs(old, "--old") if isinstance(old, str) else as_definitions(old, "old")


def _held_to_the_old_code(
    judged: tuple[RunVerdict, ...], old: dict[str, Done], new: dict[str, Done]
) -> tuple[RunVerdict, ...]:
    """Each run's verdict held to what the old code's passes did (:mod:`._compare`)."""
    return tuple(
        compared(verdict, old[verdict.run.run], new[verdict.run.run]) for verdict in judged
    )


def runs_in_flight(source: RunsSource) -> list[RunInFlight]:
    """The source's runs not ended, each with its step ledger."""
    dump = source.dump
    ledgers: dict[str, list[LedgerStep]] = {}
    for step in dump.steps:
        ledgers.setdefault(step.run_id, []).append(LedgerStep(step.step, step.result is not None))
    return [
        RunInFlight(
            scope=dump.scope_id,
            run=row.id,
            module_id=row.module_id,
            job=row.job,
            instance=row.instance,
            source=source.label,
            ledger=tuple(ledgers.get(row.id, ())),
            held_by_a_pass=row.lease_began_at is not None,
        )
        for row in dump.runs
        if row.status == "running"
    ]


def _run_the_world(
    jobs: tuple[JobDefinition, ...],
    setting: CheckWorld,
    dumps: tuple[JobRunDump, ...],
    runs: frozenset[str],
) -> WorldOutcome:
    setup = WorldSetup(
        scopes=tuple(dump.scope_id for dump in dumps),
        drives=(DRIVE,),
        lease_ms=setting.lease_ms,
        services=setting.services,
        operations=setting.operations,
    )
    drive = partial(drive_next_passes, jobs=jobs, dumps=dumps, runs=runs)
    # Runs in flight need not end within the check: only their next passes are judged.
    return run_world(SEED, setup, drive, settles=False)


def _judged(
    outcome: WorldOutcome, checked: list[RunInFlight], passes: dict[str, list[PassSeen]]
) -> tuple[RunVerdict, ...]:
    rows = {row.id: row for rows in outcome.runs.values() for row in rows}
    return tuple(judge_run(run, passes[run.run], rows.get(run.run)) for run in checked)
