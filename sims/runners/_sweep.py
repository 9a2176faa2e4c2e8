"""Sweeps: one scenario over a range of seeds, in parallel processes, summarised.

Each seed is an independent world, so a sweep is embarrassingly parallel; a worker returns only a
small, picklable summary of its world, never its trace, and the summary says how to replay any
seed that did not come out as documented.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO

import attrs

from .._numbers import plural
from .._seeds import sweep_seeds
from ..faults._plan import NO_FAULTS
from ..mutants._catalog import MUTANTS
from ..oracle._probes import probe_lines
from ..oracle._report import verdict_words
from ..scenarios._registry import ScenarioRef, find_scenario
from ._dask import run_on_cluster
from ._outcome import explore_command, replay_command
from ._raised import WorldRaised
from ._rerun import NONDETERMINISM_HELP, first_difference
from ._simulate import simulate

#: How many of a failing seed's findings a sweep's report lists (the rest are counted).
_SHOWN_PER_SEED = 3

#: Besides every failing seed, one seed in this many is run twice and its traces compared: a
#: handler that reads random, the wall clock or state from an earlier world shows there.
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

    @property
    def ok(self) -> bool:
        return not self.violations and not self.mismatches and not self.nondeterministic


@attrs.frozen(kw_only=True)
class SweepReport:
    scenario: str
    mutant: str | None
    seeds: tuple[SeedSummary, ...]
    seconds: float
    #: The scenario's own declaration: whether a fault of its plan that never fired fails its seed
    #: (it then does, as it fails a single run), or is only counted.
    faults_must_fire: bool

    @property
    def failing(self) -> tuple[SeedSummary, ...]:
        return tuple(s for s in self.seeds if not s.ok)

    def replay_command(self, seed: int) -> str:
        return replay_command(self.scenario, seed, mutant=self.mutant)

    def verdict(self) -> str:
        """The verdict's sentence, in the words of a single run's: the spec's violations apart
        from the user's checks that failed, and in how many seeds."""
        user = {check for s in self.seeds for check in s.user_checks}
        spec: Counter[str] = Counter()
        seeds_failing: Counter[str] = Counter()
        for summary in self.seeds:
            for check, count in summary.violated:
                if check in user:
                    seeds_failing[check] += 1
                else:
                    spec[check] += count
        failed = {
            check: f"in {seeds_failing[check]} of {plural(len(self.seeds), 'seed')}"
            for check in sorted(seeds_failing)
        }
        explained = Counter(check for s in self.seeds for check in s.explained)
        return verdict_words(spec, failed, explained)

    def lines(self, *, show: int = SHOWN_SEEDS) -> Iterator[str]:
        """The report: the headline, the verdict, violations and explained findings by check,
        the probes, faults that never fired, then at most ``show`` failing seeds with the
        command that runs each again."""
        if type(show) is not int or show < 0:
            raise ValueError(f"show={show!r}; pass how many failing seeds to list, 0 or more")
        total = len(self.seeds)
        rate = total / self.seconds if self.seconds else float("inf")
        yield (
            f"sweep {self.scenario}{' with mutant ' + self.mutant if self.mutant else ''}: "
            f"{plural(total, 'seed')} in {self.seconds:.1f} s ({rate:.1f} seeds/s), "
            f"{total - len(self.failing)} as documented, {len(self.failing)} not"
        )
        yield f"  verdict: {self.verdict()}"
        yield from self._violation_lines()
        explained = Counter(check for s in self.seeds for check in s.explained)
        for check, count in sorted(explained.items()):
            yield f"  explained by the spec: {count} × {check}"
        yield from probe_lines(self.seeds)
        rerun = sum(1 for s in self.seeds if s.rerun)
        yield (
            f"  determinism: {plural(rerun, 'world')} run twice (every failing seed and one in "
            f"{RERUN_EVERY} others), {sum(1 for s in self.seeds if s.nondeterministic)} differed"
        )
        yield from self._unfired_lines()
        failing = self.failing
        for summary in failing[:show]:
            yield f"  seed {summary.seed}: {self.replay_command(summary.seed)}"
            found = (*summary.violations, *summary.mismatches)
            for text in found[:_SHOWN_PER_SEED]:
                yield f"      {text}"
            if len(found) > _SHOWN_PER_SEED:
                more = len(found) - _SHOWN_PER_SEED
                yield f"      … and {more} more, not listed here: the command above shows them all"
            if summary.nondeterministic:
                yield f"      not a function of its seed: {summary.nondeterministic}"
                yield f"      {NONDETERMINISM_HELP}"
            if summary.plan and summary.plan != repr(NO_FAULTS) and summary.violations:
                yield (
                    "      to shrink its plan: "
                    + explore_command(self.scenario, summary.seed, summary.plan, self.mutant)
                )
        if len(failing) > show:
            left = len(failing) - show
            yield (
                f"  … and {plural(left, 'more failing seed')}, not listed (--show {show} lists "
                f"{show}): --show {len(failing)} lists them all, and each seed's command above "
                "runs it again"
            )

    def _violation_lines(self) -> Iterator[str]:
        """Violations by check, and in how many seeds: a sweep of many failing seeds is read
        here first, not seed by seed."""
        user = {check for s in self.seeds for check in s.user_checks}
        found: Counter[str] = Counter()
        where: Counter[str] = Counter()
        for summary in self.seeds:
            for check, count in summary.violated:
                found[check] += count
                where[check] += 1
        for check, count in sorted(found.items(), key=lambda item: (-item[1], item[0])):
            whose = "your check" if check in user else "the spec's check"
            yield f"  violations: {count} × {check} ({whose}) in {plural(where[check], 'seed')}"

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


