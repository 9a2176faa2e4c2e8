"""Running a world: the seed goes into Trio's scheduler and every stream before anything runs.

``run_world`` is synchronous: it owns its ``trio.run``, on a ``VirtualClock`` that the host's
network jumps as soon as no task can run, so a simulated hour costs what its events cost and
nothing more.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from driver import JobDefinition, JobRun
from scopehost import (
    DatabaseFactory,
    ModuleOperation,
    ScopeDatabase,
    StoreClock,
    VirtualClock,
    describe,
    open_scope_host,
)

from .._seeds import require_seed
from .._trace import TRACE_FORMAT, WORLD_FOLDER_PREFIX, Trace
from ..faults._check import check_plan
from ..faults._plan import (
    NO_FAULTS,
    Fault,
    FaultPlan,
    PctSchedule,
    StoreClockFault,
    UpstreamFailure,
)
from ..mutants._ablation import ablated
from ..oracle._checks import TraceChecker
from ..oracle._report import CheckReport
from ..world._marks import marks_of
from ..world._scheduling import pct_scheduling, seed_scheduler
from ..world._services import (
    CURRENT_WORLD,
    Service,
    check_provider_faults,
    check_services,
    service_operations,
)
from ..world._upstream import Upstream
from ..world._world import World, undeclared_scope
from ._watchdog import allowance


def _check_operations(
    setup: object, attribute: object, operations: Mapping[str, ModuleOperation] | None
) -> None:
    """Refuse a bad ``operations`` where the setup is written, not at the scope's first call."""
    if operations is None:
        return
    if not isinstance(operations, Mapping):
        raise ValueError(
            f"WorldSetup(operations={operations!r}); pass a dict of names to functions "
            "(conn, args, now) -> result, or None for the built-in ones only"
        )
    for name, operation in operations.items():
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"WorldSetup(operations=...) has the name {name!r}; name each operation with a "
                "non-empty str"
            )
        if not callable(operation):
            raise ValueError(
                f"WorldSetup(operations=...)[{name!r}] is {operation!r}; an operation is a "
                "function (conn, args, now) -> result"
            )


def _check_grace(setup: object, attribute: object, grace_ms: object) -> None:
    if (
        isinstance(grace_ms, bool)
        or not isinstance(grace_ms, int | float)
        or not math.isfinite(grace_ms)
        or grace_ms < 0
    ):
        raise ValueError(
            f"WorldSetup(grace_ms={grace_ms!r}); give how long the world waits for its running "
            "passes after the scenario returned: a finite number of ms >= 0"
        )


def _check_allowance(setup: object, attribute: object, cpu_s: object) -> None:
    if cpu_s is None:
        return
    if (
        isinstance(cpu_s, bool)
        or not isinstance(cpu_s, int | float)
        or not math.isfinite(cpu_s)
        or cpu_s <= 0
    ):
        raise ValueError(
            f"WorldSetup(cpu_allowance_s={cpu_s!r}); give the seconds of CPU a world may use "
            "before it is stopped as a loop that never awaits: a finite number > 0, or None for "
            "no limit"
        )


def _versions(versions: object) -> dict[str, tuple[JobDefinition, ...]]:
    """``WorldSetup(versions=...)`` as a dict of each version's job definitions, refused with
    the remedy when it is anything else."""
    shape = (
        "give a dict of each version's name to the JobDefinition (or tuple of them) it deploys, "
        "as {'v2': ORDER_V2}"
    )
    if not isinstance(versions, Mapping):
        raise ValueError(f"WorldSetup(versions={versions!r}); {shape}")
    found: dict[str, tuple[JobDefinition, ...]] = {}
    for name, jobs in versions.items():
        listed = (jobs,) if isinstance(jobs, JobDefinition) else jobs
        if not isinstance(name, str) or not name:
            raise ValueError(f"WorldSetup(versions=...) names a version {name!r}; {shape}")
        if (
            not isinstance(listed, tuple | list)
            or not listed
            or not all(isinstance(job, JobDefinition) for job in listed)
        ):
            raise ValueError(f"WorldSetup(versions=...)[{name!r}] is {jobs!r}; {shape}")
        found[name] = tuple(listed)
    return found


def _check_version_services(setup: WorldSetup, attribute: object, versions: object) -> None:
    """A version whose job calls a service the world does not declare could never run its
    calls: refused where the setup is written, as ``World.register`` refuses such a job."""
    declared = {service.name for service in setup.services}
    for name, jobs in setup.versions.items():
        for job in jobs:
            missing = [service for service in job.services if service not in declared]
            if missing:
                raise ValueError(
                    f"WorldSetup(versions=...)[{name!r}]: job {job.module_id}/{job.job} calls "
                    f"{', '.join(missing)}, which this world does not declare; declare them in "
                    "WorldSetup(services=(Service(...),))"
                )


