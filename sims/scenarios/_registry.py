"""Scenarios: each a world, a way to drive it, the outcome it documents, and the user's checks.

A scenario's ``expect`` returns the ways the outcome differs from what the scenario documents (an
empty list is a pass). The invariant checks run on every scenario besides, so a scenario can be
"as expected" and still report a violation, and the reverse.

Scenarios live in two places. The built-in ones are registered by ``sims.scenarios._catalog`` and
named by their name alone (``late-begin``). A user's scenarios live in their own Python file and are
named ``FILE.py:NAME``; :class:`ScenarioRef` is that name as a value. It is the ONE way a scenario
is referred to across a process boundary: a sweep's worker process, or a remote worker, gets the
reference (a path and a name, both strings, so it pickles) and loads the file again itself.
"""

from __future__ import annotations

import enum
import hashlib
import importlib.util
import json
import os
import reprlib
import sys
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from random import Random
from types import CodeType, FrameType, ModuleType
from typing import Any

import attrs
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from .._seeded import seed_only
from .._trace import Trace
from ..faults._check import did_you_mean
from ..faults._plan import (
    NO_FAULTS,
    FaultPlan,
)
from ..oracle._report import UserFinding
from ..runners._outcome import Simulation
from ..runners._run import WorldSetup
from ..world._world import World
from ._instrument import loading_users_code, users_loader

SCOPE = "scope-1"
LEASE_MS = 1_000

#: Drives a world: adds drives and jobs, starts runs, ticks the drives, waits for the end.
Drive = Callable[[World], Awaitable[None]]
#: What a scenario promises about a finished world: the ways the outcome differs (empty = as
#: documented). Not asserted when a plan replaces the scenario's own.
Expectation = Callable[[Simulation], Iterable[str]]
#: A user's own check over a finished world's trace: one finding per violation, a string or a
#: :class:`UserFinding` (which says when it happened, and on which run); empty = it held. Typed
#: loosely (what it returns is checked when it runs), so that code written when a check returned
#: strings alone reads its findings as it did.
TraceCheck = Callable[[Trace], Iterable[Any]]

#: What a check and an expect must return, said in the error when one returns anything else.
_CONTRACTS = {
    "check": "a check must return its violations as a list (or any iterable) of strings or "
    "sims.UserFinding values, one per violation, and an empty list when it held",
    "expect": "an expect must return the ways the world differs from what the scenario "
    "documents as a list (or any iterable) of strings, and an empty list when it is as "
    "documented",
}


def returned_lines(kind: str, function: Callable[..., Any], returned: object) -> list[str]:
    """The lines an expect returned (see :func:`returned_findings`)."""
    lines = returned_findings(kind, function, returned)
    assert all(isinstance(line, str) for line in lines)
    return [line for line in lines if isinstance(line, str)]


def returned_findings(
    kind: str, function: Callable[..., Any], returned: object
) -> list[str | UserFinding]:
    """The lines a check or an expect (``kind``) returned, or a TypeError that names the function,
    what it returned and what it must return.

    Anything else would make a verdict lie: ``None`` (a forgotten ``return``) is no list to read,
    and a lone string would be read one character at a time, one finding each. A set's lines come
    sorted, so that its findings are listed alike in every process."""
    shown = _shown(returned)
    if isinstance(returned, str):
        shown = (
            f"the string {shown}, which would be read one character at a time, one line each "
            f"(put it in a list: [{shown}])"
        )
    elif isinstance(returned, Iterable) and not isinstance(returned, bytes | bytearray):
        lines = list(returned)
        # Only a check may give a finding its time and run; an expect's lines are words alone.
        allowed: tuple[type, ...] = (str, UserFinding) if kind == "check" else (str,)
        wrong = [(index, line) for index, line in enumerate(lines) if not isinstance(line, allowed)]
        if not wrong:
            # A set's order is its strings' hashes, which differ from process to process: read
            # as it comes, the same world would list its findings in another order elsewhere.
            return sorted(lines, key=_order) if isinstance(returned, set | frozenset) else lines
        index, line = wrong[0]
        what = "a string or a sims.UserFinding" if kind == "check" else "a string"
        shown = f"{shown}, whose item {index} is {_shown(line)}, not {what}"
    raise TypeError(f"{kind} {_function_place(function)} returned {shown}; {_CONTRACTS[kind]}")


def _order(line: str | UserFinding) -> tuple[str, str]:
    """Strings by themselves, findings after them by their text and time."""
    return ("", line) if isinstance(line, str) else ("~", repr(line))


