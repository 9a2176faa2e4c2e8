"""The swarm world behind the ``random`` scenario: every rule of the spec within reach of a seed.

A checker can only judge what a world does, so the world has to do everything the spec has a rule
for. Swarm-style, each seed switches on a random SUBSET of the features below (a world with every
feature at once hides the interactions a world with two shows), and draws their numbers at the
spec's edges:

* policies: the walk's and the chore's own retry policies, and per-step policies narrower and
  wider than the job's (a step may narrow its job's, never widen it);
* chores: a second job whose handler omits its cursor, counts, reuses step names across passes,
  uses one name twice in one pass (refused), throws, returns a cursor that is not queue-safe
  (refused), and has step bodies that fail a few times, some asking afterwards for fewer attempts
  than they spent (a step spent by its own narrower policy);
* orphans: runs of a job no drive registers, started first so they head the due order, with drives
  whose ``limit`` is 1 or 2 (the limit counts RUNNABLE runs) and that may take up to three passes
  per run in one call; a deploy registers the job at the end;
* the system door held for a while (deferral: nothing charged);
* starts: a join of a live key, a second start of a key under another subject and one under no
  subject (both refused: the live run has one), one under a subject of a key whose live run has
  none (refused too), a payload that is not queue-safe (refused before
  any row), one instance name live in several scopes, and a key started again once its run has
  ended (a new run, not a join);
* a crowd: more runnable runs on one scope than a drive takes by default (50), with the cron given
  no limit, so the default budget binds and the runs past it are the next call's;
* erasure of a subject while passes hold its runs, and of another after its runs finished;
* export and import: a dump of one scope imported into another mid-world, and a scope restored
  from its own dump once it is quiet;
* a drive whose claims come back too late to begin, on a scope of its own: admission misses up
  to the tenth, which fails the run (in half the worlds: the backoffs between misses are checked
  by a checkpoint of the scope after each miss, and only a world with misses has any);
* a punctual drive: when a pass writes a run's next due time, a drive of its own reads the due runs
  in exactly that millisecond (a run due at the read's own time is due: the test is ``<=``);
* a step result that carries a subject's classified envelope, in a chore whose later step fails
  the run (so the ledger keeps it), and an erasure of that subject at the end: the run is reached
  only through its step result;
* registrations of a job with a lease below the minimum (refused) and then near it (accepted),
  and a run of that job under its short lease;
* in a world on files (one seed in ten): a power loss under the driven scopes once they are quiet,
  outside SQLite readers and writers of their files, a checkpoint from a shell, a ``chmod`` and a
  ``touch``, and one scope's file put at the other's path while it is closed and copied over it
  while it is open (both refused);
* spec-edge faults added to the drawn plan: a BEGIN request held past the lease (refused), a BEGIN
  reply held past the margin (the documented double run), a pause past the lease before a step,
  inside one or before the outcome, abandoned requests delivered late.

Everything is drawn from the world's named random streams, so a seed replays byte for byte.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from functools import partial
from typing import Any

import attrs
import trio

from driver import (
    SYSTEM_DOOR_WAIT,
    Conflict,
    JobPassResult,
    JobRunFilter,
    RetryPolicy,
    StartJobRunInput,
    ValidationFailed,
    parse_iso_ms,
)
from scopehost import DEFAULT_EPOCH_MS

from ..faults._plan import DelayLeg, Fault, LateRequest, PauseDrive
from ..oracle._spec import LEASE_ENTRY_MARGIN
from ..world._files import OUTSIDE_ACTS, WorldFiles
from ..world._world import WALK_MODULE, DriveSpec, World

#: The scopes of the swarm: two driven by the cron and the alarm, one by the slow drive alone.
SWARM_SCOPES = ("scope-1", "scope-2", "scope-3")
#: The swarm's drives: the cron and the alarm, and the slow and the prompt drives some seeds add.
SWARM_DRIVES = ("cron", "alarm", "slow", "prompt")
#: The job of the chores, and the job no drive registers until the end.
CHORE_JOB = "chore"
ORPHAN_JOB = "orphan"
#: The job registered with a lease near the minimum (after one below it, refused).
BRIEF_JOB = "brief"
#: The job of the crowd: one pass, done.
CROWD_JOB = "crowd"
#: The default drive budget is 50 runnable runs: a crowd is always more, whatever the alarm's
#: limited calls take from it before the cron's first call.
CROWD_SIZES = (54, 57)
SUBJECTS = ("subject-1", "subject-2")


@attrs.frozen(kw_only=True)
class Swarm:
    """What one seed switched on, and its numbers."""

    walk_retry: RetryPolicy | None
    chore_retry: RetryPolicy
    chores: tuple[dict[str, Any], ...]
    limits: tuple[int | None, int | None]
    #: Passes per run in one drive call, for the cron and the alarm.
    passes: tuple[int, int]
    orphans: int
    hold_door: tuple[str, float, float] | None
    starts: bool
    shared_instance: bool
    erase_mid_ms: float | None
    erase_after: bool
    export_ms: float | None
    restore: bool
    slow_drive: bool
    #: Once every run has ended, a key is started again: a new run, never a join of the old.
    restart: bool
    #: Operator reads through a drive, mid-world and at the end, with limits at the clamp's edges.
    reads: tuple[JobRunFilter, ...]
    #: Starts handed a payload the queue-safety rule refuses, by kind (see ``UNSAFE_PAYLOADS``).
    unsafe_payloads: tuple[str, ...] = ()
    #: The slow drive's claim answer leaves exactly the margin by its count (a miss: BEGIN's
    #: test is strict), rather than less than it.
    exact_margin: bool = False
    #: A drive of its own calls at the very millisecond a pass said its run is due again.
    punctual: bool = False
    #: A chore whose first step returns an envelope of ``SUBJECTS[1]`` and whose second step
    #: always fails, and an erasure of that subject once every run has ended.
    keeper: bool = False
    #: The leases the cron registers ``BRIEF_JOB`` with, in order: one below the minimum (the
    #: spec refuses it), then one near it (accepted, and a run of the job uses it).
    brief_leases: tuple[int, int] | None = None
    #: Runs of ``CROWD_JOB`` started on scope-2 before any drive ticks (0: no crowd); with a
    #: crowd the cron is given no limit, so its default budget binds.
    crowd: int = 0
    #: Once per chore run, its handler throws an error that LOOKS like the door's "not now" (its
    #: ``reason`` is ``SYSTEM_DOOR_WAIT``) but is the job's own: the pass must fail, never defer
    #: (the host answers a deferral by the identity of what its door threw, not by its shape).
    look_alike: bool = False


def _policy(rng: random.Random, max_attempts: int) -> RetryPolicy:
    base = rng.choice((0, 10, 200, 1_000))
    return RetryPolicy(
        max_attempts=max_attempts, base_delay_ms=base, max_delay_ms=rng.choice((base, 4 * base))
    )


def _chore(rng: random.Random, job: RetryPolicy, index: int) -> dict[str, Any]:
    """A chore's payload: what its handler will do, pass by pass (a pure function of it)."""
    steps = []
    for number in range(rng.randint(1, 3)):
        retry: dict[str, int] | None = None
        shape = rng.random()
        if shape < 0.35 and job.max_attempts > 1:  # narrower than the job's
            narrow = _policy(rng, rng.randint(1, job.max_attempts - 1))
            retry = attrs.asdict(narrow)
        elif shape < 0.6:  # wider than the job's: narrowed to it
            wide = _policy(rng, job.max_attempts + rng.randint(1, 3))
            retry = attrs.asdict(
                attrs.evolve(
                    wide, base_delay_ms=wide.base_delay_ms * 10, max_delay_ms=wide.max_delay_ms * 10
                )
            )
        steps.append(
            {
                "name": f"part-{number}",
                "fail": rng.choice((0, 0, 1, 2, 3)),
                "retry": retry,
                # After a failure, ask for no more attempts than were spent: the next pass finds
                # the step spent by its own narrower policy and fails the run without running it.
                "tighten": rng.random() < 0.3,
            }
        )
    return {
        "index": index,
        "passes": rng.randint(1, 4),
        "steps": steps,
        "omit_cursor": rng.random() < 0.8,
        "reuse": rng.random() < 0.3,
        "catch_reuse": rng.random() < 0.5,
        "throws": rng.choice((0, 0, 1, 2, 5)),
        # Once, a cursor that is not queue-safe: the pass is refused it and fails.
        "bad_cursor": rng.random() < 0.6,
    }