def _check_on_files(setup: WorldSetup, attribute: object, on_files: object) -> None:
    if not isinstance(on_files, bool):
        raise ValueError(
            f"WorldSetup(on_files={on_files!r}); pass True (the world's scopes are SQLite files "
            "in a folder of its own, removed after) or False (in memory)"
        )
    if on_files and setup.directory is not None:
        raise ValueError(
            f"WorldSetup(on_files=True, directory={str(setup.directory)!r}); pass one: "
            "on_files=True makes (and removes) a folder of the world's own, directory= keeps the "
            "scopes' files in yours"
        )


#: Set to "1" (``sims run --on-files``, ``sims sweep --on-files``), every world of this process
#: and of the processes it starts runs on files, as ``WorldSetup(on_files=True)`` says, unless
#: its setup names a ``directory`` of its own.
ON_FILES_ENV = "SIMS_ON_FILES"


def runs_on_files(setup: WorldSetup) -> bool:
    """Whether ``run_world`` gives this world a folder of its own (see ``ON_FILES_ENV``)."""
    return setup.directory is None and (setup.on_files or os.environ.get(ON_FILES_ENV) == "1")


@contextlib.contextmanager
def _world_folder(setup: WorldSetup) -> Iterator[Path | None]:
    """The folder of the world's scope files: its setup's ``directory``, or, on files, a fresh
    temporary one removed as the world ends (None: in memory). The folder's path never reaches
    the trace: the host names a scope's file only in the errors about the file itself (gone,
    foreign, written behind its open scope), which nothing in a simulated world does."""
    if not runs_on_files(setup):
        yield setup.directory
        return
    with tempfile.TemporaryDirectory(
        prefix=WORLD_FOLDER_PREFIX, ignore_cleanup_errors=True
    ) as folder:
        yield Path(folder)


#: The CPU a world may use by default (docs/simulating-your-jobs.md, "A handler that never
#: awaits"): far more than any built-in world takes (the largest, well under a second of CPU).
DEFAULT_CPU_ALLOWANCE_S = 60.0


@attrs.frozen(kw_only=True)
class WorldSetup:
    """What a world is made of before its scenario drives it."""

    scopes: tuple[str, ...] = ("scope-1",)
    #: The drives the world may add; a fault plan is checked against these names.
    drives: tuple[str, ...] = ("cron", "alarm")
    lease_ms: int = 1_000
    objects: int = 10
    plan: FaultPlan = NO_FAULTS
    trace: bool = True
    directory: Path | None = None
    #: Run the world on a file-backed host with its output gate on, in a fresh temporary folder
    #: of its own that is removed when the world ends: each scope is a SQLite file in WAL mode
    #: holding its identity, watched for writes behind the open scope, synced before a reply
    #: leaves, and reopened from its file after an eviction. The trace is byte for byte the
    #: one in memory.
    on_files: bool = attrs.field(default=False, validator=_check_on_files)
    database: DatabaseFactory = ScopeDatabase
    #: Called with every event as it happens, kept or not (a progress line, a live check).
    listeners: tuple[Callable[[dict[str, Any]], None], ...] = ()
    #: Module operations of the world's own, by name, added to (or replacing) the scope's
    #: built-in ``record``, ``record_once`` and ``items``: ``fn(conn, args, now)`` runs inside the
    #: scope's one transaction of the call, as ``open_scope_host(operations=...)`` runs it, so a
    #: world can model a provider that dedupes atomically.
    operations: Mapping[str, ModuleOperation] | None = attrs.field(
        default=None, validator=_check_operations
    )
    #: Trace what each ``step()`` handed back to its handler (``hx.got``, trace format 4), so the
    #: oracle checks that a memo returns the value its body returned. Off by default: it makes a
    #: world's trace longer.
    record_returns: bool = False
    #: The job's outside world: simulated external systems (a payment provider, a mailer, a
    #: CRM), each with its own state per world, latency, refusals and faults
    #: (docs/simulating-your-jobs.md, "Services").
    services: tuple[Service, ...] = attrs.field(default=(), validator=check_services)
    #: How long, in virtual ms, the world waits after its scenario returned for the passes still
    #: running (a stale pass, a late BEGIN) and the service calls on the wire to end by
    #: themselves; what still runs then is cut (``world.cut``), and the verdict says so.
    grace_ms: float = attrs.field(default=60_000.0, validator=_check_grace)
    #: The seconds of CPU the world may use (its scenario, handlers, step bodies and service
    #: operations, in the thread that runs it) before it is stopped and reported as a loop that
    #: never awaits (virtual time cannot move past it); None for no limit.
    cpu_allowance_s: float | None = attrs.field(
        default=DEFAULT_CPU_ALLOWANCE_S, validator=_check_allowance
    )
    #: Later versions of the world's jobs, by name: the code a :class:`Deploy` (or
    #: :class:`DeployAfter`) fault of the plan puts on the drives, each version a
    #: ``JobDefinition`` or a tuple of them replacing the jobs of the same module and name
    #: (docs/deploys.md). The scenario registers the version the world starts on.
    versions: Mapping[str, tuple[JobDefinition, ...]] = attrs.field(
        factory=dict, converter=_versions, validator=_check_version_services
    )
    #: The scenario's inputs for this world (``world.inputs``): set by ``simulate`` from the
    #: scenario's ``inputs`` strategy (its simplest value, or the value given), JSON values.
    inputs: Any = attrs.field(default=None, eq=False)

    def check_plan(self, plan: FaultPlan | None = None) -> None:
        """Refuse ``plan`` (None: this world's own) with a one-line ``PlanError`` when a fault of
        it names a drive, scope or service operation this world does not have."""
        plan = self.plan if plan is None else plan
        check_plan(
            plan,
            drives=self.drives,
            scopes=self.scopes,
            services=service_operations(self.services),
            versions=self.versions,
        )
        # A stale read of a call that does not lag, a partial batch of one that takes no batch.
        check_provider_faults(plan.faults, self.services)


