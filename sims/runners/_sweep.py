"""Sweeps: one scenario over a range of seeds, in parallel processes, summarised.

Each seed is an independent world, so a sweep is embarrassingly parallel; a worker returns only a
small, picklable summary of its world, never its trace, and the summary says how to replay any
seed that did not come out as documented.

A worker runs many worlds in one process, and a world that keeps state in a module global depends
on the worlds run before it there. So a failing seed is run again alone, in a fresh process
(:mod:`._fresh`), before its findings are laid on the spec or the user's checks: one that gives
another world there is "not a function of its seed", with the first event where the two parted,
and no command is printed for it, since none would reproduce what it did in the sweep.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO

import attrs

from .._numbers import plural
from .._seeds import sweep_seeds
from ..faults._plan import NO_FAULTS, FaultPlan
from ..mutants._catalog import MUTANTS
from ..oracle._probes import probe_lines
from ..oracle._report import MISTAKES, verdict_words
from ..scenarios._registry import ScenarioRef, find_scenario
from ..world._marks import marks_in
from ._dask import run_on_cluster
from ._fresh import close_fresh_worlds, fresh_difference
from ._lifeline import workers_end_with_this_process
from ._outcome import explore_command, replay_command
from ._raised import WORLD_RAISED, WorldRaised
from ._rerun import NONDETERMINISM_HELP, first_difference
from ._simulate import simulate

#: How many of a failing seed's findings a sweep's report lists (the rest are counted).
_SHOWN_PER_SEED = 3

#: Besides every failing seed (run again alone, in a fresh process), one seed in this many is run
#: twice in its own process and its traces compared: a handler that reads random or the wall clock
#: shows there.
RERUN_EVERY = 20

#: How many failing seeds a sweep's report lists by default (``--show N``); the rest are counted,
#: and every one of them is in the counts by check above the list.
SHOWN_SEEDS = 10


@attrs.frozen
class SeedSummary:
    """What a sweep keeps of one seed's world."""

    seed: int
    violations: tuple[str, ...]
    mismatches: tuple[str, ...]
    explained: tuple[str, ...]
    rpcs: int
    #: The coverage probes this seed's world hit, with how often.
    probes: tuple[tuple[str, int], ...] = ()
    #: The user's ``sometimes`` marks this seed's world saw, by name, each with whether it held.
    marks: tuple[tuple[str, bool], ...] = ()
    #: Whether ``marks`` was read: not for a world that kept no trace (``WorldSetup(trace=
    #: False)`` keeps only counts) or that raised, whose marks are unknown, not unseen.
    marks_read: bool = True
    #: The kind of each fault of the seed's plan that never fired, in plan order.
    unfired: tuple[str, ...] = ()
    #: The seed's fault plan, as code (what ``explore --plan`` shrinks).
    plan: str = ""
    #: Whether the sweep ran this world a second time to compare the traces.
    rerun: bool = False
    #: Where the world, run again, gave another trace (uncontrolled nondeterminism), or "".
    nondeterministic: str = ""
    #: How many violations each check had in this seed's world (the spec's and the user's).
    violated: tuple[tuple[str, int], ...] = ()
    #: The names of the scenario's own checks (the user's), which ran on this world.
    user_checks: tuple[str, ...] = ()
    #: For a failing seed: whether its world, run again alone in a fresh process, was the one the
    #: sweep ran (None: not confirmed, see ``unconfirmed``, or a seed that did not fail).
    confirmed: bool | None = None
    #: Why a failing seed could not be run in a fresh process (its scenario cannot be loaded
    #: there), or "".
    unconfirmed: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations and not self.mismatches and not self.nondeterministic

    @property
    def judged(self) -> bool:
        """Whether what this seed found is laid on the spec or the user: it did not fail, or a
        fresh process reproduced its world byte for byte."""
        return self.ok or self.confirmed is True

    @property
    def raised(self) -> bool:
        """Whether the seed's world raised instead of running to its end."""
        return any(check == WORLD_RAISED for check, _ in self.violated)


