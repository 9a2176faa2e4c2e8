"""A world: one seed, one scope host, several drives, an upstream, faults, and a trace.

Everything that could differ between two runs is drawn from the seed or fixed by it: Trio's
scheduler (seeded deterministic scheduling), every link's latency draws, every drive's id mints
and retry jitter, the store clock's skew and drift, the fault plan. Randomness is split into
named streams (``world.rng("link:a")``), each seeded from the seed and its name through SHA-512,
so adding a stream does not shift the draws of the others, and ``PYTHONHASHSEED`` plays no part.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from functools import partial
from typing import Any

import attrs
import trio

from driver import (
    JOB_LEASE_ENTRY_MARGIN,
    JobDefinition,
    JobDriver,
    JobDriveReport,
    JobHandler,
    JobPassResult,
    JobRun,
    JobRunFilter,
    RetryPolicy,
    StartJobRunInput,
    SystemScope,
    iso_from_ms,
    job_run_of,
)
from scopehost import (
    DEFAULT_EPOCH_MS,
    DeliverLate,
    JobRunDump,
    LegDelay,
    LinkCall,
    LinkOutcome,
    RequestVerdict,
    ScopeEvicted,
    ScopeFileChanged,
    ScopeHost,
    ScopeHostError,
    TransportError,
    Verdict,
    describe,
)
from scopehost._network import withdraw

from .._trace import Trace, effect_recorded
from ..faults._plan import (
    START_OPERATION,
    CrashAfter,
    CrashDrive,
    DelayLeg,
    Deploy,
    DeployAfter,
    DropLeg,
    Evict,
    EvictAfter,
    Fault,
    FaultPlan,
    HoldLeg,
    LateRequest,
    PauseDrive,
    PctSchedule,
    RepeatStart,
    StoreClockFault,
)
from ._callbacks import EndpointFn
from ._fence import DriveKilled, FencedLink, Incarnation, living_as, only_kills
from ._files import SimulatedDisk, WorldFiles
from ._incident import latest_ms, moved
from ._recording import WorldJobDriver
from ._services import Service, Services
from ._upstream import Upstream

#: Admission misses are in the trace and the story already; the kernel's log line would only
#: repeat them on stderr, once per miss, in every world of a sweep.
_DRIVE_LOG = logging.getLogger("sims.drives")
_DRIVE_LOG.addHandler(logging.NullHandler())
_DRIVE_LOG.propagate = False

#: How often the world asks a scope again when an eviction refused its own read unrun.
_READ_TRIES = 5
#: How often ``World.start`` tries a start that failed on the wire, in all, and how long it
#: waits before the next try: the guide's caller, who starts again when a start raises (a start
#: joins the run a lost one made while that run is live).
START_TRIES = 3
START_AGAIN_MS = 500.0

#: The module and job every simulated walk is registered as.
WALK_MODULE = "importer"
WALK_JOB = "walk"


@attrs.frozen(kw_only=True)
class DriveSpec:
    """One drive of a world: its name, its wire and its own clocks."""

    name: str
    request_ms: LegDelay = 1.0
    reply_ms: LegDelay = 1.0
    #: How far this drive's wall clock is from the store's (the store's own skew is separate).
    clock_skew_ms: float = 0.0


class SimDrive:
    """A ``JobDriver`` with its own link and clocks, which faults can crash, pause and delay."""

    def __init__(self, world: World, spec: DriveSpec, *, index: int) -> None:
        self.world = world
        self.name = spec.name
        self.spec = spec
        # A crash fences the killed incarnation's calls on this link (``_fence``).
        self.link = FencedLink(
            trace=world.trace,
            name=spec.name,
            request_ms=spec.request_ms,
            reply_ms=spec.reply_ms,
            rng=world.rng(f"link:{spec.name}"),
        )
        # A monotonic clock has an arbitrary origin; a different one per drive makes sure the
        # kernel never compares it with anything but itself.
        self._origin = 1_000_000.0 * (index + 1)
        #: The version of the world's jobs this drive runs: "" for the scenario's own, else the
        #: name of the ``WorldSetup.versions`` entry a deploy restarted it on.
        self.version = ""
        self.restarts = 0
        self.driver: JobDriver = self._new_driver(f"drive:{spec.name}")
        #: The retry policy and lease of the built-in walk on this drive (``add_drive``'s).
        self.walk_retry: RetryPolicy | None = None
        self.walk_lease_ms = world.lease_ms
        self._calls: Counter[str] = Counter()
        self._call_index: dict[int, int] = {}
        # The plan's wire faults of this drive, by (operation, leg, nth): looked up once per
        # leg, which a 100 000-object walk crosses more than half a million times.
        self._leg_plan: dict[tuple[str, str, int], tuple[float, bool]] = {}
        #: The plan's faults behind each entry, marked fired when it strikes.
        self._leg_faults: dict[tuple[str, str, int], list[Fault]] = {}
        for fault in world.plan.faults:
            if isinstance(fault, DelayLeg | DropLeg) and fault.drive == spec.name:
                where = (fault.operation, fault.leg, fault.nth)
                self._leg_faults.setdefault(where, []).append(fault)
                delay, drop = self._leg_plan.get(where, (0.0, False))
                if isinstance(fault, DelayLeg):
                    self._leg_plan[where] = (delay + fault.ms, drop)
                else:
                    self._leg_plan[where] = (delay, True)
        # Requests this drive gives up on and the wire delivers late, by (operation, nth).
        self._late_plan: dict[tuple[str, int], LateRequest] = {
            (fault.operation, fault.nth): fault
            for fault in world.plan.faults
            if isinstance(fault, LateRequest) and fault.drive == spec.name
        }
        # Starts whose caller sends them again, by the drive's nth start (``RepeatStart``).
        self._repeats: dict[int, list[RepeatStart]] = {}
        for fault in world.plan.faults:
            if isinstance(fault, RepeatStart) and fault.drive == spec.name:
                self._repeats.setdefault(fault.nth, []).append(fault)
        # Legs held until another drive does something, by (operation, leg, nth).
        self._holds: dict[tuple[str, str, int], list[HoldLeg]] = {}
        # Crashes, evictions and deploys right after a call ran, by (operation, nth).
        self._after: dict[tuple[str, int], list[CrashAfter | EvictAfter | DeployAfter]] = {}
        for fault in world.plan.faults:
            if isinstance(fault, HoldLeg) and fault.drive == spec.name:
                self._holds.setdefault((fault.operation, fault.leg, fault.nth), []).append(fault)
            elif (
                isinstance(fault, CrashAfter | EvictAfter | DeployAfter)
                and fault.drive == spec.name
            ):
                self._after.setdefault((fault.operation, fault.nth), []).append(fault)
        self._reached: Counter[str] = Counter()
        #: The cancel scope of every tick in progress: a drive ticking several scopes at once
        #: (a tick loop per scope) is one process, and a crash kills all of its work. A list, not
        #: a set: they are cancelled in the order they began, the same in every process.
        self._working: list[trio.CancelScope] = []
        #: The drive's current life: its ticks run as it, and a crash kills it (``_fence``).
        self.incarnation = Incarnation(spec.name, 1)
        self.down_until_ms = -math.inf
        # A leg with nothing planned for it is carried without waking this drive (``wants``).
        self.link.add_request_hook(self._on_request, wants=self._request_wanted)
        self.link.add_reply_hook(self._on_reply, wants=self._reply_wanted)

    def _new_driver(self, stream: str) -> JobDriver:
        """The drive's kernel as a process starts it: nothing registered yet, its ids and
        jitter drawn from the random ``stream``."""
        world, spec, origin = self.world, self.spec, self._origin
        virtual_s = world.host.network.now
        # Recording: the oracle learns what each handler asked, from the handler's side.
        return WorldJobDriver(
            world.host,
            record=world.trace.record,
            record_returns=world.record_returns,
            name=spec.name,
            link=self.link,
            now=lambda: iso_from_ms(DEFAULT_EPOCH_MS + spec.clock_skew_ms + virtual_s() * 1000.0),
            # Read to the microsecond, as the trace spells its times: a wait the oracle reads
            # from two whole-millisecond trace times is then exactly the wait the drive measured.
            monotonic=lambda: origin + round(virtual_s() * 1000.0, 3),
            rng=world.rng(stream),
            observer=world.trace.record,
            log=_DRIVE_LOG,
            # A handler's service calls go to the world's services, as a real drive's go to its
            # real clients: the same ``ctx.call_service`` in both.
            services=world.services,
        )

    # -- faults on the wire ---------------------------------------------------------------------

    def _request_wanted(self, call: LinkCall) -> bool:
        self._calls[call.operation] += 1
        nth = self._call_index[call.seq] = self._calls[call.operation]
        return (
            (call.operation, "request", nth) in self._leg_plan
            or (call.operation, nth) in self._late_plan
            or (call.operation, "request", nth) in self._holds
            or (call.operation == START_OPERATION and nth in self._repeats)
        )

    def _reply_wanted(self, call: LinkCall, outcome: LinkOutcome) -> bool:
        nth = self._call_index.pop(call.seq, 0)
        if (
            (call.operation, "reply", nth) not in self._leg_plan
            and (call.operation, "reply", nth) not in self._holds
            and (call.operation, nth) not in self._after
        ):
            return False
        self._call_index[call.seq] = nth
        return True

    async def _on_request(self, call: LinkCall) -> RequestVerdict:
        nth = self._call_index.get(call.seq, 0)
        if call.operation == START_OPERATION:
            for repeat in self._repeats.get(nth, ()):
                self.world.nursery.start_soon(self._repeat_start, repeat, call, nth)
        verdict: RequestVerdict = await self._apply(call, "request")
        late = self._late_plan.get((call.operation, nth)) if self._late_plan else None
        if verdict is None and late is not None:
            self.world.fired.add(late)
            self.world.trace.record(
                "fault.late",
                {
                    "drive": self.name,
                    "op": call.operation,
                    "seq": call.seq,
                    "nth": nth,
                    "ms": late.ms,
                },
            )
            verdict = DeliverLate(late.ms)
            self.world.requests_on_the_wire.add((self.name, call.seq))
        if verdict is not None:
            # A dropped or abandoned request's reply hook will not run to forget it.
            self._call_index.pop(call.seq, None)
        return verdict

    async def _on_reply(self, call: LinkCall, outcome: LinkOutcome) -> Verdict:
        try:
            nth = self._call_index.get(call.seq, 0)
            for fault in self._after.get((call.operation, nth), ()):
                self._strike_after(fault, call, nth)
            return await self._apply(call, "reply")
        finally:
            self._call_index.pop(call.seq, None)

    async def _repeat_start(self, fault: RepeatStart, call: LinkCall, nth: int) -> None:
        """The caller of the drive's ``nth`` start sends it again ``after_ms`` later: the same
        start through the drive's kernel, as the first went, so it mints a new run id and joins
        the first run only while that one is live. Not sent once the scenario is over (nobody is
        left to start again): the fault is then reported as never fired."""
        await self.world.host.sleep_ms(fault.after_ms)
        if self.world.closing:
            return
        self.world.fired.add(fault)
        where = {"drive": self.name, "op": call.operation, "seq": call.seq, "nth": nth}
        self.world.trace.record("fault.repeat", {**where, "after_ms": fault.after_ms})
        key, row = call.args
        again = StartJobRunInput(
            module_id=key.module_id,
            job=key.job,
            instance=key.instance,
            payload=json.loads(row.payload),
            subject=row.subject_id,
        )
        self.world.starts_repeated.append(call.seq)
        try:
            run = await self.driver.start_job_run(call.scope_id, again)
        except (Exception, DriveKilled) as error:
            # The repeat met a fault of its own (or its drive was killed): its caller gives up.
            self.world.trace.record(
                "world.start.failed",
                {
                    "drive": self.name,
                    "scope": call.scope_id,
                    "repeat": nth,
                    "error": type(error).__name__,
                },
            )
        else:
            self.world.trace.record(
                "world.start",
                {"drive": self.name, "scope": call.scope_id, "run": run.id, "repeat": nth},
            )
        finally:
            self.world.starts_repeated.remove(call.seq)
            self.world.quiet_check()

    def _strike_after(
        self, fault: CrashAfter | EvictAfter | DeployAfter, call: LinkCall, nth: int
    ) -> None:
        """The call has run in the scope and its reply has not left: strike now."""
        self.world.fired.add(fault)
        after = {"after": call.operation, "seq": call.seq, "nth": nth}
        if isinstance(fault, DeployAfter):
            # The first restart happens here, before the reply can reach the drive.
            self.world.deploy(fault, after={"drive": self.name, **after})
        elif isinstance(fault, EvictAfter):
            live = self.world.host.evict(call.scope_id)
            self.world.trace.record(
                "fault.evict", {"scope": call.scope_id, "live": live, "drive": self.name, **after}
            )
        else:
            # The kill is delivered at the drive's next checkpoint, which is waiting for this
            # reply: the drive never learns what the call answered.
            self.crash(fault.down_ms, after=after)

    async def _apply(self, call: LinkCall, leg: str) -> Verdict:
        nth = self._call_index.get(call.seq, 0)
        delay, drop = self._leg_plan.get((call.operation, leg, nth), (0.0, False))
        if delay or drop:
            self.world.fired.update(self._leg_faults[(call.operation, leg, nth)])
        # ``nth`` is the plan's count (this drive's nth call of the operation), so the story and
        # the timeline name a call the way the plan that struck it does.
        if delay:
            self.world.trace.record(
                "fault.delay",
                {
                    "drive": self.name,
                    "op": call.operation,
                    "seq": call.seq,
                    "nth": nth,
                    "leg": leg,
                    "ms": delay,
                },
            )
            await self.world.host.sleep_ms(delay)
        for hold in self._holds.get((call.operation, leg, nth), ()):
            self.world.fired.add(hold)
            await self.world.hold(hold, seq=call.seq, nth=nth)
        if drop:
            self.world.trace.record(
                "fault.drop",
                {"drive": self.name, "op": call.operation, "seq": call.seq, "nth": nth, "leg": leg},
            )
            return "drop"
        return None

    # -- faults in the process ------------------------------------------------------------------

    async def pause_point(self, where: str) -> None:
        """Called by the walk at each point a ``PauseDrive`` can strike; counts per point."""
        self._reached[where] += 1
        nth = self._reached[where]
        for fault in self.world.plan.of(PauseDrive):
            assert isinstance(fault, PauseDrive)
            if fault.drive == self.name and fault.where == where and fault.nth == nth:
                self.world.fired.add(fault)
                self.world.trace.record(
                    "fault.pause", {"drive": self.name, "where": where, "nth": nth, "ms": fault.ms}
                )
                await self.world.host.sleep_ms(fault.ms)

    def restart_on(self, version: str, down_ms: float) -> None:
        """Stop the drive for a deploy and start it again on ``version`` of the world's jobs:
        killed where it stands, as :meth:`crash` kills, and back ``down_ms`` later as a new
        process, its kernel built afresh with the version's handlers registered."""
        self.world.trace.record(
            "fault.deploy",
            {"drive": self.name, "version": version, "was": self.version or None},
        )
        self.crash(down_ms, after={"deploy": version})
        self.version = version
        self.restarts += 1
        # A stream of its own per start: a new process draws new ids, never the first one's.
        self.driver = self._new_driver(f"drive:{self.name}@{version}#{self.restarts}")
        self.world.register_on(self)

    def crash(self, down_ms: float, *, after: dict[str, Any] | None = None) -> None:
        """Kill whatever the drive is doing, as a process kill would; it restarts later.
        ``after`` names the call it struck after (a :class:`CrashAfter`).

        The fence goes up before the work is cancelled: whatever ``finally:`` or ``except`` of
        the killed incarnation still runs can no longer reach the world (``_fence``), as a killed
        process runs none. The drive's next tick runs as a new incarnation."""
        self.down_until_ms = self.world.now_ms() + down_ms
        working = bool(self._working)
        self.world.trace.record(
            "fault.crash",
            {"drive": self.name, "down_ms": down_ms, "working": working, **(after or {})},
        )
        self.incarnation.killed = True
        self.incarnation = Incarnation(self.name, self.incarnation.number + 1)
        for work in self._working:
            work.cancel()

    # -- work -----------------------------------------------------------------------------------

    async def tick(
        self, scope_id: str, *, max_passes: int = 1, limit: int | None = None
    ) -> JobDriveReport | None:
        """One drive over ``scope_id``; None when the drive is down or was killed mid-drive."""
        if self.world.now_ms() < self.down_until_ms:
            self.world.trace.record("drive.skip", {"drive": self.name, "scope": scope_id})
            return None
        self.world.trace.record("drive.tick", {"drive": self.name, "scope": scope_id})
        report: JobDriveReport | None = None
        incarnation = self.incarnation
        work = trio.CancelScope()
        self._working.append(work)
        try:
            with living_as(incarnation), work:
                report = await self.driver.run_due_jobs(
                    scope_id, max_passes=max_passes, limit=limit
                )
        except ScopeHostError as error:
            # The store's wire failed the drive call itself (its due read, say, refused by an
            # eviction): a cron logs it and ticks again later, and so does a simulated drive.
            self.world.trace.record(
                "drive.failed",
                {"drive": self.name, "scope": scope_id, "error": type(error).__name__},
            )
        except BaseException as error:
            # The killed incarnation's leftover code met the fence: the kill, not a failure.
            if not (incarnation.killed and only_kills(error)):
                raise
        finally:
            self._working.remove(work)
            self.world.quiet_check()
        if report is not None:
            self.world.trace.record(
                "drive.report", {"drive": self.name, "scope": scope_id, "report": describe(report)}
            )
        return report


