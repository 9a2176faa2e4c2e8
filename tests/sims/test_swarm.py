"""The random swarm reaches what the spec has rules for, and several scopes sharing instance names
are not mistaken for a double start."""

from __future__ import annotations

import random
from collections import Counter

from sims import World, WorldSetup, run_world, simulate, sweep
from sims.scenarios._swarm import draw_swarm
from sims.world._world import DriveSpec

SCOPES = ("north", "south", "west")


async def _shared_instances(world: World) -> None:
    world.add_drive(DriveSpec(name="cron"))
    world.add_drive(DriveSpec(name="alarm"))
    for scope in SCOPES:
        await world.start_walk("cron", scope, objects=4, chunk=2, instance="shared")
    for scope in SCOPES:
        world.every("cron", scope, every_ms=500, first_ms=0, until_ms=30_000)
        world.every("alarm", scope, every_ms=300, first_ms=100, until_ms=30_000)
    await world.settle(SCOPES, horizon_ms=30_000, poll_ms=1_000)


def test_one_instance_name_live_in_several_scopes_is_no_double_start() -> None:
    outcome = run_world(3, WorldSetup(scopes=SCOPES, objects=4), _shared_instances)
    starts = [e for e in outcome.trace.events if e["ev"] == "world.start"]
    # Three runs, one per scope, all live at once under the one instance name.
    assert len({e["run"] for e in starts}) == 3
    assert outcome.report.ok, [f.line() for f in outcome.report.violations]
    assert all(run.status == "done" for runs in outcome.runs.values() for run in runs)


def test_each_swarm_feature_is_switched_on_by_some_seeds_and_off_by_others() -> None:
    swarms = [draw_swarm(random.Random(f"{seed}/swarm")) for seed in range(200)]
    features = {
        "walk retry": [s.walk_retry is not None for s in swarms],
        "chores": [bool(s.chores) for s in swarms],
        "orphans": [s.orphans > 0 for s in swarms],
        "limits": [s.limits != (None, None) for s in swarms],
        "held door": [s.hold_door is not None for s in swarms],
        "starts": [s.starts for s in swarms],
        "shared instance": [s.shared_instance for s in swarms],
        "erasure mid": [s.erase_mid_ms is not None for s in swarms],
        "erasure after": [s.erase_after for s in swarms],
        "export": [s.export_ms is not None for s in swarms],
        "restore": [s.restore for s in swarms],
        "slow drive": [s.slow_drive for s in swarms],
        "crowd": [s.crowd > 0 for s in swarms],
    }
    for name, on in features.items():
        assert 10 <= sum(on) <= 190, f"{name} is on in {sum(on)} of 200 seeds"
    steps = [step for s in swarms for chore in s.chores for step in chore["steps"]]
    # Step policies narrower and wider than the job's are both drawn.
    narrower = wider = 0
    for s in swarms:
        for chore in s.chores:
            for step in chore["steps"]:
                if step["retry"] is None:
                    continue
                if step["retry"]["max_attempts"] < s.chore_retry.max_attempts:
                    narrower += 1
                elif step["retry"]["max_attempts"] > s.chore_retry.max_attempts:
                    wider += 1
    assert narrower > 10
    assert wider > 10
    assert any(step["fail"] for step in steps)
    assert any(step["tighten"] for step in steps)
    # A crowd is more runnable runs than the default budget of 50, on a drive given no limit.
    crowds = [s for s in swarms if s.crowd]
    assert all(s.crowd > 50 and s.limits[0] is None for s in crowds)


def test_a_few_swarm_worlds_do_what_the_spec_has_rules_for() -> None:
    seen: Counter[str] = Counter()
    for seed in range(8):
        sim = simulate("random", seed)
        assert sim.report.ok, [f.line() for f in sim.report.violations]
        for event in sim.outcome.trace.events:
            name = event["ev"]
            if name == "world.note":
                seen[str(event["text"]).split(" ")[0]] += 1
            elif name == "pass.outcome":
                seen[f"outcome {event['status']}"] += 1
            else:
                seen[name] += 1
    for name in (
        "admission.miss",
        "begin.refused",
        "step.memo",
        "rpc.late",
        "claim.won",
        "outcome deferred",
        "outcome failed",
        "outcome retrying",
        "outcome completed",
        "start",  # refused starts and the orphans' deploy are noted
        "subject",  # erasures
        "a",  # dump imports ("a dump of ...") and the deploy ("a deploy registers ...")
    ):
        assert seen[name] > 0, f"no {name!r} in seeds 0..7: {sorted(seen)}"


def test_a_flat_admission_backoff_is_caught_by_many_swarm_worlds() -> None:
    # A miss's reply carries only the count; the swarm's checkpoint after each miss is what shows
    # the backoff it wrote. Half the worlds have the slow drive, whose misses run to the tenth.
    report = sweep("random", range(8), jobs=1, mutant="admission-backoff-flat")
    caught = [
        s.seed
        for s in report.seeds
        if any("] store-rows " in v and "next_attempt_at" in v for v in s.violations)
    ]
    assert len(caught) >= 3, f"seeds 0..7 caught the flat backoff only in {caught}"