@attrs.frozen
class SweepJob:
    """One seed of a sweep: the scenario (by a reference that pickles), the seed, the store, and
    the plan given in place of the scenario's own (None: its own)."""

    scenario: ScenarioRef
    seed: int
    mutant: str | None = None
    plan: FaultPlan | None = None


@attrs.frozen(kw_only=True)
class SweepReport:
    scenario: str
    mutant: str | None
    seeds: tuple[SeedSummary, ...]
    seconds: float
    #: The scenario's own declaration: whether a fault of its plan that never fired fails its seed
    #: (it then does, as it fails a single run), or is only counted.
    faults_must_fire: bool
    #: The plan given in place of the scenario's own, for every seed (its repr), or None.
    plan: str | None = None
    #: Whether the scenario is defined in a user's file: its report then shows the user's marks,
    #: and the spec's probes only on request (see :meth:`lines`).
    user_world: bool = False
    #: How many seeds were asked for, when the sweep was interrupted (Ctrl-C) before it ran them
    #: all: the report is then of the seeds done; None when it ran every seed.
    interrupted_of: int | None = None

    @property
    def failing(self) -> tuple[SeedSummary, ...]:
        return tuple(s for s in self.seeds if not s.ok)

    @property
    def judged(self) -> tuple[SeedSummary, ...]:
        """The seeds whose findings are laid on the spec or the user: those that did not fail,
        and the failing ones a fresh process reproduced."""
        return tuple(s for s in self.seeds if s.judged)

    @property
    def not_functions(self) -> tuple[SeedSummary, ...]:
        """The seeds whose world is not a function of its seed: what they found is laid on
        nobody, since no command reproduces it."""
        return tuple(s for s in self.seeds if s.nondeterministic)

    @property
    def unconfirmed(self) -> tuple[SeedSummary, ...]:
        """The failing seeds no fresh process could run (it could not load the scenario)."""
        return tuple(s for s in self.seeds if not s.judged and not s.nondeterministic)

    def replay_command(self, seed: int) -> str:
        return replay_command(self.scenario, seed, mutant=self.mutant, plan=self.plan)

    def verdict(self) -> str:
        """The verdict's sentence, in the words of a single run's: the spec's violations apart
        from the user's checks that failed and the user's mistakes, and in how many seeds; first
        the seeds whose findings are laid on nobody (not a function of their seed, or not
        confirmed) and those whose world raised, where no check ran, and then what held said to
        hold only in the other seeds."""
        total = len(self.seeds)
        raised = [s for s in self.judged if s.raised]
        checked = [s for s in self.judged if not s.raised]
        user = {check for s in self.seeds for check in s.user_checks}
        spec: Counter[str] = Counter()
        seeds_failing: Counter[str] = Counter()
        for summary in checked:
            for check, count in summary.violated:
                if check in user or check in MISTAKES:
                    seeds_failing[check] += 1
                else:
                    spec[check] += count
        when = {check: f"in {n} of {plural(total, 'seed')}" for check, n in seeds_failing.items()}
        failed = {check: when[check] for check in sorted(when) if check not in MISTAKES}
        mistakes = {check: when[check] for check in sorted(when) if check in MISTAKES}
        explained = Counter(check for s in checked for check in s.explained)
        before = [*self._unjudged_words(), *_raised_words(len(raised), total)]
        held_in: str | None = ""
        if before:
            held_in = f" in the other {plural(len(checked), 'seed')}" if checked else None
        return verdict_words(
            spec, failed, explained, mistakes=mistakes, before=before, held_in=held_in
        )

    def _unjudged_words(self) -> Iterator[str]:
        total = plural(len(self.seeds), "seed")
        unsure = len(self.not_functions)
        if unsure:
            yield (
                f"{unsure} of {total} {'was' if unsure == 1 else 'were'} not a function of "
                f"{'its' if unsure == 1 else 'their'} seed (run again alone in a fresh process, or "
                "twice, each gave another world), so what was found in them is laid on neither "
                "the spec nor your checks"
            )
        unconfirmed = self.unconfirmed
        if unconfirmed:
            yield (
                f"{len(unconfirmed)} of {total} could not be run again in a fresh process "
                f"({unconfirmed[0].unconfirmed}), so what was found in them is laid on neither "
                "the spec nor your checks"
            )

    def lines(self, *, show: int = SHOWN_SEEDS, spec_probes: bool | None = None) -> Iterator[str]:
        """The report: the headline, the verdict, violations and explained findings by check,
        the user's marks and the spec's probes, faults that never fired, then at most ``show``
        failing seeds with the command that runs each again.

        ``spec_probes`` says whether to list the spec's coverage probes; None: for a built-in
        world (whose spec is what is tested), not for a user's (``--spec-probes`` shows them)."""
        if type(show) is not int or show < 0:
            raise ValueError(f"show={show!r}; pass how many failing seeds to list, 0 or more")
        total = len(self.seeds)
        rate = total / self.seconds if self.seconds else float("inf")
        unsure, unconfirmed = len(self.not_functions), len(self.unconfirmed)
        apart = []
        if unsure:
            apart.append(f"{unsure} not a function of {'its' if unsure == 1 else 'their'} seed")
        if unconfirmed:
            apart.append(f"{unconfirmed} not confirmed in a fresh process")
        given = f" under the given plan {self.plan}" if self.plan else ""
        interrupted = (
            ""
            if self.interrupted_of is None
            else f"interrupted by Ctrl-C after {total} of {plural(self.interrupted_of, 'seed')}; "
        )
        yield (
            f"sweep {self.scenario}{' with mutant ' + self.mutant if self.mutant else ''}{given}: "
            f"{interrupted}{plural(total, 'seed')} in {self.seconds:.1f} s ({rate:.1f} seeds/s), "
            f"{total - len(self.failing)} as documented, {len(self.failing)} not"
            + (f" ({', '.join(apart)})" if apart else "")
        )
        yield f"  verdict: {self.verdict()}"
        yield from self._violation_lines()
        explained = Counter(check for s in self.judged for check in s.explained)
        for check, count in sorted(explained.items()):
            yield f"  explained by the spec: {count} × {check}"
        yield from self._coverage_lines(spec_probes)
        rerun = sum(1 for s in self.seeds if s.rerun)
        yield (
            f"  determinism: {plural(rerun, 'world')} run twice (every failing seed, again alone "
            f"in a fresh process, and one in {RERUN_EVERY} others in the same process), "
            f"{unsure} differed"
        )
        yield from self._unfired_lines()
        failing = self.failing
        for summary in failing[:show]:
            yield from self._seed_lines(summary)
        if len(failing) > show:
            left = len(failing) - show
            yield (
                f"  … and {plural(left, 'more failing seed')}, not listed (--show {show} lists "
                f"{show}): --show {len(failing)} lists them all, and each seed's command above "
                "runs it again"
            )

    def _coverage_lines(self, spec_probes: bool | None) -> Iterator[str]:
        """The user's marks, for a user's world (or any world whose marks a handler set), and
        the spec's probes when asked for, or by default for a built-in world. A user's world
        names no spec edge on purpose, so listing the probes it never hit (dozens) would bury
        the marks that say what the user wanted reached."""
        shown = not self.user_world if spec_probes is None else spec_probes
        if self.user_world or any(s.marks for s in self.seeds):
            hidden = "" if shown else "; the spec's probes are hidden (--spec-probes shows them)"
            yield from marks_lines(self.seeds, hidden)
        if shown:
            yield from probe_lines(self.seeds)

    def _seed_lines(self, summary: SeedSummary) -> Iterator[str]:
        """One failing seed: the command that reproduces it; or, for a seed that is not a
        function of its seed (or that no fresh process could run), why no command is given."""
        found = (*summary.violations, *summary.mismatches)
        here = "where it found:" if found else "where it was as documented"
        if summary.nondeterministic:
            yield f"  seed {summary.seed}: not a function of its seed: {summary.nondeterministic}"
            yield f"      {NONDETERMINISM_HELP}"
            yield f"      so no command reproduces what it did in this sweep, {here}"
        elif not summary.judged:
            yield f"  seed {summary.seed}: not confirmed in a fresh process: {summary.unconfirmed}"
            yield f"      so no command is known to reproduce what it did in this sweep, {here}"
        else:
            yield f"  seed {summary.seed}: {self.replay_command(summary.seed)}"
        for text in found[:_SHOWN_PER_SEED]:
            yield f"      {text}"
        if len(found) > _SHOWN_PER_SEED:
            more = len(found) - _SHOWN_PER_SEED
            where = "the command above shows them all" if summary.judged else "in this sweep"
            yield f"      … and {more} more, not listed here: {where}"
        plan = summary.plan and summary.plan != repr(NO_FAULTS)
        if plan and summary.violations and summary.judged:
            yield (
                "      to shrink its plan: "
                + explore_command(self.scenario, summary.seed, summary.plan, self.mutant)
            )

    def _violation_lines(self) -> Iterator[str]:
        """Violations by check, and in how many seeds: a sweep of many failing seeds is read
        here first, not seed by seed. Every failing seed is counted on some line: under each
        check it broke (a world that raised under ``world-raised``), as not as documented, or
        apart, as not a function of its seed or not confirmed (under no check: nothing it found
        is laid on anyone)."""
        user = {check for s in self.seeds for check in s.user_checks}
        found: Counter[str] = Counter()
        where: Counter[str] = Counter()
        for summary in self.judged:
            for check, count in summary.violated:
                found[check] += count
                where[check] += 1
        for check, count in sorted(found.items(), key=lambda item: (-item[1], item[0])):
            seeds = plural(where[check], "seed")
            yield f"  violations: {count} × {check} ({_whose(check, user)}) in {seeds}"
        documented = sum(1 for s in self.judged if s.mismatches and not s.violated)
        if documented:
            yield (
                f"  not as documented, with no violation: {plural(documented, 'seed')} (what its "
                "scenario documents, or a fault of its plan that never fired)"
            )
        unsure = len(self.not_functions)
        if unsure:
            yield (
                f"  not a function of its seed: {plural(unsure, 'seed')}, counted under no "
                "check: run again alone in a fresh process, or twice, each gave another world"
            )
        unconfirmed = len(self.unconfirmed)
        if unconfirmed:
            yield (
                f"  not confirmed in a fresh process: {plural(unconfirmed, 'seed')}, counted "
                "under no check"
            )

    def _unfired_lines(self) -> Iterator[str]:
        """How many faults never fired, in how many seeds, by kind: a fault that never fires
        tests nothing, and a sweep that said nothing of it would pass for one that tested it."""
        seeds = [s for s in self.seeds if s.unfired]
        if not seeds:
            return
        faults = Counter(kind for s in seeds for kind in s.unfired)
        where = Counter(kind for s in seeds for kind in set(s.unfired))
        if self.faults_must_fire:
            judged = "each of those seeds is not as documented, as a single run of it is"
        else:
            judged = "the scenario declares faults_must_fire=False, so they fail no seed"
        yield (
            f"  faults that never fired: {sum(faults.values())} in {len(seeds)} of "
            f"{plural(len(self.seeds), 'seed')} ({judged})"
        )
        for kind, count in sorted(faults.items()):
            yield f"    {count} × {kind} in {plural(where[kind], 'seed')}"


