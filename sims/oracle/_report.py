"""What a check reports: findings (a violation of the spec, or an overlap it allows, explained),
in sentences, and the report of a whole world with the coverage probes it hit.

A finding is the spec's (one of :data:`SPEC_CHECKS`), a user's own check's (``by_user``), or a
mistake in how the user's world is written (one of :data:`MISTAKES`: a step never awaited, a run
no drive ever drove). The three are told apart in every verdict (:meth:`CheckReport.verdict`): a
user's check that fails in a world where the spec's checks held, or explained what happened, is a
bug in the user's handler, not in the store or the kernel, and a mistake is the user's to fix with
the remedy it names; a reader must take neither for a violation of the spec.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

import attrs

from .._numbers import ms, plural

Verdict = Literal["violation", "explained"]


@attrs.frozen
class Finding:
    """One thing a check saw: a violation of the spec, or an overlap the spec allows, explained."""

    check: str
    verdict: Verdict
    run: str | None
    t: float
    text: str
    #: True for a finding of a user's own check (a scenario's ``checks``), not the spec's.
    by_user: bool = attrs.field(default=False, kw_only=True)

    def line(self) -> str:
        where = f" run {short(self.run)}" if self.run else ""
        mistake = MISTAKES.get(self.check)
        whose = " (your check)" if self.by_user else f" ({mistake.whose})" if mistake else ""
        return f"[{self.verdict}] {self.check}{where} at {ms(self.t)} ms{whose}: {self.text}"


def _at_ms(instance: UserFinding, attribute: attrs.Attribute[float | None], value: object) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(
            f"UserFinding at_ms={value!r} is not a time; give the virtual time in ms at which "
            "it happened (a number >= 0, e.g. an event's event['t']), or leave it out"
        )


def _text(instance: UserFinding, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise ValueError(
            f"UserFinding text={value!r} is not a string; say what went wrong in words"
        )


def _run(instance: UserFinding, attribute: attrs.Attribute[str | None], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise ValueError(
            f"UserFinding run={value!r} is not a run id; give the run's id (a string, e.g. "
            "event['run']), or leave it out"
        )


@attrs.frozen
class UserFinding:
    """One finding of a user's own check, with when it happened and on which run.

    A check may return these alongside plain strings: a string is placed at the end of the world;
    a ``UserFinding`` at ``at_ms`` (the virtual time of the event that broke the rule, e.g. the
    second effect) and on ``run``, so that the page marks it where it happened."""

    text: str = attrs.field(validator=_text)
    at_ms: float | None = attrs.field(default=None, kw_only=True, validator=_at_ms)
    run: str | None = attrs.field(default=None, kw_only=True, validator=_run)


#: Every check of the spec's, by the name its findings carry (``docs/checks.md`` says each rule):
#: the store model's, the kernel model's and the invariant checks over the whole trace.
SPEC_CHECKS: tuple[str, ...] = (
    *(
        f"store-{operation}"
        for operation in (
            "start_or_join",
            "due_keys",
            "claim",
            "begin",
            "miss",
            "patch",
            "commit_pass",
            "begin_step",
            "record_step",
            "list",
            "shred_subject",
            "export_dump",
            "import_dump",
            "rows",
            "steps",
        )
    ),
    # The file layer's, in a world on files (``_files``).
    "durable-writes",
    "file-outside",
    "file-identity",
    "file-behind",
    "fresh-owner",
    "drive-selection",
    "drive-passes",
    "lease-ms",
    "begin-admission",
    "begin-margin",
    "takeover",
    "takeover-exhausted",
    "step-boundary",
    "step-memo",
    "step-record",
    "pass-outcome",
    "drive-report",
    "payload-refused",
    "start-row",
    "join-returns-live",
    "join-subject",
    "handler-iff-begin",
    "double-run",
    "one-live-run-per-key",
    "claim-only-when-due",
    "no-write-after-lease-lost",
    "attempts-charged",
    "admission-misses",
    "ledger-one-pass",
    "failed-without-invocation",
    "effects",
    "runs-settle",
)


#: The checks only the oracle's executable models make (the store's answers, the kernel's
#: drives, passes and starts): what a trace the models cannot follow leaves unchecked. They are
#: listed first in :data:`SPEC_CHECKS`; of those, the invariant checks make ``begin-margin`` and
#: ``takeover`` too.
MODEL_CHECKS: frozenset[str] = frozenset(SPEC_CHECKS[: SPEC_CHECKS.index("handler-iff-begin")]) - {
    "begin-margin",
    "takeover",
}


@attrs.frozen
class Mistake:
    """A mistake in how a user's world is written, which the simulator finds in any world: whose
    it is, what it did, in words a verdict says, and the remedy."""

    whose: str
    did: str
    remedy: str


#: The checks of the user's own code, not of the spec, by name: a finding of one is a violation
#: (the world is not clean), told as the user's mistake with its remedy, never as the spec's.
MISTAKES: dict[str, Mistake] = {
    "step-never-awaited": Mistake(
        "your handler",
        "your handler created a step and never awaited it, so its body never ran and the pass "
        "failed",
        "write `await ctx.step(...)`",
    ),
    "handler-raised": Mistake(
        "your handler",
        "your handler (or a step body) raised an exception of its own, not the outside world's",
        "fix the code at the line named (the finding gives the exception's type, file and line)",
    ),
    "run-failed": Mistake(
        "your handler",
        "your handler raised an exception of its own in a run's last pass, and the run ended "
        "failed",
        "fix the code at the line named; if failing is what the job should do in this world, say "
        "so with @scenario(..., failures_expected=True)",
    ),
    "run-never-driven": Mistake(
        "your scenario",
        "your scenario drove no run after it was started (by the scenario, by a start the wire "
        "delivered late or sent again, or by a service's callback), so it could not end",
        "drive its scope (world.tick, or world.every) past the moment the run was started, and "
        "wait for it with world.settle (the finding says what started it)",
    ),
}


@attrs.frozen
class CheckReport:
    findings: tuple[Finding, ...]
    #: The coverage probes the world hit, by name, with how often (``sims.oracle._probes``).
    probes: tuple[tuple[str, int], ...] = ()
    #: Violations counted past the repeat cap beyond the one line that reports them: what the
    #: listed findings leave out (0 for a report built by hand, or where nothing repeated).
    violations_unlisted: int = 0
    #: How many violations each check had, listed or not, by check (empty for a report built by
    #: hand: the listed findings are counted instead).
    violations_by_check: tuple[tuple[str, int], ...] = ()
    #: The names of the user's own checks that ran on the world, in the scenario's order.
    user_checks: tuple[str, ...] = ()
    #: Whether ``runs-settle`` ran: only on a world whose scenario says every run must end.
    settles: bool = True
    #: What the world's end cut off (``world.cut``): passes still running when the grace after
    #: the scenario ran out, said in the verdict; None when every pass stopped by itself.
    cut: str | None = None

    @property
    def violation_count(self) -> int:
        """How many violations the world had: what a verdict says (the listed findings alone
        undercount a world that repeated one violation thousands of times)."""
        return len(self.violations) + self.violations_unlisted

    @property
    def violations(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.verdict == "violation")

    @property
    def explained(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.verdict == "explained")

    @property
    def ok(self) -> bool:
        return not self.violations

    def explained_of(self, check: str) -> int:
        return sum(1 for f in self.explained if f.check == check)

    @property
    def spec_violations(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.violations if not f.by_user and f.check not in MISTAKES)

    @property
    def mistakes(self) -> tuple[Finding, ...]:
        """The violations that are mistakes in how the user's world is written (``MISTAKES``)."""
        return tuple(f for f in self.violations if f.check in MISTAKES)

    @property
    def user_violations(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.violations if f.by_user)

    def violations_of(self) -> Counter[str]:
        """How many violations each check had (the spec's counted past the repeat cap)."""
        counted: Counter[str] = Counter(dict(self.violations_by_check))
        if not counted:
            counted.update(f.check for f in self.spec_violations)
        counted.update(f.check for f in self.user_violations)
        return counted

    @property
    def spec_checks(self) -> tuple[str, ...]:
        """The spec's checks that ran on this world."""
        return tuple(c for c in SPEC_CHECKS if self.settles or c != "runs-settle")

    def verdict(self) -> str:
        """The verdict in one sentence, the same in the terminal, a sweep, a test's failure and
        the page: whether the spec was violated, and apart from it, whether a user's own check
        failed (and when), with what the spec's checks explained."""
        failed: dict[str, str] = {}
        for finding in self.user_violations:
            failed.setdefault(finding.check, f"at {ms(finding.t)} ms")
        violated = self.violations_of()
        spec = Counter(
            {c: n for c, n in violated.items() if c not in self.user_checks and c not in MISTAKES}
        )
        mistakes = {c: f"({n} × {c})" for c, n in sorted(violated.items()) if c in MISTAKES}
        explained = Counter(f.check for f in self.explained)
        words = verdict_words(spec, failed, explained, mistakes=mistakes)
        return words if self.cut is None else f"{words}; {self.cut}"

    def check_lines(self) -> Iterator[str]:
        """Every check that ran, the spec's and the user's, with what it found: the ones that
        found something one line each, the ones that held named together."""
        violated = self.violations_of()
        explained = Counter(f.check for f in self.explained)
        held = [c for c in self.spec_checks if not violated[c] and not explained[c]]
        for check in self.spec_checks:
            if violated[check]:
                yield f"  {check}: VIOLATED ({plural(violated[check], 'violation')})"
            elif explained[check]:
                yield f"  {check}: explained ({explained[check]} × allowed by the spec)"
        yield f"  the spec's other {plural(len(held), 'check')} held: {', '.join(held)}"
        for check, mistake in MISTAKES.items():
            if violated[check]:
                found = plural(violated[check], "finding")
                yield f"  {check}: FOUND ({found}), {mistake.whose}'s mistake"
        clean = [check for check in MISTAKES if not violated[check]]
        if clean:
            yield f"  no mistake in how your world is written: {', '.join(clean)}"
        for check in self.user_checks:
            if violated[check]:
                yield f"  your check {check}: FAILED ({plural(violated[check], 'finding')})"
            else:
                yield f"  your check {check}: held"


