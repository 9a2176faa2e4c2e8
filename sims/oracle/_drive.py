"""The kernel model's drive rules: which runs a drive call claims and how often, a fresh owner and
the job's lease per claim, the claim's reply (a takeover, one that used the last attempt), the
BEGIN-or-miss decision on the drive's own measured wait, and the drive's report.
"""

from __future__ import annotations

from typing import Any

from .._numbers import ms
from ._model import too_short_text
from ._records import KernelRecords, PassModel, Policy, Row, TickModel
from ._spec import DRIVE_LIMIT, LEASE_ENTRY_MARGIN, LEASE_MAX_MS, LEASE_MIN_MS, LEASE_MS

#: A world's drives read their monotonic clock to the microsecond, as the trace spells its times,
#: from an origin of whole milliseconds: a wait between two trace times of whole milliseconds is
#: exactly the drive's, and is decided exactly. Between other times the drive's subtraction (of
#: two readings near its origin) may differ from the trace's by float rounding, far below this.
_ROUNDING_MS = 1e-6


def _tolerance(sent_t: float, delivered_t: float) -> float:
    return 0.0 if sent_t.is_integer() and delivered_t.is_integer() else _ROUNDING_MS


class DriveRules(KernelRecords):
    """Follows drive calls and the claim, BEGIN and miss of each pass."""

    def on_register(self, e: Row) -> None:
        asked = e["lease_ms"]
        lawful = asked is None or (type(asked) is int and LEASE_MIN_MS <= asked <= LEASE_MAX_MS)
        refused = e.get("refused")
        if refused is not None:
            self.probe("register.lease-refused")
            # Only a refusal that names the lease is judged: a registration may be refused for
            # its name or its retry policy too, which this rule says nothing about.
            if lawful and "lease_ms" in refused:
                self.report(
                    "register-lease",
                    None,
                    e["t"],
                    f"job {e['module_id']}/{e['job']} on {e['drive']} was refused lease_ms "
                    f"{asked!r}, which the spec allows (an integer from {LEASE_MIN_MS} to "
                    f"{LEASE_MAX_MS} ms): {refused}",
                )
            return
        if not lawful:
            self.report(
                "register-lease",
                None,
                e["t"],
                f"job {e['module_id']}/{e['job']} on {e['drive']} registered lease_ms "
                f"{asked!r}, which the spec refuses: a lease is an integer from {LEASE_MIN_MS} "
                f"to {LEASE_MAX_MS} ms",
            )
        elif asked is not None and asked < 2 * LEASE_MIN_MS:
            self.probe("register.lease-near-min")
        lease = asked if asked is not None else LEASE_MS
        self.jobs[(e["drive"], e["module_id"], e["job"])] = (Policy.of(e["retry"]), lease)

    def on_drive_call(self, e: Row) -> None:
        limit = e["limit"] if e["limit"] is not None else DRIVE_LIMIT
        self.ticks[(e["drive"], e["scope"])] = TickModel(
            e["drive"], e["scope"], e["max_passes"], limit, default_limit=e["limit"] is None
        )

    def on_due_reply(self, e: Row) -> None:
        tick = self.ticks.get((e["link"], e["scope"]))
        if tick is None or tick.picked is not None or e["ev"] != "rpc.deliver":
            return
        runnable: list[str] = []
        for key in e.get("result") or []:
            if key["id"] in runnable or (tick.drive, key["module_id"], key["job"]) not in self.jobs:
                if key["id"] not in runnable and len(runnable) < tick.limit:
                    self.probe("drive.unregistered-skipped")
                continue
            runnable.append(key["id"])
        tick.bound = len(runnable) > tick.limit
        tick.picked = runnable[: tick.limit]

    def on_claim_send(self, e: Row) -> None:
        run_id, owner, lease_ms = e["args"][0], e["args"][1], e["args"][2]
        drive, scope = e["link"], e["scope"]
        if owner in self.owners:
            self.report(
                "fresh-owner",
                run_id,
                e["t"],
                f"drive {drive} claimed with owner {owner}, which an earlier claim already used: "
                "every claim mints a fresh owner, so a stale pass's writes can never pass as "
                "the new holder's",
            )
        self.owners.add(owner)
        tick = self.ticks.get((drive, scope))
        job = self._job_of(drive, tick, run_id)
        policy, lease = job if job is not None else (Policy(), lease_ms)
        if job is not None and lease_ms != lease:
            self.report(
                "lease-ms",
                run_id,
                e["t"],
                f"drive {drive} claimed with a {lease_ms} ms lease; the job registered {lease} ms",
            )
        if tick is not None:
            self._check_turn(tick, run_id, e["t"])
        p = PassModel(owner, run_id, drive, scope, lease_ms, policy, tick, e["t"])
        self.passes[owner] = p

    def _job_of(self, drive: str, tick: TickModel | None, run_id: str) -> tuple[Policy, int] | None:
        key = self.run_keys.get(run_id)
        if key is None:
            return None
        return self.jobs.get((drive, key[0], key[1]))

    def _check_turn(self, tick: TickModel, run_id: str, t: float) -> None:
        picked = tick.picked or []
        if run_id not in picked:
            self.report(
                "drive-selection",
                run_id,
                t,
                f"drive {tick.drive} claimed a run its snapshot did not pick (picked "
                f"{len(picked)} of at most {tick.limit}, registered jobs only, each id once)",
            )
            return
        count = tick.passes.get(run_id, 0)
        if count:
            if tick.last_status.get(run_id) != "advanced":
                self.report(
                    "drive-passes",
                    run_id,
                    t,
                    f"drive {tick.drive} claimed the run again after a pass that did not advance "
                    f"({tick.last_status.get(run_id)}); only an advanced pass earns another",
                )
            elif count >= tick.max_passes:
                self.report(
                    "drive-passes",
                    run_id,
                    t,
                    f"drive {tick.drive} claimed the run a {count + 1}th time in one call with "
                    f"max_passes={tick.max_passes}",
                )
            else:
                self.probe("drive.second-pass")
        else:
            expected = [r for r in picked if r not in tick.claimed]
            if expected and expected[0] != run_id:
                self.report(
                    "drive-selection",
                    run_id,
                    t,
                    f"drive {tick.drive} claimed runs out of its snapshot's order: run "
                    f"{expected[0][-6:]} was due first",
                )
            tick.claimed.append(run_id)
        tick.passes[run_id] = count + 1

    def on_claim_reply(self, e: Row, p: PassModel) -> None:
        if e["ev"] != "rpc.deliver":
            p.ended = True
            return
        result = e.get("result")
        p.claim_delivered_t = e["t"]
        if result is None:
            p.ended = True
            if p.tick is not None:
                p.tick.last_status[p.run] = "lost"
            return
        p.row, p.takeover = dict(result["run"]), result["takeover"]
        if p.tick is not None:
            p.tick.runs_won.add(p.run)
        if p.takeover:
            self.probe("takeover.begun")
        if p.takeover and p.row["attempts"] >= p.job.max_attempts:
            p.exhausted = True
            self.probe("takeover.exhausted")
            # Picked up, due and running: attempted, though no handler runs (the spec's word).
            if p.tick is not None and p.tick.passes.get(p.run) == 1:
                p.tick.runs_attempted.add(p.run)
            row = p.row
            p.expected = {
                "op": "patch",
                "status": "failed",
                "cursor": row["cursor"],
                "counters": row["counters"],
                "attempts": row["attempts"],
                "last_error": row["last_error"],
                "next": None,
                "ended": True,
                "rule": "a takeover that charged the dead pass its last attempt fails the run "
                "without invoking the handler",
                "outcome": "failed",
            }

    def on_claim_won(self, e: Row) -> None:
        p = self.passes.get(e["owner"])
        if p is not None and p.row is not None and e["takeover"] != p.takeover:
            self.report(
                "takeover",
                p.run,
                e["t"],
                f"the drive reported takeover={e['takeover']} for a claim the store answered "
                f"takeover={p.takeover}",
            )

    def _admission(self, p: PassModel, op: str, t: float) -> None:
        """The drive's BEGIN-or-miss decision on its own measured wait."""
        if p.claim_delivered_t is None or p.row is None:
            return
        if p.exhausted:
            self.report(
                "takeover-exhausted",
                p.run,
                t,
                f"pass {p.owner[-6:]} sent {op} after a takeover that used the job's last "
                f"attempt ({p.row['attempts']} of {p.job.max_attempts}): the run must fail "
                "without its handler",
            )
            p.exhausted = False
            p.expected = None
            return
        waited = p.claim_delivered_t - p.claim_sent_t
        left = p.lease_ms - waited
        margin = p.lease_ms * LEASE_ENTRY_MARGIN
        tolerance = _tolerance(p.claim_sent_t, p.claim_delivered_t)
        if left == margin and tolerance == 0.0:
            self.probe("begin.exact-margin")
        if op == "begin" and left <= margin - tolerance:
            self.report(
                "begin-admission",
                p.run,
                t,
                f"drive {p.drive} sent BEGIN with {ms(left)} ms of its lease left by its own "
                f"count, not more than the margin of {ms(margin)} ms: it must miss instead",
            )
        if op == "miss" and not p.begun and left > margin + tolerance and not p.begin_refused:
            self.report(
                "begin-admission",
                p.run,
                t,
                f"drive {p.drive} missed its admission with {ms(left)} ms of its lease left, more "
                f"than the margin of {ms(margin)} ms, without BEGIN refusing",
            )
        if op == "miss" and p.begun:
            self.report(
                "miss-after-begin",
                p.run,
                t,
                f"drive {p.drive} recorded an admission miss for pass {p.owner[-6:]} after its "
                "BEGIN wrote: a begun pass runs its handler",
            )

    def on_begin_send(self, e: Row, p: PassModel) -> None:
        self._admission(p, "begin", e["t"])
        margin = e["args"][2]
        if margin != p.lease_ms * LEASE_ENTRY_MARGIN:
            self.report(
                "begin-margin",
                p.run,
                e["t"],
                f"BEGIN was sent with a margin of {margin} ms; the margin is a quarter of the "
                f"{p.lease_ms} ms lease",
            )

    def on_begin_reply(self, e: Row, p: PassModel) -> None:
        if e["ev"] == "rpc.deliver" and e.get("result") is True:
            p.begun = True
            if p.tick is not None and p.tick.passes.get(p.run) == 1:
                p.tick.runs_attempted.add(p.run)
        elif e["ev"] == "rpc.deliver":
            p.begin_refused = True
            self.probe("begin.refused")
        else:
            p.ended = True

    def on_miss_send(self, e: Row, p: PassModel) -> None:
        self._admission(p, "miss", e["t"])
        p.miss_warning = e["args"][2]
        self.probe("admission.miss")
        if p.tick is not None:
            p.tick.last_status[p.run] = "missed"
        p.ended = True

    def on_miss_reply(self, e: Row, p: PassModel) -> None:
        if e["ev"] == "rpc.deliver" and p.tick is not None:
            # A miss ran no handler: superseded, except the one that failed the run (the tenth).
            result = e.get("result")
            failed = result is not None and bool(result.get("failed"))
            p.tick.tally("failed" if failed else "superseded")
            warning = p.miss_warning or ""
            # The tenth miss's error is what the store wrote on the record: the note, prefixed.
            if failed:
                p.tick.errors.append((p.run, too_short_text(warning)))
            p.tick.warnings.append((p.run, warning))

    def on_call_raised(self, p: PassModel) -> None:
        """A call the drive made for a pass, outside its handler, never got its answer: the
        call raised, which ends the run's turn as one entry in the report's errors."""
        if p.tick is not None:
            p.tick.errors.append((p.run, None))

    def on_handler_invoke(self, e: Row) -> None:
        p = self.passes.get(e["owner"])
        if p is None:
            return
        p.handler = True
        self.current[(p.drive, p.run)] = p
        if p.exhausted:
            self.report(
                "takeover-exhausted",
                p.run,
                e["t"],
                "the handler was invoked after a takeover used the job's last attempt",
            )
            p.exhausted = False
            p.expected = None

    def on_drive_report(self, e: Row) -> None:
        tick = self.ticks.pop((e["drive"], e["scope"]), None)
        if tick is None:
            return
        # The budget mattered only when the snapshot held more runnable runs than it and the call
        # got to the end of its picks (a drive killed mid-call never tried the run past it).
        # Counted apart for the default budget, which binds only in a call given no limit.
        if tick.bound:
            self.probe(
                "drive.default-limit-reached" if tick.default_limit else "drive.limit-reached"
            )
        report = e["report"]
        wrong = []
        for status in ("advanced", "completed", "retrying", "failed", "deferred", "superseded"):
            if report[status] != tick.outcomes.get(status, 0):
                wrong.append(f"{status} {report[status]}, not {tick.outcomes.get(status, 0)}")
        if report["attempted"] != len(tick.runs_attempted):
            wrong.append(
                f"attempted {report['attempted']}, though {len(tick.runs_attempted)} run(s) were "
                "picked up (their first pass of the call began, or their first claim was a "
                "takeover that found the attempts spent)"
            )
        wrong += _entries_wrong("errors", "error", report["errors"], tick.errors)
        wrong += _entries_wrong("warnings", "warning", report["warnings"], tick.warnings)
        if wrong:
            self.report(
                "drive-report",
                None,
                e["t"],
                f"drive {tick.drive}'s report on {tick.scope} says {'; '.join(wrong)}",
            )
        picked = tick.picked or []
        unclaimed = [r for r in picked if r not in tick.claimed]
        if unclaimed:
            self.report(
                "drive-selection",
                unclaimed[0],
                e["t"],
                f"drive {tick.drive} picked {len(unclaimed)} run(s) in its snapshot and never "
                "claimed them",
            )


#: What each list of the report holds, as a finding says it.
_ENTRY_RULES = {
    "errors": "one entry per run the call left retrying or failed, carrying the error written "
    "on its record, and one per call for a run that raised",
    "warnings": "one entry per admission miss, carrying the warning the drive gave the store",
}


def _entries_wrong(field: str, text: str, got: list[Row], want: list[Any]) -> list[str]:
    """How the report's ``errors`` or ``warnings`` differ from the predicted ones, entry by entry
    (a predicted text of None is a raised call's, whose words the transport chooses)."""
    pairs = [(entry.get("run_id"), entry.get(text)) for entry in got]
    if len(pairs) == len(want) and all(
        run == w_run and (w_text is None or said == w_text)
        for (run, said), (w_run, w_text) in zip(pairs, want, strict=True)
    ):
        return []
    return [f"{field} {_spelled(pairs)}, not {_spelled(want)} ({_ENTRY_RULES[field]})"]


def _spelled(entries: list[Any]) -> str:
    shown = ", ".join(
        f"{str(run)[-6:]}: {'(any text)' if said is None else repr(said)}" for run, said in entries
    )
    return f"[{shown}]"