def marks_lines(seeds: Iterable[SeedSummary], hidden: str = "") -> Iterator[str]:
    """The user's ``sometimes`` marks over a sweep's worlds: how many held in some world, then
    each mark with how many worlds saw it and how many it held in; a mark seen but never held
    is what no world reached, so nothing was tested there. ``hidden`` ends the first line (what
    the report leaves out)."""
    seeds = list(seeds)
    read = [s for s in seeds if s.marks_read]
    seen = Counter(name for s in read for name, _ in s.marks)
    held = Counter(name for s in read for name, ok in s.marks if ok)
    unread = len(seeds) - len(read)
    # Unknown is not unseen: a world that kept no trace, or raised, left no marks to read.
    counted = ""
    if unread:
        counted = f" (read in {len(read)} of {plural(len(seeds), 'world')}: the others kept no "
        counted += "trace or raised)"
    if not seen:
        yield (
            f"  your marks (sims.sometimes): none seen{counted}; sims.sometimes(condition, name) "
            f"in your code marks what some world should reach{hidden}"
        )
        return
    yield (
        f"  your marks (sims.sometimes): {len(held)} of {len(seen)} held in some world"
        f"{counted}{hidden}"
    )
    for name in sorted(seen):
        worlds = f"    {name}: seen in {plural(seen[name], 'world')}, held in"
        if held[name]:
            yield f"{worlds} {held[name]}"
        else:
            yield f"{worlds} none (no world reached it, so nothing was tested there)"


