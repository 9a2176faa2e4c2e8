"""What one simulated world came to: its outcome, its check report, and the scenario's verdict."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

import attrs

from driver import JobRun

from .._seeds import require_seed
from ..faults._plan import plan_from_text
from ..mutants._catalog import MUTANTS
from ..oracle._report import CheckReport
from ._run import WorldOutcome
from ._words import one_line, python_name, shell_line


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
    #: The scenario's inputs this world ran on, as JSON text (what ``--inputs`` takes); None for
    #: a scenario that takes none.
    inputs: str | None = None

    @property
    def facts(self) -> Facts:
        return Facts(self.outcome)

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.mismatches

    @property
    def replay_command(self) -> str:
        """The command that runs this very world again: same scenario, seed, store and plan.

        A world on a custom store has none (no command line can name the store), nor has one
        whose scenario no one-line command shows as itself (a file name with a newline): for
        them, the Python call that runs it again, said to be Python and why."""
        if self.custom_store is not None:
            return _on_own_store(self.scenario, self.seed, self.custom_store, self.plan)
        if not one_line(self.scenario):
            call = python_replay_call(
                self.scenario, self.seed, plan=self.plan, mutant=self.mutant, inputs=self.inputs
            )
            return (
                f"{call} in Python: its scenario, {self.scenario!r}, holds a character that does "
                "not print, which no one-line command can show as itself"
            )
        return replay_command(
            self.scenario, self.seed, mutant=self.mutant, plan=self.plan, inputs=self.inputs
        )


#: What a Python call names a store of the caller's own by when its name is not a plain name.
STORE: Final = "STORE"


def _on_own_store(scenario: str, seed: int, store: str, plan: str | None) -> str:
    if python_name(store):
        call = python_replay_call(scenario, seed, store, plan=plan)
        return (
            f"{call} in Python: this world ran on a store of your own, {store}, which no "
            "command line can name"
        )
    call = python_replay_call(scenario, seed, STORE, plan=plan)
    return (
        f"{call} in Python, {STORE} being the store of your own this world ran on, "
        f"{store!r}, which no command line can name"
    )


def python_replay_call(
    scenario: str,
    seed: int,
    store: str | None = None,
    *,
    plan: str | None = None,
    mutant: str | None = None,
    inputs: str | None = None,
) -> str:
    """``sims.simulate(...)`` that runs one world again, for a world no command line can run: on
    a store of the caller's own (``store``), or whose scenario no one-line command can show.

    Every argument is written as data: the scenario as a string literal, the seed as a whole
    number, the plan read back as a plan and written as its repr, the mutant as a string literal
    of a mutant's name, and the store only when it is a plain Python name (a ``ValueError``
    otherwise: a call must not be composed of text that could be any code)."""
    words = [repr(scenario), str(require_seed(seed))]
    if plan is not None:
        words.append(f"plan={plan_from_text(plan)!r}")
    if mutant is not None:
        words.append(f"mutant={_known_mutant(mutant)!r}")
    if inputs is not None:
        # Read back and written as a Python value: the call holds data, never the text as code.
        words.append(f"inputs={json.loads(inputs)!r}")
    if store is not None:
        if not python_name(store):
            raise ValueError(
                f"the store's name {store!r} is not a plain Python name, so no call names it; "
                f"write the call with {STORE} for the store it ran on"
            )
        words.append(f"database={store}")
    return f"sims.simulate({', '.join(words)})"


def _known_mutant(mutant: str) -> str:
    """``mutant`` when it names one of ``MUTANTS``; a ``ValueError`` that lists them otherwise."""
    if mutant not in MUTANTS:
        # --mutant takes only these: a command naming another store would not run.
        raise ValueError(f"no mutant {mutant!r}; the mutants are: {', '.join(MUTANTS)}")
    return mutant


def replay_command(
    scenario: str,
    seed: int,
    *,
    mutant: str | None = None,
    plan: str | None = None,
    inputs: str | None = None,
) -> str:
    """``python -m sims run ...`` for one world, each word quoted for a POSIX shell (a
    ``ValueError`` for a word no one-line command can show)."""
    words = ["python", "-m", "sims", "run", scenario, "--seed", str(seed)]
    if mutant is not None:
        words += ["--mutant", _known_mutant(mutant)]
    if plan is not None:
        words += ["--plan", plan]
    if inputs is not None:
        words += ["--inputs", inputs]
    return shell_line(words)


def explore_command(scenario: str, seed: int, plan: str, mutant: str | None = None) -> str:
    """``python -m sims explore ... --plan PLAN``: shrink a failing world's plan to its smallest."""
    words = ["python", "-m", "sims", "explore", scenario, "--seed", str(seed)]
    if mutant is not None:
        words += ["--mutant", _known_mutant(mutant)]
    words += ["--plan", plan]
    return shell_line(words)
