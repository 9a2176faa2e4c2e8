"""Every store door refuses text SQLite cannot hold with ValidationFailed naming the path, and
writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from driver import JobRunFilter, ValidationFailed

from .async_support import new_row
from .store_support import LEASE_MS, T0, advanced_patch, open_db, read, started

BAD = "ab\ud800"
MESSAGE = (
    "holds a lone surrogate ('\\ud800' at index 2), which UTF-8 cannot carry — decode the text "
    "properly before passing it"
)


def _start(db: Any) -> None:
    row = attrs.evolve(new_row("run-2", instance="two"), payload=BAD)  # text, to the store
    db.start_or_join(row.key, row, now=T0)


CALLS: list[tuple[str, Callable[[Any], object]]] = [
    ("row.payload", _start),
    ("id", lambda db: db.claim(BAD, "o", LEASE_MS, now=T0)),
    ("owner", lambda db: db.claim("run-1", BAD, LEASE_MS, now=T0)),
    ("note", lambda db: db.miss("run-1", "owner-1", BAD, now=T0)),
    (
        "patch.cursor",
        lambda db: db.patch("run-1", attrs.evolve(advanced_patch(), cursor=BAD), None, now=T0),
    ),
    ("name", lambda db: db.begin_step("run-1", BAD, "owner-1", LEASE_MS, now=T0)),
    (
        "last_error",
        lambda db: db.record_step("run-1", "a", None, 1, BAD, T0, "o", LEASE_MS, now=T0),
    ),
    ("subject_id", lambda db: db.shred_subject(BAD, now=T0)),
    ("filter.job", lambda db: db.list(JobRunFilter(job=BAD), now=T0)),
]


@pytest.mark.parametrize(("path", "call"), CALLS, ids=[path for path, _ in CALLS])
def test_a_lone_surrogate_is_refused_by_path_at_every_store_door(
    path: str, call: Callable[[Any], object]
) -> None:
    db = open_db()
    started(db)
    before = read(db)
    with pytest.raises(ValidationFailed) as caught:
        call(db)
    assert [(e.path, e.message) for e in caught.value.errors] == [(path, MESSAGE)]
    assert read(db) == before
    assert db.connection.execute("SELECT COUNT(*) FROM _substrat_job_runs").fetchone()[0] == 1