class World:
    """One simulated world, built from a seed and a :class:`WorldSetup`; a scenario drives it.

    A scenario adds drives (:meth:`add_drive`) and its jobs (:meth:`add_job`), starts runs
    (:meth:`start`), drives scopes on a schedule (:meth:`every`) or once (:meth:`tick`), and
    waits for the runs to end (:meth:`settle`). Everything it does is in the trace; the faults of
    the plan strike by themselves. ``rng(name)`` is a random stream of the seed, for a scenario
    that draws its own choices."""

    def __init__(
        self,
        *,
        seed: int,
        host: ScopeHost,
        trace: Trace,
        plan: FaultPlan,
        nursery: trio.Nursery,
        lease_ms: int,
        upstream: Upstream,
        drive_names: tuple[str, ...] = ("cron", "alarm"),
        scope_names: tuple[str, ...] = ("scope-1",),
        record_returns: bool = False,
        services: tuple[Service, ...] = (),
        stretch_ms: float = 0.0,
        versions: Mapping[str, tuple[JobDefinition, ...]] | None = None,
        inputs: Any = None,
    ) -> None:
        self.seed = seed
        #: The scenario's inputs for this world (``@scenario(inputs=...)``): what the drive reads
        #: its payloads, runs and services' starting state from; None for a scenario without.
        self.inputs = inputs
        #: Later versions of the world's jobs, by name: what a deploy restarts drives on.
        self.versions = dict(versions or {})
        #: Whether the drives trace what each ``step()`` handed back (``hx.got``, format 4).
        self.record_returns = record_returns
        self.host = host
        self.trace = trace
        self.plan = plan
        #: How much longer than its scenario says the world ticks and settles: what a plan given
        #: in place of the scenario's own can hold it up (``FaultPlan.hold_up_ms``), else 0.
        self.stretch_ms = stretch_ms
        self.nursery = nursery
        self.lease_ms = lease_ms
        self.margin_ms = lease_ms * JOB_LEASE_ENTRY_MARGIN
        self.upstream = upstream
        self.drives: dict[str, SimDrive] = {}
        #: The drives this world may add: a fault plan was checked against these names.
        self.drive_names = drive_names
        #: The scopes this world may use: the end-of-world checks read exactly these (a run
        #: left running in a scope they did not read would pass unseen).
        self.scope_names = scope_names
        #: The plan's faults that struck (the rest are reported as never fired).
        self.fired: set[Fault] = set()
        #: The user's jobs, registered on every drive (those added later too).
        self.jobs: dict[tuple[str, str], _UserJob] = {}
        #: Held legs waiting for another drive's event: (what, the held drive, its wake-up).
        self._waiting: list[_Hold] = []
        #: The arguments of each ``invoke`` sent, by (link, seq): what it ran decides whether it
        #: was an effect (``effect_recorded``, the one definition), which a read never is.
        self._door_args: dict[tuple[str, int], Any] = {}
        if plan.of(HoldLeg):
            trace.listeners.append(self._watch)
        #: The job's outside world: the services the setup declares, with their state.
        self.services = Services(self, services)
        #: Set once the scenario returned: no new tick starts, and the world waits for every
        #: pass still running to stop (:meth:`wind_down`).
        self.closing = False
        #: The cancel scopes of scheduled ticks waiting for their time: cancelled at the end.
        self._idle: list[trio.CancelScope] = []
        #: The passes whose handler is running, as (drive, run), in the order they began.
        self.running: list[tuple[str, str]] = []
        #: Scope requests their callers gave up on (a ``LateRequest``), still on the wire, by
        #: (drive, seq): a stale pass's write that lands late is part of the world's end. Each
        #: leaves the set as it runs in its scope (``_landed``).
        self.requests_on_the_wire: set[tuple[str, int]] = set()
        #: The starts a ``RepeatStart`` sent again that have not been answered yet, by the seq of
        #: the start they repeat: the world's end waits for them as for any call on the wire.
        self.starts_repeated: list[int] = []
        trace.listeners.append(self._landed)
        self._quiet: trio.Event | None = None
        #: What operators and the power can do to the scopes' files: a world on files only
        #: (``WorldSetup(on_files=True)``); None in memory, where there is no file.
        self.files: WorldFiles | None = None
        if host.directory is not None and host.gate is not None:
            disk = SimulatedDisk()
            host.gate.sync = disk
            self.files = WorldFiles(self, host, disk)

    def rng(self, stream: str) -> random.Random:
        """The named random stream of this world (independent of every other stream)."""
        return random.Random(f"{self.seed}/{stream}")

    def now_ms(self) -> float:
        return self.host.network.now() * 1000.0

    async def sleep_until_ms(self, at_ms: float) -> None:
        delay = at_ms - self.now_ms()
        if delay > 0:
            await self.host.sleep_ms(delay)

    async def hold(self, fault: HoldLeg, *, seq: int, nth: int) -> None:
        """Hold the calling leg until another drive than ``fault.drive`` does ``fault.until``,
        or for ``fault.max_ms`` at the most."""
        where = {"drive": fault.drive, "op": fault.operation, "seq": seq, "nth": nth}
        self.trace.record(
            "fault.hold", {**where, "leg": fault.leg, "until": fault.until, "max_ms": fault.max_ms}
        )
        waiting = _Hold(until=fault.until, drive=fault.drive, woken=trio.Event())
        self._waiting.append(waiting)

        async def give_up() -> None:
            await self.host.sleep_ms(fault.max_ms)
            if not waiting.woken.is_set():
                waiting.why = "max_ms"
                self._waiting.remove(waiting)
                waiting.woken.set()

        self.nursery.start_soon(give_up, name="hold:max_ms")
        await waiting.woken.wait()
        released = {"by": waiting.by, "by_op": waiting.what} if waiting.by else {}
        self.trace.record(
            "fault.release", {**where, "leg": fault.leg, "why": waiting.why, **released}
        )

    def _watch(self, event: dict[str, Any]) -> None:
        """Wake the holds whose event this is (a trace listener, while a plan holds legs)."""
        happened, by, what = self._happened(event)
        if happened is None or not self._waiting:
            return
        for waiting in [w for w in self._waiting if w.until == happened and w.drive != by]:
            waiting.why, waiting.by, waiting.what = happened, by, what
            self._waiting.remove(waiting)
            waiting.woken.set()

    def _happened(self, event: dict[str, Any]) -> tuple[str | None, str, str]:
        """What a held leg may wait for that ``event`` is, by which drive, and the call that did
        it: (None, "", "") for anything else."""
        kind = event["ev"]
        if kind == "rpc.send":
            if event["op"] == "invoke":
                self._door_args[(event["link"], event["seq"])] = event["args"]
            return None, "", ""
        by = str(event.get("drive") or event.get("link") or "")
        if kind == "svc.exec":
            return ("effect" if event.get("effect") else None), by, str(event["op"])
        if kind == "claim.won" and event.get("takeover"):
            return "takeover", by, "claim"
        if kind == "drive.tick":
            return "tick", by, ""
        if kind != "rpc.exec":
            return None, "", ""
        op = event["op"]
        args = self._door_args.pop((event["link"], event["seq"]), None) if op == "invoke" else None
        if "error" in event:
            return None, "", ""
        if op == "record_step":
            return "step", by, op
        if op == "commit_pass":
            return "commit", by, op
        key = effect_recorded(args, event.get("result")) if op == "invoke" else None
        if key is not None:
            return "effect", by, f"the scope's {args[0]} of {key}"  # type: ignore[index]
        return None, "", ""

    def note(self, text: str, **fields: Any) -> None:
        """A line of the story, in the trace."""
        self.trace.record("world.note", {"text": text, **fields})

    # -- the end of the world ------------------------------------------------------------------

    @contextlib.contextmanager
    def _waiting_for_time(self) -> Iterator[None]:
        """A scheduled tick's wait for its time: what :meth:`wind_down` cancels."""
        with trio.CancelScope() as waiting:
            if self.closing:
                waiting.cancel()
            self._idle.append(waiting)
            try:
                yield
            finally:
                self._idle.remove(waiting)

    def tracked(self, drive: str, handler: JobHandler) -> JobHandler:
        """``handler``, counted in :attr:`running` while it runs (the passes the end waits for).
        Its calls to services find this world through ``CURRENT_WORLD``, which the run sets once
        in the task every tick descends from."""

        async def running(ctx: Any) -> Any:
            entry = (drive, str(ctx.run.id))
            self.running.append(entry)
            try:
                return await handler(ctx)
            finally:
                self.running.remove(entry)
                self.quiet_check()

        return running

    def _busy(self) -> bool:
        return bool(
            self.running
            or self.services.in_flight
            or self.services.callbacks.in_flight
            or self.requests_on_the_wire
            or self.starts_repeated
            or any(drive._working for drive in self.drives.values())
        )

    def _landed(self, event: dict[str, Any]) -> None:
        """A request given up on ran in its scope (the host says so only in its ``rpc.exec``)."""
        if event["ev"] == "rpc.exec" and self.requests_on_the_wire:
            self.requests_on_the_wire.discard((str(event["link"]), int(event["seq"])))
            self.quiet_check()

    def quiet_check(self) -> None:
        """Wake :meth:`wind_down` once nothing runs any more."""
        if self._quiet is not None and not self._busy():
            self._quiet.set()

    async def wind_down(self, grace_ms: float) -> None:
        """The scenario returned: start no new tick, and let every pass still running (a stale
        pass, a pass past its lease, a late BEGIN), every service call on the wire and every scope
        request its caller gave up on run to its natural end, for ``grace_ms`` at the most. What
        was still running then is cut, and said."""
        self.closing = True
        for waiting in list(self._idle):
            waiting.cancel()
        running = self._running_now()
        self.trace.record("world.closing", {"grace_ms": grace_ms, **running})
        if not self._busy():
            return
        self._quiet = trio.Event()
        quiet = self._quiet
        timer = self.host.network.after(grace_ms / 1000.0, quiet.set)
        await quiet.wait()
        withdraw(timer)
        if self._busy():
            self.trace.record("world.cut", {"grace_ms": grace_ms, **self._running_now()})
        else:
            self.trace.record("world.quiet", {})

    def _running_now(self) -> dict[str, Any]:
        return {
            "passes": [{"drive": drive, "run": run} for drive, run in self.running],
            "ticks": [name for name, drive in self.drives.items() if drive._working],
            "calls": self.services.in_flight,
            "requests": len(self.requests_on_the_wire),
        }

    # -- drives and jobs ------------------------------------------------------------------------

    def add_drive(
        self,
        spec: DriveSpec,
        *,
        retry: RetryPolicy | None = None,
        lease_ms: int | None = None,
    ) -> SimDrive:
        if spec.name not in self.drive_names:
            raise ValueError(
                f"drive {spec.name!r} is not one of this world's drives "
                f"({', '.join(self.drive_names)}); declare it in WorldSetup(drives=...), which is "
                "what a fault plan is checked against"
            )
        drive = SimDrive(self, spec, index=len(self.drives))
        drive.walk_retry = retry
        drive.walk_lease_ms = lease_ms if lease_ms is not None else self.lease_ms
        self.drives[spec.name] = drive
        self.register_on(drive)
        return drive

    def register_on(self, drive: SimDrive) -> None:
        """Register on ``drive``'s kernel the walk and every job of the version it runs: the
        scenario's own jobs, each replaced by the version's job of the same module and name."""
        drive.driver.register_job(
            WALK_MODULE,
            WALK_JOB,
            self.tracked(drive.name, partial(self._walk, drive)),
            retry=drive.walk_retry,
            lease_ms=drive.walk_lease_ms,
        )
        for job in self.jobs_of(drive.version).values():
            job.register(drive)

    def jobs_of(self, version: str) -> dict[tuple[str, str], _UserJob]:
        """The jobs a drive on ``version`` runs ("" for the scenario's own)."""
        jobs = dict(self.jobs)
        for definition in self.versions.get(version, ()):
            jobs[(definition.module_id, definition.job)] = _UserJob.of(definition, self.lease_ms)
        return jobs

    def deploy(self, fault: Deploy | DeployAfter, *, after: dict[str, Any] | None = None) -> None:
        """A rolling deploy of ``fault.version`` begins: the first drive restarts on it now, the
        others one by one, ``fault.every_ms`` apart (``_rolling``)."""
        self.fired.add(fault)
        order = self._deploy_order(fault)
        self.trace.record(
            "fault.deploying",
            {
                "version": fault.version,
                "drives": order,
                "every_ms": fault.every_ms,
                **(after or {}),
            },
        )
        if fault.every_ms == 0:
            for name in order:
                self.drives[name].restart_on(fault.version, fault.down_ms)
        elif order:
            self.drives[order[0]].restart_on(fault.version, fault.down_ms)
            self.nursery.start_soon(self._rolling, fault, order[1:])

    def _deploy_order(self, fault: Deploy | DeployAfter) -> list[str]:
        """The drives a deploy restarts, in order: those it names, or every drive of the world
        (the one a :class:`DeployAfter` struck after first)."""
        if fault.drives:
            return [name for name in fault.drives if name in self.drives]
        first = [fault.drive] if isinstance(fault, DeployAfter) else []
        return [*first, *(name for name in self.drives if name not in first)]

    async def _rolling(self, fault: Deploy | DeployAfter, rest: list[str]) -> None:
        for name in rest:
            await self.host.sleep_ms(fault.every_ms)
            self.drives[name].restart_on(fault.version, fault.down_ms)

    async def _deploy_at(self, fault: Deploy) -> None:
        await self.sleep_until_ms(fault.at_ms)
        self.deploy(fault)

    def scope(self, scope_id: str) -> str:
        """``scope_id``, if this world declared it; a clear error otherwise."""
        if scope_id not in self.scope_names:
            raise ValueError(undeclared_scope(scope_id, self.scope_names))
        return scope_id

    def add_job(
        self,
        module_id: str,
        job: str,
        handler: JobHandler,
        *,
        retry: RetryPolicy | None = None,
        lease_ms: int | None = None,
    ) -> None:
        """Register the user's ``handler`` as ``module_id``/``job`` on every drive of the world,
        those added before and after. ``handler`` is ``async def handler(ctx) -> JobPassResult |
        None``; ``retry`` is the job's retry policy; ``lease_ms`` its lease (default the world's
        ``WorldSetup.lease_ms``)."""
        key = (module_id, job)
        if key in self.jobs:
            raise ValueError(f"job {module_id}/{job} is already added to this world")
        if key == (WALK_MODULE, WALK_JOB):
            raise ValueError(
                f"job {module_id}/{job} is the simulator's own walk; name your job differently"
            )
        user_job = _UserJob(
            module_id=module_id,
            job=job,
            handler=handler,
            retry=retry,
            lease_ms=lease_ms if lease_ms is not None else self.lease_ms,
        )
        self.jobs[key] = user_job
        for drive in self.drives.values():
            # A drive a deploy restarted already runs its version's job of this name.
            if key not in {(d.module_id, d.job) for d in self.versions.get(drive.version, ())}:
                user_job.register(drive)

    def register(self, definition: JobDefinition) -> None:
        """Register a job as its definition says, the same value a real drive takes
        (``JobDriver.register``): its handler on every drive, with its retry policy and lease.
        Refused when the job calls a service this world does not declare. A ``deadline_ms`` is
        not simulated (the oracle has no model of a cancelled handler): the story says so."""
        if not isinstance(definition, JobDefinition):
            raise ValueError(f"register({definition!r}): give a driver.JobDefinition(...)")
        missing = [name for name in definition.services if not self.services.provides(name)]
        if missing:
            raise ValueError(
                f"job {definition.module_id}/{definition.job} calls {', '.join(missing)}, which "
                "this world does not declare; declare them in WorldSetup(services=(Service(...),))"
            )
        self.add_job(
            definition.module_id,
            definition.job,
            definition.handler,
            retry=definition.retry,
            lease_ms=definition.lease_ms,
        )
        if definition.deadline_ms is not None:
            self.note(
                f"job {definition.module_id}/{definition.job}: its deadline_ms="
                f"{definition.deadline_ms} is not simulated; its passes run without one here"
            )

    def add_endpoint(self, name: str, fn: EndpointFn, *, drive: str) -> None:
        """Receive the callbacks (webhooks) the world's services send to ``name``
        (``sims.call_back(name, payload)``) with ``await fn(driver, payload)`` on ``drive``: the
        job's own code, given the drive's ``JobDriver`` to start runs or read its scopes
        through the drive's wire (:mod:`._callbacks`)."""
        self.services.callbacks.add_endpoint(name, fn, drive)

    async def start(
        self,
        drive: str,
        scope_id: str,
        module_id: str,
        job: str,
        *,
        payload: Any = None,
        instance: str = "default",
        subject: str | None = None,
    ) -> JobRun:
        """Start (or join: runs coalesce by key) a run of ``module_id``/``job`` on ``scope_id``,
        through ``drive``; the start goes into the trace and the story. A start the wire lost or
        gave up on is started again, as the guide's caller does (:meth:`start_again`)."""
        if drive not in self.drives:
            raise ValueError(
                f"no drive {drive!r} in this world; add it first with world.add_drive(DriveSpec("
                f"name={drive!r}))"
            )
        return await self.start_again(
            drive,
            scope_id,
            StartJobRunInput(
                module_id=module_id,
                job=job,
                instance=instance,
                payload=payload,
                subject=subject,
            ),
        )

    async def start_again(self, drive: str, scope_id: str, input: StartJobRunInput) -> JobRun:
        """``input`` started through ``drive``, tried up to :data:`START_TRIES` times in all,
        :data:`START_AGAIN_MS` apart, while the start fails on the wire (a ``TransportError``:
        its request or reply lost, or given up on). A failed try may have run, or may still run
        late: the next one joins the run it made while that run is live, and makes another once
        it ended; that is the caller's part of the at-least-once wire. Each failed try is in the
        trace and the story; the last one's error is raised."""
        for tried in range(1, START_TRIES + 1):
            try:
                run = await self.drives[drive].driver.start_job_run(self.scope(scope_id), input)
            except TransportError as error:
                again = tried < START_TRIES
                self.trace.record(
                    "world.start.failed",
                    {
                        "drive": drive,
                        "scope": scope_id,
                        "try": tried,
                        "tries": START_TRIES,
                        "error": type(error).__name__,
                        **({"again_ms": START_AGAIN_MS} if again else {}),
                    },
                )
                if not again:
                    raise
                await self.host.sleep_ms(START_AGAIN_MS)
                continue
            self.trace.record("world.start", {"drive": drive, "scope": scope_id, "run": run.id})
            return run
        raise AssertionError("unreachable: the last try returns or raises")

    async def tick(self, drive: str, scope_id: str, *, max_passes: int = 1) -> None:
        """Drive ``scope_id`` once with ``drive`` now: run up to ``max_passes`` due passes."""
        await self.drives[drive].tick(self.scope(scope_id), max_passes=max_passes)

    async def start_walk(
        self,
        drive: str,
        scope_id: str,
        *,
        objects: int,
        chunk: int,
        instance: str = "default",
        subject: str | None = None,
    ) -> JobRun:
        return await self.start_again(
            drive,
            scope_id,
            StartJobRunInput(
                module_id=WALK_MODULE,
                job=WALK_JOB,
                instance=instance,
                payload={"objects": objects, "chunk": chunk},
                subject=subject,
            ),
        )

    def every(
        self,
        drive: str,
        scope_id: str,
        *,
        every_ms: float,
        first_ms: float,
        until_ms: float,
        max_passes: int = 1,
        limit: int | None = None,
    ) -> None:
        """Tick ``drive`` on ``scope_id`` every ``every_ms`` from ``first_ms`` until ``until_ms``
        (and the plan's hold-up, :attr:`stretch_ms`, more): a cron, or an alarm, running at most
        ``limit`` runs a tick (the kernel's default when None). Ticks of one drive never overlap;
        a slow tick delays the next."""
        self.scope(scope_id)
        until_ms += self.stretch_ms

        async def ticking() -> None:
            at = first_ms
            while at < until_ms:
                with self._waiting_for_time():
                    await self.sleep_until_ms(at)
                if self.closing:
                    return
                await self.drives[drive].tick(scope_id, max_passes=max_passes, limit=limit)
                at = max(at + every_ms, math.floor(self.now_ms() / every_ms + 1) * every_ms)

        self.nursery.start_soon(ticking, name=f"ticks:{drive}")

    def schedule_faults(self) -> None:
        """Start the timed faults of the plan (evictions, crashes)."""
        for fault in self.plan.faults:
            if isinstance(fault, StoreClockFault | PctSchedule):
                # The store's clock and the scheduler run so from the first moment.
                self.fired.add(fault)
            elif isinstance(fault, Evict):
                self.nursery.start_soon(self._evict_at, fault)
            elif isinstance(fault, CrashDrive):
                self.nursery.start_soon(self._crash_at, fault)
            elif isinstance(fault, Deploy):
                self.nursery.start_soon(self._deploy_at, fault)

    async def _evict_at(self, fault: Evict) -> None:
        await self.sleep_until_ms(fault.at_ms)
        live = self.host.evict(fault.scope)
        self.fired.add(fault)
        self.trace.record("fault.evict", {"scope": fault.scope, "live": live})

    async def _crash_at(self, fault: CrashDrive) -> None:
        await self.sleep_until_ms(fault.at_ms)
        drive = self.drives.get(fault.drive)
        if drive is not None:
            self.fired.add(fault)
            drive.crash(fault.down_ms)

    # -- the walk ---------------------------------------------------------------------------------

    async def _walk(self, drive: SimDrive, ctx: Any) -> JobPassResult:
        """The spec's opening example: walk ``objects`` upstream objects, ``chunk`` per pass, one
        step per object, each step fetching it and recording one effect row in the scope.

        The page read at the start of a pass is deliberately NOT a step: when it fails, the pass
        fails as a whole, which is the path a failed pass's outcome write takes."""
        payload = ctx.payload
        objects, chunk = int(payload["objects"]), int(payload["chunk"])
        start = int(ctx.cursor) if ctx.cursor is not None else 0
        door = await ctx.scope()
        await drive.pause_point("pass-start")
        page = self.upstream.page(start, chunk)
        for index in page:
            await drive.pause_point("before-step")
            await ctx.step(f"object-{index}", partial(self._effect, drive, door, ctx.run.id, index))
        await drive.pause_point("before-outcome")
        end = start + len(page)
        ctx.count("walked", len(page))
        return JobPassResult(cursor=end, done=end >= objects)

    async def _effect(self, drive: SimDrive, door: SystemScope, run_id: str, index: int) -> int:
        self.upstream.fetch(index)
        seq: int = await door.invoke("record", {"kind": "effect", "key": f"{run_id}/{index}"})
        await drive.pause_point("after-effect")
        return seq

    # -- reading the outcome --------------------------------------------------------------------

    async def ask(self, scope_id: str, call: Callable[[Any], Awaitable[Any]]) -> Any:
        """One of the world's own calls to a scope over the host's direct link (a read, an
        erasure, an import): ``await call(stub)``. A call that an eviction (a fault of the plan)
        refused unrun is simply asked again of the fresh actor: the world's own calls are not
        what is simulated, so a fault must not make them raise. In a world on files, a scope
        that takes its file for one written behind it when the world wrote nothing there is
        the file layer's finding (``world.files.refused``); the world undoes it as the refusal
        says an operator should, and asks again."""
        for _ in range(_READ_TRIES - 1):
            try:
                return await call(self.host.stub(scope_id))
            except ScopeEvicted:
                continue
            except ScopeFileChanged as refusal:
                if self.files is None:
                    raise
                self.files.refused(scope_id, refusal)
        return await call(self.host.stub(scope_id))

    async def restore(self, scope_id: str, dump: JobRunDump) -> None:
        """Put an incident's rows in ``scope_id``, replacing what it holds, as a restore does:
        ``dump`` is a scope's export (``JobRunDump.from_json`` of a saved one, or
        ``scopehost.read_scope_file`` of a data folder's file). Its times move so that the
        moment of the incident (the latest time something happened in it) is the world's now, so
        each lease and retry keeps what it had left (``sims.world._incident``); a running run
        resumes, taken over once its lease runs out.
        Written over the host's own link, so the trace (and the oracle) has every row. A world
        restores at its start, before any drive ticks or run starts: a restore later would roll
        back what the world's own passes recorded, and their steps would run again."""
        self.scope(scope_id)
        if self.trace.counts.get("drive.tick") or self.trace.counts.get("world.start"):
            raise ValueError(
                f"world.restore({scope_id!r}, ...) after the world's drives began: restore an "
                "incident at the start of the scenario, before world.start, world.tick and "
                "world.every (a restore later rolls back what the world's passes recorded)"
            )
        now = self.host.clock.now_ms()
        restored = moved(dump, scope_id, now - latest_ms(dump))
        await self.host.stub(scope_id).import_dump(restored, scope_id)

    def restore_service(
        self, name: str, state: Any, *, answered: Mapping[tuple[str, str], Any] | None = None
    ) -> None:
        """Service ``name`` as the real one stood at an incident: ``state`` in the shape the
        world's operations use, and ``answered``, the first answer it gave to each
        ``(OPERATION, IDEMPOTENCY_KEY)`` it remembers (a repeat of the key gets that answer, as
        from a provider that keeps its keys). Read them from the provider's own records."""
        self.services.restore(name, state, answered)

    async def runs(self, scope_id: str) -> list[JobRun]:
        """Every run on the scope, oldest first, as an operator reads them."""
        rows = await self.ask(scope_id, lambda stub: stub.list(JobRunFilter(limit=500)))
        return [job_run_of(row) for row in reversed(rows)]

    async def sync(self, scope_id: str) -> None:
        """Put the scope's rows, every run and step row, in the trace: a checkpoint the oracle
        compares with its model, column by column."""
        dump = await self.ask(scope_id, lambda stub: stub.export_dump())
        self.trace.record(
            "world.sync",
            {"scope": scope_id, "runs": describe(dump.runs), "steps": describe(dump.steps)},
        )

    async def settle(self, scopes: tuple[str, ...], *, horizon_ms: float, poll_ms: float) -> None:
        """Wait until every run on ``scopes`` has ended, and the services have nothing due
        before the horizon (their own work, callbacks on the wire: either may start runs), or
        until ``horizon_ms`` (and the plan's hold-up, :attr:`stretch_ms`, more: bounded faults
        must leave every run time to end)."""
        for scope_id in scopes:
            self.scope(scope_id)
        horizon_ms += self.stretch_ms
        while self.now_ms() < horizon_ms:
            await self.sleep_until_ms(min(horizon_ms, self.now_ms() + poll_ms))
            if self.services.due_before(horizon_ms):
                continue
            live = [
                run
                for scope in scopes
                for run in await self.ask(
                    scope, lambda stub: stub.list(JobRunFilter(status="running"))
                )
            ]
            if not live:
                return

    async def effects(self, scope_id: str) -> Counter[str]:
        """How many effect rows each ``run/object`` key has in the scope."""
        rows: list[dict[str, Any]] = await self.ask(
            scope_id, lambda stub: stub.invoke("items", {"kind": "effect"})
        )
        return Counter(str(row["key"]) for row in rows)