#: A payload of each kind the queue-safety rule refuses, by the name the trace gives its kind.
UNSAFE_PAYLOADS: dict[str, Any] = {
    "float": math.nan,
    "tuple": ("a", 1),
    "set": {"a"},
    "bytes": b"a",
    "object": object(),
}


def _read(rng: random.Random) -> JobRunFilter:
    """An operator's filter: a limit at the edges of the clamp, and maybe a narrowing field."""
    limit = rng.choice((None, -1, 0, 1, 2, 2.7, 501, 10_000, math.inf, math.nan))
    narrowing: dict[str, Any] = rng.choice(
        (
            {},
            {"status": rng.choice(("running", "done", "failed"))},
            {"instance": rng.choice(("a", "b", "c"))},
            {"module_id": WALK_MODULE, "job": rng.choice(("walk", CHORE_JOB, ORPHAN_JOB))},
        )
    )
    return JobRunFilter(limit=limit, **narrowing)


def draw_swarm(rng: random.Random) -> Swarm:
    """One seed's subset of features (each on about half the time) and their numbers."""

    def on(p: float = 0.5) -> bool:
        return rng.random() < p

    walk_retry = _policy(rng, rng.choice((1, 1, 2, 3, 5))) if on() else None
    chore_retry = _policy(rng, rng.choice((1, 2, 3, 4)))
    chores = tuple(_chore(rng, chore_retry, i) for i in range(rng.randint(1, 2))) if on(0.7) else ()
    limits = (rng.choice((None, 1, 2)), rng.choice((None, 1, 2)))
    swarm = Swarm(
        walk_retry=walk_retry,
        chore_retry=chore_retry,
        chores=chores,
        limits=limits,
        passes=(rng.choice((1, 1, 3)), rng.choice((1, 1, 3))),
        orphans=rng.randint(1, 3) if on(0.4) else 0,
        hold_door=(
            (rng.choice(SWARM_SCOPES[:2]), rng.uniform(0, 3_000), rng.uniform(100, 5_000))
            if on(0.3)
            else None
        ),
        starts=on(0.4),
        shared_instance=on(),
        erase_mid_ms=rng.uniform(0, 3_000) if on(0.3) else None,
        erase_after=on(0.3),
        export_ms=rng.uniform(0, 3_000) if on(0.3) else None,
        restore=on(0.3),
        # Half the worlds, as most features: each one checks ten misses and their backoffs.
        slow_drive=on(0.5),
        restart=on(0.4),
        reads=tuple(_read(rng) for _ in range(rng.randint(1, 3))) if on(0.4) else (),
        unsafe_payloads=tuple(rng.sample(sorted(UNSAFE_PAYLOADS), 2)) if on(0.6) else (),
        exact_margin=on(),
        punctual=on(),
        keeper=on(0.15),
        brief_leases=(
            (rng.choice((1, 50, 75, 99)), rng.choice((100, 101, 150, 199))) if on(0.15) else None
        ),
        # Drawn last, so every other feature of a seed is drawn as it was before the crowd.
        crowd=rng.randint(*CROWD_SIZES) if on(0.1) else 0,
    )
    if swarm.crowd:
        swarm = attrs.evolve(swarm, limits=(None, swarm.limits[1]))
    # Drawn after everything else, so every other feature of a seed is what it was.
    return attrs.evolve(swarm, look_alike=on(0.3))


