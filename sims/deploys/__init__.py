"""Deploys: new code checked against the runs in flight on a real host, before it ships.

What it does: :mod:`._sources` reads the runs a host left (a scope's saved dump, its SQLite file,
a data folder, or a recorded history through :mod:`._history_rows`); :mod:`._new_code` loads the
job definitions about to ship and the world whose services they call; :mod:`._drive` restores
the runs in flight in one world with no faults and runs each one's next pass, and its retry, on
the new code; :mod:`._judge` reads the world's trace for what the new code cannot carry (a step
of the ledger it never calls, an exception over the old payload or cursor, a new step before one
the ledger holds); given the old code too, :mod:`._compare` runs it in a second world and holds
the new code's calls to the old code's (a key changed, other work); :mod:`._verdict` is the
verdict, as values and as lines; :mod:`._check` is the entry, :func:`check_deploy` (``python -m
sims before-deploy``, docs/deploys.md).

What it may import: ``driver``, ``scopehost``, the world, the faults, the oracle (a history's
rows, as its model holds them), the scenarios (a user's file, loaded as a world file is) and the
runners (a world run on a seed), with ``sims._trace`` and the other foundations. What it must
not import: the search, the timeline or the command line (``tests/sims/test_layout.py``).

Its public names are re-exported from :mod:`sims`.
"""

from ._check import check_deploy
from ._errors import DeployInputError
from ._sources import RunsSource, read_sources
from ._verdict import DeployFinding, DeployVerdict, LedgerStep, RunInFlight, RunVerdict

__all__ = [
    "DeployFinding",
    "DeployInputError",
    "DeployVerdict",
    "LedgerStep",
    "RunInFlight",
    "RunVerdict",
    "RunsSource",
    "check_deploy",
    "read_sources",
]
