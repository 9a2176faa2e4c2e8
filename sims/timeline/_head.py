"""The top of the timeline page: what a reader needs before the picture, so that the page can be
handed to someone alone — the verdict, the world (scenario, seed, store or mutant, fault plan),
and every finding of the checks in their own words, numbered as the picture numbers them.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

import attrs

from .._trace import Trace
from ..faults._plan import FaultPlan, plan_from_text
from ..mutants._catalog import MUTANTS
from ..oracle._checks import check_trace
from ..oracle._report import CheckReport, Finding, short
from ._model import Timeline
from ._scale import fmt_ms, fmt_store

#: Findings listed (and marked in the picture); more are counted, not drawn.
MAX_FINDINGS = 200


@attrs.frozen
class PageFacts:
    """What the page says about its world besides the trace itself."""

    title: str
    report: CheckReport
    #: True when the caller gave the report; False when the page checked the trace itself.
    report_given: bool
    #: What the scenario documents and the world did not do; None: not compared with a scenario.
    mismatches: tuple[str, ...] | None
    replay: str | None
    plan: FaultPlan | str | None
    plan_overridden: bool
    mutant: str | None
    summary: str | None

    @property
    def shown(self) -> tuple[Finding, ...]:
        """The findings the page lists and marks: violations first, then explained overlaps."""
        ordered = self.report.violations + self.report.explained
        return ordered[:MAX_FINDINGS]


def facts_of(
    trace: Trace,
    *,
    title: str,
    report: CheckReport | None,
    mismatches: Sequence[str] | None,
    replay: str | None,
    plan: FaultPlan | str | None,
    plan_replaced: bool | None,
    mutant: str | None,
    summary: str | None,
) -> PageFacts:
    """The page's facts: what the caller gave, else what the trace's ``world.begin`` recorded."""
    begin: dict[str, Any] = next(trace.of("world.begin"), {})
    if plan is None and isinstance(begin.get("plan"), str):
        try:
            plan = plan_from_text(begin["plan"])
        except ValueError:
            plan = begin["plan"]
    if mutant is None and isinstance(begin.get("mutant"), str):
        mutant = begin["mutant"]
    given = report is not None
    if report is None:
        # Whether every run had to settle is the scenario's to say; the page does not assume it.
        report = check_trace(trace, settles=False)
    return PageFacts(
        title=title,
        report=report,
        report_given=given,
        mismatches=None if mismatches is None else tuple(mismatches),
        replay=replay,
        plan=plan,
        plan_overridden=(
            bool(begin.get("plan_overridden")) if plan_replaced is None else plan_replaced
        ),
        mutant=mutant,
        summary=summary,
    )


def _e(text: object) -> str:
    return html.escape(str(text))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def verdict_html(facts: PageFacts) -> str:
    report = facts.report
    lines: list[str] = []
    if report.spec_violations or report.violations_unlisted:
        # The same sentence as the terminal's, a sweep's and a test's failure.
        text = report.verdict()
        lines.append(f'<p class="verdict bad" id="verdict">VIOLATED — {_e(text)}</p>')
    elif report.mistakes:
        # The spec held: what was found is a mistake in how the user's world is written.
        lines.append(
            f'<p class="verdict bad" id="verdict">YOUR MISTAKE — {_e(report.verdict())}</p>'
        )
    elif report.user_violations:
        # The spec held: what failed is the user's own check, a bug in the user's handler (or
        # the check), not in the store or the kernel.
        lines.append(
            f'<p class="verdict bad" id="verdict">YOUR CHECK FAILED — {_e(report.verdict())}</p>'
        )
    elif facts.mismatches:
        lines.append(
            '<p class="verdict bad" id="verdict">NOT AS DOCUMENTED — no invariant violated, but '
            "the world did not do what its scenario documents</p>"
        )
    elif facts.mismatches is None:
        lines.append('<p class="verdict ok" id="verdict">no invariant violated</p>')
    else:
        lines.append('<p class="verdict ok" id="verdict">as documented; no invariant violated</p>')
    for mismatch in facts.mismatches or ():
        lines.append(f"<p>NOT AS DOCUMENTED: {_e(mismatch)}</p>")
    if not facts.report_given:
        lines.append(
            '<p class="summary">the checks were run on this trace when the page was drawn '
            "(without asserting that every run settled)</p>"
        )
    return "\n".join(lines)


def _plan_html(facts: PageFacts) -> str:
    plan = facts.plan
    whose = " (given in place of the scenario's own plan)" if facts.plan_overridden else ""
    if plan is None:
        return "<dd>not recorded in the trace</dd>"
    if isinstance(plan, str):
        return f"<dd><pre>{_e(plan)}</pre>{_e(whose)}</dd>"
    if not plan.faults:
        return f"<dd>none: no fault was injected{_e(whose)}</dd>"
    items = "".join(f"<li><code>{_e(repr(fault))}</code></li>" for fault in plan.faults)
    return f"<dd>{_plural(len(plan.faults), 'fault')}{_e(whose)}<ol>{items}</ol></dd>"


def _store_html(mutant: str | None) -> str:
    if mutant is None:
        return "<dd>the real scope store (no mutant)</dd>"
    kind = MUTANTS.get(mutant)
    doc = (kind.__doc__ or "").strip().split("\n\n")[0] if kind is not None else ""
    about = f": {_e(' '.join(doc.replace('``', '').split()))}" if doc else ""
    return (
        f"<dd><b>mutant {_e(mutant)}</b> — a deliberately broken store that a check must "
        f"catch{about}</dd>"
    )


def _world_html(model: Timeline, trace: Trace) -> str:
    if not trace.enabled:
        happened = sum(trace.counts.values())
        return (
            f"<dd>{_e(happened)} events happened, but this world did not keep its trace (it is "
            "too big to keep): the picture shows only where the checks found something</dd>"
        )
    runs = sum(len(r) for r in model.runs.values())
    parts = [
        f"{model.events} events",
        f"{fmt_ms(model.end - model.start)} ms of virtual time",
        _plural(len(model.drives), "drive"),
        _plural(len(model.scopes), "scope"),
        _plural(runs, "run"),
        _plural(len(model.overlaps), "double run"),
    ]
    text = " · ".join(parts)
    if model.clock is not None:
        text += (
            f"; the store's clock read {fmt_store(model.clock.to_store(0.0))} at t=0 and ran at "
            f"{model.clock.rate:.4f}× virtual time (leases are placed by it)"
        )
    return f"<dd>{_e(text)}</dd>"


#: How much of one service's final state the top of the page shows; the rest is cut with "…"
#: (``sims.service_states(trace)`` reads it whole).
STATE_CHARS = 2_000


def _states_html(model: Timeline) -> str:
    """Each service's state when the world ended, spaced so that a long one wraps."""
    items = []
    for name, state in model.service_states.items():
        text = json.dumps(state, sort_keys=True, separators=(", ", ": "), ensure_ascii=False)
        if len(text) > STATE_CHARS:
            text = text[: STATE_CHARS - 1] + "… (cut; sims.service_states(trace) reads it whole)"
        items.append(f"<li><b>{_e(name)}</b> <code>{_e(text)}</code></li>")
    return f'<dd><ul class="states">{"".join(items)}</ul></dd>'


