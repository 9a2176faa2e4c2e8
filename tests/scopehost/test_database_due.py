"""The due read by index ranges returns exactly the spec's statement's rows, in its order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scopehost import JOB_RUN_DUE_SQL

from .store_support import at, open_db

#: Few distinct times, so ties in the due order (broken by id) are common.
_TIMES = st.sampled_from([at(ms) for ms in (0, 1, 2, 5, 9)])

_ROWS = st.lists(
    st.tuples(
        st.sampled_from(["running", "running", "done", "failed"]),
        st.none() | _TIMES,
        _TIMES,
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(rows=_ROWS, ids=st.randoms(use_true_random=False), now=_TIMES, limit=st.integers(0, 12))
def test_the_due_read_equals_the_spec_statement_on_random_tables(
    rows: list[tuple[str, str | None, str]], ids: object, now: str, limit: int
) -> None:
    db = open_db()
    order = list(range(len(rows)))
    ids.shuffle(order)  # type: ignore[attr-defined]
    for index, (status, next_attempt_at, started_at) in zip(order, rows, strict=True):
        db.connection.execute(
            "INSERT INTO _substrat_job_runs (id, module_id, job, instance, payload, status, "
            "started_at, updated_at, next_attempt_at) VALUES (?, 'mod', ?, 'default', '{}', ?, "
            "?, ?, ?)",
            (f"run-{index:02d}", f"job-{index}", status, started_at, started_at, next_attempt_at),
        )
    spec = [tuple(row) for row in db.connection.execute(JOB_RUN_DUE_SQL, (now, limit))]
    keys = db.due_keys(now, limit, now=now)
    assert [(key.id, key.module_id, key.job) for key in keys] == spec
