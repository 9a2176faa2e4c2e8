"""What one simulated world came to: its outcome, its check report, and the scenario's verdict."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from driver import JobRun

from ._checks import CheckReport
from ._run import WorldOutcome


@attrs.frozen
class Facts:
    """Questions a scenario's expectation asks of a world's outcome."""

    outcome: WorldOutcome

    def count(self, event: str) -> int:
        """How many times ``event`` happened (counted even when the trace was not kept)."""
        return self.outcome.trace.counts.get(event, 0)

    def of(self, event: str) -> Iterator[dict[str, Any]]:
        return self.outcome.trace.of(event)

    def writes(self, operation: str) -> int:
        """How many ``operation`` calls the store accepted (returned true)."""
        return sum(
            1 for e in self.of("rpc.exec") if e["op"] == operation and e.get("result") is True
        )

    def superseded_by(self, drive: str) -> int:
        return sum(
            1
            for e in self.of("pass.outcome")
            if e["drive"] == drive and e["status"] == "superseded"
        )

    def runs(self, scope: str = "scope-1") -> list[JobRun]:
        return self.outcome.runs[scope]

    def only_run(self, scope: str = "scope-1") -> JobRun:
        runs = self.runs(scope)
        if len(runs) != 1:
            raise AssertionError(f"expected one run on {scope}, found {len(runs)}")
        return runs[0]


@attrs.frozen
class Simulation:
    """A finished world: the outcome, what the checks found, and how it met its scenario."""

    scenario: str
    seed: int
    outcome: WorldOutcome
    report: CheckReport
    #: Where the outcome differs from what the scenario documents (empty = as documented).
    mismatches: tuple[str, ...] = ()

    @property
    def facts(self) -> Facts:
        return Facts(self.outcome)

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.mismatches

    @property
    def replay_command(self) -> str:
        return f"python -m sims run {self.scenario} --seed {self.seed}"