@attrs.frozen
class WorldOutcome:
    """What a finished world leaves: its trace, its runs and effects, the upstream's counts."""

    seed: int
    setup: WorldSetup
    trace: Trace
    runs: dict[str, list[JobRun]]
    effects: dict[str, Counter[str]]
    fetched: Counter[int]
    report: CheckReport
    #: The plan's faults that never struck, in plan order.
    unfired: tuple[Fault, ...] = ()


def run_world(
    seed: int,
    setup: WorldSetup,
    drive: Callable[[World], Awaitable[None]],
    *,
    settles: bool = True,
    meta: dict[str, Any] | None = None,
) -> WorldOutcome:
    """Build a world from ``seed`` and ``setup``, let ``drive`` run it, and collect the outcome,
    checked live against the spec's invariants (``settles``: every run must have ended)."""
    seed = require_seed(seed)
    setup.check_plan()
    seed_scheduler(seed)
    # Time moves only when the host's network jumps it (jump_clock=True below).
    clock = VirtualClock()
    # A mutant made of source ablations breaks the real code for this world only.
    with (
        ablated(*getattr(setup.database, "ablations", ())),
        _scheduled(setup.plan),
        allowance(setup.cpu_allowance_s),
        _world_folder(setup) as directory,
    ):
        result: WorldOutcome = trio.run(
            partial(_main, seed, setup, drive, settles, meta or {}, directory), clock=clock
        )
    return result


def _scheduled(plan: FaultPlan) -> contextlib.AbstractContextManager[None]:
    """The plan's scheduler: PCT when it has a :class:`PctSchedule`, else the seeded shuffle."""
    for fault in plan.of(PctSchedule):
        assert isinstance(fault, PctSchedule)
        return pct_scheduling(fault.seed, depth=fault.depth, within=fault.within)
    return contextlib.nullcontext()


def _store_clock(plan: FaultPlan) -> StoreClock:
    skew, drift = 0.0, 0.0
    for fault in plan.of(StoreClockFault):
        assert isinstance(fault, StoreClockFault)
        skew, drift = fault.skew_ms, fault.drift
    return StoreClock(skew_ms=skew, drift=drift)


async def _main(
    seed: int,
    setup: WorldSetup,
    drive: Callable[[World], Awaitable[None]],
    settles: bool,
    meta: dict[str, Any],
    directory: Path | None,
) -> WorldOutcome:
    checker = TraceChecker()
    trace = Trace(
        enabled=setup.trace,
        listeners=[checker.observe, *setup.listeners],
        now=trio.lowlevel.current_clock().current_time,
    )
    trace.record(
        "world.begin",
        {
            "format": TRACE_FORMAT,
            "seed": seed,
            "plan": repr(setup.plan),
            **meta,
        },
    )
    upstream = Upstream(setup.objects, _failing_calls(setup.plan))

    # A plan given in place of the scenario's own was not what its author chose the horizon for:
    # the world runs as much longer as that plan's faults can hold it up.
    stretch_ms = setup.plan.hold_up_ms() if meta.get("plan_overridden") else 0.0
    with marks_of(trace):
        return await _hosted(
            seed, setup, drive, settles, trace, checker, upstream, stretch_ms, directory
        )


