"""The catalogue of named scenarios, each with the outcome the spec promises for it.

Every scenario is a world-driving function registered with
:func:`sims.scenarios._registry.scenario`; its docstring is what ``python -m sims list`` prints, and
its ``expect`` function lists where an outcome differs from what the docstring says.
"""

from __future__ import annotations

import random

from driver import (
    JOB_ERASED_RUNNING_NOTE,
    JOB_LEASE_EXPIRED_NOTE,
    JOB_LEASE_TOO_SHORT_NOTE,
    RetryPolicy,
    admission_backoff_ms,
    parse_iso_ms,
)

from ..faults._plan import (
    EVENT_KINDS,
    CrashDrive,
    DelayLeg,
    DropLeg,
    Evict,
    FaultPlan,
    PauseDrive,
    StoreClockFault,
    UpstreamFailure,
    draw_plan,
)
from ..runners._outcome import Simulation
from ..runners._run import WorldSetup
from ..world._world import DriveSpec, World
from ._registry import LEASE_MS, SCOPE, expect_all, fixed, scenario
from ._swarm import SWARM_DRIVES, SWARM_SCOPES, SwarmWorld, draw_swarm, edge_faults


async def _cron_and_alarm(
    world: World,
    *,
    objects: int,
    chunk: int,
    horizon_ms: float = 60_000,
    retry: RetryPolicy | None = None,
) -> None:
    """The production shape: a cron every 5 s and an alarm offset by 1.2 s, on one scope."""
    world.add_drive(DriveSpec(name="cron"), retry=retry)
    world.add_drive(DriveSpec(name="alarm"), retry=retry)
    await world.start_walk("cron", SCOPE, objects=objects, chunk=chunk)
    world.every("cron", SCOPE, every_ms=5_000, first_ms=0, until_ms=horizon_ms)
    world.every("alarm", SCOPE, every_ms=5_000, first_ms=1_200, until_ms=horizon_ms)
    await world.settle((SCOPE,), horizon_ms=horizon_ms, poll_ms=1_000)


# -- late-begin ---------------------------------------------------------------------------------


def _expect_late_begin(sim: Simulation) -> list[str]:
    facts = sim.facts
    run = facts.only_run()
    return expect_all(
        (
            facts.count("handler.invoke") == 2,
            f"two handler runs, saw {facts.count('handler.invoke')}",
        ),
        (facts.writes("commit_pass") == 1, f"one commit, saw {facts.writes('commit_pass')}"),
        (run.status == "done", f"the run ends done, it is {run.status}"),
        (
            any(e["takeover"] and e["attempts"] == 1 for e in facts.of("claim.won")),
            "the rival's takeover charges the begun pass one attempt",
        ),
        (
            facts.superseded_by("cron") == 1,
            "the late pass is stopped at its next step or commit (superseded)",
        ),
        (sim.report.explained_of("double-run") == 1, "one double run, explained as a late BEGIN"),
    )


@scenario(
    "late-begin",
    setup=fixed(
        FaultPlan((DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=1_250),)),
        objects=20,
    ),
    expect=_expect_late_begin,
)
async def late_begin(world: World) -> None:
    """BEGIN is written but its reply is held past the lease: the alarm takes the run over (charged)
    and starts walking it; the late reply then arrives, the cron runs its handler too — both run
    at once — until the cron's first step boundary finds the lease gone. One of the two double
    runs the spec documents (the other: a stretch longer than the lease)."""
    await _cron_and_alarm(world, objects=20, chunk=20)


def _expect_late_begin_once(sim: Simulation) -> list[str]:
    facts = sim.facts
    run = facts.only_run()
    return expect_all(
        (
            facts.count("handler.invoke") == 1,
            f"one handler run (the late pass), saw {facts.count('handler.invoke')}",
        ),
        (facts.count("takeover.exhausted") == 1, "the rival fails the run without invoking"),
        (run.status == "failed", f"the run ends failed, it is {run.status}"),
        (
            run.last_error == JOB_LEASE_EXPIRED_NOTE,
            f"with the expiry note, it says {run.last_error!r}",
        ),
        (facts.writes("commit_pass") == 0, "nothing commits"),
    )


