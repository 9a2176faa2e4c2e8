"""What a check reports: findings (a violation of the spec, or an overlap it allows, explained),
in sentences, and the report of a whole world with the coverage probes it hit."""

from __future__ import annotations

from typing import Literal

import attrs

from .._numbers import ms

Verdict = Literal["violation", "explained"]


@attrs.frozen
class Finding:
    """One thing a check saw: a violation of the spec, or an overlap the spec allows, explained."""

    check: str
    verdict: Verdict
    run: str | None
    t: float
    text: str

    def line(self) -> str:
        where = f" run {short(self.run)}" if self.run else ""
        return f"[{self.verdict}] {self.check}{where} at {ms(self.t)} ms: {self.text}"


@attrs.frozen
class CheckReport:
    findings: tuple[Finding, ...]
    #: The coverage probes the world hit, by name, with how often (``sims.oracle._probes``).
    probes: tuple[tuple[str, int], ...] = ()
    #: Violations counted past the repeat cap beyond the one line that reports them: what the
    #: listed findings leave out (0 for a report built by hand, or where nothing repeated).
    violations_unlisted: int = 0

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


def short(run_id: str | None) -> str:
    """The tail of a ULID, which is what differs between runs minted in one millisecond."""
    return "-" if run_id is None else run_id[-6:]