async def _hosted(
    seed: int,
    setup: WorldSetup,
    drive: Callable[[World], Awaitable[None]],
    settles: bool,
    trace: Trace,
    checker: TraceChecker,
    upstream: Upstream,
    stretch_ms: float,
    directory: Path | None,
) -> WorldOutcome:
    async with open_scope_host(
        directory,
        clock=_store_clock(setup.plan),
        observer=trace.record,
        # The world's own reads (over the host's direct link) are not part of what is simulated;
        # its writes (an erasure, an import) are, and the oracle follows them.
        observe_direct=_WORLD_WRITES,
        rng=random.Random(f"{seed}/host"),
        database=setup.database,
        operations=setup.operations,
        # The world is the whole run and nothing in it waits for all tasks to block.
        jump_clock=True,
    ) as host:
        if runs_on_files(setup):
            # Its temporary folder's name is drawn anew by each process.
            trace.hidden = str(host.directory)
        async with trio.open_nursery() as nursery:
            world = World(
                seed=seed,
                host=host,
                trace=trace,
                plan=setup.plan,
                nursery=nursery,
                lease_ms=setup.lease_ms,
                upstream=upstream,
                drive_names=setup.drives,
                scope_names=setup.scopes,
                record_returns=setup.record_returns,
                services=setup.services,
                stretch_ms=stretch_ms,
                versions=setup.versions,
                inputs=setup.inputs,
            )
            world.schedule_faults()
            token = CURRENT_WORLD.set(world)
            try:
                await drive(world)
            finally:
                CURRENT_WORLD.reset(token)
            # A world ends when every pass has stopped, not when its last run ended: a stale
            # pass still running its body is the spec's at-least-once window.
            await world.wind_down(setup.grace_ms)
            # What the services do on their own (a capture, a settlement, a webhook) happens
            # before the world ends, however far off: a check sees the outside world at rest.
            await world.services.finish()
            nursery.cancel_scope.cancel()
        # A run started in a scope the world never declared (through a driver, past the world's
        # own methods) would escape the checks below, which read the declared scopes only.
        for scope, _ in checker.runs:
            if scope not in setup.scopes:
                raise ValueError(undeclared_scope(scope, setup.scopes))
        for scope in setup.scopes:
            await world.sync(scope)
        runs = {scope: await world.runs(scope) for scope in setup.scopes}
        effects = {scope: await world.effects(scope) for scope in setup.scopes}
        unfired = _unfired(setup.plan, world.fired, upstream.refused)
        if unfired:
            trace.record("world.unfired", {"faults": [repr(fault) for fault in unfired]})
        # Each service's final state, for the user's checks (``sims.service_states``): what the
        # outside world holds once the world ended, without a check rebuilding it from calls.
        services = {"services": world.services.final()} if setup.services else {}
        trace.record(
            "world.end",
            {"runs": {scope: describe(rows) for scope, rows in runs.items()}, **services},
        )
    report = checker.report(settles=settles)
    return WorldOutcome(seed, setup, trace, runs, effects, upstream.fetched, report, unfired)


def _unfired(
    plan: FaultPlan, fired: set[Fault], refused: set[tuple[str, int]]
) -> tuple[Fault, ...]:
    def struck(fault: Fault) -> bool:
        if isinstance(fault, UpstreamFailure):
            calls = range(fault.first, fault.first + fault.count)
            return any((fault.what, n) in refused for n in calls)
        return fault in fired

    return tuple(fault for fault in plan.faults if not struck(fault))


#: What a world writes over the host's direct link: traced, since it changes the rows the oracle
#: follows (its reads there are not part of what is simulated).
_WORLD_WRITES = frozenset({"shred_subject", "import_dump", "start_or_join"})


def _failing_calls(plan: FaultPlan) -> frozenset[tuple[str, int]]:
    failing: set[tuple[str, int]] = set()
    for fault in plan.of(UpstreamFailure):
        assert isinstance(fault, UpstreamFailure)
        failing.update((fault.what, n) for n in range(fault.first, fault.first + fault.count))
    return frozenset(failing)
