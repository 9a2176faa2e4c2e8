"""Start a run, or join the one already in flight.

The payload is refused before the store is asked anything, so a run is never recorded carrying a
value it cannot resume from; the lookup and the insert are ONE store operation (``start_or_join``),
because as two, concurrent starts both find no live run and both insert.
"""

from __future__ import annotations

from collections.abc import Callable

from ._constants import JOB_ID_MAX_BYTES, JOB_PAYLOAD_MAX_BYTES, JOB_SUBJECT_MISMATCH
from ._errors import Conflict, FieldError, ValidationFailed
from ._json import SizeCap, dumps, queue_safety_errors, text_errors
from ._limits import size_errors
from ._port import JobRunStore
from ._values import JobRunKey, JobRunRow, StartJobRunInput

#: A payload's cap, counted while its parts are checked, so that one of millions of items is
#: refused after reading about a cap's worth of them, before any of it is encoded.
_PAYLOAD_CAP = SizeCap(JOB_PAYLOAD_MAX_BYTES, "a payload's JSON")


def name_errors(value: object, path: str) -> list[FieldError]:
    """Why ``value`` cannot name a module, a job, an instance, a subject, a step or a counter
    (empty when it can): a non-empty str that UTF-8 carries, within ``JOB_ID_MAX_BYTES``."""
    if isinstance(value, str) and value:
        return text_errors(value, path) or size_errors(value, JOB_ID_MAX_BYTES, path, "a name")
    return [FieldError(path, f"is {value!r}; it must be a non-empty str")]


def start_input(input: object) -> StartJobRunInput:
    """``input``, refused unless it is a ``StartJobRunInput``: a dict of the same fields would
    otherwise fail as a bare AttributeError on its first field."""
    if not isinstance(input, StartJobRunInput):
        raise ValidationFailed.at(
            "input",
            f"is {input!r}; pass a StartJobRunInput(module_id=..., job=..., instance=..., "
            "payload=..., subject=...)",
        )
    return input


def _input_errors(input: StartJobRunInput) -> list[FieldError]:
    errors = name_errors(input.module_id, "module_id")
    errors += name_errors(input.job, "job")
    errors += name_errors(input.instance, "instance")
    if input.subject is not None:
        if isinstance(input.subject, str) and input.subject:
            errors += name_errors(input.subject, "subject")
        else:
            errors.append(
                FieldError("subject", f"is {input.subject!r}; it must be a non-empty str or None")
            )
    errors += queue_safety_errors(input.payload, "payload", cap=_PAYLOAD_CAP)
    return errors


async def start_job_run(
    store: JobRunStore,
    input: StartJobRunInput,
    mint_id: Callable[[], str],
    now: Callable[[], str],
) -> JobRunRow:
    """The live run for ``input``'s key, or a new one: the join returns the live run unchanged.

    Raises ``ValidationFailed`` (before any store call) for an ``input`` that is not a
    ``StartJobRunInput``, a bad key or a payload that is not queue-safe, and
    ``Conflict(JOB_SUBJECT_MISMATCH)`` when the live run declares another subject.
    """
    errors = _input_errors(start_input(input))
    if errors:
        raise ValidationFailed(errors)
    payload = dumps(input.payload)
    # Measured once it is known to be JSON: its size is the stored text's.
    too_big = size_errors(payload, JOB_PAYLOAD_MAX_BYTES, "payload", "a payload's JSON")
    if too_big:
        raise ValidationFailed(too_big)
    at = now()
    key = JobRunKey(input.module_id, input.job, input.instance)
    row = JobRunRow.fresh(mint_id(), key, payload=payload, at=at, subject_id=input.subject)
    live = await store.start_or_join(key, row)
    if live.subject_id != input.subject:
        # "None against some" is a mismatch too: the live run's erasure story would otherwise
        # silently exclude (or include) the joiner's subject.
        raise Conflict(
            JOB_SUBJECT_MISMATCH,
            f"job {key.module_id}/{key.job} instance {key.instance!r} is already running as run "
            f"{live.id} for subject {live.subject_id!r}, not {input.subject!r} — wait for it to "
            "end, or start the other subject's walk under its own instance",
        )
    return live
