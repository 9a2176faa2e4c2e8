"""A user's own world (a scenario in the user's file, with checks of its own) is recorded and
checked exactly as a built-in one: its sweep counts the coverage probes it reaches, and the
oracle's recording events are in its trace."""

from __future__ import annotations

from pathlib import Path

from sims import simulate, sweep

USER_FILE = '''
from sims import DriveSpec, JobPassResult, RetryPolicy, World, WorldSetup, scenario


async def handler(ctx):
    async def fetch():
        return 7

    await ctx.step("fetch", fetch)
    ctx.count("fetched")
    if ctx.run.attempts < 2:
        raise RuntimeError("flaky after its step")  # the retry finds the step's memo
    return JobPassResult(done=True)


def nothing_wrong(trace):
    return []


@scenario(
    "memo-retry",
    setup=WorldSetup(scopes=("s",), lease_ms=2_000),
    checks=[nothing_wrong],
    failures_expected=True,  # its handler fails on purpose, to be retried
)
async def memo_retry(world: World) -> None:
    """A pass that fails after its step; the retry skips the step."""
    world.add_drive(DriveSpec(name="cron"))
    world.add_job(
        "m", "flaky", handler, retry=RetryPolicy(max_attempts=3, base_delay_ms=10, max_delay_ms=10)
    )
    await world.start("cron", "s", "m", "flaky")
    world.every("cron", "s", every_ms=100, first_ms=0, until_ms=5_000)
    await world.settle(("s",), horizon_ms=5_000, poll_ms=100)
'''


def test_a_user_world_with_checks_reports_its_probes(tmp_path: Path) -> None:
    path = tmp_path / "user_world.py"
    path.write_text(USER_FILE)
    ref = f"{path}:memo-retry"
    report = sweep(ref, range(3))
    assert not report.failing, "\n".join(report.lines())
    for summary in report.seeds:
        probes = dict(summary.probes)
        assert probes.get("step.memo", 0) >= 1, summary
        assert probes.get("handler.counts", 0) >= 1, summary
        assert probes.get("handler.throws", 0) >= 1, summary
    # A user's world lists the spec's probes only when asked (--spec-probes).
    assert "probes hit: 0 of" not in "\n".join(report.lines(spec_probes=True))

    simulation = simulate(ref, 0)
    events = {event["ev"] for event in simulation.outcome.trace.events}
    assert {"job.register", "drive.call", "start.call", "hx.step", "hx.count", "hx.end"} <= events

    # The kernel model follows the user's world too: a store that ignores the memo is caught.
    broken = sweep(ref, range(2), mutant="memo-ignored")
    assert len(broken.failing) == 2, "\n".join(broken.lines())
