"""A failing seed, run again where no other world ran: is its failure a function of its seed?

A sweep runs many worlds in each process. A handler that keeps state in a module global (a set of
what was sent, a cache) makes a world depend on the worlds that ran before it in that process, and
a failing seed re-run in the same process agrees with itself: the poison is still there. So a sweep
confirms each failing seed where it is the first and only world of its process, as the command it
prints runs it, and compares the two traces.

Starting an interpreter per failing seed would cost a second or so each (a sweep of 200 failing
seeds, minutes). Instead each process that confirms starts ONE fresh interpreter, which loads the
scenario and never runs a world itself: each seed runs in a child forked from it, so it begins
from an interpreter in which nothing has run yet, at the cost of a fork and one world. The child
writes its trace and what it found to files; the interpreter answers one line per seed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

import attrs

from .._trace import Trace
from ..faults._plan import FaultPlan, plan_from_text
from ..scenarios._registry import ScenarioRef
from ._raised import WorldRaised
from ._rerun import first_difference
from ._simulate import simulate


@attrs.frozen
class FreshWorld:
    """What one seed's world did in a fresh process: its trace (None when it keeps none or
    raised), what its checks and its scenario found, and what it raised (or None)."""

    trace: Trace | None
    findings: tuple[str, ...]
    ok: bool
    raised: WorldRaised | None


class FreshWorlds:
    """One fresh interpreter for one scenario (and mutant, and plan given in place of its own),
    which runs each world asked of it in a child forked before any world ran."""

    def __init__(self, ref: ScenarioRef, mutant: str | None, plan: FaultPlan | None) -> None:
        self._lock = threading.Lock()
        # What the fresh process says on stderr, kept to quote should it end before answering.
        self._errors: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        # The sims this process runs, first on the path: the same code runs the fresh world.
        package = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (package, os.environ.get("PYTHONPATH")) if p)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "sims.runners._fresh"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            text=True,
            env={**os.environ, "PYTHONPATH": path},
        )
        header = {
            "name": ref.name,
            "path": ref.path,
            "spelled": ref.spelled,
            "mutant": mutant,
            "plan": None if plan is None else repr(plan),
        }
        reply = self._ask(header)
        #: Why no world can be confirmed here (the fresh process cannot load the scenario), or "".
        self.refused = str(reply.get("error", ""))

    def run(self, seed: int) -> FreshWorld | str:
        """The seed's world in a fresh process, or why it could not be run there."""
        if self.refused:
            return self.refused
        with self._lock, tempfile.TemporaryDirectory() as folder:
            out = Path(folder)
            reply = self._ask({"seed": seed, "out": str(out)})
            if "error" in reply:
                return str(reply["error"])
            if not (out / "found.json").exists():
                return f"the fresh process's world ended without a word (exit {reply['status']})"
            found = json.loads((out / "found.json").read_text())
            trace = Trace.read(out / "trace.jsonl") if (out / "trace.jsonl").exists() else None
        raised = found["raised"]
        return FreshWorld(
            trace=trace,
            findings=tuple(found["findings"]),
            ok=bool(found["ok"]),
            raised=None if raised is None else WorldRaised(seed, *raised),
        )

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        try:
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
            line = self._process.stdout.readline()
        except OSError:
            line = ""
        try:
            reply = json.loads(line) if line else None
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self._errors.seek(0)
            said = self._errors.read().decode(errors="replace").strip().splitlines()[-1:]
            return {
                "error": f"the fresh process ended before it answered (exit "
                f"{self._process.poll()}){': ' + said[0] if said else ''}"
            }
        return reply

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._errors.close()


#: The fresh interpreters this process started, by (process id, scenario, mutant, plan): a pool
#: worker forked from a process that had one starts its own (the pipes are its parent's).
_STARTED: dict[tuple[int, ScenarioRef, str | None, FaultPlan | None], FreshWorlds] = {}
_STARTING = threading.Lock()


