"""``python -m sims check HISTORY...``: the oracle's verdict on a history recorded on a real host.

Exit 0 when the spec held, 1 on a violation (its rule, its moment, its run), 2 when the input
cannot be judged (the reason said). docs/recording.md.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from driver import iso_from_ms

from .._numbers import ms, plural
from ..oracle._history import (
    SKIPPED,
    CannotJudge,
    History,
    HistoryVerdict,
    SetAside,
    judge_history,
    read_history,
)
from ..oracle._report import MODEL_CHECKS, SPEC_CHECKS, CheckReport, short


def add_check_command(commands: Any) -> None:
    """Add the subcommand to ``python -m sims``'s subparsers."""
    command = commands.add_parser(
        "check",
        help="judge a history recorded on a real host (open_scope_host(record=FOLDER)) by the "
        "spec's checks",
        description="Judge a history recorded on a real host by the spec's checks: the oracle "
        "and every invariant check that applies to a real history. Exit 0 when the spec held, 1 "
        "on a violation, 2 when the input cannot be judged. Details: docs/recording.md.",
    )
    command.add_argument(
        "histories",
        nargs="+",
        metavar="HISTORY",
        help="a recorded history file, or a folder: every history-*.jsonl in it (the parts and "
        "processes of one history are merged)",
    )


def check_command(arguments: argparse.Namespace) -> int:
    try:
        history = read_history(arguments.histories)
    except CannotJudge as error:
        print(f"check: cannot judge: {error}")
        return 2
    verdict = judge_history(history)
    for line in _lines(history, verdict):
        print(
            textwrap.fill(
                line,
                width=100,
                subsequent_indent="    ",
                break_on_hyphens=False,
                break_long_words=False,
            )
        )
    return 0 if verdict.report.ok else 1


def _lines(history: History, verdict: HistoryVerdict) -> list[str]:
    report, set_aside, cut = verdict.report, verdict.set_aside, verdict.models_cut
    lines = [*_what_was_read(history), "", "checks:", *_checks(verdict)]
    if report.findings:
        lines.extend(("", "findings:"))
        lines.extend(f"  {finding.line()}" for finding in report.findings)
    if set_aside or (cut is not None and cut.findings):
        lines.extend(("", "not judged (what the history cannot tell the oracle):"))
        lines.extend(_set_aside(set_aside))
    if cut is not None and cut.findings:
        lines.append(
            f"  the oracle's models from {ms(cut.t)} ms on, where {cut.what} had no recorded "
            "outcome (the store may have run it, the models take it for unrun); what they say "
            "from there is set aside:"
        )
        lines.extend(f"    {f.line()}" for f in cut.findings)
    lines.extend(("", "verdict:", f"  checks: {report.verdict()}{_not_run(verdict)}"))
    return lines


def _not_run(verdict: HistoryVerdict) -> str:
    """What the verdict line adds of what was not judged or did not run: a verdict never says
    more was checked than was."""
    said = ""
    if verdict.set_aside:
        said += f"; {plural(len(verdict.set_aside), 'run')} not judged (above)"
    if verdict.models_skipped is not None:
        said += "; the oracle's models did not run (above), only the invariant checks"
    elif verdict.models_cut is not None and verdict.models_cut.findings:
        said += f"; the oracle's models followed the history until {ms(verdict.models_cut.t)} ms"
    return said


def _what_was_read(history: History) -> list[str]:
    """The files, the span, and what about the history a reader of the verdict must know."""
    events = history.events
    span = events[-1]["t"] if events else 0.0
    processes = plural(len(history.processes), "process", "processes")
    lines = [
        f"check: {plural(len(history.files), 'file')} of {processes}, "
        f"{plural(len(events), 'event')} over {ms(span)} ms from {iso_from_ms(history.began_ms)} "
        "(times below are ms from there)"
    ]
    for path in history.cut:
        lines.append(
            f"  {path}: its last line was cut (the process was killed as it wrote it) and is left "
            "out"
        )
    for process, ended, runs in history.left_running:
        lines.append(
            f"  process {process}: its history ends at {ms(ended)} ms with "
            f"{plural(len(runs), 'run')} still in a handler ({', '.join(map(short, runs))}): the "
            "process was killed or stopped recording there, and those passes never came back; "
            "the checks judge them so"
        )
    shared = history.shared_scopes
    one_machine = [scope for scope, hosts in shared.items() if len(hosts) == 1]
    if one_machine:
        lines.append(
            f"  scopes called by more than one process ({', '.join(one_machine)}): each by "
            "processes of one machine, merged by the one clock they share: exact"
        )
    for scope, hosts in shared.items():
        if len(hosts) > 1:
            lines.append(
                f"  scope {scope} was called by processes of {len(hosts)} hosts "
                f"({', '.join(hosts)}): a scope's file is shared only on one machine (its log's "
                "index is shared memory), so these are containers of one machine, merged by its "
                "clock, or different stores of one name, judged as one: give the histories of "
                "one deployment"
            )
    return lines


def _checks(verdict: HistoryVerdict) -> list[str]:
    """Each of the spec's checks that applies: violated, explained, or among those that held;
    then the ones a recorded history cannot feed, with why: never a check that did not run
    among those that held."""
    report, models_skipped = verdict.report, verdict.models_skipped
    violated = report.violations_of()
    explained = {f.check for f in report.explained}
    lines, held = [], []
    for check in SPEC_CHECKS:
        if check in SKIPPED or (models_skipped is not None and check in MODEL_CHECKS):
            continue
        if violated[check]:
            lines.append(f"  {check}: VIOLATED ({plural(violated[check], 'violation')})")
        elif check in explained:
            lines.append(f"  {check}: explained (allowed by the spec)")
        else:
            held.append(check)
    lines.append(f"  the spec's other {plural(len(held), 'check')} held: {', '.join(held)}")
    for check in sorted(c for c in violated if c not in SPEC_CHECKS):
        lines.append(f"  {check}: FOUND ({plural(violated[check], 'finding')})")
    lines.extend(f"  skipped {skipped}: {why}" for skipped, why in SKIPPED.items())
    if models_skipped is not None:
        lines.append(
            f"  skipped the oracle's models of the store and the kernel ({len(MODEL_CHECKS)} "
            f"checks: {', '.join(sorted(MODEL_CHECKS))}): {models_skipped}"
        )
    else:
        cut = verdict.models_cut
        until = (
            f" until {ms(cut.t)} ms, where {cut.what} had no outcome"
            if cut is not None and cut.findings
            else ""
        )
        lines.append(
            f"  the oracle's models of the store and the kernel followed the history{until}; "
            f"of the rarer moments the spec has rules for (its probes: a takeover, a late BEGIN, "
            f"a retry, ...), it reached {_probes(report)}"
        )
    return lines


def _probes(report: CheckReport) -> str:
    """The probes a history reached, the most often reached first, or "none"."""
    reached = sorted(report.probes, key=lambda probe: (-probe[1], probe[0]))
    if not reached:
        return "none"
    shown = ", ".join(f"{count} × {name}" for name, count in reached[:6])
    return shown + (f", and {len(reached) - 6} more" if len(reached) > 6 else "")


def _set_aside(set_aside: SetAside) -> list[str]:
    lines = []
    for run, why, findings in set_aside:
        lines.append(f"  run {short(run)}: {why}; what the checks say of it is set aside:")
        lines.extend(f"    {f.line()}" for f in findings)
    return lines