@scenario(
    "late-begin-once",
    setup=fixed(
        FaultPlan((DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=1_500),)),
        objects=4,
    ),
    expect=_expect_late_begin_once,
    # The run ends failed: the takeover spent its last attempt, as the scenario documents.
    failures_expected=True,
)
async def late_begin_once(world: World) -> None:
    """The late-BEGIN world with ``max_attempts=1``: the alarm's takeover charges the begun pass
    its only attempt and fails the run without invoking the handler; the late pass still runs once,
    and writes nothing."""
    await _cron_and_alarm(world, objects=4, chunk=4, retry=RetryPolicy(max_attempts=1))


# -- late-claim and slow-begin: admission misses ---------------------------------------------


def _expect_late_claim(sim: Simulation) -> list[str]:
    facts = sim.facts
    run = facts.only_run()
    misses = list(facts.of("admission.miss"))
    return expect_all(
        (len(misses) == 1, f"one admission miss, saw {len(misses)}"),
        (bool(misses) and misses[0]["misses"] == 1, "the miss is the first of ten"),
        (
            facts.count("handler.invoke") == 1,
            f"the handler runs once, on a later claim; saw {facts.count('handler.invoke')}",
        ),
        (run.status == "done" and run.attempts == 0, "the run ends done, with no attempt charged"),
        (run.admission_misses == 0, "the next BEGIN clears the miss count"),
    )


@scenario(
    "late-claim",
    setup=fixed(
        FaultPlan(
            (DelayLeg(drive="cron", operation="claim", nth=1, leg="reply", ms=LEASE_MS * 0.75),)
        ),
        objects=4,
    ),
    expect=_expect_late_claim,
)
async def late_claim(world: World) -> None:
    """The claim's reply comes back with less than the margin of the lease left: the cron does not
    BEGIN, records an admission miss (no attempt charged, a 1 s backoff, a warning), and a later
    claim runs the pass."""
    await _cron_and_alarm(world, objects=4, chunk=4)


def _expect_slow_begin(sim: Simulation) -> list[str]:
    facts = sim.facts
    run = facts.only_run()
    return expect_all(
        (facts.count("begin.refused") == 1, "the late BEGIN is refused by the store"),
        (facts.count("handler.invoke") == 1, "only the alarm's pass runs the handler"),
        (sim.report.explained_of("double-run") == 0, "no double run"),
        (run.status == "done" and run.attempts == 0, "the run ends done, nothing charged"),
    )


@scenario(
    "slow-begin",
    setup=fixed(
        FaultPlan(
            (DelayLeg(drive="cron", operation="begin", nth=1, leg="request", ms=LEASE_MS * 1.5),)
        ),
        objects=4,
    ),
    expect=_expect_slow_begin,
)
async def slow_begin(world: World) -> None:
    """BEGIN is delayed in transit past the lease: the alarm claims the expired, never-begun lease
    for free and runs it; when the cron's BEGIN finally arrives the store refuses it, and nothing
    runs twice."""
    await _cron_and_alarm(world, objects=4, chunk=4)


# -- crash-after-begin and lease-expiry-between-steps: the at-least-once windows ----------------


def _expect_crash_after_begin(sim: Simulation) -> list[str]:
    facts = sim.facts
    run = facts.only_run()
    takeovers = [e for e in facts.of("claim.won") if e["takeover"]]
    return expect_all(
        (len(takeovers) == 1 and takeovers[0]["attempts"] == 1, "the takeover charges one attempt"),
        (facts.count("handler.invoke") == 1, "the handler runs once, on the alarm"),
        (run.status == "done", f"the run ends done, it is {run.status}"),
        (
            sim.report.explained_of("handler-iff-begin") == 1,
            "the begun, never-run pass is explained",
        ),
    )


