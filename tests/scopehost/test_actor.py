"""The actor is the input gate: one message at a time, one transaction each, eviction as a DO's."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing

from driver import JobRunFilter, ValidationFailed
from scopehost import Link, ScopeDatabase, ScopeEvicted, StoreClock, VirtualClock, open_scope_host
from scopehost._actor import Message, ScopeActor

from .async_support import STARTED, new_row
from .store_support import OLD_RUNS_DDL


async def test_fifty_concurrent_starts_for_one_key_give_one_row(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        stub = host.stub("s1")
        answers: list[str] = []

        async def start(index: int) -> None:
            row = new_row(f"01RUN{index:04d}")
            answers.append((await stub.start_or_join(row.key, row)).id)

        async with trio.open_nursery() as nursery:
            for index in range(50):
                nursery.start_soon(start, index)

        rows = await stub.list(JobRunFilter(limit=500))
        assert len(rows) == 1
        assert answers == [rows[0].id] * 50


def _memory_actor() -> tuple[sqlite3.Connection, ScopeActor]:
    """An actor of scope ``s1`` on an in-memory database, not yet serving."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    actor = ScopeActor(
        "s1", lambda: ScopeDatabase(connection, "s1"), lambda database, changed: None, StoreClock()
    )
    return connection, actor


async def test_eviction_fails_queued_calls_and_keeps_committed_rows(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection, actor = _memory_actor()
    first, second, third = (new_row(f"01RUN{c}", instance=c) for c in "ABC")
    committed = Message("start_or_join", (first.key, first))
    actor.submit(committed)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.serve)
        assert committed.done is not None
        await committed.done.wait()
        # Two calls wait in the queue when the abort comes: neither may run.
        queued = [Message("start_or_join", (row.key, row)) for row in (second, third)]
        for message in queued:
            actor.submit(message)
        actor.evict()
    for message in queued:
        assert message.outcome is not None
        assert isinstance(message.outcome.error, ScopeEvicted)
        assert str(message.outcome.error) == (
            "start_or_join on scope 's1' did not run: the scope was evicted while it waited; "
            "the next call starts a fresh actor on the same database"
        )
    assert actor.closed
    database = ScopeDatabase(connection, "s1")
    rows = database.list(JobRunFilter(), now=STARTED)
    assert [row.id for row in rows] == ["01RUNA"]


async def test_the_next_call_after_an_eviction_starts_a_fresh_actor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        stub = host.stub("s1")
        row = new_row("01RUNA")
        await stub.start_or_join(row.key, row)
        assert host.evict("s1") is True
        other = new_row("01RUNB", instance="b")
        await stub.start_or_join(other.key, other)
        assert [r.id for r in await stub.list(JobRunFilter())] == ["01RUNB", "01RUNA"]


async def test_evicting_an_idle_scope_is_harmless(autojump_clock: trio.testing.MockClock) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        assert host.evict("never-called") is False
        stub = host.stub("s1")
        row = new_row("01RUNA")
        await stub.start_or_join(row.key, row)
        assert host.evict("s1") is True
        assert host.evict("s1") is False
        assert [r.id for r in await stub.list(JobRunFilter())] == ["01RUNA"]


