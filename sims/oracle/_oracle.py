"""The oracle: the executable model of the spec, run over a trace as it is written.

Theory of operation
-------------------
Every event goes through two models that share nothing with the implementation:

* the STORE model (``_model``): each ``rpc.exec`` — one store operation, at the store's time
  ``store_at``, with the arguments its ``rpc.send`` carried — is predicted from the model's own
  rows; a reply that differs is a violation naming the rule, and the model adopts the store's
  answer where the reply carries a row, so one bug is reported once. At each checkpoint of the
  store's real rows (``world.sync``: every run and step row) the rows are compared column by
  column and adopted;
* the KERNEL model (``_model_kernel``): each drive call and each pass, followed by its lease
  owner, from the registration, the budget, the claimed row, what the handler asked (``hx.*``) and
  the replies the drive got, to the outcome the spec makes it write.

Every edge either model meets is counted as a coverage probe (``_probes``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from ._erasure import REFUSED, carries, tombstone_of
from ._files import FileRules
from ._kernel import KernelModel
from ._model import ScopeModel, predict
from ._probes import PROBES
from ._records import PassModel

#: The first trace format that carries what the oracle reads (docs/trace-format.md).
ORACLE_FORMAT = 2

Row = dict[str, Any]
Report = Callable[[str, str | None, float, str], None]

#: Where the owner sits in each kernel write's arguments.
_OWNER_ARG = {
    "begin": 1,
    "miss": 1,
    "begin_step": 2,
    "record_step": 6,
    "patch": 2,
    "commit_pass": 2,
}


def _short(value: Any, width: int = 160) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def _diff(predicted: Any, actual: Any) -> str:
    """What differs between two replies, column by column where they are rows."""
    if isinstance(predicted, dict) and isinstance(actual, dict):
        if "run" in predicted and "run" in actual and isinstance(predicted["run"], dict):
            parts = []
            if predicted.get("takeover") != actual.get("takeover"):
                parts.append(f"takeover {actual.get('takeover')} (model {predicted['takeover']})")
            inner = _diff(predicted["run"], actual["run"])
            return "; ".join([*parts, inner] if inner else parts)
        keys = sorted(set(predicted) | set(actual))
        parts = [
            f"{k} {_short(actual.get(k), 80)} (model {_short(predicted.get(k), 80)})"
            for k in keys
            if predicted.get(k) != actual.get(k)
        ]
        return "; ".join(parts)
    return f"{_short(actual)} (model {_short(predicted)})"


class Oracle:
    """Checks one world's trace against the executable model; findings go to ``report``."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self.probes: Counter[str] = Counter()
        self.scopes: dict[str, ScopeModel] = {}
        self.sent: dict[tuple[str, int], list[Any]] = {}
        self.kernel = KernelModel(report, self.probe)
        self.files = FileRules(report, self.probe)
        self.calls: dict[tuple[str, int], PassModel] = {}
        self.enabled = False

    def probe(self, name: str) -> None:
        self.probes[name] += 1

    def scope(self, name: str) -> ScopeModel:
        model = self.scopes.get(name)
        if model is None:
            model = self.scopes[name] = ScopeModel(name)
        return model

    # -- events ----------------------------------------------------------------------------------

    def observe(self, e: Row) -> None:
        ev = e["ev"]
        if ev in ("world.begin", "record.begin"):
            # Only a trace that records what the model needs (format 2 on) is checked by it; an
            # older or hand-written trace gets the invariant checks alone. A history recorded on
            # a real host begins with record.begin.
            self.enabled = e.get("format", 1) >= ORACLE_FORMAT
        if not self.enabled:
            return
        if ev == "rpc.send":
            self._send(e)
        elif ev == "rpc.exec":
            self._exec(e)
        elif ev == "rpc.deliver" or ev == "rpc.drop":
            self.sent.pop((e["link"], e["seq"]), None)
            self._leg_end(e)
        elif ev == "rpc.abandon":
            # The caller gave up at once (it never hears back); the wire may still deliver the
            # request later, so its arguments are kept for that execution.
            self._leg_end(e)
        elif ev == "rpc.late":
            self.probe("request.late")
        else:
            handler = _EVENTS.get(ev)
            if handler is not None:
                handler(self, e)

    def _send(self, e: Row) -> None:
        key = (e["link"], e["seq"])
        args = e["args"]
        self.sent[key] = args
        op = e["op"]
        kernel = self.kernel
        if op == "claim":
            kernel.on_claim_send(e)
            self.calls[key] = kernel.passes[args[1]]
        elif op == "start_or_join":
            kernel.on_start_send(e)
        elif op in _OWNER_ARG:
            p = kernel.passes.get(args[_OWNER_ARG[op]])
            if p is None:
                return
            self.calls[key] = p
            if op == "begin":
                kernel.on_begin_send(e, p)
            elif op == "miss":
                kernel.on_miss_send(e, p)
            elif op == "begin_step":
                kernel.on_begin_step_send(e, p)
            elif op == "record_step":
                kernel.on_record_step_send(e, p)
            else:
                kernel.on_outcome_send(e, p)

    def _leg_end(self, e: Row) -> None:
        if e["ev"] == "rpc.deliver" and "error" in e:
            # A reply that carries the call's error (a queued call an eviction refused unrun, a
            # host that closed) raises in the caller, as a lost reply does: to every rule below
            # it is a call that never got its answer.
            e = {**e, "ev": "rpc.raised"}
        key = (e["link"], e["seq"])
        op = e["op"]
        if op == "due_keys":
            self.kernel.on_due_reply(e)
            return
        if op == "start_or_join":
            self.kernel.on_start_reply(e)
            return
        p = self.calls.pop(key, None)
        if p is None:
            return
        kernel = self.kernel
        # A step's call that raised is the handler's to meet (and, uncaught, its pass's error);
        # the drive's own calls that raise end the run's turn as an entry of their own.
        if e["ev"] != "rpc.deliver" and op not in ("begin_step", "record_step"):
            kernel.on_call_raised(p)
        if op == "claim":
            kernel.on_claim_reply(e, p)
        elif op == "begin":
            kernel.on_begin_reply(e, p)
        elif op == "miss":
            kernel.on_miss_reply(e, p)
        elif op == "begin_step":
            kernel.on_begin_step_reply(e, p)
        elif op == "record_step":
            kernel.on_record_step_reply(e, p)
        elif op in ("patch", "commit_pass"):
            kernel.on_outcome_reply(e, p)

    def _exec(self, e: Row) -> None:
        args = self.sent.get((e["link"], e["seq"]))
        if args is None or "error" in e:
            return
        op = e["op"]
        model = self.scope(e["scope"])
        self._probe_before(op, model, args, e)
        predicted = predict(model, op, e["store_at"], args)
        if predicted is None:
            return
        reply, rule = predicted
        actual = e.get("result")
        if reply == REFUSED:
            self._violation(
                f"store-{op}",
                None,
                e,
                f"{op} was accepted (answered {_short(actual)}) where the spec refuses it "
                f"whole: {rule}",
            )
            return
        if reply != actual:
            run = args[0] if op not in ("due_keys", "list", "shred_subject") else None
            if isinstance(run, dict):
                run = None
            self._violation(
                f"store-{op}",
                run,
                e,
                f"{op} at store time {e['store_at']} answered differently from the spec's "
                f"rule ({rule}): {_diff(reply, actual)}",
            )
            self._adopt(model, op, actual)
        self._probe_after(op, model, args, actual)

    def _violation(self, check: str, run: str | None, e: Row, text: str) -> None:
        self._report(check, run, e["t"], text)

    def _adopt(self, model: ScopeModel, op: str, actual: Any) -> None:
        """Take the store's row where its reply carries one, so one bug is reported once."""
        if op == "claim" and isinstance(actual, dict):
            row = actual["run"]
            model.runs[row["id"]] = dict(row)
        elif op == "start_or_join" and isinstance(actual, dict):
            model.runs[actual["id"]] = dict(actual)

    # -- probes the store's view decides ---------------------------------------------------------

    def _probe_before(self, op: str, model: ScopeModel, args: list[Any], e: Row) -> None:
        if op == "claim":
            row = model.runs.get(args[0])
            if (
                row is not None
                and row["lease_owner"] is not None
                and row["lease_began_at"] is None
                and row["status"] == "running"
                and row["next_attempt_at"] is not None
                and row["next_attempt_at"] <= e["store_at"]
            ):
                self.probe("takeover.unbegun")
        elif op in ("patch", "commit_pass", "record_step", "begin_step", "begin", "miss"):
            row = model.runs.get(args[0])
            owner = args[_OWNER_ARG[op]]
            if row is not None and row["lease_owner"] != owner and owner in self.kernel.owners:
                self.probe("stale-write.refused")
        elif op == "due_keys":
            # A run due in the very millisecond of the read: the edge between `<=` and `<`.
            if any(
                row["status"] == "running" and row["next_attempt_at"] == args[0]
                for row in model.runs.values()
            ):
                self.probe("due.same-ms")
        elif op == "shred_subject":
            for row in model.runs.values():
                if row.get("subject_id") == args[0] and tombstone_of(row["payload"]) is None:
                    if row["lease_owner"] is not None:
                        self.probe("erasure.mid-pass")
                    if row["status"] != "running":
                        self.probe("erasure.after-pass")
            if any(
                carries(step["result"], args[0])
                and not carries(model.runs.get(run_id, {}).get("payload"), args[0])
                for (run_id, _), step in model.steps.items()
            ):
                self.probe("erasure.step-result")
        elif op == "import_dump":
            own = args[0].get("scope_id") == e["scope"]
            self.probe("import.own-scope" if own else "import.other-scope")
        elif op == "start_or_join":
            key = args[0]
            triple = (key["module_id"], key["job"], key["instance"])
            for name, other in self.scopes.items():
                if name != e["scope"] and any(
                    r["status"] == "running" and (r["module_id"], r["job"], r["instance"]) == triple
                    for r in other.runs.values()
                ):
                    self.probe("instance.several-scopes")
                    break

    def _probe_after(self, op: str, model: ScopeModel, args: list[Any], actual: Any) -> None:
        if op == "start_or_join" and isinstance(actual, dict):
            self.kernel.run_keys[actual["id"]] = (actual["module_id"], actual["job"])
            if actual["id"] != args[1]["id"]:
                self.probe("join.live")
        elif op == "claim" and isinstance(actual, dict):
            row = actual["run"]
            self.kernel.run_keys[row["id"]] = (row["module_id"], row["job"])
        elif op == "miss" and isinstance(actual, dict) and actual.get("failed"):
            self.probe("admission.tenth-miss")
        elif op == "import_dump":
            for row in model.runs.values():
                self.kernel.run_keys.setdefault(row["id"], (row["module_id"], row["job"]))

    # -- checkpoints -----------------------------------------------------------------------------

    def on_world_sync(self, e: Row) -> None:
        if "steps" not in e:
            return
        model = self.scope(e["scope"])
        actual_runs = {r["id"]: r for r in e["runs"]}
        actual_steps = {(s["run_id"], s["step"]): s for s in e["steps"]}
        for run_id in sorted(set(model.runs) | set(actual_runs)):
            mine, theirs = model.runs.get(run_id), actual_runs.get(run_id)
            if mine != theirs:
                what = (
                    "is missing from the store"
                    if theirs is None
                    else "is in the store but no operation the spec allows put it there"
                    if mine is None
                    else _diff(mine, theirs)
                )
                rule, after = self.files.checkpoint_rule(e["scope"], "store-rows")
                self._report(
                    rule,
                    run_id,
                    e["t"],
                    f"{after}the run row on {e['scope']} is not what the spec's operations "
                    f"leave: {what}",
                )
        for key in sorted(set(model.steps) | set(actual_steps)):
            mine, theirs = model.steps.get(key), actual_steps.get(key)
            if mine != theirs:
                what = (
                    "was dropped, but nothing the spec allows drops it"
                    if theirs is None
                    else "is still in the ledger, though the spec drops it (a commit drops its "
                    "pass's ledger; erasure shreds a carrying step)"
                    if mine is None
                    else _diff(mine, theirs)
                )
                rule, after = self.files.checkpoint_rule(e["scope"], "store-steps")
                self._report(rule, key[0], e["t"], f"{after}step {key[1]!r} on {e['scope']} {what}")
        self.files.checkpointed(e["scope"])
        model.runs = {k: dict(v) for k, v in actual_runs.items()}
        model.steps = {k: dict(v) for k, v in actual_steps.items()}
        for run_id, row in actual_runs.items():
            self.kernel.run_keys.setdefault(run_id, (row["module_id"], row["job"]))

    def conclude(self, explained: list[str]) -> None:
        for text in explained:
            if "Late BEGIN reply" in text:
                self.probe("late-begin.overlap")

    def probe_counts(self) -> tuple[tuple[str, int], ...]:
        return tuple((name, self.probes[name]) for name in PROBES if self.probes[name])


