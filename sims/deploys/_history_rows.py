"""A recorded history's rows: the oracle's model of each scope at the history's end.

The oracle replays every store call a history holds through its model of the store; what the
model holds at the end is every run and step row the store held, column for column, on three
conditions, each checked here and refused when it does not hold (the remedy: give the scope's
file, or a dump of it):

- every run the history touches began in it (a run made before recording began, or by a start
  whose outcome its process never wrote, is not in the model as the store holds it);
- no write to a run still running was left in flight (a process killed between the store's
  commit and its record leaves a write the store may have run, and the model has not);
- the store answered every call as the model predicts (otherwise the model's rows are the spec's,
  not the store's: ``python -m sims check`` says where).

A run that no recorded call touched is not in a history at all: the history tells what its
drives did.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from driver import JobRunRow
from scopehost import JobRunDump, JobStepDumpRow

from .._numbers import ms
from ..oracle._checks import TraceChecker
from ..oracle._history import FORMAT, CannotJudge, History, read_history, runs_begun
from ..oracle._model import ScopeModel
from ._errors import DeployInputError

#: The store operations that name one run first.
_RUN_CALLS: Final = frozenset(
    {"claim", "begin", "miss", "patch", "commit_pass", "begin_step", "record_step"}
)


def history_dumps(paths: Iterable[Path], label: str) -> list[JobRunDump]:
    """Each scope of the history in ``paths`` (named ``label``), as the store held it at the
    history's end; or the reason it cannot be known, with the remedy (``DeployInputError``)."""
    given = list(paths)
    instead = (
        "give the scope's file instead (DATA/scopes/SCOPE.sqlite3, read while no host has it "
        "open) or a dump of it"
    )
    try:
        history = read_history(given)
    except CannotJudge as error:
        raise DeployInputError(f"--runs {label}: {error}; or {instead}") from None
    checker = TraceChecker()
    # A recorded history has no world.begin; the oracle's model reads a trace from one.
    checker.feed([{"t": 0.0, "ev": "world.begin", "format": FORMAT}, *history.events])
    models = checker.oracle.scopes
    problem = _unknown_rows(history, models) or _store_disagreed(checker)
    if problem is not None:
        raise DeployInputError(f"--runs {label}: {problem}; {instead}")
    return [_dump(model) for _, model in sorted(models.items())]


def _unknown_rows(history: History, models: dict[str, ScopeModel]) -> str | None:
    """Why the model cannot hold a run's rows as the store does, or None."""
    begun = runs_begun(history.events)
    for run in sorted(_touched(history.events) - begun):
        return (
            f"run {run} began before the history did (made before recording began, or by a "
            "start whose outcome its process never wrote), so the history does not hold its rows"
        )
    running = {
        run
        for model in models.values()
        for run, row in model.runs.items()
        if row.get("status") == "running"
    }
    for run, (t, what) in sorted(history.in_flight.items()):
        if run in running:
            return (
                f"{what} at {ms(t)} ms for run {run} has no recorded outcome (the process ended "
                "between the store's commit and its record, or before the store ran it), so the "
                "history cannot say what the run's rows hold"
            )
    return None


def _touched(events: Iterable[dict[str, Any]]) -> set[str]:
    """Every run a recorded call named, or a due read listed."""
    touched: set[str] = set()
    for event in events:
        if event["ev"] == "rpc.send" and event.get("op") in _RUN_CALLS:
            args = event.get("args")
            if isinstance(args, list) and args and isinstance(args[0], str):
                touched.add(args[0])
        elif event["ev"] == "rpc.exec" and event.get("op") == "due_keys":
            result = event.get("result")
            if isinstance(result, list):
                touched.update(str(r["id"]) for r in result if isinstance(r, dict) and "id" in r)
    return touched


def _store_disagreed(checker: TraceChecker) -> str | None:
    for finding in checker.findings:
        if finding.check.startswith("store-"):
            return (
                f"the store answered a call otherwise than the spec's model of it ({finding.check}"
                f" at {ms(finding.t)} ms), so the model's rows are not the store's (python -m "
                "sims check shows where)"
            )
    return None


def _dump(model: ScopeModel) -> JobRunDump:
    return JobRunDump(
        model.scope,
        tuple(JobRunRow(**row) for _, row in sorted(model.runs.items())),
        tuple(JobStepDumpRow(**row) for _, row in sorted(model.steps.items())),
    )
