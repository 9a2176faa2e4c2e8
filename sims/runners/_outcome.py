"""What one simulated world came to: its outcome, its check report, and the scenario's verdict."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any

import attrs

from driver import JobRun

from ..mutants._catalog import MUTANTS
from ..oracle._report import CheckReport
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

    #: The scenario's reference, as ``python -m sims run`` takes it (``NAME`` or ``FILE.py:NAME``).
    scenario: str
    seed: int
    outcome: WorldOutcome
    report: CheckReport
    #: Where the outcome differs from what the scenario documents (empty = as documented).
    mismatches: tuple[str, ...] = ()
    #: The broken store the world ran on, by its name in ``MUTANTS``; None for the real store.
    mutant: str | None = None
    #: The fault plan given in place of the scenario's own; None when the scenario's own ran.
    plan: str | None = None
    #: A store factory of the caller's own that the world ran on (``simulate(database=...)``, not
    #: one of ``MUTANTS``), by its Python name: no command line can name it.
    custom_store: str | None = None

    @property
    def facts(self) -> Facts:
        return Facts(self.outcome)

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.mismatches

    @property
    def replay_command(self) -> str:
        """The command that runs this very world again: same scenario, seed, store and plan.

        A world on a custom store has none (no command line can name the store): for it, the
        Python call that runs it again, said to be Python and why."""
        if self.custom_store is not None:
            call = python_replay_call(self.scenario, self.seed, self.custom_store, plan=self.plan)
            return (
                f"{call} in Python: this world ran on a store of your own, {self.custom_store}, "
                "which no command line can name"
            )
        return replay_command(self.scenario, self.seed, mutant=self.mutant, plan=self.plan)


def python_replay_call(scenario: str, seed: int, store: str, *, plan: str | None = None) -> str:
    """``sims.simulate(...)`` for a world on a store of the caller's own, which no command line
    can name."""
    with_plan = f", plan={plan}" if plan is not None else ""
    return f"sims.simulate({scenario!r}, {seed}{with_plan}, database={store})"


def replay_command(
    scenario: str, seed: int, *, mutant: str | None = None, plan: str | None = None
) -> str:
    """``python -m sims run ...`` for one world, quoted for a POSIX shell."""
    if mutant is not None and mutant not in MUTANTS:
        # --mutant takes only these: a command naming another store would not run.
        raise ValueError(f"no mutant {mutant!r}; the mutants are: {', '.join(MUTANTS)}")
    words = ["python", "-m", "sims", "run", scenario, "--seed", str(seed)]
    if mutant is not None:
        words += ["--mutant", mutant]
    if plan is not None:
        words += ["--plan", plan]
    return " ".join(_quote(word) for word in words)


def explore_command(scenario: str, seed: int, plan: str, mutant: str | None = None) -> str:
    """``python -m sims explore ... --plan PLAN``: shrink a failing world's plan to its smallest."""
    words = ["python", "-m", "sims", "explore", scenario, "--seed", str(seed)]
    if mutant is not None:
        words += ["--mutant", mutant]
    words += ["--plan", plan]
    return " ".join(_quote(word) for word in words)


def _quote(word: str) -> str:
    """A word for a POSIX shell; a plan (full of single quotes) reads best in double quotes."""
    if shlex.quote(word) == word:
        return word
    if not any(c in word for c in '"$`\\!'):
        return f'"{word}"'
    return shlex.quote(word)