def _shown(value: object) -> str:
    # reprlib: a list of thousands, or a long text, stays one line that can be read.
    shown = reprlib.repr(value)
    if value is None or isinstance(value, str | list):
        return shown
    return f"{shown} (of type {type(value).__name__})"


def _function_place(function: Callable[..., Any]) -> str:
    """``name (FILE:LINE)``, as far as ``function`` says where it is defined."""
    name = getattr(function, "__qualname__", None) or repr(function)
    code = getattr(function, "__code__", None)
    if code is None:
        return name
    return f"{name} ({display_path(code.co_filename)}:{code.co_firstlineno})"


def _no_expectation(simulation: Simulation) -> list[str]:
    return []


@attrs.frozen(kw_only=True)
class Scenario:
    """A named, documented world."""

    name: str
    summary: str
    setup: Callable[[int], WorldSetup]
    drive: Drive
    expect: Expectation = _no_expectation
    #: The user's own checks over the trace, run after the spec's; each is named by its function.
    checks: tuple[TraceCheck, ...] = ()
    #: Every fault is bounded, so every run must end ``done`` or ``failed``.
    settles: bool = True
    #: The scenario's own plan documents what happens, so each of its faults must fire (False
    #: for a plan drawn from the seed, whose faults may legitimately miss the world).
    faults_must_fire: bool = True
    #: Runs of this world may end failed, and its handlers may raise: not findings.
    failures_expected: bool = False
    #: The file that defines the scenario (absolute); None for a built-in scenario.
    source: str | None = None
    #: What the scenario's worlds may vary besides their faults (payloads, the services'
    #: starting state, how many runs and when): a Hypothesis strategy of JSON values, read by
    #: the drive as ``world.inputs``; None for a scenario whose inputs are fixed.
    inputs: st.SearchStrategy[Any] | None = attrs.field(default=None, eq=False)

    @property
    def ref(self) -> ScenarioRef:
        return ScenarioRef(name=self.name, path=self.source)


#: The built-in scenarios, by name (filled by ``sims.scenarios._catalog``).
SCENARIOS: dict[str, Scenario] = {}
#: A user's scenarios, by the absolute path of their file, then by name.
_FILES: dict[str, dict[str, Scenario]] = {}


def scenario(
    name: str,
    *,
    setup: WorldSetup | Callable[[int], WorldSetup] | None = None,
    expect: Expectation | None = None,
    checks: Iterable[TraceCheck] = (),
    settles: bool = True,
    faults_must_fire: bool = True,
    failures_expected: bool = False,
    inputs: st.SearchStrategy[Any] | None = None,
) -> Callable[[Drive], Drive]:
    """Register the decorated world-driving function as scenario ``name`` (one word, once in a
    file).

    ``setup`` is the world's scopes, lease, fault plan and store (a :class:`WorldSetup`, or a
    function of the seed giving one; the default is one scope, ``scope-1``, and no faults).
    ``expect`` lists where a finished world differs from what the scenario documents. ``checks``
    are the user's own checks over the trace: each returns one line per violation. Both return
    a list (or any iterable) of strings; anything else is refused. ``settles``
    says every fault is bounded, so every run must have ended. The docstring's first paragraph is
    the summary ``python -m sims list`` prints. ``failures_expected`` says runs of this world may
    end failed and its handlers may raise exceptions of their own; otherwise each is a finding
    (``handler-raised``, ``run-failed``), named by type, file and line.

    ``inputs`` is a Hypothesis strategy of JSON values (dicts with string keys, lists, strings,
    whole numbers, finite floats, booleans, None): what the world may vary besides its faults.
    The drive reads the value as ``world.inputs``; a world given none gets the strategy's simplest
    value, and explore draws others, with the plans, and shrinks both.

    A scenario defined in a user's file is run as ``python -m sims run FILE.py:NAME``."""
    if not is_scenario_name(name):
        raise ValueError(
            f"scenario name {name!r} must be one word: not empty, without spaces, ':' or "
            "characters that do not print (it is typed as FILE.py:NAME, and list prints it as "
            "the first word of its line)"
        )
    make_setup = _setup_of(setup)
    checks = tuple(checks)
    if inputs is not None and not isinstance(inputs, st.SearchStrategy):
        raise ValueError(
            f"scenario {name!r} has inputs={_shown(inputs)}; give a Hypothesis strategy of JSON "
            "values, as inputs=st.fixed_dictionaries({'orders': st.integers(1, 3)})"
        )

    def register(drive: Drive) -> Drive:
        # The docstring's reST literals (``x``) read as `x` on a terminal.
        summary = " ".join((drive.__doc__ or "").strip().split("\n\n")[0].split())
        summary = summary.replace("``", "`")
        source = _source_of(drive)
        registry = SCENARIOS if source is None else _FILES.setdefault(source, {})
        run, place = _defined_at(drive)
        earlier = _DEFINED.get((source, name))
        if name in registry and earlier is not None and _same_run(earlier[0], run):
            # The second would replace the first, checks and all, and a check that fails would
            # be dropped without a word. The same place run again (the file imported under
            # another name too, or reloaded) is a new definition and replaces the old one.
            raise ValueError(
                f"scenario {name!r} is defined twice in one file, at {earlier[1]} and at "
                f"{place}; give each scenario its own name"
            )
        _DEFINED[(source, name)] = (run, place)
        registry[name] = Scenario(
            name=name,
            summary=summary,
            setup=make_setup,
            drive=drive,
            expect=expect if expect is not None else _no_expectation,
            checks=checks,
            settles=settles,
            faults_must_fire=faults_must_fire,
            failures_expected=failures_expected,
            source=source,
            inputs=inputs,
        )
        return drive

    return register