class LookAlike(Exception):
    """An error a job throws whose ``reason`` is the door's "not now": it looks like a deferral
    and is not one."""

    reason = SYSTEM_DOOR_WAIT


#: The keeper's plan: its first step's result holds a person's data (a classified envelope of
#: the second subject, while the run itself names no subject); its second step fails until the
#: run has failed, so the ledger keeps that result for the erasure at the end.
KEEPER_CHORE: dict[str, Any] = {
    "index": 90,
    "passes": 1,
    "steps": [
        {"name": "part-0", "fail": 0, "retry": None, "tighten": False, "envelope": SUBJECTS[1]},
        {"name": "part-1", "fail": 99, "retry": None, "tighten": False},
    ],
    "omit_cursor": False,
    "reuse": False,
    "catch_reuse": False,
    "throws": 0,
    "bad_cursor": False,
}


def edge_faults(
    rng: random.Random, *, drives: tuple[str, ...], lease_ms: int, margin_ms: float
) -> tuple[Fault, ...]:
    """Faults aimed at the spec's windows, which a uniform draw reaches too rarely."""
    faults: list[Fault] = []
    if rng.random() < 0.2:  # BEGIN arrives after the lease: the store refuses it
        faults.append(
            DelayLeg(
                drive=rng.choice(drives),
                operation="begin",
                nth=rng.randint(1, 3),
                leg="request",
                ms=lease_ms * 1.5,
            )
        )
    if rng.random() < 0.35:  # BEGIN's reply is late past the margin: the documented double run
        faults.append(
            DelayLeg(
                drive=rng.choice(drives),
                operation="begin",
                nth=rng.randint(1, 3),
                leg="reply",
                ms=rng.choice((margin_ms + 1, lease_ms + 250.0, lease_ms * 2.0, lease_ms * 3.0)),
            )
        )
    if rng.random() < 0.3:  # a pass stops past its lease: taken over, it learns at its next write
        faults.append(
            PauseDrive(
                drive=rng.choice(drives),
                nth=rng.randint(1, 3),
                ms=rng.choice((lease_ms * 1.5, lease_ms * 2.5)),
                where=rng.choice(("before-step", "after-effect", "before-outcome")),
            )
        )
    if rng.random() < 0.3:  # a stale owner's write arrives during a later pass
        faults.append(
            LateRequest(
                drive=rng.choice(drives),
                operation=rng.choice(("record_step", "commit_pass", "patch", "begin", "claim")),
                nth=rng.randint(1, 3),
                ms=rng.choice((margin_ms, lease_ms * 1.5, lease_ms * 3.0)),
            )
        )
    return tuple(faults)


