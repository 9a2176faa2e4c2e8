"""Errors a caller can catch. Messages are lowercase, name the offending value, and the remedy."""

from __future__ import annotations

from collections.abc import Sequence

import attrs


class JobError(Exception):
    """Base of every refusal the job-run kernel makes on purpose."""

    code: str = "job_error"


@attrs.frozen
class FieldError:
    """One reason a value was refused: where in the value (dotted path) and why."""

    path: str
    message: str


class ValidationFailed(JobError):
    """Bad input, refused before anything was written."""

    code = "validation_failed"

    def __init__(self, errors: Sequence[FieldError]) -> None:
        if not errors:
            raise ValueError("ValidationFailed needs at least one FieldError")
        self.errors: list[FieldError] = list(errors)
        super().__init__("; ".join(f"{e.path} {e.message}" for e in self.errors))

    @classmethod
    def at(cls, path: str, message: str) -> ValidationFailed:
        return cls([FieldError(path, message)])


class Conflict(JobError):
    """A request that contradicts the state it met (``reason`` says which rule)."""

    code = "conflict"

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)