class Given(enum.Enum):
    """What a world runs on when its caller gives it no inputs (an enum member, so that it
    pickles as itself and a drawn ``None`` stays a value of its own)."""

    #: The scenario's simplest inputs (:func:`simplest_inputs`); no inputs for a scenario that
    #: takes none.
    SIMPLEST = "simplest"


SIMPLEST = Given.SIMPLEST


def world_inputs(found: Scenario, given: Any = SIMPLEST) -> Any:
    """The inputs ``found``'s world runs on: ``given``, else the scenario's simplest, as JSON
    reads them back (a tuple is a list), so that a world given them as Python values and the
    same world given them as ``--inputs`` text are one world. None for a scenario that takes
    none; refused for inputs given to one."""
    if found.inputs is None:
        if given is not SIMPLEST:
            raise ValueError(
                f"scenario {found.ref} takes no inputs, and was given {_shown(given)}; declare "
                "what may vary with @scenario(..., inputs=STRATEGY), or leave the inputs out"
            )
        return None
    value = simplest_inputs(found) if given is SIMPLEST else given
    return json.loads(inputs_text(value, found))


def inputs_text(value: Any, found: Scenario | None = None) -> str:
    """``value`` as JSON text, in one line (what ``--inputs`` takes and a command prints), or a
    ValueError that names the value and what inputs must be."""
    whose = f" of scenario {found.ref}" if found is not None else ""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise ValueError(
            f"the inputs{whose}, {_shown(value)}, are not JSON ({error}); inputs are dicts with "
            "string keys, lists, strings, whole numbers, finite floats, booleans and None, so "
            "that a command line can give them back: draw them from strategies of those"
        ) from None


def given_inputs(text: str | None) -> Any:
    """The inputs a search carries as JSON text (None: the scenario's simplest), as
    :func:`~sims.runners._simulate.simulate` takes them."""
    return SIMPLEST if text is None else json.loads(text)