def undeclared_scope(scope_id: str, declared: tuple[str, ...]) -> str:
    return (
        f"scope {scope_id!r} is not one of this world's scopes ({', '.join(declared)}); declare "
        "it in WorldSetup(scopes=...), which is what the end-of-world checks read (a run left "
        "running in an undeclared scope would go unseen)"
    )


@attrs.define(kw_only=True)
class _Hold:
    """A held leg waiting for ``until`` by a drive other than ``drive``; ``why`` it woke."""

    until: str
    drive: str
    woken: trio.Event
    why: str = ""
    #: The drive whose event released it, and the call that was (for the story).
    by: str = ""
    what: str = ""


@attrs.frozen(kw_only=True)
class _UserJob:
    module_id: str
    job: str
    handler: JobHandler
    retry: RetryPolicy | None
    lease_ms: int

    @classmethod
    def of(cls, definition: JobDefinition, lease_ms: int) -> _UserJob:
        """The job ``definition`` describes (``lease_ms``: the world's, when it names none)."""
        return cls(
            module_id=definition.module_id,
            job=definition.job,
            handler=definition.handler,
            retry=definition.retry,
            lease_ms=definition.lease_ms if definition.lease_ms is not None else lease_ms,
        )

    def register(self, drive: SimDrive) -> None:
        drive.driver.register_job(
            self.module_id,
            self.job,
            drive.world.tracked(drive.name, self.handler),
            retry=self.retry,
            lease_ms=self.lease_ms,
        )


Scenario = Callable[[World], Awaitable[None]]