def _raised_words(raised: int, total: int) -> list[str]:
    if not raised:
        return []
    return [
        f"the world raised in {raised} of {plural(total, 'seed')} ({raised} × {WORLD_RAISED}), "
        f"so no check ran on {'it' if raised == 1 else 'them'}"
    ]


def _whose(check: str, user: set[str]) -> str:
    if check in user:
        return "your check"
    if check in MISTAKES:
        return f"{MISTAKES[check].whose}'s mistake"
    if check == WORLD_RAISED:
        return "the world raised"
    return "the spec's check"


def summarise(job: SweepJob) -> SeedSummary:
    """One seed's world, reduced to what a sweep reports. A failing seed is run again alone in a
    fresh process; a seed that did not fail, one in :data:`RERUN_EVERY` of them, twice here."""
    scenario, seed, mutant, plan = job.scenario, job.seed, job.mutant, job.plan
    simulation = simulate(scenario, seed, mutant=mutant, plan=plan)
    report = simulation.report
    traced = simulation.outcome.setup.trace
    violations = tuple(finding.line() for finding in report.violations)
    confirmed, said = None, ""
    if not simulation.ok:
        trace = simulation.outcome.trace if traced else None
        found = (*violations, *simulation.mismatches)
        confirmed, said = fresh_difference(scenario, seed, mutant, trace, found, plan=plan)
    differs = said if confirmed is False else None
    rerun = not simulation.ok or seed % RERUN_EVERY == 0
    if rerun and confirmed is None and traced:
        again = simulate(scenario, seed, mutant=mutant, plan=plan)
        differs = first_difference(simulation.outcome.trace, again.outcome.trace)
    return SeedSummary(
        plan=repr(simulation.outcome.setup.plan),
        nondeterministic=differs or "",
        rerun=rerun,
        seed=seed,
        violations=violations,
        mismatches=simulation.mismatches,
        explained=tuple(finding.check for finding in report.explained),
        rpcs=simulation.facts.count("rpc.exec"),
        probes=report.probes,
        marks=tuple(sorted(marks_in(simulation.outcome.trace.events).items())),
        marks_read=traced,
        unfired=tuple(type(fault).__name__ for fault in simulation.outcome.unfired),
        violated=tuple(sorted(report.violations_of().items())),
        user_checks=report.user_checks,
        confirmed=confirmed,
        unconfirmed=said if confirmed is None else "",
    )