def inputs_from_text(text: str) -> Any:
    """The inputs ``--inputs`` gives, read as JSON, or a ValueError that says what to write."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError as error:
        raise ValueError(
            f"--inputs {text!r} is not JSON ({error}); write the inputs as the command explore "
            """printed prints them, e.g. --inputs '{"orders": 2}'"""
        ) from None
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON number: inputs hold finite numbers only")


#: Each scenario's simplest inputs, found once per process (by its strategy's identity).
_SIMPLEST: dict[int, tuple[st.SearchStrategy[Any], str]] = {}


def simplest_inputs(found: Scenario) -> Any:
    """The simplest value of ``found``'s inputs strategy, as Hypothesis shrinks towards it: the
    same in every process (the search is fixed: no database, a fixed seed, the draws depending
    on nothing but that seed)."""
    strategy = found.inputs
    assert strategy is not None
    cached = _SIMPLEST.get(id(strategy))
    if cached is None or cached[0] is not strategy:
        try:
            with seed_only():
                value = find(
                    strategy,
                    lambda _: True,
                    settings=settings(
                        max_examples=10,
                        database=None,
                        deadline=None,
                        phases=(Phase.generate, Phase.shrink),
                        suppress_health_check=list(HealthCheck),
                    ),
                    random=Random(0),
                )
        except NoSuchExample:
            raise ValueError(
                f"the inputs strategy of scenario {found.ref} draws no value at all (is it "
                "filtered to nothing?); give one that draws JSON values"
            ) from None
        cached = (strategy, inputs_text(value, found))
        _SIMPLEST[id(strategy)] = cached
    return json.loads(cached[1])


def is_scenario_name(name: object) -> bool:
    """Whether ``name`` can name a scenario: one word, that ``FILE.py:NAME`` can be typed with
    (:meth:`ScenarioRef.parse` takes what follows the last ':', stripped) and that ``list`` can
    print as the first word of its line."""
    return (
        isinstance(name, str)
        and name.isprintable()
        and bool(name)
        and not any(character.isspace() or character == ":" for character in name)
    )


#: One run of a file's top-level code: its namespace and its code object. A file imported twice
#: runs in two namespaces; a file reloaded in its old namespace runs freshly compiled code.
_Run = tuple[dict[str, Any], CodeType]

#: Where each scenario was defined, by (file, name): the run of the file's top-level code that
#: defined it (None for a scenario defined later, by a function called then), and FILE:LINE.
_DEFINED: dict[tuple[str | None, str], tuple[_Run | None, str]] = {}


def _defined_at(drive: Drive) -> tuple[_Run | None, str]:
    """Which run of its file's top-level code is defining ``drive``, and where, as FILE:LINE."""
    namespace = getattr(drive, "__globals__", None)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is namespace and frame.f_code.co_name == "<module>":
            where = f"{display_path(frame.f_code.co_filename)}:{frame.f_lineno}"
            return (frame.f_globals, frame.f_code), where
        frame = frame.f_back
    code = getattr(drive, "__code__", None)
    if code is None:
        return None, repr(drive)
    return None, f"{display_path(code.co_filename)}:{code.co_firstlineno}"


def _same_run(one: _Run | None, other: _Run | None) -> bool:
    return one is not None and other is not None and one[0] is other[0] and one[1] is other[1]


def _setup_of(
    setup: WorldSetup | Callable[[int], WorldSetup] | None,
) -> Callable[[int], WorldSetup]:
    if setup is None:
        return fixed()
    if isinstance(setup, WorldSetup):
        return lambda seed: setup
    return setup


def _source_of(drive: Drive) -> str | None:
    """The file a scenario comes from; None for the simulator's own."""
    module = getattr(drive, "__module__", None) or ""
    if module == "sims" or module.startswith("sims."):
        return None
    path = getattr(sys.modules.get(module), "__file__", None) or drive.__code__.co_filename
    return str(Path(path).resolve())


def fixed(plan: FaultPlan = NO_FAULTS, **options: Any) -> Callable[[int], WorldSetup]:
    """A setup that does not depend on the seed (beyond scheduling and latency draws)."""
    return lambda seed: WorldSetup(plan=plan, **options)


def expect_all(*checks: tuple[bool, str]) -> list[str]:
    """The texts of the checks that failed."""
    return [text for ok, text in checks if not ok]


# -- references -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ScenarioRef:
    """How to find a scenario again, in this process or another: a name, and the file that
    defines it (an absolute path; None for a built-in scenario). Picklable."""

    name: str
    path: str | None = None
    #: ``FILE.py:NAME`` exactly as it was typed, when it was (see :attr:`recorded`).
    spelled: str | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def recorded(self) -> str:
        """The reference as a trace records it: as it was typed, else with the file's absolute
        path. Never relative to the working folder, which would make the same world's trace
        differ from one folder to another."""
        if self.path is None:
            return self.name
        return self.spelled if self.spelled is not None else f"{self.path}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> ScenarioRef:
        """``NAME`` (built-in) or ``FILE.py:NAME`` (a user's file, relative to the working folder
        or absolute)."""
        text = text.strip()
        file, colon, name = text.rpartition(":")
        if not colon:
            if text.endswith(".py"):
                raise ValueError(
                    f"scenario {text!r} names a file but no scenario; write {text}:NAME "
                    f"(python -m sims list {text} shows the names)"
                )
            return cls(name=text)
        if not file.endswith(".py") or not name:
            raise ValueError(f"scenario {text!r} must be NAME or FILE.py:NAME")
        return cls(name=name, path=os.path.abspath(file), spelled=text)

    def __str__(self) -> str:
        """The reference as a person types it: the path relative to the working folder when the
        file is inside it."""
        if self.path is None:
            return self.name
        return f"{display_path(self.path)}:{self.name}"

    def load(self) -> Scenario:
        """The scenario this names, loading its file the first time (once per process)."""
        if self.path is None:
            found = SCENARIOS.get(self.name)
            if found is None:
                raise ValueError(
                    f"no scenario {self.name!r}; the scenarios are: {', '.join(SCENARIOS)}"
                    + did_you_mean(self.name, SCENARIOS)
                )
            return found
        defined = load_file(self.path)
        found = defined.get(self.name)
        if found is None:
            names = ", ".join(defined) or "none (decorate a drive function with @sims.scenario)"
            raise ValueError(
                f"no scenario {self.name!r} in {display_path(self.path)}; its scenarios are: "
                f"{names}{did_you_mean(self.name, defined)}"
            )
        return found


