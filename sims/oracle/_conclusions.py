"""The checks drawn once the whole trace is read: a BEGIN with no handler, the overlaps of two
passes of one run (each placed in a window the spec documents, or a violation), runs failed with no
handler ever invoked, effects that landed twice, and runs that never settled (or that no drive ever
drove: the scenario's mistake)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from driver import iso_from_ms

from .._numbers import ms
from ._passes import Pass, Run, end_of
from ._report import Finding, short

#: The store call a start is, as the trace names it (the oracle reads the trace, not the plan).
_START = "start_or_join"


class Conclusions:
    """The checker's last rules, over what its replay collected (the attributes below)."""

    findings: list[Finding]
    runs: dict[tuple[str, str], Run]
    passes: dict[str, Pass]
    passes_of: dict[str, list[Pass]]
    effects: dict[str, list[tuple[str, str, float]]]
    service_effects: dict[tuple[str, int, str, str], list[tuple[str, float]]]
    steps_recorded: Counter[tuple[str, int, str]]
    end_t: float
    end_runs: list[tuple[str, dict[str, Any]]]
    #: When each run was started (``start.result``), and when a drive was last called on each
    #: scope (``drive.call``): a run started after its scope's last drive call was never driven.
    started_t: dict[str, float]
    last_drive_t: dict[str, float]
    #: The run whose handler started each run a handler started (``world.start``'s ``by``).
    started_by: dict[str, str]
    #: The callback whose endpoint started each run an endpoint started (``world.start``'s
    #: ``callback``).
    started_from: dict[str, str]
    #: Who sent each run's start again (``world.start``'s ``repeat``: a ``RepeatStart``).
    started_again: dict[str, str]
    #: The runs a start its caller gave up on inserted when the wire delivered it late
    #: (``rpc.late``), by run: the drive, its call's seq and when it landed.
    late_starts: dict[str, tuple[str, int, float]]
    #: The starts whose caller gave up on them (``fault.late``), by (drive, seq): the drive's
    #: nth start_or_join call, when it gave up, and how late the wire delivers it.
    gave_up: dict[tuple[str, int], tuple[int, float, float]]
    #: When the scenario returned (``world.closing``), or None while it runs.
    returned_t: float | None
    #: The arguments of each call on the wire, by (link, seq), until it ran (``rpc.send``).
    sent: dict[tuple[str, int], Any]

    def violation(self, check: str, run: str | None, t: float, text: str) -> None:
        raise NotImplementedError

    def explained(self, check: str, run: str | None, t: float, text: str) -> None:
        raise NotImplementedError

    def conclude(self, *, settles: bool) -> None:
        for run_id, passes in self.passes_of.items():
            self.begins_without_handler(passes)
            self.overlaps(run_id, passes)
        self.failed_without_invocation()
        self.duplicate_effects()
        self.duplicate_service_effects()
        if settles:
            for scope, row in self.end_runs:
                if row["status"] == "running" and not self.never_driven(scope, row["id"]):
                    self.violation(
                        "runs-settle",
                        row["id"],
                        self.end_t,
                        f"the run is still running at the end (attempts {row['attempts']}, "
                        f"last error {row['last_error']!r}), in a world that settles (its scenario "
                        "says settles=True: every fault is bounded, so every run must end)",
                    )

    def on_fault_late(self, event: dict[str, Any]) -> None:
        if event["op"] == _START:
            self.gave_up[(event["drive"], event["seq"])] = (event["nth"], event["t"], event["ms"])

    def on_rpc_late(self, event: dict[str, Any]) -> None:
        """A start its caller gave up on reaches its scope: the run it inserts (its candidate's
        id) was started now, though no one hears of it (``start.result`` never comes)."""
        if event["op"] != _START:
            return
        args = self.sent.get((event["link"], event["seq"]))
        if args and isinstance(args[1], dict) and "id" in args[1]:
            self.late_starts[args[1]["id"]] = (event["link"], event["seq"], event["t"])

    def on_world_closing(self, event: dict[str, Any]) -> None:
        self.returned_t = event["t"]

    def on_start_result(self, event: dict[str, Any]) -> None:
        if "run" in event:
            self.started_t.setdefault(event["run"], event["t"])

    def on_drive_call(self, event: dict[str, Any]) -> None:
        self.last_drive_t[event["scope"]] = event["t"]

    def on_world_start(self, event: dict[str, Any]) -> None:
        if "by" in event:
            self.started_by[event["run"]] = str(event["by"])
        if "callback" in event:
            self.started_from[event["run"]] = str(event["callback"])
        if "repeat" in event:
            self.started_again[event["run"]] = (
                f"{event['drive']}'s start {event['repeat']}, sent again by its caller "
                "(a RepeatStart: a second click, or a client that never saw the first answer)"
            )

    def never_driven(self, scope: str, run_id: str) -> bool:
        """Whether no drive was called on the run's scope after the run was started (and none
        claimed it): a run left running so is the scenario's mistake, told with its remedy (the
        spec promises an end only to a run that is driven), never as the spec's violation."""
        late = self.late_starts.get(run_id)
        started = self.started_t.get(run_id, late[2] if late is not None else None)
        if started is None or self.passes_of.get(run_id):
            return False
        last = self.last_drive_t.get(scope)
        if last is not None and last >= started:
            return False
        driven = (
            f"no drive was ever called on its scope {scope}"
            if last is None
            else f"no drive was called on its scope {scope} after that (the last call was at "
            f"{ms(last)} ms)"
        )
        parent = self.started_by.get(run_id)
        if parent is not None:
            self.explained(
                "runs-settle",
                run_id,
                self.end_t,
                f"run {short(run_id)} was started at {ms(started)} ms by the handler of run "
                f"{short(parent)} (ctx.start_run), and {driven}, so it is still running at the "
                "end; not the scenario's mistake: a start in a step body runs at least once, "
                "and a pass that lost its lease may start a child again after the first one "
                "ended (a start joins only a live run). On a real host the drives that go on "
                "ticking run it; if a second child is a bug for your job, check for it",
            )
            return True
        if late is not None or run_id in self.started_again:
            self.started_by_the_world(run_id, started, driven, late)
            return True
        callback = self.started_from.get(run_id)
        who = "your scenario" if callback is None else f"{callback} (its endpoint)"
        self.violation(
            "run-never-driven",
            run_id,
            self.end_t,
            f"{who} started run {short(run_id)} at {ms(started)} ms and {driven}, so the "
            "run is still running at the end: the scenario's mistake, not the spec's; "
            + (
                "drive its scope (world.tick, or world.every) and wait for the run with "
                "world.settle"
                if callback is None
                else "the service called back after the scenario stopped driving: tick and "
                "settle with a horizon past what the service does on its own (world.settle "
                "waits for what falls due before its horizon)"
            ),
        )
        return True

    def started_by_the_world(
        self,
        run_id: str,
        started: float,
        driven: str,
        late: tuple[str, int, float] | None,
    ) -> None:
        """A run no drive drove, that the world's wire started (a start delivered late, or sent
        again): the world's, said with what started it and its remedy, never the spec's."""
        if late is not None:
            drive, seq, _ = late
            nth, gave_up_t, late_ms = self.gave_up.get((drive, seq), (seq, started, 0.0))
            who = (
                f"{drive}'s start_or_join call {nth}, which its caller gave up on at "
                f"{ms(gave_up_t)} ms and the wire delivered {ms(late_ms)} ms late anyway (a "
                "LateRequest: the at-least-once wire),"
            )
        else:
            who = f"{self.started_again[run_id]},"
        returned = self.returned_t
        when = (
            f"after the scenario returned at {ms(returned)} ms"
            if returned is not None and started >= returned
            else "after the drives stopped driving"
        )
        self.violation(
            "run-never-driven",
            run_id,
            self.end_t,
            f"{who} started run {short(run_id)} at {ms(started)} ms, {when}, and {driven}, so "
            "the run is still running at the end: the world's, not the spec's (and not a bug "
            "of the job; on a real host the drives that go on ticking run it); to run it here, "
            "keep its scope driven past the fault (world.every with until_ms past "
            f"{ms(started)} ms, or world.tick) and settle with a horizon past it "
            "(world.settle waits for what falls due before its horizon)",
        )

    def begins_without_handler(self, passes: list[Pass]) -> None:
        for p in passes:
            if p.begin_t is None or p.invoke_t is not None:
                continue
            if p.begin_reply_lost:
                self.explained(
                    "handler-iff-begin",
                    p.run,
                    p.begin_t,
                    f"BEGIN of {short(p.owner)} (drive {p.drive}) was written but its reply was "
                    "lost, so the handler never ran; the pass counts as begun and a takeover "
                    "charges it (the spec: a crash between BEGIN and the handler)",
                )
            elif p.crashed:
                self.explained(
                    "handler-iff-begin",
                    p.run,
                    p.begin_t,
                    f"drive {p.drive} was killed between BEGIN of {short(p.owner)} and its "
                    "handler; the pass counts as begun and a takeover charges it",
                )
            elif p.begin_delivered_t is None:
                self.explained(
                    "handler-iff-begin",
                    p.run,
                    p.begin_t,
                    f"BEGIN of {short(p.owner)} (drive {p.drive}) was written and its reply was "
                    "still in flight when the world ended",
                )
            else:
                self.violation(
                    "handler-iff-begin",
                    p.run,
                    p.begin_t,
                    f"BEGIN of {short(p.owner)} (drive {p.drive}) wrote and its reply arrived at "
                    f"{ms(p.begin_delivered_t)} ms, but the handler was never invoked",
                )

    def overlaps(self, run_id: str, passes: list[Pass]) -> None:
        """A double run: two passes of one run both invoked the handler, and the older one's
        handler was still running (or not yet started) when the newer one claimed the run."""
        ran = sorted((p for p in passes if p.invoke_t is not None), key=lambda p: p.claim_t)
        # Sorted by claim, the passes that overlap a stale one are the run of those that follow it
        # and claimed before its handler ended: stop at the first that claimed after, so the cost
        # is the number of overlapping pairs, not the square of the number of passes.
        for i, stale in enumerate(ran):
            stale_end = end_of(stale, self.end_t)
            for fresh in ran[i + 1 :]:
                if stale_end <= fresh.claim_t:
                    break
                self.classify_overlap(run_id, stale, fresh)

    def classify_overlap(self, run_id: str, stale: Pass, fresh: Pass) -> None:
        assert stale.invoke_t is not None
        assert fresh.invoke_t is not None
        # The finding is placed where the two handlers first run at once (the later of their
        # starts), which is where the page draws the double run's band, not at either start.
        start = max(stale.invoke_t, fresh.invoke_t)
        both = (
            f"double run: pass {short(stale.owner)} (drive {stale.drive}) ran the handler from "
            f"{ms(stale.invoke_t)} to {ms(end_of(stale, self.end_t))} ms and pass "
            f"{short(fresh.owner)} (drive {fresh.drive}) from {ms(fresh.invoke_t)} to "
            f"{ms(end_of(fresh, self.end_t))} ms, on one run"
        )
        expiry = stale.last_renewal_store_ms + stale.lease_ms
        expired_at, taken_at = iso_from_ms(expiry), iso_from_ms(fresh.claim_store_ms)
        if fresh.claim_store_ms < expiry:
            self.violation(
                "double-run",
                run_id,
                start,
                f"{both}, and the takeover came at {taken_at} before the stale "
                f"lease expired at {expired_at}: no window of the spec allows that",
            )
        elif stale.invoke_t >= fresh.claim_t:
            began = stale.begin_t or stale.claim_t
            late = (stale.begin_delivered_t or stale.invoke_t) - began
            self.explained(
                "double-run",
                run_id,
                start,
                f"{both}. Late BEGIN reply: {short(stale.owner)}'s BEGIN was written at "
                f"{ms(began)} ms and its reply took {ms(late)} ms, past the margin, so its "
                f"lease expired at {expired_at} and drive {fresh.drive} took the run over at "
                f"{taken_at} before the stale handler even started. The stale "
                "pass stops at its next step boundary or outcome (the spec's at-least-once window)",
            )
        else:
            gap = fresh.claim_store_ms - stale.last_renewal_store_ms
            self.explained(
                "double-run",
                run_id,
                start,
                f"{both}. A stretch longer than the lease: {short(stale.owner)} went {gap} ms of "
                f"store time without reaching a step boundary (lease {stale.lease_ms} ms), so "
                f"drive {fresh.drive} took the run over; the stale pass stops at its next step "
                "boundary or outcome (the spec's at-least-once window)",
            )

    def failed_without_invocation(self) -> None:
        for scope, row in self.end_runs:
            if row["status"] != "failed":
                continue
            run_id = row["id"]
            if any(p.invoke_t is not None for p in self.passes_of.get(run_id, [])):
                continue
            model = self.runs.get((scope, run_id))
            reason = model.failed_by if model is not None else None
            if reason is None:
                # A copy (an import, id and all) failed where it ran: its reason is that scope's.
                reason = next(
                    (
                        r.failed_by
                        for (_, rid), r in self.runs.items()
                        if rid == run_id and r.failed_by
                    ),
                    None,
                )
            if reason in ("admission exhaustion", "erasure", "an import into another scope"):
                self.explained(
                    "failed-without-invocation",
                    run_id,
                    self.end_t,
                    f"the run failed with no handler ever invoked, by {reason}: "
                    f"{row['last_error']!r}",
                )
            elif reason == "takeover exhaustion":
                self.explained(
                    "failed-without-invocation",
                    run_id,
                    self.end_t,
                    "the run failed with no handler ever invoked, by takeover exhaustion: every "
                    "begun pass died between BEGIN and its handler (a lost BEGIN reply or a crash)",
                )
            else:
                self.violation(
                    "failed-without-invocation",
                    run_id,
                    self.end_t,
                    f"the run failed with no handler ever invoked and no reason the spec gives: "
                    f"{row['last_error']!r}",
                )

    def duplicate_effects(self) -> None:
        recorded_by: dict[str, int] = defaultdict(int)
        for p in self.passes.values():
            for step in p.recorded:
                recorded_by[f"{p.run}/{step.removeprefix('object-')}"] += 1
        for key, effects in self.effects.items():
            if len(effects) < 2:
                continue
            drives = ", ".join(sorted({drive for drive, _, _ in effects}))
            if recorded_by[key] <= 1:
                self.explained(
                    "effects",
                    key.split("/")[0],
                    effects[1][2],
                    f"effect {key} landed {len(effects)} times (drives {drives}) but its step "
                    "was recorded at most once: the at-least-once window of a step body (an "
                    "effect that landed before its step was recorded)",
                )
            else:
                self.violation(
                    "effects",
                    key.split("/")[0],
                    effects[1][2],
                    f"effect {key} landed {len(effects)} times and its step was recorded "
                    f"{recorded_by[key]} times: a completed step ran again",
                )

    def duplicate_service_effects(self) -> None:
        """A service call's effect made twice in one step, told as a row's effect is: inside the
        at-least-once window while the step was recorded at most once (between two commits)."""
        for (run, epoch, step, call), effects in self.service_effects.items():
            if len(effects) < 2:
                continue
            drives = ", ".join(sorted({drive for drive, _ in effects}))
            recorded = self.steps_recorded[(run, epoch, step)]
            what = f"{call} changed its service {len(effects)} times in step {step!r}"
            if recorded <= 1:
                self.explained(
                    "effects",
                    run,
                    effects[1][1],
                    f"{what} (drives {drives}) while the step was recorded at most once: the "
                    "at-least-once window of a step body",
                )
            else:
                self.violation(
                    "effects",
                    run,
                    effects[1][1],
                    f"{what} and the step was recorded {recorded} times between two commits: a "
                    "completed step ran again",
                )
