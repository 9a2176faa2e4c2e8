"""The code about to ship (``FILE.py:NAME``: job definitions), and the world it is checked in.

The file is loaded as a world file is (``sims.scenarios``: once per process, under a private
module name, its folder on the path so that it imports its neighbours). The world's services and
lease come from a scenario's ``WorldSetup`` (``--world FILE.py:NAME``), made healthy: no share of
requests refused, and no fault plan.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from driver import JOB_LEASE_MS, JobDefinition
from scopehost import ModuleOperation

from ..scenarios._registry import ScenarioRef, display_path, file_module, find_scenario
from ..world._services import Service
from ._errors import DeployInputError

#: The seed of the check's world, and of the scenario setup it reads.
SEED = 1


def _form(given_as: str) -> str:
    """What the argument ``given_as`` (``NEW_JOBS`` or ``--old``) is, in words."""
    which = "the code running now" if given_as == "--old" else "the code about to ship"
    return (
        f"{given_as} is FILE.py:NAME, NAME a driver.JobDefinition or a tuple of them in that "
        f"file: {which}"
    )


@attrs.frozen(kw_only=True)
class CheckWorld:
    """What the check's world takes from a scenario: its services (healthy), lease and scope
    operations; and the scenario, as named (None: no services, the driver's default lease)."""

    services: tuple[Service, ...] = ()
    lease_ms: int = JOB_LEASE_MS
    operations: Mapping[str, ModuleOperation] | None = None
    named: str | None = None


def load_jobs(text: str, given_as: str = "NEW_JOBS") -> tuple[JobDefinition, ...]:
    """The job definitions ``FILE.py:NAME`` names (``given_as``: the argument, for an error)."""
    file, colon, name = text.strip().rpartition(":")
    if not colon or not file.endswith(".py") or not name:
        raise DeployInputError(f"{given_as} {text!r}: {_form(given_as)}")
    path = Path(file)
    if not path.is_file():
        what = "a folder" if path.is_dir() else "no file"
        raise DeployInputError(
            f"{given_as} {text}: {file} is {what}; name the Python file that defines the code "
            "about to ship (FILE.py:NAME)"
        )
    try:
        module = file_module(path)
    except ValueError as error:
        raise DeployInputError(f"{given_as} {text}: {error}") from None
    if not hasattr(module, name):
        found = [key for key, value in vars(module).items() if _definitions(value)]
        raise DeployInputError(
            f"{given_as} {text}: {display_path(file)} defines no {name}; its job definitions are: "
            f"{', '.join(found) or 'none (define NAME = driver.JobDefinition(...))'}"
        )
    return as_definitions(getattr(module, name), f"{given_as} {text}")


def _definitions(value: object) -> bool:
    if isinstance(value, JobDefinition):
        return True
    return (
        isinstance(value, tuple | list)
        and bool(value)
        and all(isinstance(one, JobDefinition) for one in value)
    )


def as_definitions(value: Any, what: str) -> tuple[JobDefinition, ...]:
    """``value`` as a tuple of job definitions, each job once; refused in words otherwise."""
    if not _definitions(value):
        raise DeployInputError(
            f"{what} is {reprlib.repr(value)}, not a driver.JobDefinition or a tuple of them; "
            "name the job definitions about to ship"
        )
    definitions = (value,) if isinstance(value, JobDefinition) else tuple(value)
    seen: set[tuple[str, str]] = set()
    for definition in definitions:
        key = (definition.module_id, definition.job)
        if key in seen:
            raise DeployInputError(
                f"{what} defines job {key[0]}/{key[1]} twice; give each job's new code once"
            )
        seen.add(key)
    return definitions


def check_world(jobs: tuple[JobDefinition, ...], world: str | ScenarioRef | None) -> CheckWorld:
    """The services (healthy) and lease of ``world``'s setup; refused when the new code calls a
    service it does not declare, or calls services and no world is named."""
    calls = {f"{job.module_id}/{job.job}": job.services for job in jobs if job.services}
    if world is None:
        if calls:
            raise DeployInputError(
                f"the new code calls services ({_calls(calls)}) and no world declares them; give "
                "--world FILE.py:NAME, a scenario whose WorldSetup(services=...) declares them"
            )
        return CheckWorld()
    try:
        setup = find_scenario(world).setup(SEED)
    except Exception as error:  # the user's file, or its setup function, in one line
        raise DeployInputError(f"--world {world}: {error}") from None
    declared = {service.name for service in setup.services}
    missing = sorted({name for names in calls.values() for name in names} - declared)
    if missing:
        raise DeployInputError(
            f"--world {world} does not declare {', '.join(missing)}, which the new code calls "
            f"({_calls(calls)}); declare them in its WorldSetup(services=(Service(...),)), or "
            "name a scenario whose setup does"
        )
    return CheckWorld(
        services=tuple(attrs.evolve(service, refuses=0.0) for service in setup.services),
        lease_ms=setup.lease_ms,
        operations=setup.operations,
        named=str(world),
    )


def _calls(calls: dict[str, tuple[str, ...]]) -> str:
    return "; ".join(f"job {job} calls {', '.join(names)}" for job, names in calls.items())