def display_path(path: str) -> str:
    """``path`` relative to the working folder when it is inside it, else as it is."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def load_file(path: str | Path) -> dict[str, Scenario]:
    """The scenarios a user's Python file defines, by name (the file runs once per process)."""
    resolved = Path(path).resolve()
    key = str(resolved)
    if key in _FILES:
        return _FILES[key]
    shown = display_path(str(path))
    if resolved.is_dir():
        raise ValueError(f"{shown} is a folder; name a Python file that defines scenarios")
    if not resolved.is_file():
        raise ValueError(f"no file {shown}")
    # A private module name per file, so two files with one stem do not collide; the file's
    # folder goes on the path so that it can import its neighbours.
    module_name = _module_name(key)
    # Compiled with probes in its branches, as are the user's modules it imports while it loads
    # (explore measures which a world took: sims/scenarios/_instrument.py).
    spec = importlib.util.spec_from_file_location(
        module_name, resolved, loader=users_loader(module_name, str(resolved))
    )
    if spec is None or spec.loader is None:
        raise ValueError(f"{shown} cannot be loaded as Python; name a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    if str(resolved.parent) not in sys.path:
        sys.path.insert(0, str(resolved.parent))
    # The content hash is taken as the file is loaded, so a trace records the code that ran even
    # if the file changes later in the process; replay runs a file only when this hash matches.
    _SHA256[key] = file_sha256(resolved)
    try:
        with loading_users_code():
            spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(module_name, None)
        _FILES.pop(key, None)
        _SHA256.pop(key, None)
        raise WorldFileError(shown, error) from error
    return _FILES.setdefault(key, {})


def _module_name(key: str) -> str:
    """The private name a user's file (by its resolved path) is loaded as."""
    return "sims_world_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def file_module(path: str | Path) -> ModuleType:
    """The module a user's Python file runs as, loaded as :func:`load_file` loads it (once per
    process), for a caller that reads the file's other names (``python -m sims before-deploy
    FILE.py:NAME`` reads a job definition)."""
    load_file(path)
    resolved = Path(path).resolve()
    module = sys.modules.get(_module_name(str(resolved)))
    if module is not None:
        return module
    # Imported by other means first (a test importing it as a module): that module is the file.
    for found in list(sys.modules.values()):
        file = getattr(found, "__file__", None)
        if isinstance(file, str) and Path(file).resolve() == resolved:
            return found
    raise ValueError(f"{display_path(str(path))} was not loaded as a module; name a .py file")


#: The sha256 of each world file's content as it was loaded, by resolved path.
_SHA256: dict[str, str] = {}


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, in hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def loaded_world_sha256(path: str) -> str:
    """The sha256 of the world file at ``path`` as this process loaded it (loading it if not yet:
    the hash is of the code that runs)."""
    load_file(path)
    key = str(Path(path).resolve())
    # A file imported by other means (a test importing it as a module) registered its scenarios
    # without passing here: its bytes now are the best record there is.
    return _SHA256.setdefault(key, file_sha256(key))


class WorldFileError(ValueError):
    """A user's world file raised while it was loaded."""

    def __init__(self, shown: str, error: Exception) -> None:
        where = ""
        if isinstance(error, SyntaxError) and error.lineno is not None:
            where = f" (line {error.lineno})"
        else:
            frames = [f for f in _frames(error) if Path(f[0]).name == Path(shown).name]
            if frames:
                where = f" (line {frames[-1][1]})"
        super().__init__(
            f"{shown} failed to load{where}: {type(error).__name__}: {error}; fix the file "
            f"and try again (python {shown} shows the whole traceback)"
        )


def _frames(error: BaseException) -> list[tuple[str, int]]:
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return frames


def find_scenario(reference: str | ScenarioRef) -> Scenario:
    """The scenario ``reference`` names (``NAME``, ``FILE.py:NAME`` or a :class:`ScenarioRef`)."""
    ref = reference if isinstance(reference, ScenarioRef) else ScenarioRef.parse(reference)
    return ref.load()
