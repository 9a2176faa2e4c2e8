"""Drives over a real scope host, and the trace they leave, for the kernel's tests."""

from __future__ import annotations

import random
from typing import Any

import attrs

from driver import JobDriver, JobRunStore, StartJobRunInput
from scopehost import Link, LinkCall, ScopeHost

SCOPE = "s1"
MODULE = "crm"
JOB = "walk"


@attrs.define
class Trace:
    """Every observer event of every drive, in order."""

    events: list[tuple[str, dict[str, Any]]] = attrs.Factory(list)

    def __call__(self, event: str, fields: dict[str, Any]) -> None:
        self.events.append((event, dict(fields)))

    def named(self, event: str, **match: Any) -> list[dict[str, Any]]:
        return [
            fields
            for name, fields in self.events
            if name == event and all(fields.get(k) == v for k, v in match.items())
        ]

    def names(self, *, drive: str | None = None) -> list[str]:
        return [name for name, fields in self.events if drive is None or fields["drive"] == drive]


def drive(
    host: ScopeHost,
    trace: Trace,
    *,
    name: str = "drive",
    link: Link | None = None,
    seed: int = 1,
) -> JobDriver:
    return JobDriver(
        host,
        name=name,
        link=link if link is not None else Link(name=name),
        rng=random.Random(seed),
        observer=trace,
    )


def start(
    payload: Any = None, *, instance: str = "default", subject: str | None = None
) -> StartJobRunInput:
    return StartJobRunInput(
        module_id=MODULE, job=JOB, instance=instance, payload=payload, subject=subject
    )


def store(host: ScopeHost) -> JobRunStore:
    return host.stub(SCOPE)


def is_op(*operations: str) -> Any:
    def match(call: LinkCall) -> bool:
        return call.operation in operations

    return match