class SwarmWorld:
    """Drives one world as its swarm says; the handlers' bookkeeping lives here."""

    def __init__(self, world: World, swarm: Swarm, *, horizon_ms: float) -> None:
        self.world = world
        self.swarm = swarm
        self.horizon_ms = horizon_ms
        #: How often each chore step body has failed, and each chore has thrown or reused a name.
        self.failures: Counter[tuple[str, str]] = Counter()
        self.thrown: Counter[str] = Counter()
        self.reused: set[str] = set()
        self.bad_cursor: set[str] = set()
        self.looked_alike: set[str] = set()
        #: The run each pass holds, by scope, followed from the trace (see ``_follow``).
        self.leases: dict[str, dict[str, str]] = {scope: {} for scope in SWARM_SCOPES}
        self.scope_of: dict[str, str] = {}
        world.trace.listeners.append(self._follow)
        #: The scopes the prompt drive is calling on now.
        self.prompt_busy: set[str] = set()
        if swarm.punctual:
            world.trace.listeners.append(self._due_again)

    # -- handlers -------------------------------------------------------------------------------

    async def chore(self, ctx: Any) -> JobPassResult:
        plan = ctx.payload
        run_id = ctx.run.id
        done = int(ctx.counters.get("passes", 0))
        await ctx.scope()  # the door: where a held door defers the pass
        if self.swarm.look_alike and run_id not in self.looked_alike:
            self.looked_alike.add(run_id)
            raise LookAlike(f"chore {plan['index']} says 'not now' in the door's words")
        for step in plan["steps"]:
            retry = RetryPolicy(**step["retry"]) if step["retry"] is not None else None
            spent = self.failures[(run_id, step["name"])]
            if step["tighten"] and 0 < spent < self.swarm.chore_retry.max_attempts:
                retry = RetryPolicy(max_attempts=spent, base_delay_ms=0, max_delay_ms=0)
            body = partial(
                self._chore_body, run_id, step["name"], step["fail"], done, step.get("envelope")
            )
            await ctx.step(step["name"], body, retry=retry)
        if plan["reuse"] and plan["steps"] and run_id not in self.reused:
            self.reused.add(run_id)
            first = plan["steps"][0]["name"]
            try:
                await ctx.step(first, partial(self._chore_body, run_id, first, 0, done))
            except Conflict:
                if not plan["catch_reuse"]:
                    raise
        ctx.count("passes", 1)
        ctx.count("steps", len(plan["steps"]))
        if self.thrown[run_id] < plan["throws"]:
            self.thrown[run_id] += 1
            raise RuntimeError(f"chore {plan['index']} throws ({self.thrown[run_id]})")
        last = done + 1 >= plan["passes"]
        if plan.get("bad_cursor") and run_id not in self.bad_cursor:
            self.bad_cursor.add(run_id)
            return JobPassResult(cursor={"pass": math.inf}, done=last)
        if plan["omit_cursor"] and done % 2 == 1:  # a cursor, then none: the last one is kept
            return JobPassResult(done=last)
        return JobPassResult(cursor={"pass": done + 1}, done=last)

    async def _chore_body(
        self, run_id: str, name: str, fail: int, done: int, envelope: str | None = None
    ) -> Any:
        if self.failures[(run_id, name)] < fail:
            self.failures[(run_id, name)] += 1
            raise RuntimeError(f"{name} failed ({self.failures[(run_id, name)]} of {fail})")
        if envelope is not None:
            return {"step": f"{name}@{done}", "contact": _envelope(envelope)}
        return f"{name}@{done}"

    async def brief(self, ctx: Any) -> JobPassResult:
        """The short-leased job: one step, then done."""
        got = await ctx.step("only", partial(_brief_body, ctx.run.id))
        return JobPassResult(cursor={"got": got}, done=True)

    async def orphan(self, ctx: Any) -> JobPassResult:
        return JobPassResult(cursor="adopted", done=True)

    async def crowd(self, ctx: Any) -> JobPassResult:
        return JobPassResult(cursor="served", done=True)

    # -- the world ------------------------------------------------------------------------------

    async def start(
        self, drive: str, scope: str, job: str, instance: str, payload: Any, subject: str | None
    ) -> None:
        """A start the world expects may be refused (another subject, a bad payload)."""
        try:
            run = await self.world.drives[drive].driver.start_job_run(
                scope,
                StartJobRunInput(
                    module_id=WALK_MODULE,
                    job=job,
                    instance=instance,
                    payload=payload,
                    subject=subject,
                ),
            )
        except (Conflict, ValidationFailed) as err:
            self.world.note(f"start of {job}/{instance} on {scope} refused: {err}")
            return
        except Exception as err:  # a broken store's answer: the checks judge it
            self.world.note(
                f"start of {job}/{instance} on {scope} failed: {type(err).__name__}: {err}"
            )
            return
        self.world.trace.record("world.start", {"drive": drive, "scope": scope, "run": run.id})

    def register_brief(self, leases: tuple[int, int]) -> bool:
        """The cron registers the brief job with each lease in turn; whether one was accepted."""
        registered = False
        for lease in leases:
            try:
                self.world.drives["cron"].driver.register_job(
                    WALK_MODULE, BRIEF_JOB, self.brief, lease_ms=lease
                )
            except (ValidationFailed, Conflict) as err:
                self.world.note(f"job {BRIEF_JOB} with lease_ms {lease} refused: {err}")
                continue
            self.world.note(f"job {BRIEF_JOB} registered with lease_ms {lease} on the cron")
            registered = True
        return registered

    async def run(self) -> None:
        world, swarm = self.world, self.swarm
        rng = world.rng("swarm-world")
        for name in ("cron", "alarm"):
            drive = world.add_drive(
                DriveSpec(name=name, request_ms=_jitter, reply_ms=_jitter), retry=swarm.walk_retry
            )
            drive.driver.register_job(
                WALK_MODULE, CHORE_JOB, self.chore, retry=swarm.chore_retry, lease_ms=world.lease_ms
            )
            if swarm.crowd:
                drive.driver.register_job(
                    WALK_MODULE, CROWD_JOB, self.crowd, lease_ms=world.lease_ms
                )
        if swarm.punctual:
            # Its own drive, not the alarm: the oracle follows one call per drive and scope at a
            # time, as a drive that ticks on a schedule makes them.
            prompt = world.add_drive(
                DriveSpec(name="prompt", request_ms=_jitter, reply_ms=_jitter),
                retry=swarm.walk_retry,
            )
            prompt.driver.register_job(
                WALK_MODULE, CHORE_JOB, self.chore, retry=swarm.chore_retry, lease_ms=world.lease_ms
            )
        for index in range(swarm.orphans):
            await self.start("cron", "scope-1", ORPHAN_JOB, f"orphan-{index}", {}, None)
        walk = {"objects": 6, "chunk": 3}
        await self.start("cron", "scope-1", "walk", "a", walk, SUBJECTS[0])
        await self.start("alarm", "scope-1", "walk", "b", {**walk, "chunk": 2}, None)
        await self.start(
            "alarm",
            "scope-2",
            "walk",
            "a" if swarm.shared_instance else "c",
            {**walk, "chunk": 6},
            SUBJECTS[1],
        )
        for chore in swarm.chores:
            scope = SWARM_SCOPES[chore["index"] % 2]
            subject = SUBJECTS[rng.randrange(2)] if rng.random() < 0.5 else None
            await self.start("cron", scope, CHORE_JOB, f"chore-{chore['index']}", chore, subject)
        if swarm.keeper:
            await self.start("cron", "scope-2", CHORE_JOB, "keeper", KEEPER_CHORE, None)
        if swarm.brief_leases is not None and self.register_brief(swarm.brief_leases):
            await self.start("cron", "scope-2", BRIEF_JOB, "brief", {}, None)
        for index in range(swarm.crowd):
            await self.start("cron", "scope-2", CROWD_JOB, f"crowd-{index}", {}, None)
        if swarm.starts:
            await self.start("alarm", "scope-1", "walk", "a", walk, SUBJECTS[0])  # joins
            await self.start("alarm", "scope-1", "walk", "a", walk, "subject-9")  # refused
            await self.start("alarm", "scope-1", "walk", "a", walk, None)  # refused: it has one
            # Refused too: walk b's live run has no subject, and no subject is not a wildcard.
            await self.start("cron", "scope-1", "walk", "b", {**walk, "chunk": 2}, SUBJECTS[1])
            await self.start("cron", "scope-2", "walk", "d", {"objects": math.nan}, None)
        for index, kind in enumerate(swarm.unsafe_payloads):
            payload = UNSAFE_PAYLOADS[kind]
            await self.start("alarm", "scope-1", "walk", f"unsafe-{index}", payload, None)
        if swarm.reads:
            world.nursery.start_soon(self._read_at, rng.uniform(0, 3_000))
        if swarm.hold_door is not None:
            world.nursery.start_soon(self._hold_door, *swarm.hold_door)
        if swarm.erase_mid_ms is not None:
            world.nursery.start_soon(self._erase_at, swarm.erase_mid_ms, SUBJECTS[0])
        if swarm.export_ms is not None:
            world.nursery.start_soon(self._copy_at, swarm.export_ms, "scope-1", "scope-2")
        slow = trio.Event()
        if swarm.slow_drive:
            margin_ms = world.lease_ms * LEASE_ENTRY_MARGIN
            exact = world.lease_ms - margin_ms - 1.0
            slow_claim_ms = exact if swarm.exact_margin else world.lease_ms * 0.8
            world.add_drive(
                # The claim's round trip (1 ms out, this back, from a tick at a whole millisecond)
                # leaves less than the margin, or exactly the margin: both miss.
                DriveSpec(name="slow", reply_ms={"claim": slow_claim_ms, "*": 1.0})
            )
            await self.start("slow", "scope-3", "walk", "far", {"objects": 2, "chunk": 2}, None)
            self._tick("slow", "scope-3", every_ms=20_000, first_ms=0, limit=None, stop=slow)
        await self._drive_until_quiet(rng, except_job=ORPHAN_JOB if swarm.orphans else None)
        if world.files is not None:
            await self._touch_files(world.files)
        if swarm.orphans:
            world.note(f"a deploy registers job {ORPHAN_JOB} on the cron")
            world.drives["cron"].driver.register_job(
                WALK_MODULE, ORPHAN_JOB, self.orphan, lease_ms=world.lease_ms
            )
            await self._drive_until_quiet(rng, except_job=None)
        if swarm.restart:
            world.note("a walk whose run has ended is started again")
            await self.start("cron", "scope-1", "walk", "b", {"objects": 2, "chunk": 2}, None)
            await self._drive_until_quiet(rng, except_job=None)
        if swarm.slow_drive:
            await self._settle(SWARM_SCOPES[2:], except_job=None)
            slow.set()
        if swarm.restore:
            await self._copy_at(world.now_ms(), "scope-1", "scope-1")
        if swarm.erase_after or swarm.keeper:
            await self._erase_at(world.now_ms(), SUBJECTS[1])
        if swarm.reads:
            await self._read_at(world.now_ms())

    async def _touch_files(self, files: WorldFiles) -> None:
        """In a world on files, once the cron and the alarm are quiet: the power goes under the
        driven scopes, operators read, write and checkpoint their files through SQLite and change
        their metadata, and one scope's file is put in place of the other's, closed or open
        (``sims.world._files``).
        Drawn from a stream of its own, so every other draw of the seed is what it was."""
        rng = self.world.rng("files")
        scopes = tuple(scope for scope in SWARM_SCOPES[:2] if files.has_file(scope))
        if rng.random() < 0.8:
            await files.lose_power(scopes)
        acts = [(scope, act) for scope in scopes for act in OUTSIDE_ACTS if rng.random() < 0.4]
        rng.shuffle(acts)
        for scope, act in acts:
            await files.outside(scope, act)
        if len(scopes) == 2 and rng.random() < 0.7:
            target = rng.choice(scopes)
            await files.copy_in(target, source=scopes[1 - scopes.index(target)])
        if len(scopes) == 2 and rng.random() < 0.9:
            target = rng.choice(scopes)
            await files.copy_over(target, source=scopes[1 - scopes.index(target)])

    async def _drive_until_quiet(self, rng: random.Random, *, except_job: str | None) -> None:
        """The cron (every 1 s) and the alarm (every 0.7 s; each less often while idle) tick both
        driven scopes until every
        run there has ended, but those of ``except_job``; then their ticks stop, so a world
        waiting for something slower does not pay for idle ticks."""
        stop = trio.Event()
        for scope in SWARM_SCOPES[:2]:
            first = self.world.now_ms()
            self._tick(
                "cron",
                scope,
                every_ms=1_000,
                first_ms=first + rng.uniform(0, 1_000),
                limit=self.swarm.limits[0],
                max_passes=self.swarm.passes[0],
                stop=stop,
            )
            self._tick(
                "alarm",
                scope,
                every_ms=700,
                first_ms=first + rng.uniform(0, 1_500),
                limit=self.swarm.limits[1],
                max_passes=self.swarm.passes[1],
                stop=stop,
            )
        await self._settle(SWARM_SCOPES[:2], except_job=except_job)
        stop.set()

    def _tick(
        self,
        drive: str,
        scope: str,
        *,
        every_ms: float,
        first_ms: float,
        limit: int | None,
        stop: trio.Event,
        max_passes: int = 1,
    ) -> None:
        world = self.world

        async def ticking() -> None:
            at, idle = first_ms, 0
            while at < self.horizon_ms:
                await world.sleep_until_ms(at)
                if stop.is_set():
                    return
                report = await world.drives[drive].tick(scope, max_passes=max_passes, limit=limit)
                # An alarm that found nothing to do while no pass holds a lease there sets itself
                # further out, up to 16 times its cadence: a deferral's minute or a backoff costs
                # a few ticks, not a hundred. While a lease is held it keeps its cadence, ready
                # to take the run over the moment the lease expires.
                if report is not None and report.attempted == 0 and not await self._leased(scope):
                    idle = min(idle + 1, 4)
                else:
                    idle = 0
                every = every_ms * (1 << idle)
                at = max(at + every, math.floor(world.now_ms() / every_ms + 1) * every_ms)

        world.nursery.start_soon(ticking, name=f"ticks:{drive}:{scope}")

    async def _leased(self, scope: str) -> bool:
        return bool(self.leases[scope])

    def _follow(self, event: dict[str, Any]) -> None:
        """Which pass holds which run, as the drives report it: what lets an idle alarm tell a
        quiet scope (nothing to take over soon) from one where a lease is running out. A pass
        that reported no outcome (a crash, a lost reply) still counts as holding until the next
        claim replaces it, so the doubt costs ticks, never a takeover."""
        name = event["ev"]
        if name == "world.start":
            self.scope_of[event["run"]] = event["scope"]
            return
        scope = self.scope_of.get(event.get("run", ""))
        if scope is None:
            return
        leases = self.leases[scope]
        if name == "claim.won":
            leases[event["run"]] = event["owner"]
        elif (
            name in ("pass.outcome", "admission.miss")
            and leases.get(event["run"]) == event["owner"]
        ):
            del leases[event["run"]]
        if name == "admission.miss":
            # A checkpoint of the scope's rows right after each miss. A miss's reply carries only
            # the count: the backoff it wrote shows nowhere else until a due read or a claim
            # happens to land between the right due time and a wrong one, and the drives idle
            # past every backoff (the slow drive ticks at most every 20 s, the last backoffs are
            # minutes). Without it a miss that backed off wrongly went unseen in most worlds.
            self.world.nursery.start_soon(self.world.sync, scope)

    def _due_again(self, event: dict[str, Any]) -> None:
        """A pass's outcome that leaves its run running names when it is due again: the prompt
        drive reads the due runs in that very millisecond (``_punctual``)."""
        if event["ev"] != "rpc.send" or event["op"] not in ("patch", "commit_pass"):
            return
        for arg in event["args"]:
            if (
                isinstance(arg, dict)
                and arg.get("status") == "running"
                and arg.get("next_attempt_at")
            ):
                at_ms = parse_iso_ms(arg["next_attempt_at"]) - DEFAULT_EPOCH_MS
                if at_ms < self.horizon_ms:
                    self.world.nursery.start_soon(self._punctual, event["scope"], at_ms)

    async def _punctual(self, scope: str, at_ms: float) -> None:
        # Half a millisecond in: the drive's clock reads that millisecond whatever the float
        # rounding of the virtual clock, and the due read is sent with it.
        await self.world.sleep_until_ms(at_ms + 0.5)
        if scope in self.prompt_busy:
            return  # one call per scope at a time; this millisecond is missed
        self.prompt_busy.add(scope)
        try:
            await self.world.drives["prompt"].tick(scope, limit=self.swarm.limits[1])
        finally:
            self.prompt_busy.discard(scope)

    async def _settle(self, scopes: tuple[str, ...], *, except_job: str | None) -> None:
        world = self.world
        # Polled more and more rarely (2 s, then half as long again each time, up to 30 s): a
        # world that waits minutes for a backoff reads its scopes a few dozen times, not hundreds.
        poll_ms = 2_000.0
        while world.now_ms() < self.horizon_ms:
            await world.sleep_until_ms(min(self.horizon_ms, world.now_ms() + poll_ms))
            poll_ms = min(poll_ms * 1.5, 30_000.0)
            for scope in scopes:
                rows = await world.ask(
                    scope, lambda stub: stub.list(JobRunFilter(status="running"))
                )
                if any(row.job != except_job for row in rows):
                    break
            else:
                return

    async def _read_at(self, at_ms: float) -> None:
        """An operator reads the runs through the alarm's wire (traced, so the checks see the
        filter and the rows it got)."""
        world = self.world
        await world.sleep_until_ms(at_ms)
        for index, read in enumerate(self.swarm.reads):
            scope = SWARM_SCOPES[index % 2]
            try:
                runs = await world.drives["alarm"].driver.job_runs(scope, read)
            except Exception as err:  # a lost leg, an evicted scope: an operator just retries
                world.note(f"an operator's read of {scope} failed: {type(err).__name__}")
                continue
            world.note(f"an operator reads {len(runs)} run(s) of {scope} with {read!r}")

    async def _hold_door(self, scope: str, at_ms: float, for_ms: float) -> None:
        world = self.world
        await world.sleep_until_ms(at_ms)
        world.host.hold_door(scope, WALK_MODULE)
        world.note(f"the system door of {WALK_MODULE} on {scope} is held for {for_ms:g} ms")
        await world.host.sleep_ms(for_ms)
        world.host.release_door(scope, WALK_MODULE)
        world.note(f"the system door of {WALK_MODULE} on {scope} is released")

    async def _erase_at(self, at_ms: float, subject: str) -> None:
        world = self.world
        await world.sleep_until_ms(at_ms)
        for scope in SWARM_SCOPES[:2]:
            touched = await world.ask(scope, lambda stub: stub.shred_subject(subject))
            world.note(f"subject {subject} erased on {scope}: {touched} run(s) touched")
            await world.sync(scope)

    async def _copy_at(self, at_ms: float, source: str, target: str) -> None:
        world = self.world
        await world.sleep_until_ms(at_ms)
        dump = await world.ask(source, lambda stub: stub.export_dump())
        imported = await world.ask(target, lambda stub: stub.import_dump(dump, source))
        world.note(f"a dump of {source} imported into {target}: {imported} run(s)")
        await world.sync(target)


def _envelope(subject: str) -> dict[str, Any]:
    """A classified envelope: a person's data, as erasure finds it (subjectId and a piiClass)."""
    return {"subjectId": subject, "piiClass": "contact", "value": f"{subject}@example.org"}


async def _brief_body(run_id: str) -> str:
    return f"brief {run_id[-4:]}"


def _jitter(call: object, rng: random.Random) -> float:
    return rng.uniform(0.5, 20.0)
