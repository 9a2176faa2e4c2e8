"""The kernel model's step rules: the per-pass step ledger as the kernel must walk it. A boundary
only for a step the handler asked for, a reused name refused, a memo returned instead of running
the body again, a spent step failing the run, a body run only when its boundary admitted it, and
each record carrying its attempt, its result or its error, and the job's lease.
"""

from __future__ import annotations

import json

from ._records import Failure, KernelRecords, PassModel, Policy, Row, StepModel


class StepRules(KernelRecords):
    """Follows each step a handler asks for, from ``hx.step`` to its record's reply."""

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

    def on_hx_got(self, e: Row) -> None:
        """What ``step()`` handed back: the body's own value when it ran, else its memo's value
        (the JSON the ledger keeps, parsed), never the stored text itself."""
        p = self._pass_of(e)
        if p is None or p.step is None or p.step.name != e["step"]:
            return
        step = p.step
        if step.ran:
            if not step.has_value:
                return
            expected, source = step.value, "its body returned"
        elif step.boundary is not None and step.boundary["result"] is not None:
            self.probe("step.memo-returned")
            try:
                expected = json.loads(step.boundary["result"])
            except ValueError:
                return  # a memo that is not JSON is the kernel's to refuse, not to hand back
            source = "its memo holds"
        else:
            return
        if "value" in e and e["value"] == expected:
            return
        got = repr(e["value"])[:60] if "value" in e else f"a {e.get('unsafe')}"
        self.report(
            "step-return",
            p.run,
            e["t"],
            f"step {e['step']!r} of pass {p.owner[-6:]} handed the handler {got}, not the value "
            f"{source} ({repr(expected)[:60]})",
        )

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
