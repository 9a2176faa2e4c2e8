"""The kernel model's outcome rules: what a pass must write once its handler ended — nothing after
a lost lease; a failure by the job's policy and the step's own (retry within the jittered backoff
window, or fail); a failure for a step never awaited (the user's mistake, told as such); a deferral
charging nothing; a commit with the cursor (an omitted one kept) and the merged counters — and the
status the pass reports.
"""

from __future__ import annotations

import json
import math
from typing import Any

from driver import parse_iso_ms

from ._records import ANY_TEXT, KernelRecords, PassModel, Policy, Row, counters_of
from ._spec import DEFER_MS


def _same_numbers(a: dict[str, float], b: dict[str, float]) -> bool:
    if set(a) != set(b):
        return False
    return all(math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-9) for k in a)


def _ms(text: Any) -> int | None:
    """A written time in milliseconds; None when it is absent or not the spec's spelling."""
    if text is None:
        return None
    try:
        return parse_iso_ms(text)
    except (ValueError, TypeError):
        return None


def _error_wrong(want: Any, got: Any) -> list[str]:
    """How a written ``last_error`` differs from the predicted one. Every prediction is checked,
    None included: a deferral and a commit write exactly the error they must keep or clear (a
    deferral records no error, so a run with none before must still have none after), and a
    failure whose words the kernel chooses (``ANY_TEXT``) must still write a text."""
    if want is ANY_TEXT:
        if isinstance(got, str):
            return []
        return [f"last_error {got!r}, where a failed pass writes its error"]
    if got == want:
        return []
    if want is None:
        return [f"last_error {got!r}, where the record must carry none"]
    return [f"last_error {got!r}, not {want!r}"]