def summarise_in_worker(job: SweepJob) -> SeedSummary:
    """:func:`summarise`, where a world that raised is its seed's finding under ``world-raised``
    (three strings, :class:`WorldRaised`), in this process as in a worker's: whatever it raised,
    the sweep reports it and goes on. It too is run again alone, in a fresh process."""
    try:
        return summarise(job)
    except Exception as error:
        raised = WorldRaised.of(job.seed, error)
    finding = raised.finding()
    confirmed, said = fresh_difference(
        job.scenario, job.seed, job.mutant, None, (finding,), plan=job.plan
    )
    return SeedSummary(
        seed=job.seed,
        violations=(finding,),
        mismatches=(),
        explained=(),
        rpcs=0,
        violated=((WORLD_RAISED, 1),),
        marks_read=False,
        rerun=True,
        nondeterministic=said if confirmed is False else "",
        confirmed=confirmed,
        unconfirmed=said if confirmed is None else "",
    )


def sweep(
    scenario: str | ScenarioRef,
    seeds: Iterable[int],
    *,
    jobs: int = 1,
    mutant: str | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int, int], None] | None = None,
    plan: FaultPlan | None = None,
    stop: threading.Event | None = None,
) -> SweepReport:
    """Run ``scenario`` for every seed: ``jobs`` local processes at a time, or as tasks on the
    Dask distributed cluster whose scheduler is at ``scheduler`` (``tcp://HOST:PORT``). Either way
    the report is the same, timings aside. Given ``plan``, every seed's world runs under it in
    place of the scenario's own (as ``run --plan`` does), and each printed command says so.

    Once ``stop`` is set (the first Ctrl-C, :func:`~sims.cli._interrupt.stop_on_ctrl_c`), no
    more seeds are taken: the report is of the seeds done, and says it was interrupted."""
    if type(jobs) is not int or jobs < 1:
        raise ValueError(f"jobs={jobs!r}; pass a whole number of processes >= 1")
    if scheduler is not None and jobs != 1:
        raise ValueError(
            f"jobs={jobs} with scheduler={scheduler!r}; a cluster sets its own parallelism "
            "(its workers' threads), so pass one or the other"
        )
    if mutant is not None and mutant not in MUTANTS:
        raise ValueError(f"no mutant {mutant!r}; the mutants are: {', '.join(MUTANTS)}")
    # The reference, not the scenario, crosses to the workers: it pickles, and a worker that did
    # not fork from this process loads the user's file from its absolute path.
    found = find_scenario(scenario)
    ref = found.ref
    given = sweep_seeds(seeds)
    # A seed is one world: a seed given twice is run, and confirmed, once.
    distinct = given if isinstance(given, range) else list(dict.fromkeys(given))
    if plan is not None and len(distinct):
        # A plan that names what the world has not is refused once, before any seed runs, not
        # told as every seed's world raising.
        found.setup(distinct[0]).check_plan(plan)
    work = [SweepJob(ref, seed, mutant, plan) for seed in distinct]
    started = time.perf_counter()
    results: list[SeedSummary] = []
    failing = 0

    def collect(summaries: Iterable[SeedSummary]) -> None:
        nonlocal failing
        for summary in summaries:
            results.append(summary)
            failing += not summary.ok
            if progress is not None:
                progress(len(results), len(work), failing)
            if stop is not None and stop.is_set():
                break

    try:
        if scheduler is not None:
            run_on_cluster(scheduler, summarise_in_worker, work, collect=collect)
        elif jobs == 1:
            collect(summarise_in_worker(job) for job in work)
        else:
            # fork keeps the scenarios a parent registered (tests register their own); each
            # worker then runs its own trio.run per seed. A world that raised comes back as a
            # value; a worker's fresh process ends with it.
            # Its workers end with this process, however it ends (see _lifeline).
            with (
                workers_end_with_this_process(),
                multiprocessing.get_context("fork").Pool(jobs) as pool,
            ):
                chunksize = max(1, len(work) // (jobs * 8))
                collect(pool.imap(summarise_in_worker, work, chunksize=chunksize))
    finally:
        close_fresh_worlds()
    results.sort(key=lambda s: s.seed)
    return SweepReport(
        scenario=str(ref),
        mutant=mutant,
        seeds=tuple(results),
        seconds=time.perf_counter() - started,
        faults_must_fire=found.faults_must_fire,
        plan=None if plan is None else repr(plan),
        user_world=ref.path is not None,
        interrupted_of=len(work) if len(results) < len(work) else None,
    )


def progress_bar(stream: TextIO = sys.stderr) -> Callable[[int, int, int], None]:
    """A one-line progress bar for a terminal: done/total and how many seeds went wrong."""

    def show(done: int, total: int, failing: int) -> None:
        filled = 30 * done // total if total else 30
        bar = "#" * filled + "." * (30 - filled)
        stream.write(f"\r[{bar}] {done}/{total} seeds, {failing} not as documented")
        if done == total:
            stream.write("\n")
        stream.flush()

    return show
