"""What a search covered: the windows its worlds entered, the probes and marks they reached.

A clean result means something only with what was searched: "no check failed in 300 worlds" says
little if none of them entered the window where the bug would be. Each world is reduced to its
features: the at-least-once windows the spec's checks explained (a double run, an effect that
landed twice, a BEGIN with no handler), the takeovers, stale passes and admission misses it saw,
the kinds of fault that fired, the oracle's probes and the user's ``sometimes`` marks. The search
counts them, steers towards the rare ones, and reports them.

A world with versions of its jobs has the windows of a deploy: a pass of one version over the
steps another ran, and the old code serving after a deploy began.

A world of the user's own file is measured too: the arcs of the user's code it took (its
handlers', step bodies', service operations' and checks' lines and branches, :mod:`._user_code`)
are features like the others, so a world that took a rare branch is a rare world; a clean
result lists the branches of the user's code no world took.

A world with services has windows of its own (a call that timed out, a reply that came after its
caller gave up, a request that ran after it, a refusal), and the report says how many service
calls the faults struck. A held leg released by its time limit is counted apart: its event never
came, so it reached no window.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import attrs

from .._numbers import plural
from ..faults._plan import ServiceOutage
from ..runners._outcome import Simulation
from ..world._marks import marks_in
from ._user_code import CODE, SHOWN_BRANCHES, UNMEASURED, code_arcs, untaken_branches

#: Trace events that mean a world entered one of the spec's windows, with how a report names them.
_WINDOW_EVENTS = {
    "step.lost": "a stale pass stopped at a step boundary",
    "admission.miss": "an admission miss",
    "takeover.exhausted": "a takeover that used the last attempt",
}
_RELEASED = "a held leg released after its event"

#: The windows a report names, in the order it lists them.
WINDOWS = (
    "a takeover",
    "a double run the spec allows",
    "an effect that landed twice",
    "a BEGIN whose handler never ran",
    *_WINDOW_EVENTS.values(),
    _RELEASED,
)

#: The job's outside world's windows, by the trace event that enters them.
_SERVICE_EVENTS = {
    "svc.timeout": "a service call that timed out",
    "svc.late": "a reply that came after its caller gave up",
    "svc.abandon": "a request its caller gave up on, still on the wire",
}
_REFUSED = "a request the service refused for now"
_DECLINED = "a request the service declined (an answer)"
#: The outside world's windows, in the order a report lists them: named only for a search whose
#: worlds called a service.
SERVICE_WINDOWS = (*_SERVICE_EVENTS.values(), _REFUSED, _DECLINED)

#: The windows of a deploy (a world with versions of its jobs): a pass of one version over the
#: steps a pass of another ran since the run's last commit (a memo it must carry), and a pass of
#: the old code after the deploy began (two versions serving at once).
_ACROSS = "a pass over the steps another version ran"
_OLD_AFTER = "a pass on the old version after a deploy began"
#: Named only for a search whose worlds had versions.
DEPLOY_WINDOWS = (_ACROSS, _OLD_AFTER)

#: The fault events that strike one service call (a crash names the call it struck after).
_STRIKES = ("fault.delay", "fault.drop", "fault.hold", "fault.late", "fault.crash")


def features_of(simulation: Simulation) -> frozenset[str]:
    """The windows, faults, probes and marks of one world, each a short name."""
    trace = simulation.outcome.trace
    report = simulation.report
    found: set[str] = set()
    explained = {finding.check for finding in report.explained}
    if "double-run" in explained:
        found.add("window:a double run the spec allows")
    if "effects" in explained:
        found.add("window:an effect that landed twice")
    if "handler-iff-begin" in explained:
        found.add("window:a BEGIN whose handler never ran")
    if any(e.get("takeover") for e in trace.of("claim.won")):
        found.add("window:a takeover")
    for event, name in _WINDOW_EVENTS.items():
        if trace.counts.get(event):
            found.add(f"window:{name}")
    for release in trace.of("fault.release"):
        # A hold its time limit let go never met its event: it reached no window.
        found.add("hold:max_ms" if release.get("why") == "max_ms" else f"window:{_RELEASED}")
    for service in simulation.outcome.setup.services:
        found.update(f"declared:{service.name}.{op}" for op in service.operations)
    found.update(f"called:{event['op']}" for event in trace.of("svc.send"))
    if trace.counts.get("svc.send"):
        found.add("services")
        for event, name in _SERVICE_EVENTS.items():
            if trace.counts.get(event):
                found.add(f"window:{name}")
        executed = list(trace.of("svc.exec"))
        if any("refused" in event and not event.get("declined") for event in executed):
            found.add(f"window:{_REFUSED}")
        if any(event.get("declined") for event in executed):
            found.add(f"window:{_DECLINED}")
    if simulation.outcome.setup.versions:
        found.add("versions")
        found.update(f"window:{name}" for name in _deploy_windows(trace.events))
    fired = set(simulation.outcome.setup.plan.faults) - set(simulation.outcome.unfired)
    found.update(f"fault:{type(fault).__name__}" for fault in fired)
    found.update(f"probe:{name}" for name, _ in report.probes)
    for name, held in marks_in(trace.events).items():
        found.add(f"mark-seen:{name}")
        if held:
            found.add(f"mark:{name}")
    return frozenset(found)


def _deploy_windows(events: list[dict[str, Any]]) -> set[str]:
    """The deploy windows a world entered: each drive's version follows its restarts
    (``fault.deploy``); a run's steps since its last commit remember the versions that ran
    them."""
    version: dict[str, str] = {}
    ran: dict[str, set[str]] = {}
    entered: set[str] = set()
    deployed = False
    for event in events:
        kind = event["ev"]
        if kind == "fault.deploy":
            version[str(event["drive"])], deployed = str(event["version"]), True
        elif kind == "step.run":
            ran.setdefault(str(event["run"]), set()).add(version.get(str(event["drive"]), ""))
        elif kind == "pass.outcome" and event["written"] and event["status"] != "failed":
            ran.pop(str(event["run"]), None)
        elif kind == "handler.invoke":
            mine = version.get(str(event["drive"]), "")
            if ran.get(str(event["run"]), set()) - {mine}:
                entered.add(_ACROSS)
            if deployed and not mine:
                entered.add(_OLD_AFTER)
    return entered


def struck_service_calls(simulation: Simulation) -> Counter[str]:
    """How many service calls of the world a fault struck, by "SERVICE.OPERATION": a leg
    delayed, dropped or held, a request given up on, a crash right after the call, a request an
    outage refused. A call struck twice counts once."""
    trace = simulation.outcome.trace
    struck: dict[tuple[str, int], str] = {}
    for event in trace.of(*_STRIKES):
        op = str(event.get("after") or event.get("op") or "")
        if "." in op:
            struck[(str(event["drive"]), int(event["seq"]))] = op
    outages = simulation.outcome.setup.plan.of(ServiceOutage)
    for event in trace.of("svc.exec"):
        # An outage is checked first where a request arrives: a refusal within one is its own.
        service = str(event["op"]).split(".", 1)[0]
        if "refused" in event and any(
            isinstance(o, ServiceOutage)
            and o.service == service
            and o.from_ms <= event["t"] < o.to_ms
            for o in outages
        ):
            struck[(str(event["drive"]), int(event["seq"]))] = str(event["op"])
    return Counter(struck.values())


@attrs.define
class Coverage:
    """How many worlds of a search had each feature, and how many service calls were struck."""

    worlds: int = 0
    counts: Counter[str] = attrs.field(factory=Counter)
    #: Service calls a fault struck, over all worlds, by "SERVICE.OPERATION".
    struck: Counter[str] = attrs.field(factory=Counter)
    #: How many worlds had a service call struck.
    struck_worlds: int = 0
    #: The features of the first world counted: a search's clean world, what a fault's world is
    #: compared with to see whether it opened a new path of the user's code.
    first: frozenset[str] = frozenset()

    def add(self, features: frozenset[str], *, struck: Counter[str] | None = None) -> None:
        if not self.worlds:
            self.first = features
        self.worlds += 1
        self.counts.update(features)
        if struck:
            self.struck.update(struck)
            self.struck_worlds += 1

    def rarity(self, features: frozenset[str]) -> float:
        """How rare ``features`` are so far: which single faults the search combines first. An arc
        of the user's code counts only when some world counted did not take it: the arcs every
        world takes (most of them) say nothing of this one."""
        return sum(
            1.0 / (1 + self.counts[f])
            for f in features
            if f.startswith(("window:", "mark:", "probe:"))
            or (f.startswith(CODE) and self.counts[f] < self.worlds)
        )

    def of(self, prefix: str) -> dict[str, int]:
        return {
            name.removeprefix(prefix): count
            for name, count in sorted(self.counts.items())
            if name.startswith(prefix)
        }

    def marks_never_held(self) -> list[str]:
        held = self.of("mark:")
        return [name for name in self.of("mark-seen:") if name not in held]

    def lines(self) -> Iterator[str]:
        windows = self.of("window:")
        # The outside world's windows are named only where the worlds called a service.
        named = (*WINDOWS, *SERVICE_WINDOWS) if self.counts["services"] else WINDOWS
        if self.counts["versions"]:
            named = (*named, *DEPLOY_WINDOWS)
        entered = [f"{windows[w]} × {w}" for w in named if w in windows]
        missed = [w for w in named if w not in windows]
        yield "  windows entered: " + ("; ".join(entered) if entered else "none")
        if missed:
            yield "  windows never entered: " + "; ".join(missed)
        if self.counts["hold:max_ms"]:
            yield (
                f"  held legs released at their max_ms (their event never came): in "
                f"{plural(self.counts['hold:max_ms'], 'world')}"
            )
        faults = self.of("fault:")
        if faults:
            yield "  faults fired: " + ", ".join(f"{n} × {k}" for k, n in faults.items())
        if self.counts["services"]:
            total = sum(self.struck.values())
            ops = ", ".join(f"{n} × {op}" for op, n in sorted(self.struck.items()))
            yield (
                f"  service calls struck: {total}"
                + (f" ({ops}), in {plural(self.struck_worlds, 'world')}" if total else "")
            )
        called = self.of("called:")
        never = [op for op in self.of("declared:") if op not in called]
        if never:
            yield (
                f"  service operations no world called: {', '.join(never)} (a fault strikes only "
                "a call the world makes: a path the search never opened, such as a fallback, was "
                "not tested)"
            )
        probes = self.of("probe:")
        if probes:
            yield f"  oracle probes reached: {len(probes)}"
        held, seen = self.of("mark:"), self.of("mark-seen:")
        if seen or held:
            yield "  your marks (sometimes): " + ", ".join(
                f"{name} held in {held.get(name, 0)} of {count} worlds that saw it"
                for name, count in {
                    **seen,
                    **{k: v for k, v in held.items() if k not in seen},
                }.items()
            )
            never = self.marks_never_held()
            if never:
                yield "  marks never reached: " + ", ".join(never)
        yield from self.code_lines()

    def code_lines(self) -> Iterator[str]:
        """The user's branches no world took (the first few, and how many more), or why the
        user's code was not measured."""
        unmeasured = self.of(UNMEASURED)
        if unmeasured:
            yield (
                f"  your code was not measured in {plural(sum(unmeasured.values()), 'world')}: "
                + ("; ".join(unmeasured))
            )
        taken = code_arcs(self.counts)
        if not taken:
            return
        untaken = untaken_branches(taken)
        if not untaken:
            yield "  your code's branches: every way of every branch the worlds came to was taken"
            return
        more = len(untaken) - SHOWN_BRANCHES
        yield f"  your code's branches no world took ({len(untaken)}):"
        for branch in untaken[:SHOWN_BRANCHES]:
            yield f"    {branch.words()}"
        if more > 0:
            yield f"    and {more} more"