def _k(method: str) -> Callable[[Oracle, Row], None]:
    return lambda oracle, e: getattr(oracle.kernel, method)(e)


_EVENTS: dict[str, Callable[[Oracle, Row], None]] = {
    "job.register": _k("on_register"),
    "drive.call": _k("on_drive_call"),
    "drive.report": _k("on_drive_report"),
    "start.call": _k("on_start_call"),
    "start.result": _k("on_start_result"),
    "claim.won": _k("on_claim_won"),
    "handler.invoke": _k("on_handler_invoke"),
    "hx.step": _k("on_hx_step"),
    "hx.fn": _k("on_hx_fn"),
    "hx.fn.end": _k("on_hx_fn_end"),
    "hx.got": _k("on_hx_got"),
    "hx.count": _k("on_hx_count"),
    "hx.end": _k("on_hx_end"),
    "pass.outcome": _k("on_pass_outcome"),
    "world.sync": Oracle.on_world_sync,
    "file.outside": lambda oracle, e: oracle.files.on_outside(e),
    "file.copied": lambda oracle, e: oracle.files.on_copied(e),
    "file.power": lambda oracle, e: oracle.files.on_power(e),
    "file.written": lambda oracle, e: oracle.files.on_written(e),
    "file.refused": lambda oracle, e: oracle.files.on_refused(e),
}
