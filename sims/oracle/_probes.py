"""Coverage probes: every spec edge the oracle knows, named, and counted when a world reaches it.

A check that never meets its edge proves nothing about it. Each probe below is an edge of the spec
that the oracle's rules have something to say about; a sweep counts how often each was hit, and a
test asserts that the ``random`` swarm over seeds 0..199 reaches every one (docs/checks.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Final, Protocol

#: Probe name -> the edge it marks, as a sweep prints it.
PROBES: Final[dict[str, str]] = {
    "takeover.begun": "a claim took over an expired lease whose pass had BEGUN (charged)",
    "takeover.unbegun": "a claim took over an expired lease that never began (free)",
    "takeover.exhausted": "a takeover charged a run's last attempt: failed without its handler",
    "admission.miss": "a claim did not begin in time: an admission miss, no attempt",
    "admission.tenth-miss": "the tenth consecutive miss failed the run",
    "begin.refused": "BEGIN was sent and the store refused it (too little lease left)",
    "begin.exact-margin": "a claim's answer left exactly the margin by the drive's count: a miss",
    "step.memo": "a step found its completed memo and did not run again",
    "step.spent": "a step had used its attempts: the run failed without running it",
    "step.spent-narrower": "a step spent by its own policy, narrower than the job's",
    "step.limit-narrower-fails": "a step's own narrower limit failed the run",
    "policy.step-narrower": "a step asked for a policy narrower than its job's",
    "policy.step-wider": "a step asked for a policy wider than its job's (narrowed to the job's)",
    "retry.job-limit": "a run failed at the job's own max_attempts",
    "step.reused": "a handler used one step name twice in a pass (refused)",
    "handler.throws": "a handler threw: the pass failed and nothing it produced was written",
    "handler.counts": "a handler counted: the counters merged at commit",
    "cursor.omitted": "a pass omitted its cursor: the committed one was kept",
    "deferral": "the host's system door said 'not now': deferred, nothing charged",
    "deferral.look-alike": "a handler threw an error in the door's words ('not now') that the "
    "door did not throw: the pass failed, not deferred (a deferral is decided by identity)",
    "pass.lost-at-boundary": "a stale pass learned at a step boundary that it lost its lease",
    "outcome.refused": "a stale pass's outcome write was refused",
    "request.late": "a request its caller gave up on reached the scope late (at-least-once wire)",
    "stale-write.refused": "a write by an owner that no longer held the run was refused",
    "late-begin.overlap": "a late BEGIN reply: two passes of one run overlapped (documented)",
    "erasure.mid-pass": "a subject erasure settled a run while a pass held it",
    "erasure.after-pass": "a subject erasure redacted a finished run",
    "import.own-scope": "a dump was restored into the scope it came from",
    "import.other-scope": "a dump was imported into another scope",
    "join.live": "a start joined the live run for its key",
    "join.other-subject": "a start under another subject met a live run (refused)",
    "join.no-subject": "a start under no subject met a live run that has one (refused)",
    "join.subject-over-none": "a start under a subject met a live run that has none (refused)",
    "payload.refused": "a start's payload was not queue-safe (refused before any row)",
    "payload.refused-float": "a start's payload was a float JSON cannot carry (NaN, infinity)",
    "payload.refused-tuple": "a start's payload was a tuple (it would come back a list)",
    "payload.refused-set": "a start's payload was a set",
    "payload.refused-bytes": "a start's payload was bytes",
    "payload.refused-object": "a start's payload was an object of a class of its own",
    "payload.cursor-refused": "a handler returned a cursor that is not queue-safe (pass failed)",
    "drive.unregistered-skipped": "a drive stepped over a due run whose job it does not register",
    "drive.limit-reached": "a drive's own limit left runnable runs for the next call",
    "drive.default-limit-reached": "a drive given no limit took the default 50 and left runnable "
    "runs for the next call",
    "drive.second-pass": "a drive call ran a second pass of one run (max_passes)",
    "instance.several-scopes": "one instance name live in several scopes at once",
    "register.lease-refused": "a job's registration was refused (a lease below the minimum)",
    "register.lease-near-min": "a job registered a lease under twice the minimum",
    "due.same-ms": "a due read at exactly a run's next_attempt_at (due: the test is <=)",
    "step.memo-returned": "step() handed the handler a memo's value, as the trace records it",
    "erasure.step-result": "an erasure reached a run only through a step result's envelope",
    "file.power": "the power went under a scope on files: what its replies promised was kept",
    "file.outside": "SQLite from outside (a reader, a writer, a checkpoint) or a chmod or touch "
    "met an open scope's file: it went on serving",
    "file.foreign": "another scope's file was put at a scope's path (refused)",
    "file.written-behind": "a file was copied over an open scope's file in place, behind SQLite "
    "(refused, its own log kept)",
}


#: The probes of each kind of payload the queue-safety rule refuses, as the trace names the kind.
UNSAFE_PAYLOAD_PROBES: Final = frozenset(p for p in PROBES if p.startswith("payload.refused-"))


class _HasProbes(Protocol):
    @property
    def probes(self) -> tuple[tuple[str, int], ...]: ...


def probe_totals(seeds: Iterable[_HasProbes]) -> Counter[str]:
    """How often each probe was hit, over every seed."""
    totals: Counter[str] = Counter()
    for summary in seeds:
        for name, count in summary.probes:
            totals[name] += count
    return totals


#: A probe hit in fewer than this share of a sweep's worlds is reached too rarely to trust: a
#: single-rule bug on its edge would be caught by a seed or two, or by none.
RARE_SHARE: Final = 0.05


def probe_worlds(seeds: Iterable[_HasProbes]) -> Counter[str]:
    """In how many worlds each probe was hit."""
    worlds: Counter[str] = Counter()
    for summary in seeds:
        worlds.update(name for name, count in summary.probes if count)
    return worlds


def probe_lines(seeds: Iterable[_HasProbes]) -> Iterator[str]:
    """A few lines for a sweep's report: the probes hit (with counts), the ones hit in fewer
    than 5% of the worlds, and the ones missed."""
    seeds = list(seeds)
    totals = probe_totals(seeds)
    worlds = probe_worlds(seeds)
    rare = [
        f"{name} in {worlds[name]}" for name in PROBES if 0 < worlds[name] < RARE_SHARE * len(seeds)
    ]
    hit = [f"{name} {totals[name]}" for name in PROBES if totals[name]]
    missed = [name for name in PROBES if not totals[name]]
    yield f"  probes hit: {len(hit)} of {len(PROBES)}"
    for start in range(0, len(hit), 6):
        yield "    " + ", ".join(hit[start : start + 6])
    if rare and len(seeds) >= 1 / RARE_SHARE:
        yield f"  probes hit in fewer than 5% of {len(seeds)} worlds: {', '.join(rare)}"
    if missed:
        yield f"  probes never hit: {', '.join(missed)}"
