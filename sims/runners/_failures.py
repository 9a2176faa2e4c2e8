"""Failures are loud: a run that ended failed, and an exception of the user's own code.

A handler that raised ``ValueError`` on every pass used to leave its run ``failed`` after five
attempts while the verdict said "every check held". Now each is a finding of the user's code (one
of the oracle's ``MISTAKES``, never the spec's), with the exception's type and the file and line
of the user's frame (``sims.world._raised``):

- ``handler-raised``: a handler or a step body raised an exception of its own (not the outside
  world's: a service's outcome, a transport error, a lost lease), once per run, type and place,
  however often a retry raised it again;
- ``run-failed``: a run ended ``failed`` because its last pass raised such an exception (a run the
  outside world failed, an outage outlasting its attempts, is the world's, not the code's).

A scenario where failing is what the job should do says so, ``@scenario(failures_expected=True)``:
its failures are then still in the story, and not findings.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs

from .._trace import Trace
from ..oracle._report import CheckReport, Finding, short


def with_failures(report: CheckReport, trace: Trace, *, expected: bool) -> CheckReport:
    """``report`` with the world's failures added as findings, unless they were ``expected``."""
    if expected:
        return report
    found = [*_raised(trace), *_failed(trace)]
    if not found:
        return report
    counted = Counter(dict(report.violations_by_check))
    counted.update(finding.check for finding in found)
    return attrs.evolve(
        report,
        findings=(*report.findings, *found),
        violations_by_check=tuple(sorted(counted.items())),
    )


def _raised(trace: Trace) -> list[Finding]:
    """One finding per run, exception type and place: a step body's exception that escapes its
    handler is the same exception, told once."""
    first: dict[tuple[str, str, str], dict[str, Any]] = {}
    times: dict[tuple[str, str, str], int] = {}
    for event in trace.of("hx.fn.end", "hx.end"):
        text = event.get("error") if event["ev"] == "hx.fn.end" else event.get("raised")
        if text is None or event.get("outside", True) or event.get("where") is None:
            continue  # the outside world's, or raised in no code of the user's
        key = (event["run"], str(event["error_type"]), str(event.get("where")))
        if key not in first:
            first[key] = {**event, "text": text}
        if event["ev"] == "hx.end":
            times[key] = times.get(key, 0) + 1
    findings = []
    for key, event in first.items():
        run, error_type, where = key
        step = f"the body of step {event['step']!r}" if "step" in event else "the handler"
        passes = times.get(key, 1)
        again = f", in {passes} passes" if passes > 1 else ""
        findings.append(
            Finding(
                "handler-raised",
                "violation",
                run,
                event["t"],
                f"{step} of run {short(run)} raised {error_type} at {where}{again}: "
                f"{event['text']}",
            )
        )
    return findings


def _failed(trace: Trace) -> list[Finding]:
    """The runs the world ended with ``failed`` whose last pass failed on an exception of the
    user's own code. A run that failed because the outside world outlasted its attempts (an
    outage, a fault the plan injected), or by a rule of the spec (admission misses, a takeover
    that spent the last attempt, an erasure) is no bug of the code: the story tells it."""
    last_raised: dict[str, dict[str, Any]] = {}
    for event in trace.of("hx.end"):
        last_raised[str(event["run"])] = event
    findings = []
    for event in trace.of("world.end"):
        for rows in event["runs"].values():
            for row in rows:
                run = str(row["id"])
                last = last_raised.get(run, {})
                bug = "raised" in last and not last.get("outside", True) and last.get("where")
                if row["status"] != "failed" or not bug:
                    continue
                findings.append(
                    Finding(
                        "run-failed",
                        "violation",
                        run,
                        last["t"],
                        f"run {short(run)} ({row['module_id']}/{row['job']}) ended failed: its "
                        f"last pass raised {last['error_type']} at {last['where']}: "
                        f"{row.get('last_error') or last['raised']}",
                    )
                )
    return findings
