"""The spec's motivating walk: N objects in chunks of 100, one step per object, through faults.

Each object's step writes one effect row through ``ctx.scope()`` (the module table ``items``, which
has no unique key, so a step body that ran twice leaves two rows). On the way the walk meets:

* transient upstream failures: the first attempt at every 37th object raises, which fails the
  pass; the retry replays the chunk from its memo and runs that step again;
* evictions: for every 450th object the scope is evicted just as the step's ``record_step`` is
  sent, and that request is lost — the effect landed and its memo did not, which is the one window
  where the spec allows a duplicate ("a stop after fn's effect lands and before recordStep
  commits");
* a drive restart: at one object the drive dies mid-pass with its scope evicted; a new drive, with
  its own link and clocks, takes the run over once the dead pass's lease expires (charged).

``check`` then holds the walk to the spec: the run is ``done`` with every object counted once,
every object has an effect row, and an object has more than one only if one of its step attempts
ran without its memo being committed.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import attrs
import trio

from driver import (
    JobDriver,
    JobDriveReport,
    JobPassContext,
    JobPassResult,
    JobRun,
    RetryPolicy,
    StartJobRunInput,
    parse_iso_ms,
)
from scopehost import Link, LinkCall, ScopeHost, Verdict, open_scope_host

SCOPE = "walk-scope"
MODULE = "importer"
JOB = "walk"
CHUNK = 100
LEASE_MS = 1000
UPSTREAM_EVERY = 37
EVICT_EVERY = 450


@attrs.define
class WalkResult:
    """What a walk left: the run, its effect rows per object, the trace and the pass count."""

    run: JobRun
    effects: Counter[int]
    events: list[tuple[str, dict[str, Any]]]
    passes: int
    restarts: int


def _item(call: LinkCall) -> int | None:
    if call.operation in ("begin_step", "record_step") and str(call.args[1]).startswith("obj-"):
        return int(str(call.args[1])[4:])
    return None


class _Walk:
    def __init__(self, host: ScopeHost, objects: int, *, seed: int, restart_at: int) -> None:
        self.host = host
        self.objects = objects
        self.seed = seed
        self.restart_at = restart_at
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.upstream_failed: set[int] = set()
        self.evicted: set[int] = set()
        self.restarted = False
        self.kill: trio.CancelScope | None = None
        self.generation = 0

    def observe(self, event: str, fields: dict[str, Any]) -> None:
        if event.startswith(("step.", "handler.", "pass.", "claim.", "takeover.")):
            self.events.append((event, fields))

    async def handler(self, ctx: JobPassContext) -> JobPassResult:
        at = ctx.cursor or 0
        end = min(at + CHUNK, self.objects)
        scope = await ctx.scope()
        for index in range(at, end):

            async def body(index: int = index) -> int:
                if index % UPSTREAM_EVERY == 5 and index not in self.upstream_failed:
                    self.upstream_failed.add(index)
                    raise RuntimeError(f"upstream 503 at object {index}")
                seq: int = await scope.invoke("record", {"kind": "walk", "key": str(index)})
                return seq

            await ctx.step(f"obj-{index}", body)
            ctx.count("walked")
        return JobPassResult(cursor=end, done=end == self.objects)

    async def faults(self, call: LinkCall) -> Verdict:
        index = _item(call)
        if index is None:
            return None
        if (
            call.operation == "record_step"
            and index % EVICT_EVERY == 7
            and index not in self.evicted
        ):
            self.evicted.add(index)
            self.host.evict(SCOPE)
            return "drop"
        if call.operation == "begin_step" and index == self.restart_at and not self.restarted:
            self.restarted = True
            self.host.evict(SCOPE)
            assert self.kill is not None
            self.kill.cancel()
            await trio.sleep(0)
        return None

    def new_drive(self) -> JobDriver:
        self.generation += 1
        name = f"drive-{self.generation}"
        link = Link(name=name)
        link.add_request_hook(self.faults)
        driver = JobDriver(
            self.host,
            name=name,
            link=link,
            rng=random.Random(self.seed * 1000 + self.generation),
            observer=self.observe,
        )
        driver.register_job(
            MODULE,
            JOB,
            self.handler,
            lease_ms=LEASE_MS,
            retry=RetryPolicy(max_attempts=10, base_delay_ms=100, max_delay_ms=1000),
        )
        return driver

    async def run(self) -> WalkResult:
        driver = self.new_drive()
        started = await driver.start_job_run(
            SCOPE, StartJobRunInput(module_id=MODULE, job=JOB, payload={"source": "crm"})
        )
        passes = 0
        while True:
            self.kill = trio.CancelScope()
            report = JobDriveReport()
            with self.kill:
                report = await driver.run_due_jobs(SCOPE, max_passes=1_000)
            if self.kill.cancelled_caught:
                driver = self.new_drive()  # the restart: a new process, a new drive
            passes += report.advanced + report.completed + report.retrying + report.failed
            [run] = await driver.job_runs(SCOPE)
            if run.status != "running":
                break
            if report.attempted == 0:
                due = run.next_attempt_at
                wait = parse_iso_ms(due) - self.host.clock.now_ms() if due else 0
                await trio.sleep(max(wait, 1) / 1000)
        assert run.id == started.id
        rows = await self.host.stub(SCOPE).invoke("items", {"kind": "walk"})
        effects = Counter(int(row["key"]) for row in rows)
        return WalkResult(run, effects, self.events, passes, self.generation - 1)


async def run_walk(objects: int, *, seed: int = 1, restart_at: int | None = None) -> WalkResult:
    """Walk ``objects`` objects to the end on a fresh in-memory scope host (virtual time)."""
    async with open_scope_host() as host:
        walk = _Walk(
            host,
            objects,
            seed=seed,
            restart_at=restart_at if restart_at is not None else objects * 3 // 5 + 11,
        )
        return await walk.run()


def unmemoized_steps(events: list[tuple[str, dict[str, Any]]]) -> set[int]:
    """Objects one of whose step attempts ran its body without a committed memo afterwards."""
    open_runs: dict[tuple[str, str], int] = {}
    unmemoized: set[int] = set()
    for event, fields in events:
        if event == "step.run":
            open_runs[(fields["owner"], fields["step"])] = int(fields["step"][4:])
        elif event == "step.end":
            index = open_runs.pop((fields["owner"], fields["step"]))
            if fields["error"] is not None or not fields["recorded"]:
                unmemoized.add(index)
    unmemoized.update(open_runs.values())  # ran, and never reported an end
    return unmemoized


def check(result: WalkResult, objects: int) -> None:
    """Hold a finished walk to the spec (raises AssertionError naming what broke)."""
    run = result.run
    assert run.status == "done", f"the walk ended {run.status!r}: {run.last_error}"
    assert run.counters == {"walked": objects}, run.counters
    assert run.cursor == objects, run.cursor
    missing = [index for index in range(objects) if result.effects[index] == 0]
    assert not missing, f"objects never done: {missing[:10]}"
    duplicated = {index for index, count in result.effects.items() if count > 1}
    allowed = unmemoized_steps(result.events)
    assert duplicated <= allowed, f"duplicates the spec does not allow: {duplicated - allowed}"
    memoized: set[tuple[str, str]] = set()
    for event, fields in result.events:
        key = (fields.get("run", ""), fields.get("step", ""))
        if event == "step.end" and fields["error"] is None and fields["recorded"]:
            memoized.add(key)
        elif event == "step.run":
            assert key not in memoized, f"step {key[1]} re-ran after its memo was committed"
