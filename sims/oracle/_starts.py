"""The kernel model's start rules: the row a start inserts, a payload that is not queue-safe
refused before any row exists, a join that returns exactly the live run the store answered, and a
start under another subject refused with a Conflict.
"""

from __future__ import annotations

import json

from ._probes import UNSAFE_PAYLOAD_PROBES
from ._records import KernelRecords, Row, counters_of


class StartRules(KernelRecords):
    """Follows each ``start_job_run`` from its call to its result."""

    def on_start_call(self, e: Row) -> None:
        self.starts[(e["drive"], e["scope"])] = dict(e, sent=False, reply=None)
        if "unsafe" in e["payload"]:
            self.probe("payload.refused")
            kind = e["payload"]["unsafe"]
            if f"payload.refused-{kind}" in UNSAFE_PAYLOAD_PROBES:
                self.probe(f"payload.refused-{kind}")

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
        if counters_of(row.get("counters")) != {}:
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
            if start["subject"] is None:
                # No subject is not a wildcard: it differs from the live run's as any other does.
                self.probe("join.no-subject")
            elif reply["subject_id"] is None:
                # Nor is a live run's missing subject: a start under one is refused too.
                self.probe("join.subject-over-none")
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