def finding_html(number: int, finding: Finding) -> str:
    where = f" · run {_e(short(finding.run))}" if finding.run else ""
    whose = " (your check)" if finding.by_user else ""
    user = " user" if finding.by_user else ""
    return (
        f'<li id="finding-{number}" class="{finding.verdict}{user}">'
        f'<span class="badge">{number}</span>'
        f"<b>[{finding.verdict}] {_e(finding.check)}{whose}</b>{where} · at {finding.t:g} ms "
        f'<button data-show="{number}" data-t="{finding.t!r}">show</button><br>'
        f"{_e(finding.text)}</li>"
    )


def head_html(facts: PageFacts, model: Timeline, trace: Trace) -> str:
    parts = [f"<h1>{_e(facts.title)}</h1>"]
    if facts.summary:
        parts.append(f'<p class="summary">{_e(facts.summary)}</p>')
    parts.append(verdict_html(facts))
    parts.append('<dl class="facts">')
    if facts.replay:
        parts.append(f"<dt>reproduce</dt><dd><code>{_e(facts.replay)}</code></dd>")
    parts.append(f"<dt>store</dt>{_store_html(facts.mutant)}")
    parts.append(f"<dt>fault plan</dt>{_plan_html(facts)}")
    parts.append(f"<dt>world</dt>{_world_html(model, trace)}")
    if model.service_states:
        parts.append(f"<dt>services at the end</dt>{_states_html(model)}")
    parts.append("</dl>")
    report = facts.report
    spec = report.violation_count - len(report.user_violations) - len(report.mistakes)
    counts = f"{_plural(spec, 'violation')} of the spec, {len(report.explained)} explained by it"
    if report.mistakes:
        counts += f", {_plural(len(report.mistakes), 'mistake')} in how your world is written"
    if report.user_checks or report.user_violations:
        counts += f", {_plural(len(report.user_violations), 'finding')} of your checks"
    parts.append(f"<h2>checks: {_e(counts)}</h2>")
    shown = facts.shown
    if not report.findings:
        parts.append("<p>every invariant held; nothing overlapped</p>")
    else:
        parts.append('<ol class="findings">')
        parts += [finding_html(number, finding) for number, finding in enumerate(shown, 1)]
        parts.append("</ol>")
        hidden = len(report.findings) - len(shown)
        if hidden > 0:
            parts.append(
                f"<p>{hidden} more findings not listed or marked (at most {MAX_FINDINGS})</p>"
            )
    return "\n".join(parts)