def summarise(job: tuple[ScenarioRef, int, str | None]) -> SeedSummary:
    """One seed's world, reduced to what a sweep reports."""
    scenario, seed, mutant = job
    simulation = simulate(scenario, seed, mutant=mutant)
    report = simulation.report
    rerun = not simulation.ok or seed % RERUN_EVERY == 0
    differs = None
    if rerun and simulation.outcome.setup.trace:
        again = simulate(scenario, seed, mutant=mutant)
        differs = first_difference(simulation.outcome.trace, again.outcome.trace)
    return SeedSummary(
        plan=repr(simulation.outcome.setup.plan),
        nondeterministic=differs or "",
        rerun=rerun,
        seed=seed,
        violations=tuple(finding.line() for finding in report.violations),
        mismatches=simulation.mismatches,
        explained=tuple(finding.check for finding in report.explained),
        rpcs=simulation.facts.count("rpc.exec"),
        probes=report.probes,
        unfired=tuple(type(fault).__name__ for fault in simulation.outcome.unfired),
        violated=tuple(sorted(report.violations_of().items())),
        user_checks=report.user_checks,
    )


def summarise_in_worker(job: tuple[ScenarioRef, int, str | None]) -> SeedSummary | WorldRaised:
    """:func:`summarise`, where a world that raised comes back as a value (three strings), in
    this process as in a worker's: whatever it raised, the sweep reports it and goes on."""
    try:
        return summarise(job)
    except Exception as error:
        return WorldRaised.of(job[1], error)


def sweep(
    scenario: str | ScenarioRef,
    seeds: Iterable[int],
    *,
    jobs: int = 1,
    mutant: str | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int, int], None] | None = None,
) -> SweepReport:
    """Run ``scenario`` for every seed: ``jobs`` local processes at a time, or as tasks on the
    Dask distributed cluster whose scheduler is at ``scheduler`` (``tcp://HOST:PORT``). Either way
    the report is the same, timings aside."""
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
    work = [(ref, seed, mutant) for seed in sweep_seeds(seeds)]
    started = time.perf_counter()
    results: list[SeedSummary] = []
    failing = 0

    def collect(summaries: Iterable[SeedSummary | WorldRaised]) -> None:
        nonlocal failing
        for summary in summaries:
            if isinstance(summary, WorldRaised):
                summary = SeedSummary(
                    seed=summary.seed,
                    violations=(summary.finding(),),
                    mismatches=(),
                    explained=(),
                    rpcs=0,
                )
            results.append(summary)
            failing += not summary.ok
            if progress is not None:
                progress(len(results), len(work), failing)

    if scheduler is not None:
        run_on_cluster(scheduler, summarise_in_worker, work, collect=collect)
    elif jobs == 1:
        collect(summarise_in_worker(job) for job in work)
    else:
        # fork keeps the scenarios a parent registered (tests register their own); each worker
        # then runs its own trio.run per seed. A world that raised comes back as a value.
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            chunksize = max(1, len(work) // (jobs * 8))
            collect(pool.imap(summarise_in_worker, work, chunksize=chunksize))
    results.sort(key=lambda s: s.seed)
    return SweepReport(
        scenario=str(ref),
        mutant=mutant,
        seeds=tuple(results),
        seconds=time.perf_counter() - started,
        faults_must_fire=found.faults_must_fire,
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
