"""The conformance kit: the store-port wire, and the reference held against another adapter.

``python -m sims conformance --target workerd|URL|"COMMAND" --examples N`` drives generated
histories through the reference and the target in lockstep and reports the first difference,
shrunk. ``python -m sims.conformance`` serves the reference itself on the wire (stdin and stdout).
docs/conformance.md describes the wire and how to check an adapter of your own.

What it may import: ``driver``, ``scopehost`` (the reference it holds others to), Hypothesis,
``sims._numbers`` and ``sims._seeded`` (Hypothesis's draws from the seed alone). What it must not
import: any other part of ``sims``; the kit runs no world
(``tests/sims/test_layout.py``).
"""

from ._compare import ALLOWANCES, Allowance
from ._kit import (
    DEFAULT_EXAMPLES,
    ConformanceReport,
    Difference,
    load_history,
    replay_history,
    run_conformance,
)
from ._targets import (
    WORKERD_FOLDER,
    CommandTarget,
    LocalTarget,
    Target,
    TargetFailed,
    UrlTarget,
    WorkerdTarget,
    open_target,
)
from ._wire import OPERATIONS, WIRE_VERSION, ReferenceStore, serve_lines, serve_stdio

__all__ = [
    "ALLOWANCES",
    "DEFAULT_EXAMPLES",
    "OPERATIONS",
    "WIRE_VERSION",
    "WORKERD_FOLDER",
    "Allowance",
    "CommandTarget",
    "ConformanceReport",
    "Difference",
    "LocalTarget",
    "ReferenceStore",
    "Target",
    "TargetFailed",
    "UrlTarget",
    "WorkerdTarget",
    "load_history",
    "open_target",
    "replay_history",
    "run_conformance",
    "serve_lines",
    "serve_stdio",
]
