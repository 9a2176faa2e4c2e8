"""The oracle's kernel: every decision a drive and a pass must make, recomputed from the trace.

Theory of operation
-------------------
A pass is followed by its lease owner from the claim the drive sent to the outcome it wrote. The
model knows, from the trace and never from the kernel's own state: the job's registration (policy,
lease), the drive call's budget, the claimed row as the store returned it, what the handler asked
for (``hx.*`` events: steps with their own policies, bodies that ran, counts, what it returned or
threw), and every reply the drive received. From those it says what the spec makes the kernel do
next — BEGIN or miss, takeover exhaustion, run a step body or return its memo, a spent step, a
reused step name, lost, retry or fail (by the job's policy AND the step's own), the backoff window
and its jitter bounds, the omitted cursor kept, counters merged, a deferral charging nothing — and
compares it with what the kernel sent. Each difference is reported naming the rule.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import attrs

from driver import (
    JOB_DEFER_MS,
    JOB_DRIVE_LIMIT,
    JOB_LEASE_ENTRY_MARGIN,
    JOB_LEASE_MS,
    JOB_RETRY_BASE_DELAY_MS,
    JOB_RETRY_MAX_ATTEMPTS,
    JOB_RETRY_MAX_DELAY_MS,
    parse_iso_ms,
)

Row = dict[str, Any]
Report = Callable[[str, str | None, float, str], None]
Probe = Callable[[str], None]

#: The measured wait and the BEGIN threshold are compared on trace times rounded to the
#: microsecond; within this much of the boundary either decision is the spec's.
_EPSILON_MS = 0.01


@attrs.frozen
class Policy:
    max_attempts: int = JOB_RETRY_MAX_ATTEMPTS
    base_delay_ms: int = JOB_RETRY_BASE_DELAY_MS
    max_delay_ms: int = JOB_RETRY_MAX_DELAY_MS

    @classmethod
    def of(cls, described: Row | None) -> Policy:
        if described is None:
            return cls()
        return cls(described["max_attempts"], described["base_delay_ms"], described["max_delay_ms"])

    def narrowed(self, step: Row | None) -> Policy:
        """A step's own policy may narrow the job's, never widen it: each number the smaller."""
        if step is None:
            return self
        other = Policy.of(step)
        return Policy(
            min(self.max_attempts, other.max_attempts),
            min(self.base_delay_ms, other.base_delay_ms),
            min(self.max_delay_ms, other.max_delay_ms),
        )

    def window(self, attempts: int) -> tuple[int, int]:
        """The backoff after ``attempts`` consecutive failures: raw, jittered by 0.8 to 1.2."""
        raw = min(self.base_delay_ms * 2 ** max(0, attempts - 1), self.max_delay_ms)
        if raw == 0:
            return 0, 0
        return math.floor(raw * 0.8), math.floor(raw * 1.2)


@attrs.define
class StepModel:
    name: str
    policy: Policy
    boundary_sent: bool = False
    boundary: Row | None = None
    may_run: bool = False
    attempt: int = 0
    ran: bool = False
    error: str | None = None
    door: bool = False
    value: Any = None
    has_value: bool = False
    record_expected: bool = False
    #: The kernel must refuse this step without touching the store (a reused name, or a pass
    #: already stopped).
    refused: bool = False


@attrs.define
class Failure:
    error: str | None
    policy: Policy
    fails_run: bool


@attrs.define
class PassModel:
    owner: str
    run: str
    drive: str
    scope: str
    lease_ms: int
    job: Policy
    tick: TickModel | None
    claim_sent_t: float
    row: Row | None = None
    takeover: bool = False
    claim_delivered_t: float | None = None
    begun: bool = False
    handler: bool = False
    used: set[str] = attrs.field(factory=set)
    lost: bool = False
    spent: str | None = None
    failure: Failure | None = None
    step: StepModel | None = None
    counts: dict[str, float] = attrs.field(factory=dict)
    expected: Row | None = None
    outcome: str | None = None
    exhausted: bool = False
    ended: bool = False
    begin_refused: bool = False


@attrs.define
class TickModel:
    drive: str
    scope: str
    max_passes: int
    limit: int
    picked: list[str] | None = None
    claimed: list[str] = attrs.field(factory=list)
    outcomes: dict[str, int] = attrs.field(factory=dict)
    runs_begun: set[str] = attrs.field(factory=set)
    runs_won: set[str] = attrs.field(factory=set)
    passes: dict[str, int] = attrs.field(factory=dict)
    last_status: dict[str, str] = attrs.field(factory=dict)

    def tally(self, status: str) -> None:
        self.outcomes[status] = self.outcomes.get(status, 0) + 1


def _counters(text: str | None) -> dict[str, float] | None:
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _same_numbers(a: dict[str, float], b: dict[str, float]) -> bool:
    if set(a) != set(b):
        return False
    return all(math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-9) for k in a)


def _ms(text: str | None) -> int | None:
    return None if text is None else parse_iso_ms(text)


class KernelModel:
    """Follows drives and passes through the trace and reports every decision the spec forbids."""

    def __init__(self, report: Report, probe: Probe) -> None:
        self.report = report
        self.probe = probe
        self.jobs: dict[tuple[str, str, str], tuple[Policy, int]] = {}
        self.passes: dict[str, PassModel] = {}
        self.ticks: dict[tuple[str, str], TickModel] = {}
        self.owners: set[str] = set()
        self.by_call: dict[tuple[str, int], tuple[str, PassModel | None]] = {}
        self.current: dict[tuple[str, str], PassModel] = {}
        self.starts: dict[tuple[str, str], Row] = {}
        #: Each run's (module_id, job), kept by the oracle from the store's rows.
        self.run_keys: dict[str, tuple[str, str]] = {}

    # -- registrations, calls and starts ---------------------------------------------------------

    def on_register(self, e: Row) -> None:
        lease = e["lease_ms"] if e["lease_ms"] is not None else JOB_LEASE_MS
        self.jobs[(e["drive"], e["module_id"], e["job"])] = (Policy.of(e["retry"]), lease)

    def on_drive_call(self, e: Row) -> None:
        limit = e["limit"] if e["limit"] is not None else JOB_DRIVE_LIMIT
        self.ticks[(e["drive"], e["scope"])] = TickModel(
            e["drive"], e["scope"], e["max_passes"], limit
        )

    def on_start_call(self, e: Row) -> None:
        self.starts[(e["drive"], e["scope"])] = dict(e, sent=False, reply=None)
        if "unsafe" in e["payload"]:
            self.probe("payload.refused")

    def on_start_send(self, e: Row) -> None:
        start = self.starts.get((e["link"], e["scope"]))
        if start is None:
            return
        start["sent"] = True
        if "unsafe" in start["payload"]:
            self.report(
                "payload-refused",
                None,
                e["t"],
                f"drive {e['link']} sent start_or_join for a payload that is not queue-safe "
                f"({start['payload']['unsafe']}): a start must refuse it before any row exists",
            )
            return
        row = e["args"][1]
        want = {
            "module_id": start["module_id"],
            "job": start["job"],
            "instance": start["instance"],
            "subject_id": start["subject"],
            "status": "running",
            "cursor": None,
            "attempts": 0,
            "lease_owner": None,
            "lease_began_at": None,
            "admission_misses": None,
            "next_attempt_at": None,
            "ended_at": None,
            "last_error": None,
        }
        wrong = [k for k, v in want.items() if row.get(k) != v]
        if _counters(row.get("counters")) != {}:
            wrong.append("counters")
        try:
            payload_ok = json.loads(row["payload"]) == start["payload"]["value"]
        except (ValueError, KeyError):
            payload_ok = False
        if not payload_ok:
            wrong.append("payload")
        if wrong:
            self.report(
                "start-row",
                row.get("id"),
                e["t"],
                f"the row a start inserts must be a fresh running run carrying what it was "
                f"handed; its {', '.join(wrong)} differ",
            )

    def on_start_reply(self, e: Row) -> None:
        start = self.starts.get((e["link"], e["scope"]))
        if start is not None and e["ev"] == "rpc.deliver":
            start["reply"] = e.get("result")

    def on_start_result(self, e: Row) -> None:
        start = self.starts.pop((e["drive"], e["scope"]), None)
        if start is None:
            return
        reply = start["reply"]
        if "unsafe" in start["payload"]:
            if "error" not in e or e["error"] != "ValidationFailed":
                self.report(
                    "payload-refused",
                    e.get("run"),
                    e["t"],
                    f"a start handed a payload that is not queue-safe "
                    f"({start['payload']['unsafe']}) must be refused with ValidationFailed; "
                    f"it {'returned run ' + str(e.get('run')) if 'run' in e else e.get('error')}",
                )
            return
        if reply is None:
            return
        if reply["subject_id"] != start["subject"]:
            self.probe("join.other-subject")
            if e.get("error") != "Conflict":
                self.report(
                    "join-subject",
                    reply["id"],
                    e["t"],
                    f"a start for subject {start['subject']!r} met live run {reply['id'][-6:]} "
                    f"of subject {reply['subject_id']!r}: it must be refused with a Conflict, "
                    f"not {'joined' if 'run' in e else e.get('error')}",
                )
            return
        if e.get("run") != reply["id"]:
            self.report(
                "join-returns-live",
                reply["id"],
                e["t"],
                f"the store answered the start with run {reply['id'][-6:]}, and the start must "
                f"return exactly that run; it gave {e.get('run') or e.get('error')}",
            )

    # -- the drive -------------------------------------------------------------------------------

    def on_due_reply(self, e: Row) -> None:
        tick = self.ticks.get((e["link"], e["scope"]))
        if tick is None or tick.picked is not None or e["ev"] != "rpc.deliver":
            return
        picked: list[str] = []
        for key in e.get("result") or []:
            if len(picked) >= tick.limit:
                break
            if key["id"] in picked or (tick.drive, key["module_id"], key["job"]) not in self.jobs:
                if key["id"] not in picked:
                    self.probe("drive.unregistered-skipped")
                continue
            picked.append(key["id"])
        if len(e.get("result") or []) > len(picked) and len(picked) == tick.limit:
            self.probe("drive.limit-reached")
        tick.picked = picked

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
        self.by_call[(drive, e["seq"])] = ("claim", p)

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
        margin = p.lease_ms * JOB_LEASE_ENTRY_MARGIN
        if op == "begin" and left <= margin - _EPSILON_MS:
            self.report(
                "begin-admission",
                p.run,
                t,
                f"drive {p.drive} sent BEGIN with {left:g} ms of its lease left by its own "
                f"count, not more than the margin of {margin:g} ms: it must miss instead",
            )
        if op == "miss" and not p.begun and left > margin + _EPSILON_MS and not p.begin_refused:
            self.report(
                "begin-admission",
                p.run,
                t,
                f"drive {p.drive} missed its admission with {left:g} ms of its lease left, more "
                f"than the margin of {margin:g} ms, without BEGIN refusing",
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
        if margin != p.lease_ms * JOB_LEASE_ENTRY_MARGIN:
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
                p.tick.runs_begun.add(p.run)
        elif e["ev"] == "rpc.deliver":
            p.begin_refused = True
            self.probe("begin.refused")
        else:
            p.ended = True

    def on_miss_send(self, e: Row, p: PassModel) -> None:
        self._admission(p, "miss", e["t"])
        self.probe("admission.miss")
        if p.tick is not None:
            p.tick.last_status[p.run] = "missed"
        p.ended = True

    def on_miss_reply(self, e: Row, p: PassModel) -> None:
        if e["ev"] == "rpc.deliver" and p.tick is not None:
            # A miss ran no handler: superseded, except the one that failed the run (the tenth).
            result = e.get("result")
            p.tick.tally("failed" if result is not None and result.get("failed") else "superseded")

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

    # -- steps -----------------------------------------------------------------------------------

    def _pass_of(self, e: Row) -> PassModel | None:
        return self.current.get((e["drive"], e["run"]))

    def on_hx_step(self, e: Row) -> None:
        p = self._pass_of(e)
        if p is None:
            return
        name = e["step"]
        if e["retry"] is not None:
            own = Policy.of(e["retry"])
            narrower = own.max_attempts < p.job.max_attempts
            self.probe("policy.step-narrower" if narrower else "policy.step-wider")
        if p.lost or p.spent is not None:
            p.step = StepModel(name, p.job, refused=True)
            return
        if name in p.used:
            self.probe("step.reused")
            if p.failure is None:
                p.failure = Failure(None, p.job, False)
            p.step = StepModel(name, p.job, refused=True)
            return
        p.used.add(name)
        p.step = StepModel(name, p.job.narrowed(e["retry"]))
        p.step.may_run = False

    def on_begin_step_send(self, e: Row, p: PassModel) -> None:
        step = p.step
        name = e["args"][1]
        if step is None or step.name != name or step.boundary_sent or step.refused:
            why = (
                "its pass had already lost the run or spent a step"
                if p.lost or p.spent is not None
                else "the name was already used in this pass, and a second step() under one "
                "name is refused (JOB_STEP_REUSED) before it can read the first one's memo"
                if step is not None and step.refused
                else "no step asked for it"
            )
            self.report(
                "step-boundary",
                p.run,
                e["t"],
                f"pass {p.owner[-6:]} crossed a step boundary for {name!r} though {why}",
            )
            return
        step.boundary_sent = True
        if e["args"][3] != p.lease_ms:
            self.report(
                "lease-ms",
                p.run,
                e["t"],
                f"the boundary of step {name!r} renewed for {e['args'][3]} ms, not the job's "
                f"lease of {p.lease_ms} ms",
            )

    def on_begin_step_reply(self, e: Row, p: PassModel) -> None:
        step = p.step
        if step is None or e["ev"] != "rpc.deliver":
            return
        result = e.get("result") or {}
        if not result.get("held"):
            p.lost = True
            self.probe("pass.lost-at-boundary")
            return
        row = result.get("row")
        step.boundary = row
        if row is not None and row["result"] is not None:
            self.probe("step.memo")
            return
        attempts = row["attempts"] if row is not None else 0
        if attempts >= step.policy.max_attempts:
            p.spent = (row["last_error"] if row is not None else None) or ""
            self.probe("step.spent")
            if step.policy.max_attempts < p.job.max_attempts:
                self.probe("step.spent-narrower")
            return
        step.may_run = True
        step.attempt = attempts + 1

    def on_hx_fn(self, e: Row) -> None:
        p = self._pass_of(e)
        if p is None:
            return
        step = p.step
        if step is None or step.name != e["step"] or not step.may_run or step.ran:
            boundary = step.boundary if step is not None else None
            why = (
                "its memo was already completed"
                if boundary is not None and boundary["result"] is not None
                else "it had used its attempts"
                if p.spent is not None
                else "no boundary admitted it"
            )
            self.report(
                "step-memo",
                p.run,
                e["t"],
                f"pass {p.owner[-6:]} ran the body of step {e['step']!r} though {why}: a "
                "completed step is never run again and a spent one fails the run",
            )
            return
        step.ran = True

    def on_hx_fn_end(self, e: Row) -> None:
        p = self._pass_of(e)
        if p is None or p.step is None or p.step.name != e["step"]:
            return
        step = p.step
        step.error, step.door = e["error"], e["door"]
        step.has_value = "value" in e
        step.value = e.get("value")
        step.record_expected = not (step.error is not None and step.door)

    def on_record_step_send(self, e: Row, p: PassModel) -> None:
        step = p.step
        args = e["args"]
        name, result, attempts, error = args[1], args[2], args[3], args[4]
        if step is None or step.name != name or not step.record_expected:
            self.report(
                "step-record",
                p.run,
                e["t"],
                f"pass {p.owner[-6:]} recorded step {name!r} without its body having ended "
                "(or for a door refusal, which is not the step's failure)",
            )
            return
        step.record_expected = False
        wrong = []
        if attempts != step.attempt:
            wrong.append(f"attempts {attempts}, not {step.attempt}")
        if step.error is None:
            if result is None or error is not None:
                wrong.append("a completed step must store its result and no error")
            elif step.has_value:
                try:
                    same = json.loads(result) == step.value
                except ValueError:
                    same = False
                if not same:
                    wrong.append(f"result {result[:40]!r} is not what the body returned")
        elif result is not None or error != step.error:
            wrong.append(f"a failed step stores NULL and its error {step.error!r}")
        if args[7] != p.lease_ms:
            wrong.append(f"renewal {args[7]} ms, not the lease of {p.lease_ms} ms")
        if wrong:
            self.report(
                "step-record",
                p.run,
                e["t"],
                f"step {name!r} of pass {p.owner[-6:]} was recorded wrongly: {'; '.join(wrong)}",
            )

    def on_record_step_reply(self, e: Row, p: PassModel) -> None:
        step = p.step
        if step is None or e["ev"] != "rpc.deliver":
            return
        if e.get("result") is not True:
            p.lost = True
            return
        if step.error is not None and p.failure is None:
            fails = step.attempt >= step.policy.max_attempts
            p.failure = Failure(step.error, step.policy, fails)
            if fails and step.policy.max_attempts < p.job.max_attempts:
                self.probe("step.limit-narrower-fails")

    def on_hx_count(self, e: Row) -> None:
        p = self._pass_of(e)
        if p is not None:
            p.counts[e["name"]] = p.counts.get(e["name"], 0) + e["by"]
            self.probe("handler.counts")

    def on_hx_end(self, e: Row) -> None:
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
                    "next": (JOB_DEFER_MS, JOB_DEFER_MS),
                    "ended": False,
                    "outcome": "deferred",
                    "rule": "a deferral charges nothing, records no error and waits JOB_DEFER_MS",
                }
                return
            self.probe("handler.throws")
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
        merged = _counters(row["counters"])
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

    def _fail(
        self, p: PassModel, error: str | None, policy: Policy, fails_run: bool, why: str
    ) -> Row:
        assert p.row is not None
        attempts = p.row["attempts"] + 1
        final = fails_run or attempts >= p.job.max_attempts
        if final and not fails_run:
            self.probe("retry.job-limit")
        return {
            "op": "patch",
            "status": "failed" if final else "running",
            "cursor": p.row["cursor"],
            "counters": p.row["counters"],
            "attempts": attempts,
            "last_error": error,
            "next": None if final else policy.window(attempts),
            "ended": final,
            "outcome": "failed" if final else "retrying",
            "rule": why
            + (
                f"; at {attempts} of the job's {p.job.max_attempts} attempts (step limit "
                f"{policy.max_attempts}) the run {'fails' if final else 'retries after a backoff'}"
            ),
        }

    # -- outcomes --------------------------------------------------------------------------------

    def on_outcome_send(self, e: Row, p: PassModel) -> None:
        op, patch = e["op"], e["args"][1]
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
            got = _counters(patch["counters"])
            if got is None or not _same_numbers(got, counters[1]):
                wrong.append(f"counters {patch['counters']}, not the merged {counters[1]}")
        elif patch["counters"] != counters:
            wrong.append(f"counters {patch['counters']}, not the committed {counters}")
        if patch["attempts"] != want["attempts"]:
            wrong.append(f"attempts {patch['attempts']}, not {want['attempts']}")
        if want["last_error"] is not None and patch["last_error"] != want["last_error"]:
            wrong.append(f"last_error {patch['last_error']!r}, not {want['last_error']!r}")
        failed = want["status"] != "running" and want["op"] == "patch"
        if want["last_error"] is None and failed and patch["last_error"] is None:
            wrong.append("no last_error on a failed run")
        if want["op"] == "commit_pass" and patch["last_error"] is not None:
            wrong.append(f"last_error {patch['last_error']!r} on a commit")
        at = _ms(patch["updated_at"])
        nxt = _ms(patch["next_attempt_at"])
        if want["next"] is None:
            if nxt is not None:
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
        if p.tick is not None:
            p.tick.tally(e["status"])
            p.tick.last_status[p.run] = e["status"]
        p.ended = True

    def on_drive_report(self, e: Row) -> None:
        tick = self.ticks.pop((e["drive"], e["scope"]), None)
        if tick is None:
            return
        report = e["report"]
        wrong = []
        for status in ("advanced", "completed", "retrying", "failed", "deferred", "superseded"):
            if report[status] != tick.outcomes.get(status, 0):
                wrong.append(f"{status} {report[status]}, not {tick.outcomes.get(status, 0)}")
        if report["attempted"] != len(tick.runs_begun):
            wrong.append(
                f"attempted {report['attempted']}, though {len(tick.runs_begun)} run(s) began "
                "their first pass of the call (a run is attempted when its handler ran)"
            )
        charged = report["retrying"] + report["failed"]
        if len(report["errors"]) < charged:
            wrong.append(
                f"{len(report['errors'])} error entries for {charged} run(s) left retrying or "
                "failed (each carries the error written on its record)"
            )
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