@scenario(
    "crash-after-begin",
    setup=fixed(
        FaultPlan(
            (
                DelayLeg(drive="cron", operation="begin", nth=1, leg="reply", ms=50),
                CrashDrive(drive="cron", at_ms=30, down_ms=10_000),
            )
        ),
        objects=4,
    ),
    expect=_expect_crash_after_begin,
)
async def crash_after_begin(world: World) -> None:
    """The cron is killed after its BEGIN was written and before its handler started: nothing can
    tell that from a crash inside the handler, so the alarm's takeover charges the begun pass an
    attempt, then runs the walk to the end."""
    await _cron_and_alarm(world, objects=4, chunk=4)


def _expect_lease_expiry(sim: Simulation) -> list[str]:
    facts = sim.facts
    run = facts.only_run()
    effects = sim.outcome.effects[SCOPE]
    doubled = sorted(key.split("/")[1] for key, n in effects.items() if n > 1)
    return expect_all(
        (facts.count("handler.invoke") == 2, "both passes run the handler"),
        (facts.count("step.memo") == 1, "the rival reuses the one step the stale pass recorded"),
        (doubled == ["1"], f"only object 1's effect lands twice, saw {doubled}"),
        (facts.writes("commit_pass") == 1, "one commit"),
        (run.status == "done" and run.counters == {"walked": 4}, "the run ends done, walked 4"),
        (sim.report.explained_of("double-run") == 1, "the overlap is explained"),
        (sim.report.explained_of("effects") == 1, "the duplicate effect is explained"),
    )


@scenario(
    "lease-expiry-between-steps",
    setup=fixed(
        FaultPlan((PauseDrive(drive="cron", nth=2, ms=LEASE_MS * 1.5, where="after-effect"),)),
        objects=4,
    ),
    expect=_expect_lease_expiry,
)
async def lease_expiry_between_steps(world: World) -> None:
    """The cron stops for longer than the lease inside a step, after its effect landed and before
    the step was recorded: the alarm takes over, replays the recorded step from the memo, runs the
    unrecorded one again (the effect lands twice — the step body is at-least-once) and commits;
    the cron's late record is refused and its pass stops."""
    await _cron_and_alarm(world, objects=4, chunk=4)


# -- admission-exhaustion and clock-skew --------------------------------------------------------


def _expect_exhaustion(sim: Simulation) -> list[str]:
    facts = sim.facts
    run = facts.only_run()
    claims = [parse_iso_ms(e["store_at"]) for e in facts.of("rpc.exec") if e["op"] == "claim"]
    misses = [parse_iso_ms(e["store_at"]) for e in facts.of("rpc.exec") if e["op"] == "miss"]
    gaps = [claim - miss for miss, claim in zip(misses, claims[1:], strict=False)]
    waits = [admission_backoff_ms(n) for n in range(1, 10)]
    return expect_all(
        (facts.count("admission.miss") == 10, f"ten misses, saw {facts.count('admission.miss')}"),
        (run.status == "failed", f"the run fails, it is {run.status}"),
        (
            (run.last_error or "").startswith(f"{JOB_LEASE_TOO_SHORT_NOTE}: job importer/walk"),
            f"with the lease-too-short note, it says {run.last_error!r}",
        ),
        (run.admission_misses == 10 and run.attempts == 0, "ten misses, no attempt charged"),
        (facts.count("handler.invoke") == 0, "the handler never runs"),
        (
            len(gaps) == 9 and all(w <= g < w + 1_100 for g, w in zip(gaps, waits, strict=True)),
            f"backoffs of 1 s, 2 s, ... 256 s between the claims; saw {gaps}",
        ),
    )


@scenario(
    "admission-exhaustion",
    setup=fixed(objects=4),
    expect=_expect_exhaustion,
    failures_expected=True,  # the run ends failed by its tenth admission miss, as documented
)
async def admission_exhaustion(world: World) -> None:
    """Every claim's reply takes 80 % of the lease: each claim is an admission miss, backing off
    1 s, 2 s, ... 256 s, and the tenth fails the run with the lease-too-short note — no handler ever
    ran and no attempt was charged."""
    world.add_drive(DriveSpec(name="cron", reply_ms={"claim": LEASE_MS * 0.8, "*": 1.0}))
    await world.start_walk("cron", SCOPE, objects=4, chunk=4)
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=1_000_000)
    await world.settle((SCOPE,), horizon_ms=1_000_000, poll_ms=10_000)


