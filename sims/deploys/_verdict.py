"""What ``before-deploy`` found: each run in flight, what the new code did over it, and why it
can or cannot go on; as values (for tests and callers) and as the lines the command prints."""

from __future__ import annotations

import textwrap

import attrs

from .._numbers import plural

_VERSION = (
    "version the job (register the new handler under a new job name and keep the old handler "
    "until the old runs have ended)"
)
#: The remedy for each rule.
REMEDY_NAME = (
    "keep the old step name; if the new code walks elsewhere, read the run's cursor and payload "
    f"as the old code wrote them; or {_VERSION}"
)
REMEDY_READ = (
    "read the old shape too, and keep writing it while the old code still serves (a rolling "
    f"deploy runs both), or {_VERSION}"
)
REMEDY_ORDER = f"call new steps after the ones the old code recorded, or {_VERSION}"
REMEDY_OTHER_WORK = (
    "read the run's cursor and payload as the old code wrote them (and, while the old code still "
    f"serves, write them so), or {_VERSION}"
)
REMEDY_KEY = (
    f"build the key as the old code did for the runs it began (from what the run holds), or "
    f"{_VERSION}"
)

#: The rules, by the name a finding carries.
STEP_NOT_CALLED = "step-not-called"
RAISES = "raises"
NEW_STEP_FIRST = "new-step-first"
KEY_CHANGED = "key-changed"
OTHER_WORK = "other-work"


@attrs.frozen
class LedgerStep:
    """One row of a run's step ledger: a step ``done`` (its result recorded: its effect
    happened), or attempted and failed (no result: its effect may have happened)."""

    name: str
    done: bool

    def said(self) -> str:
        if self.done:
            return f"{self.name!r} (done by the old code: whatever it does happened)"
        return f"{self.name!r} (attempted by the old code and failed: its effect may have happened)"


@attrs.frozen(kw_only=True)
class RunInFlight:
    """A run not ended (``running``) in a source, with the step ledger its source holds."""

    scope: str
    run: str
    module_id: str
    job: str
    instance: str
    #: Where it was read (the ``--runs`` value, or the file in a folder).
    source: str
    ledger: tuple[LedgerStep, ...] = ()
    #: Whether a pass held the run when the source was taken (its lease begun): a process
    #: killed mid-pass leaves it so, and the step that pass was in may have done its work.
    held_by_a_pass: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.module_id, self.job)

    def named(self) -> str:
        return (
            f"scope {self.scope}, run {self.run} (job {self.module_id}/{self.job}, instance "
            f"{self.instance!r})"
        )

    def held(self, name: str) -> LedgerStep | None:
        return next((step for step in self.ledger if step.name == name), None)


@attrs.frozen(kw_only=True)
class DeployFinding:
    """One thing the new code cannot carry on one run: its ``rule``, the ``step`` it is about
    (for an exception, where in the pass it came), what happened, and the remedy."""

    rule: str
    run: RunInFlight
    step: str
    text: str
    remedy: str

    def lines(self) -> list[str]:
        return [
            f"cannot go on: {self.run.named()}, {self.step}",
            f"  {self.text}",
            f"  remedy: {self.remedy}",
        ]


@attrs.frozen(kw_only=True)
class RunVerdict:
    """One run in flight of a job the new code defines, after the new code's passes over it:
    the steps each pass called, in order, and its findings. ``not_judged`` says why the passes
    could not show what the new code does with the run (no pass ran, or each failed on the
    outside world's answer before it showed which steps it calls)."""

    run: RunInFlight
    called: tuple[tuple[str, ...], ...] = ()
    findings: tuple[DeployFinding, ...] = ()
    not_judged: str | None = None

    @property
    def goes_on(self) -> bool:
        return not self.findings and self.not_judged is None


@attrs.frozen(kw_only=True)
class DeployVerdict:
    """Every run in flight in the sources, judged (``runs``) or not checked (its job is not in
    the new code); ``ok`` when every judged run can go on under the new code."""

    sources: tuple[str, ...]
    jobs: tuple[str, ...]
    runs: tuple[RunVerdict, ...] = ()
    not_checked: tuple[RunInFlight, ...] = ()
    #: The old code's jobs, when given: the idempotency keys its repeats would use were compared
    #: with the new code's (:data:`KEY_CHANGED`).
    old_jobs: tuple[str, ...] = ()

    @property
    def findings(self) -> tuple[DeployFinding, ...]:
        return tuple(finding for run in self.runs for finding in run.findings)

    @property
    def ok(self) -> bool:
        return all(run.goes_on for run in self.runs)

    def summary(self) -> str:
        going = sum(1 for run in self.runs if run.goes_on)
        cannot = sum(1 for run in self.runs if run.findings)
        judged = sum(1 for run in self.runs if run.not_judged is not None and not run.findings)
        total = len(self.runs) + len(self.not_checked)
        line = (
            f"{plural(total, 'run')} in flight; {going} can go on under the new code; "
            f"{cannot} cannot"
        )
        if judged:
            line += f"; {judged} not judged (above)"
        if self.not_checked:
            line += f"; {len(self.not_checked)} not checked (their jobs are not in the new code)"
        return line

    def lines(self) -> list[str]:
        """What ``python -m sims before-deploy`` prints, long lines wrapped at 100."""
        lines = [
            f"before-deploy: the runs in flight in {', '.join(self.sources)}, checked against "
            f"the new code ({', '.join(self.jobs)}): each run's next pass, and its retry if it "
            "fails, run on the new code in a world restored from the source, with no faults"
        ]
        if not self.runs and not self.not_checked:
            lines.append("no run is in flight in these sources: nothing for the new code to carry")
        for run in self.runs:
            for finding in run.findings:
                lines.extend(("", *finding.lines()))
            if run.not_judged is not None and not run.findings:
                lines.extend(("", f"not judged: {run.run.named()}", f"  {run.not_judged}"))
        if self.not_checked:
            listed = "; ".join(
                f"run {run.run} (job {run.module_id}/{run.job}, instance {run.instance!r}) in "
                f"scope {run.scope}"
                for run in self.not_checked
            )
            lines.extend(
                (
                    "",
                    f"not checked: {plural(len(self.not_checked), 'run')} of jobs the new code "
                    f"does not define: {listed}",
                )
            )
        if self.runs and not self.old_jobs:
            lines.extend(
                (
                    "",
                    "not compared: whether the new code repeats what the old code attempted under "
                    "the same idempotency keys, and does the same outside work as the old code "
                    "on each run, takes the old code: give --old FILE.py:NAME",
                )
            )
        lines.extend(("", self.summary()))
        return [_wrapped(line) for line in lines]


def _wrapped(line: str) -> str:
    """A line wrapped as ``check`` wraps its own: at 100, each piece after the first indented by
    four spaces (the lines of a block are indented by two)."""
    return textwrap.fill(
        line,
        width=100,
        subsequent_indent="    ",
        break_on_hyphens=False,
        break_long_words=False,
    )
