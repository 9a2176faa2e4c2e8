"""What a search covered: the windows its worlds entered, the probes and marks they reached.

A clean result means something only with what was searched: "no check failed in 300 worlds" says
little if none of them entered the window where the bug would be. Each world is reduced to its
features: the at-least-once windows the spec's checks explained (a double run, an effect that
landed twice, a BEGIN with no handler), the takeovers, stale passes and admission misses it saw,
the kinds of fault that fired, the oracle's probes and the user's ``sometimes`` marks. The search
counts them, steers towards the rare ones, and reports them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import attrs

from ..runners._outcome import Simulation
from ..world._marks import marks_in

#: Trace events that mean a world entered one of the spec's windows, with how a report names them.
_WINDOW_EVENTS = {
    "step.lost": "a stale pass stopped at a step boundary",
    "admission.miss": "an admission miss",
    "takeover.exhausted": "a takeover that used the last attempt",
    "fault.release": "a held leg released after its event",
}

#: The windows a report names, in the order it lists them.
WINDOWS = (
    "a takeover",
    "a double run the spec allows",
    "an effect that landed twice",
    "a BEGIN whose handler never ran",
    *_WINDOW_EVENTS.values(),
)


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
    fired = set(simulation.outcome.setup.plan.faults) - set(simulation.outcome.unfired)
    found.update(f"fault:{type(fault).__name__}" for fault in fired)
    found.update(f"probe:{name}" for name, _ in report.probes)
    for name, held in marks_in(trace.events).items():
        found.add(f"mark-seen:{name}")
        if held:
            found.add(f"mark:{name}")
    return frozenset(found)


@attrs.define
class Coverage:
    """How many worlds of a search had each feature."""

    worlds: int = 0
    counts: Counter[str] = attrs.field(factory=Counter)

    def add(self, features: frozenset[str]) -> None:
        self.worlds += 1
        self.counts.update(features)

    def rarity(self, features: frozenset[str]) -> float:
        """How rare ``features`` are so far: which single faults the search combines first."""
        return sum(
            1.0 / (1 + self.counts[f])
            for f in features
            if f.startswith(("window:", "mark:", "probe:"))
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
        entered = [f"{windows[w]} × {w}" for w in WINDOWS if w in windows]
        missed = [w for w in WINDOWS if w not in windows]
        yield "  windows entered: " + ("; ".join(entered) if entered else "none")
        if missed:
            yield "  windows never entered: " + "; ".join(missed)
        faults = self.of("fault:")
        if faults:
            yield "  faults fired: " + ", ".join(f"{n} × {k}" for k, n in faults.items())
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