def _expect_skew(sim: Simulation) -> list[str]:
    facts = sim.facts
    run = facts.only_run()
    return expect_all(
        (facts.count("admission.miss") == 0, "no admission miss"),
        (facts.count("begin.refused") == 0, "no BEGIN refused"),
        (run.status == "done" and run.attempts == 0, "the run ends done, nothing failed"),
    )


@scenario(
    "clock-skew",
    setup=fixed(FaultPlan((StoreClockFault(skew_ms=100.0),)), objects=6, lease_ms=100),
    expect=_expect_skew,
)
async def clock_skew(world: World) -> None:
    """A 100 ms lease, the store's clock 100 ms ahead of one drive and 200 ms ahead of the other:
    every lease time is the store's and every wait the drive's own, so the skew refuses nothing
    and fails nothing."""
    world.add_drive(DriveSpec(name="cron", clock_skew_ms=0.0))
    world.add_drive(DriveSpec(name="alarm", clock_skew_ms=-100.0))
    await world.start_walk("cron", SCOPE, objects=6, chunk=2)
    world.every("cron", SCOPE, every_ms=50, first_ms=0, until_ms=60_000)
    world.every("alarm", SCOPE, every_ms=50, first_ms=25, until_ms=60_000)
    await world.settle((SCOPE,), horizon_ms=60_000, poll_ms=100)


# -- overlapping-drives and erasure-mid-pass ----------------------------------------------------


def _expect_overlapping(sim: Simulation) -> list[str]:
    facts = sim.facts
    runs = facts.runs()
    effects = sim.outcome.effects[SCOPE]
    by_drive = {e["drive"] for e in facts.of("handler.invoke")}
    return expect_all(
        (len(runs) == 3 and all(r.status == "done" for r in runs), "all three runs end done"),
        (all(n == 1 for n in effects.values()) and len(effects) == 18, "each object's effect once"),
        (facts.count("claim.lost") > 0, "the drives race for claims, and one loses each race"),
        (by_drive == {"cron", "alarm"}, f"both drives run passes, saw {sorted(by_drive)}"),
        (sim.report.explained_of("double-run") == 0, "no double run"),
    )


def _jitter(call: object, rng: random.Random) -> float:
    return rng.uniform(0.5, 20.0)


@scenario("overlapping-drives", setup=fixed(objects=6), expect=_expect_overlapping)
async def overlapping_drives(world: World) -> None:
    """A cron and an alarm tick on one scope at overlapping times with jittered latency, over three
    runs: they snapshot the same due runs and race for every claim; exactly one wins each, and
    every step runs once."""
    world.add_drive(DriveSpec(name="cron", request_ms=_jitter, reply_ms=_jitter))
    world.add_drive(DriveSpec(name="alarm", request_ms=_jitter, reply_ms=_jitter))
    for instance in ("a", "b", "c"):
        await world.start_walk("cron", SCOPE, objects=6, chunk=2, instance=instance)
    world.every("cron", SCOPE, every_ms=200, first_ms=0, until_ms=60_000)
    world.every("alarm", SCOPE, every_ms=200, first_ms=0, until_ms=60_000)
    await world.settle((SCOPE,), horizon_ms=60_000, poll_ms=500)


SUBJECT = "subject-7"


def _expect_erasure(sim: Simulation) -> list[str]:
    facts = sim.facts
    run = facts.only_run()
    late = [e for e in facts.of("rpc.exec") if e["op"] == "record_step" and e["t"] > 200]
    return expect_all(
        (run.status == "failed", f"the erased run is failed, it is {run.status}"),
        (run.last_error == JOB_ERASED_RUNNING_NOTE, f"with the erasure note: {run.last_error!r}"),
        (
            isinstance(run.payload, dict) and "_substratRedacted" in run.payload,
            "its payload is a tombstone",
        ),
        (all(e["result"] is False for e in late), "the pass writes nothing after the erasure"),
        (facts.writes("commit_pass") == 0, "nothing commits"),
    )


