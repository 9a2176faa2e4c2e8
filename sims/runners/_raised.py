"""A world that raised, told as a finding: its kind, its message and the line it came from.

A sweep must print its report whatever a world raises: an exception group out of Trio's nurseries,
a user's exception whose ``__init__`` takes other arguments than its message, one that cannot be
pickled at all. So no exception ever crosses from the process that ran the world (a pool worker,
a Dask worker) to the sweep; three strings do, and the sweep reports them as a failing seed, with
the command that replays it. Rebuilding the exception on the other side is what used to fail
(``BaseExceptionGroup`` cannot be made from one string), and with it the whole sweep.
"""

from __future__ import annotations

import attrs

from .._trace import hide_world_folders
from ..scenarios._registry import display_path
from ._simulate import WorldError

#: The check name a world that raised is reported under.
WORLD_RAISED = "world-raised"

#: How many of a group's leaves the message names (the rest are counted).
_LEAVES_NAMED = 3


@attrs.frozen
class WorldRaised:
    """A seed whose world raised, reduced to what pickles anywhere: three strings."""

    seed: int
    #: The exception's type name (the user's own exception under a ``WorldError``).
    kind: str
    message: str
    #: ``file:line`` of the deepest frame it was raised in (a group's: its first leaf's), or "".
    line: str

    @classmethod
    def of(cls, seed: int, error: BaseException) -> WorldRaised:
        if isinstance(error, WorldError) and error.error is not None:
            # A user's scenario raised: the user's own exception is the one to tell.
            error = error.error
        return cls(seed, type(error).__name__, _message(error), _where(error))

    def finding(self) -> str:
        """The line a sweep lists under the seed, as it lists a violation."""
        where = f" (raised at {self.line})" if self.line else ""
        return f"[violation] {WORLD_RAISED}: {self.kind}: {self.message}{where}"


def _message(error: BaseException) -> str:
    text = _str(error)
    if isinstance(error, BaseExceptionGroup):
        leaves = list(_leaves(error))
        named = "; ".join(f"{type(leaf).__name__}: {_str(leaf)}" for leaf in leaves[:_LEAVES_NAMED])
        more = len(leaves) - _LEAVES_NAMED
        text += f": {named}" + (f"; and {more} more" if more > 0 else "")
    return hide_world_folders(text)


def _str(error: BaseException) -> str:
    # A user's __str__ may itself raise; the report must not.
    try:
        return str(error)
    except Exception:
        return f"<{type(error).__name__} whose str() raised>"


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _where(error: BaseException) -> str:
    """The deepest frame of the error's traceback (of a group's first leaf), as ``file:line``."""
    first = _leaves(error)[0]
    tb = first.__traceback__ or error.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"{display_path(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