def counts(by_check: Counter[str]) -> str:
    """``2 × effects, 1 × double-run``: most first, then by name."""
    ordered = sorted(by_check.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{count} × {check}" for check, count in ordered)


def verdict_words(
    spec: Counter[str],
    failed: Mapping[str, str],
    explained: Counter[str],
    *,
    mistakes: Mapping[str, str] | None = None,
    before: Sequence[str] = (),
    held_in: str | None = "",
) -> str:
    """The verdict's sentence, from the spec's violations by check, the user's checks that
    failed with when (``at 12 ms``, ``in 3 of 5 seeds``), the mistakes found in how the user's
    world is written (:data:`MISTAKES`) with how often, and what the spec's checks explained:
    "the spec was violated" only when one of the spec's checks was, and "every check held" only
    when nothing at all was found.

    ``before`` is said first: what kept worlds from being judged (a sweep's worlds that raised, or
    that were not a function of their seed). ``held_in`` qualifies what held (`` in the other 3
    seeds``); None when no world was left to hold anything, so that nothing is said to hold."""
    parts = list(before)
    for check, when in (mistakes or {}).items():
        mistake = MISTAKES[check]
        parts.append(f"{mistake.did} {when}: {mistake.remedy}")
    total = sum(spec.values())
    if total:
        parts.append(f"the spec was violated: {plural(total, 'violation')} ({counts(spec)})")
    if failed:
        said = [f"`{check}` failed {when}" for check, when in failed.items()]
        parts.append(f"{'your check' if len(said) == 1 else 'your checks'} {' and '.join(said)}")
    if not total and held_in is not None:
        held = "the spec held" if failed or mistakes else "every check held"
        held += held_in
        if explained:
            held += f"; the spec's checks explained what happened ({counts(explained)})"
        parts.append(held)
    return "; ".join(parts)


def short(run_id: str | None) -> str:
    """The tail of a ULID, which is what differs between runs minted in one millisecond."""
    return "-" if run_id is None else run_id[-6:]