@scenario(
    "erasure-mid-pass",
    setup=fixed(
        FaultPlan((PauseDrive(drive="cron", nth=2, ms=400, where="after-effect"),)), objects=4
    ),
    expect=_expect_erasure,
    failures_expected=True,  # the erasure stops the run it holds, as documented
)
async def erasure_mid_pass(world: World) -> None:
    """A run carrying a data subject is erased while its pass is inside a step: the erasure fails
    the run and tombstones what it held, and the pass's next write is refused, so nothing the
    person was in is written back."""
    world.add_drive(DriveSpec(name="cron"))
    await world.start_walk("cron", SCOPE, objects=4, chunk=4, subject=SUBJECT)
    world.every("cron", SCOPE, every_ms=5_000, first_ms=0, until_ms=20_000)
    await world.sleep_until_ms(200)
    touched = await world.host.stub(SCOPE).shred_subject(SUBJECT)
    world.note(f"subject {SUBJECT} erased: {touched} run(s) touched")
    await world.sync(SCOPE)
    await world.settle((SCOPE,), horizon_ms=20_000, poll_ms=1_000)


# -- walk-100k ------------------------------------------------------------------------------------


WALK_OBJECTS = 100_000


def _expect_walk(sim: Simulation) -> list[str]:
    facts = sim.facts
    run = facts.only_run()
    effects = sim.outcome.effects[SCOPE]
    objects = run.payload["objects"] if isinstance(run.payload, dict) else 0
    missing = [i for i in range(objects) if effects[f"{run.id}/{i}"] == 0]
    doubled = sum(1 for n in effects.values() if n > 1)
    return expect_all(
        (run.status == "done", f"the walk ends done, it is {run.status} ({run.last_error!r})"),
        (run.counters == {"walked": objects}, f"every object counted once: {run.counters}"),
        (not missing, f"every object has its effect; missing {missing[:5]}"),
        (facts.count("fault.evict") >= 3 and facts.count("fault.crash") >= 1, "the faults struck"),
        (facts.count("rpc.drop") >= 1, "record_step requests were lost on the wire"),
        (
            doubled == sim.report.explained_of("effects"),
            f"{doubled} effects landed twice and the checks explained "
            f"{sim.report.explained_of('effects')}: each must be a step whose record was lost",
        ),
    )


def _walk_setup(seed: int) -> WorldSetup:
    rng = random.Random(f"{seed}/walk-faults")
    evictions = tuple(
        Evict(scope=SCOPE, at_ms=float(at)) for at in sorted(rng.sample(range(1_000, 60_000), 5))
    )
    # Inside the ~101 000 upstream calls the walk makes (1 000 page reads and 100 000 fetches,
    # plus retries), so that every failure the story promises really strikes.
    failures = tuple(
        UpstreamFailure(first=first, count=2)
        for first in sorted(rng.sample(range(100, 100_000), 20))
    )
    # A record_step request lost on the wire after its effect landed: the one window where the
    # spec lets an effect land twice: the effect landed, its record did not (docs/protocol.md,
    # "The at-least-once windows").
    lost_records = tuple(
        DropLeg(drive=drive, operation="record_step", nth=nth, leg="request")
        for drive in ("cron", "alarm")
        for nth in sorted(rng.sample(range(1, 40_000), 5))
    )
    deploy = CrashDrive(drive="cron", at_ms=float(rng.randint(5_000, 30_000)), down_ms=3_000)
    return WorldSetup(
        plan=FaultPlan((*evictions, deploy, *failures, *lost_records)),
        objects=WALK_OBJECTS,
        lease_ms=5_000,
        trace=False,
    )