def fresh_worlds(ref: ScenarioRef, mutant: str | None, plan: FaultPlan | None) -> FreshWorlds:
    """This process's fresh interpreter for ``ref``, ``mutant`` and ``plan``, started the first
    time."""
    key = (os.getpid(), ref, mutant, plan)
    with _STARTING:
        found = _STARTED.get(key)
        if found is None:
            found = _STARTED[key] = FreshWorlds(ref, mutant, plan)
    return found


def close_fresh_worlds() -> None:
    """Stop the fresh interpreters this process started (a sweep's end)."""
    with _STARTING:
        mine = [key for key in _STARTED if key[0] == os.getpid()]
        for key in mine:
            _STARTED.pop(key).close()


def fresh_difference(
    ref: ScenarioRef,
    seed: int,
    mutant: str | None,
    ours: Trace | None,
    found: tuple[str, ...],
    *,
    plan: FaultPlan | None = None,
) -> tuple[bool | None, str]:
    """Whether the seed's world, run alone in a fresh process, is the one this process ran:
    (True, ""); (False, where it differs); or (None, why it could not be run there). ``ours`` is
    this process's trace (None when the world keeps none, or raised), ``found`` what it found
    (for a world that raised, its one finding)."""
    try:
        fresh = fresh_worlds(ref, mutant, plan).run(seed)
    except OSError as error:
        return None, f"no fresh process could be started: {error}"
    if isinstance(fresh, str):
        return None, fresh
    theirs = fresh.findings if fresh.raised is None else (fresh.raised.finding(),)
    outcome = "as documented" if fresh.ok else "failing too"
    if fresh.raised is not None:
        outcome = "raising too" if ours is None else "raising"
    if ours is not None and fresh.trace is not None:
        differs = first_difference(ours, fresh.trace)
    else:
        differs = None if theirs == found else _other_findings(theirs)
    if differs is None:
        return True, ""
    return False, f"run alone in a fresh process, it gave another world ({outcome}): {differs}"


def _other_findings(findings: tuple[str, ...]) -> str:
    if not findings:
        return "it found nothing"
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return f"it found {findings[0]}{more}"


# -- the fresh interpreter ------------------------------------------------------------------------


def _serve() -> None:
    """Read the scenario, then one seed a line; answer one line each, from a forked child."""
    # The answers go out on stdout as it was given; what the user's file and worlds print goes
    # nowhere, so that it can never be read as an answer.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    header = json.loads(sys.stdin.readline() or "{}")
    ref = ScenarioRef(name=header["name"], path=header["path"], spelled=header["spelled"])
    mutant = header["mutant"]
    try:
        ref.load()
        plan = None if header.get("plan") is None else plan_from_text(header["plan"])
    except Exception as error:
        _answer(answers, {"error": f"a fresh process cannot load the scenario: {error}"})
        return
    _answer(answers, {"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        child = os.fork()
        if child == 0:
            _child(ref, int(request["seed"]), mutant, plan, Path(request["out"]))
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        _answer(answers, {"done": request["seed"], "status": code})


def _child(
    ref: ScenarioRef, seed: int, mutant: str | None, plan: FaultPlan | None, out: Path
) -> None:
    """Run one world, write what it did, and leave without running anything of the parent's."""
    code = 0
    try:
        try:
            simulation = simulate(ref, seed, mutant=mutant, plan=plan)
        except BaseException as error:  # whatever it raised is its finding
            raised = WorldRaised.of(seed, error)
            found: dict[str, Any] = {
                "raised": [raised.kind, raised.message, raised.line],
                "findings": [],
            }
            (out / "found.json").write_text(json.dumps({**found, "ok": False}))
        else:
            if simulation.outcome.setup.trace:
                (out / "trace.jsonl").write_bytes(simulation.outcome.trace.to_bytes())
            findings = [f.line() for f in simulation.report.violations]
            findings += list(simulation.mismatches)
            found = {"raised": None, "findings": findings, "ok": simulation.ok}
            (out / "found.json").write_text(json.dumps(found))
    except BaseException:  # the child must never go back to the parent's loop
        code = 1
    finally:
        os._exit(code)


def _answer(answers: IO[str], reply: dict[str, Any]) -> None:
    answers.write(json.dumps(reply) + "\n")
    answers.flush()


if __name__ == "__main__":
    _serve()