class OutcomeRules(KernelRecords):
    """Predicts each pass's outcome write and checks it, and the status the pass reports."""

    def on_hx_end(self, e: Row) -> None:
        unawaited = e.get("unawaited") or []
        if unawaited:
            self._never_awaited(e, unawaited)
        p = self._pass_of(e)
        if p is None or p.row is None:
            return
        row = p.row
        if p.lost:
            p.expected = {
                "op": None,
                "outcome": "superseded",
                "rule": "a pass that lost its lease writes no outcome",
            }
            return
        if p.spent is not None:
            error = p.spent or None
            p.expected = self._fail(p, error, p.job, True, "a spent step fails the run")
            return
        if p.failure is not None:
            f = p.failure
            p.expected = self._fail(
                p,
                f.error,
                f.policy,
                f.fails_run,
                "a failed step fails the pass by the step's own policy",
            )
            return
        if unawaited:
            p.expected = self._fail(
                p, None, p.job, False, "a step called and never awaited fails the pass"
            )
            return
        if "raised" in e:
            if e["door"]:
                self.probe("deferral")
                p.expected = {
                    "op": "patch",
                    "status": "running",
                    "cursor": row["cursor"],
                    "counters": row["counters"],
                    "attempts": row["attempts"],
                    "last_error": row["last_error"],
                    "next": (DEFER_MS, DEFER_MS),
                    "ended": False,
                    "outcome": "deferred",
                    "rule": "a deferral charges nothing, records no error and waits DEFER_MS",
                }
                return
            self.probe("handler.throws")
            if e.get("looks_like_door"):
                self.probe("deferral.look-alike")
            p.expected = self._fail(
                p, e["raised"], p.job, False, "a handler that throws fails the pass"
            )
            return
        if "bad" in e or "cursor_unsafe" in e:
            self.probe("payload.cursor-refused")
            p.expected = self._fail(
                p, None, p.job, False, "a cursor or result that is not queue-safe fails the pass"
            )
            return
        if e.get("keep"):
            self.probe("cursor.omitted")
            cursor: Any = ("same", row["cursor"])
        else:
            cursor = ("value", e["cursor"])
        merged = counters_of(row["counters"])
        if merged is None:
            return
        merged = dict(merged)
        for name, by in p.counts.items():
            merged[name] = merged.get(name, 0) + by
        done = bool(e.get("done"))
        p.expected = {
            "op": "commit_pass",
            "status": "done" if done else "running",
            "cursor": cursor,
            "counters": ("numbers", merged),
            "attempts": 0,
            "last_error": None,
            "next": None,
            "ended": done,
            "outcome": "completed" if done else "advanced",
            "rule": "a committed pass writes its cursor (an omitted one kept) and the merged "
            "counters, clears attempts and error, and drops the ledger",
        }

    def _never_awaited(self, e: Row, steps: list[str]) -> None:
        """A step the handler created and never awaited: its body never ran, and the kernel
        fails the pass. The user's mistake, told as such with its remedy."""
        names = " and ".join(repr(step) for step in steps)
        which = (
            f"step {names} and never awaited it"
            if len(steps) == 1
            else (f"steps {names} and never awaited them")
        )
        self.report(
            "step-never-awaited",
            e["run"],
            e["t"],
            f"your handler created {which}, so the body never ran and the pass failed: write "
            "`await ctx.step(...)`",
        )

    def _fail(
        self, p: PassModel, error: str | None, policy: Policy, fails_run: bool, why: str
    ) -> Row:
        assert p.row is not None
        attempts = p.row["attempts"] + 1
        # The kernel's own failure (error None here) writes a text of its choosing, never none.
        written: Any = ANY_TEXT if error is None else error
        final = fails_run or attempts >= p.job.max_attempts
        if final and not fails_run:
            self.probe("retry.job-limit")
        return {
            "op": "patch",
            "status": "failed" if final else "running",
            "cursor": p.row["cursor"],
            "counters": p.row["counters"],
            "attempts": attempts,
            "last_error": written,
            "next": None if final else policy.window(attempts),
            "ended": final,
            "outcome": "failed" if final else "retrying",
            "rule": why
            + (
                f"; at {attempts} of the job's {p.job.max_attempts} attempts (step limit "
                f"{policy.max_attempts}) the run {'fails' if final else 'retries after a backoff'}"
            ),
        }

    def on_outcome_send(self, e: Row, p: PassModel) -> None:
        op, patch = e["op"], e["args"][1]
        p.written_error = patch["last_error"]
        want = p.expected
        if want is None:
            if p.row is not None and p.handler:
                self.report(
                    "pass-outcome",
                    p.run,
                    e["t"],
                    f"pass {p.owner[-6:]} wrote an outcome ({op}) before its handler ended",
                )
            return
        p.expected = None
        if want["op"] is None:
            self.report(
                "pass-outcome",
                p.run,
                e["t"],
                f"pass {p.owner[-6:]} lost its lease at a step boundary but still wrote {op}: "
                "a pass that lost the run stops and writes nothing",
            )
            return
        wrong = self._differences(want, op, patch)
        if wrong:
            self.report(
                "pass-outcome",
                p.run,
                e["t"],
                f"pass {p.owner[-6:]} wrote {op} {'; '.join(wrong)} — the rule: {want['rule']}",
            )
        p.outcome = want["outcome"]

    def _differences(self, want: Row, op: str, patch: Row) -> list[str]:
        wrong = []
        if op != want["op"]:
            wrong.append(f"where the spec calls for {want['op']}")
        if patch["status"] != want["status"]:
            wrong.append(f"status {patch['status']!r}, not {want['status']!r}")
        cursor = want["cursor"]
        if isinstance(cursor, tuple) and cursor[0] == "value":
            try:
                ok = patch["cursor"] is not None and json.loads(patch["cursor"]) == cursor[1]
            except ValueError:
                ok = False
            if not ok:
                wrong.append(f"cursor {patch['cursor']!r}, not the handler's {cursor[1]!r}")
        else:
            kept = cursor[1] if isinstance(cursor, tuple) else cursor
            if patch["cursor"] != kept:
                wrong.append(f"cursor {patch['cursor']!r}, not the committed {kept!r}")
        counters = want["counters"]
        if isinstance(counters, tuple):
            got = counters_of(patch["counters"])
            if got is None or not _same_numbers(got, counters[1]):
                wrong.append(f"counters {patch['counters']}, not the merged {counters[1]}")
        elif patch["counters"] != counters:
            wrong.append(f"counters {patch['counters']}, not the committed {counters}")
        if patch["attempts"] != want["attempts"]:
            wrong.append(f"attempts {patch['attempts']}, not {want['attempts']}")
        wrong += _error_wrong(want["last_error"], patch["last_error"])
        # updated_at is the kernel's clock reading (its ``now()``), which the spec leaves to the
        # host: a drive's clock may stand anywhere from the store's, so its exact value is free
        # and unchecked. What the spec does determine is that it is a time in the spec's
        # spelling (the column is NOT NULL), and that next_attempt_at and ended_at are measured
        # from it, which the checks below hold it to.
        at = _ms(patch["updated_at"])
        if at is None:
            wrong.append(f"updated_at {patch['updated_at']!r}, which is not a time")
        nxt = _ms(patch["next_attempt_at"])
        if want["next"] is None:
            if patch["next_attempt_at"] is not None:
                wrong.append(f"next_attempt_at {patch['next_attempt_at']}, where none is due")
        elif at is not None:
            low, high = want["next"]
            if nxt is None or not low <= nxt - at <= high:
                waited = "none" if nxt is None else f"{nxt - at} ms"
                wrong.append(f"a backoff of {waited}, outside [{low}, {high}] ms")
        ended = patch["ended_at"]
        if want["ended"] and ended != patch["updated_at"]:
            wrong.append(f"ended_at {ended!r}, not the outcome's time")
        if not want["ended"] and ended is not None:
            wrong.append(f"ended_at {ended!r} on a run still running")
        return wrong

    def on_outcome_reply(self, e: Row, p: PassModel) -> None:
        if e["ev"] == "rpc.deliver" and e.get("result") is not True and p.outcome is not None:
            p.outcome = "superseded"
            self.probe("outcome.refused")

    def on_pass_outcome(self, e: Row) -> None:
        p = self.passes.get(e["owner"])
        if p is None:
            return
        self.current.pop((p.drive, p.run), None)
        want = p.outcome
        if want is None and p.expected is not None and p.expected["op"] is None:
            want = "superseded"
        if want is not None and e["status"] != want:
            self.report(
                "pass-outcome",
                p.run,
                e["t"],
                f"pass {p.owner[-6:]} reported {e['status']!r}; its writes make it {want!r}",
            )
        elif want is not None:
            self._check_reported_error(e, p)
        if p.tick is not None:
            p.tick.tally(e["status"])
            p.tick.last_status[p.run] = e["status"]
            if e["status"] in ("retrying", "failed"):
                # The report's entry carries the error the outcome wrote on the record.
                p.tick.errors.append((p.run, p.written_error))
        p.ended = True

    def _check_reported_error(self, e: Row, p: PassModel) -> None:
        """The error a pass reports with its status (``JobPassOutcome.error``): on ``retrying``
        and ``failed`` exactly the error its outcome left on the record; on ``deferred`` the
        door's refusal, whose words are the host's (a text, unchecked beyond that); on every
        other status none."""
        status, said = e["status"], e.get("error")
        if status in ("retrying", "failed"):
            if p.written_error is None or said == p.written_error:
                return
            why = f"not the error its outcome left on the record ({p.written_error!r})"
        elif status == "deferred":
            if isinstance(said, str):
                return
            why = "where a deferred pass reports the door's refusal"
        elif said is None:
            return
        else:
            why = f"where a pass that ends {status} reports none"
        self.report(
            "pass-outcome",
            p.run,
            e["t"],
            f"pass {p.owner[-6:]} reported {status!r} with error {said!r}, {why} — the rule: a "
            "pass's reported error is present exactly on retrying and failed (the record's) and "
            "on deferred (the refusal)",
        )