@scenario("walk-100k", setup=_walk_setup, expect=_expect_walk)
async def walk_100k(world: World) -> None:
    """The spec's opening example: walk 100 000 objects, 100 per pass, one step per object, through
    five evictions, a deploy (the cron killed mid-pass and back 3 s later), forty transient
    upstream failures and ten lost step records — continuing where it stopped, every object's
    effect landing, and an effect landing twice only where its step's record was lost."""
    world.add_drive(DriveSpec(name="cron", request_ms=0.0, reply_ms=0.0))
    world.add_drive(DriveSpec(name="alarm", request_ms=0.0, reply_ms=0.0))
    await world.start_walk("cron", SCOPE, objects=WALK_OBJECTS, chunk=100)
    world.every("cron", SCOPE, every_ms=1_000, first_ms=0, until_ms=10_000_000, max_passes=50)
    world.every("alarm", SCOPE, every_ms=1_000, first_ms=500, until_ms=10_000_000, max_passes=50)
    await world.settle((SCOPE,), horizon_ms=10_000_000, poll_ms=10_000)


# -- random ---------------------------------------------------------------------------------------


RANDOM_SCOPES = SWARM_SCOPES
RANDOM_HORIZON_MS = 3_600_000
#: The share of the swarm's worlds that run on files: each costs about ten in memory.
RANDOM_ON_FILES = 0.1


def _random_setup(seed: int) -> WorldSetup:
    rng = random.Random(f"{seed}/plan")
    drives = ("cron", "alarm")
    plan = draw_plan(
        rng,
        drives=drives,
        scopes=RANDOM_SCOPES[:2],
        lease_ms=LEASE_MS,
        margin_ms=LEASE_MS * 0.25,
        horizon_ms=30_000,
    )
    edges = edge_faults(rng, drives=drives, lease_ms=LEASE_MS, margin_ms=LEASE_MS * 0.25)
    # The faults that strike at events and the PCT scheduler, from a stream of their own so that
    # every other draw of a seed stays what it was.
    events = draw_plan(
        random.Random(f"{seed}/events"),
        drives=drives,
        scopes=RANDOM_SCOPES[:2],
        lease_ms=LEASE_MS,
        margin_ms=LEASE_MS * 0.25,
        horizon_ms=30_000,
        kinds=EVENT_KINDS,
    )
    # The slow drive's scope only in the worlds that have the slow drive: an untouched scope
    # still costs its actor and its schema when the world reads it at the end.
    swarm = draw_swarm(random.Random(f"{seed}/swarm"))
    return WorldSetup(
        scopes=RANDOM_SCOPES if swarm.slow_drive else RANDOM_SCOPES[:2],
        drives=SWARM_DRIVES,
        plan=FaultPlan((*plan.faults, *edges, *events.faults)),
        objects=6,
        record_returns=True,
        # Some worlds on SQLite files with the output gate on (identity, watch, syncs, reopening
        # after an eviction), from a stream of their own; the trace is the one in memory.
        on_files=random.Random(f"{seed}/files").random() < RANDOM_ON_FILES,
    )


def _expect_random(sim: Simulation) -> list[str]:
    return []


@scenario(
    "random",
    setup=_random_setup,
    expect=_expect_random,
    faults_must_fire=False,
    # Its chores throw and fail on purpose, and its erasures and short leases end runs failed:
    # what the swarm documents (``_expect_random``), not a bug of a handler.
    failures_expected=True,
)
async def random_world(world: World) -> None:
    """Everything drawn from the seed: a swarm of fault kinds (delayed, dropped and late-delivered
    requests at the spec's boundary values, evictions, crashes, pauses, store clock skew and drift,
    upstream failures) and of world features (step policies narrower and wider than the job's,
    handlers that omit the cursor, count, reuse step names and throw, unregistered jobs ahead in
    the due order under small limits, a held system door, joins and refused starts, erasures,
    dump imports, one instance in several scopes, admission misses to the tenth) over two to
    three drives and three scopes; only the invariants are asserted."""
    swarm = draw_swarm(world.rng("swarm"))
    await SwarmWorld(world, swarm, horizon_ms=RANDOM_HORIZON_MS).run()
