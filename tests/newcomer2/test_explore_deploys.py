"""explore's DEFAULT budget over the payout job's deploys (world.py): each buggy v2 found with a
Deploy/DeployAfter in its plan, each fixed v2 clean."""

from __future__ import annotations

import re

import pytest

from tests.newcomer2.helpers import sims

BUGGY = {
    # bug 1: v2 reads ctx.cursor["offset"], v1 wrote an int
    "cursor": "in batch_v2_cursor, in 5 passes: 'int' object is not subscriptable",
    # bug 2: v2 keys each transfer by its chunk too; v1's attempted transfer is paid again
    "rekey": "bank.transfer with payee=",
    # bug 3: v2 reads v1's int cursor as 'start over' (silent: only the counters show it)
    "restart": "ended done saying it paid 7 payees of 5",
    # v2 reads both shapes but writes a dict: a v1 drive still serving cannot read it
    "cursor-half": "unsupported operand type(s) for +: 'dict' and 'int'",
}
FIXED = ("v1", "cursor-fixed", "rekey-fixed", "restart-fixed")


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_explore_finds_the_deploy_bug(name: str) -> None:
    done = sims("explore", f"world.py:{name}", "--no-remember")
    assert done.returncode == 1, done.stdout + done.stderr
    assert BUGGY[name] in done.stdout, done.stdout
    plan = re.search(r'--plan "(FaultPlan\(.*\))"', done.stdout)
    assert plan, done.stdout
    assert "Deploy(" in plan.group(1) or "DeployAfter(" in plan.group(1), plan.group(1)
    assert "a fresh process reproduced it byte for byte" in done.stdout


@pytest.mark.parametrize("name", FIXED)
def test_explore_finds_nothing_in_the_fix(name: str) -> None:
    done = sims("explore", f"world.py:{name}", "--no-remember")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no check failed in 300 worlds" in done.stdout
    if name != "v1":
        assert "a pass over the steps another version ran" in done.stdout


KILL_MID_STEP = (
    "FaultPlan(faults=(DeployAfter(version='v2', drive='cron', operation='bank.transfer', "
    "nth={n}),))"
)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_deploy_that_kills_a_pass_mid_transfer_pays_twice_under_the_new_key(n: int) -> None:
    """The world's counterpart of the real host's killed process (which before-deploy misses,
    test_before_deploy.py): the restart cuts a pass after its transfer ran, before the step was
    recorded; v2's retry pays again under its new key. The fix is clean under the same plan."""
    plan = KILL_MID_STEP.format(n=n)
    buggy = sims("run", "world.py:rekey", "--seed", "1", "--plan", plan)
    assert buggy.returncode == 1, buggy.stdout[-3000:]
    assert "took effect 2 times" in buggy.stdout
    fixed = sims("run", "world.py:rekey-fixed", "--seed", "1", "--plan", plan)
    assert fixed.returncode == 0, fixed.stdout[-3000:]
