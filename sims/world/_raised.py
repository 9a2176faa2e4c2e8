"""How an exception a handler or a step body raised is told: its type, where in the user's code it
was raised, and whether it is the outside world's or the code's own.

The outside world's exceptions are the ones a correct handler lets fail its pass, to be retried:
a service's outcome (``ServiceTimedOut``, ``ServiceUnavailable``; a ``ServiceDeclined`` let out
of a handler is one too), the scope's transport and availability errors, a lost lease, the
built-in walk's upstream, a timeout of the handler's own. Anything else (a ``KeyError``, a
``TypeError``, the kernel refusing a step's name) is the code's own: a bug, which the verdict
names by type, file and line (``sims.runners._failures``).

A frame is named ``FILE:LINE in FUNCTION`` by the file's base name, never its path: a trace is
byte-identical in any process, whatever folder it runs in.
"""

from __future__ import annotations

import importlib.util
import os
import sysconfig
import traceback
from typing import Any, Final

import trio

from driver import ServiceError
from driver._pass import _PassStopped
from scopehost import ScopeHostError

from ._fence import DriveKilled
from ._upstream import UpstreamUnavailable


def _folder_of(module: str) -> str:
    """The folder a package lives in, found without importing it (``serviceclients`` needs
    httpx, which the simulator does not)."""
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    # A package that is not installed matches no path: none holds a NUL.
    return os.path.dirname(os.path.abspath(origin)) + os.sep if origin else "\0"


#: Folders whose frames are never the user's: this project's packages, the libraries it runs
#: on, and Python's own.
_NOT_THE_USERS: Final = (
    *(_folder_of(name) for name in ("driver", "scopehost", "serviceclients", "sims", "trio")),
    _folder_of("attrs"),
    sysconfig.get_paths()["stdlib"] + os.sep,
)
#: What the outside world raises into a handler (see the module's docstring).
_OUTSIDE: Final = (
    ServiceError,
    ScopeHostError,
    DriveKilled,
    UpstreamUnavailable,
    trio.TooSlowError,
    _PassStopped,
)


def raised_fields(err: BaseException) -> dict[str, Any]:
    """``error_type``, ``where`` and ``outside`` of ``err``, for its trace event."""
    return {
        "error_type": type(err).__name__,
        "where": user_frame(err),
        "outside": isinstance(err, _OUTSIDE),
    }


def user_frame(err: BaseException) -> str | None:
    """The innermost frame of ``err``'s traceback in the user's code, as ``FILE:LINE in FN``."""
    frames = traceback.extract_tb(err.__traceback__)
    for frame in reversed(frames):
        path = os.path.abspath(frame.filename)
        if not path.startswith(_NOT_THE_USERS):
            return f"{os.path.basename(path)}:{frame.lineno} in {frame.name}"
    return None