async def test_a_failing_operation_rolls_back_and_the_actor_keeps_serving(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        stub = host.stub("s1")
        with pytest.raises(
            ValidationFailed,
            match=r"^operation is 'no-such-operation', which this scope does not have; "
            r"it has 'items', 'record', 'record_once'$",
        ):
            await stub.invoke("no-such-operation")
        row = new_row("01RUNA")
        assert (await stub.start_or_join(row.key, row)).id == "01RUNA"


async def test_a_directory_scope_survives_eviction_and_a_new_host(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        stub = host.stub("s1")
        row = new_row("01RUNA")
        await stub.start_or_join(row.key, row)
        host.evict("s1")
        assert [r.id for r in await stub.list(JobRunFilter())] == ["01RUNA"]
    assert (tmp_path / "s1.sqlite3").exists()
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        assert [r.id for r in await host.stub("s1").list(JobRunFilter())] == ["01RUNA"]


@pytest.mark.parametrize("scope_id", ["a/b", "s1\n", ".s1", "", "x" * 129, 7])
async def test_bad_scope_ids_and_directories_are_refused(scope_id: object) -> None:
    async with open_scope_host(clock=StoreClock()) as host:
        with pytest.raises(
            ValidationFailed,
            match=rf"^scope_id is {re.escape(repr(scope_id))}; a scope id is 1 to 128 letters, "
            r"digits, '\.', '_', ':' or '-', not starting with '\.'$",
        ):
            host.stub(scope_id)  # type: ignore[arg-type]
        host.stub("x" * 128)
    with pytest.raises(ValueError, match=r"^directory '/nonexistent-dir' does not exist"):
        async with open_scope_host("/nonexistent-dir"):
            pass


async def test_a_scope_file_of_an_older_shape_is_upgraded_when_its_actor_starts(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    old = sqlite3.connect(tmp_path / "s1.sqlite3", isolation_level=None)
    old.executescript(OLD_RUNS_DDL)
    old.execute(
        "INSERT INTO _substrat_job_runs (id, module_id, job, instance, payload, status, "
        "started_at, updated_at) VALUES ('01RUNA', 'mod', 'walk', 'default', '{}', 'running', "
        "'2026-10-04T11:00:00.000Z', '2026-10-04T11:00:00.000Z')"
    )
    old.close()
    async with open_scope_host(tmp_path, clock=StoreClock()) as host:
        stub = host.stub("s1")
        [row] = await stub.list(JobRunFilter())
        assert (row.id, row.subject_id, row.lease_owner, row.admission_misses) == (
            "01RUNA",
            None,
            None,
            None,
        )
        claim = await stub.claim("01RUNA", "owner-1", 1_000)
        assert claim is not None
        assert claim.run.lease_owner == "owner-1"


async def test_an_idle_actor_serves_a_request_off_the_wire_at_once_and_a_busy_one_queues_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, actor = _memory_actor()
    first, second, third = (new_row(f"01RUN{c}", instance=c) for c in "ABC")
    opening = Message("start_or_join", (first.key, first))
    actor.submit(opening)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.serve)
        assert opening.done is not None
        await opening.done.wait()
        await trio.testing.wait_all_tasks_blocked()
        # Idle (parked, queue empty, database open): served here and now, in the caller's turn.
        heard: list[str] = []
        at_once = Message("start_or_join", (second.key, second), lambda o: heard.append("second"))
        actor.submit(at_once, at_once=True)
        assert heard == ["second"]
        # A message already waits: the one off the wire queues behind it, and both run in order.
        waiting = Message("start_or_join", (third.key, third), lambda o: heard.append("third"))
        actor.submit(waiting)
        behind = Message("list", (JobRunFilter(),), lambda o: heard.append("list"))
        actor.submit(behind, at_once=True)
        assert heard == ["second"]
        await trio.testing.wait_all_tasks_blocked()
        assert heard == ["second", "third", "list"]
        assert behind.outcome is not None
        assert [row.id for row in behind.outcome.unwrap()] == ["01RUNC", "01RUNB", "01RUNA"]
        nursery.cancel_scope.cancel()


def test_a_call_with_latency_on_both_legs_costs_one_scheduler_batch() -> None:
    # The request is served as it comes off the wire and the reply wakes the caller: the caller's
    # own batch is the only one. Without latency the actor's task serves it: two batches. Neither
    # costs a pass of the run loop in which no task runs.
    batches: list[str] = []

    class Batches(trio.abc.Instrument):
        ran = True

        def before_io_wait(self, timeout: float) -> None:
            if not self.ran:
                batches.append("idle")
            self.ran = False

        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            if not self.ran:
                self.ran = True
                batches.append("batch")

    async def main() -> dict[float, list[str]]:
        counts = {}
        async with open_scope_host(clock=StoreClock(), jump_clock=True) as host:
            for ms in (1.0, 0.0):
                stub = host.stub("s1", link=Link(name=f"l{ms}", request_ms=ms, reply_ms=ms))
                await stub.list(JobRunFilter())  # the actor starts and opens its database
                instrument = Batches()
                trio.lowlevel.add_instrument(instrument)
                batches.clear()
                for _ in range(10):
                    await stub.list(JobRunFilter())
                trio.lowlevel.remove_instrument(instrument)
                counts[ms] = list(batches)
        return counts

    assert trio.run(main, clock=VirtualClock()) == {1.0: ["batch"] * 10, 0.0: ["batch"] * 20}
