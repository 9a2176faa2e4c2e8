"""The deterministic simulator of the job-run system.

One seed determines a whole world — Trio's scheduling, every latency and fault, every id — so any
interleaving of drives, scopes and faults can be produced, checked against the spec's guarantees,
replayed byte for byte, shrunk and looked at. ``python -m sims list`` shows the scenarios.

Simulating your own job needs only the names here: :func:`scenario` registers a world-driving
function; the :class:`World` it gets adds drives (:class:`DriveSpec`), your jobs
(``World.add_job``), starts runs and ticks drives; :class:`WorldSetup` holds the scopes, the lease
and the :class:`FaultPlan`; :func:`record_effect` records what a step body did
(:func:`record_effect_once` records it only if it is new, in one scope call), and a scenario's
``checks`` read the :class:`Trace` (:func:`effects_in` counts effects). The job's outside world
is declared as :class:`Service` values (``WorldSetup(services=...)``), called from a handler with
:func:`call_service`; :func:`at_most_once` and :func:`once_per_done_run` are ready-made checks of
their effects. Run it with
``python -m sims run FILE.py:NAME``, or in a test with :func:`check_worlds` (the pytest fixture
``sims_worlds``). docs/simulating-your-jobs.md walks through it.
"""

from driver import (
    JobDefinition,
    JobPassContext,
    JobPassResult,
    JobRun,
    RetryPolicy,
    ServiceDeclined,
    ServiceError,
    ServiceTimedOut,
    ServiceUnavailable,
)

from ._seeds import parse_seeds
from ._trace import Trace
from .deploys import DeployFinding, DeployInputError, DeployVerdict, RunVerdict, check_deploy
from .faults._plan import (
    NO_FAULTS,
    CrashAfter,
    CrashDrive,
    DelayCallback,
    DelayLeg,
    Deploy,
    DeployAfter,
    DropCallback,
    DropLeg,
    Evict,
    EvictAfter,
    Fault,
    FaultPlan,
    HoldLeg,
    LateRequest,
    PartialBatch,
    PauseDrive,
    PctSchedule,
    RateLimited,
    RepeatCallback,
    RepeatStart,
    ServiceOutage,
    StaleRead,
    StoreClockFault,
    UpstreamFailure,
    draw_plan,
    plan_from_text,
)
from .mutants._catalog import MUTANTS
from .oracle._checks import TraceChecker, check_trace
from .oracle._report import CheckReport, Finding, UserFinding
from .runners._outcome import Facts, Simulation, replay_command
from .runners._run import WorldOutcome, WorldSetup, run_world
from .runners._simulate import WorldError, scenario_names, simulate
from .runners._sweep import SeedSummary, SweepReport, sweep
from .runners._testing import WorldFailed, check_worlds, describe_failure
from .scenarios._deploy_checks import carries_the_ledger
from .scenarios._effect_checks import at_most_once, once_per_done_run, run_keys
from .scenarios._registry import (
    SCENARIOS,
    Expectation,
    Scenario,
    ScenarioRef,
    TraceCheck,
    find_scenario,
    load_file,
    scenario,
)
from .search._explore import (
    Exploration,
    SearchReport,
    WorldShape,
    explore_plans,
    fault_plans,
    fault_plans_for,
    search,
    world_shape,
)
from .search._shrink import shrink_plan
from .timeline._render import render_html, render_terminal, write_timeline
from .timeline._story import story_lines
from .world._effects import (
    effect_key,
    effects_at,
    effects_in,
    record_effect,
    record_effect_once,
)
from .world._fence import DriveKilled
from .world._marks import sometimes
from .world._provider import call_back, later, now_ms
from .world._scheduling import seed_scheduler
from .world._services import (
    Operation,
    Service,
    ServiceRefused,
    ServiceTimeout,
    call_service,
)
from .world._upstream import Upstream, UpstreamUnavailable
from .world._wire import ServiceCallRecord, service_calls, service_states
from .world._world import DriveSpec, SimDrive, World

__all__ = [
    "MUTANTS",
    "NO_FAULTS",
    "SCENARIOS",
    "CheckReport",
    "CrashAfter",
    "CrashDrive",
    "DelayCallback",
    "DelayLeg",
    "Deploy",
    "DeployAfter",
    "DeployFinding",
    "DeployInputError",
    "DeployVerdict",
    "DriveKilled",
    "DriveSpec",
    "DropCallback",
    "DropLeg",
    "Evict",
    "EvictAfter",
    "Expectation",
    "Exploration",
    "Facts",
    "Fault",
    "FaultPlan",
    "Finding",
    "HoldLeg",
    "JobDefinition",
    "JobPassContext",
    "JobPassResult",
    "JobRun",
    "LateRequest",
    "Operation",
    "PartialBatch",
    "PauseDrive",
    "PctSchedule",
    "RateLimited",
    "RepeatCallback",
    "RepeatStart",
    "RetryPolicy",
    "RunVerdict",
    "Scenario",
    "ScenarioRef",
    "SearchReport",
    "SeedSummary",
    "Service",
    "ServiceCallRecord",
    "ServiceDeclined",
    "ServiceError",
    "ServiceOutage",
    "ServiceRefused",
    "ServiceTimedOut",
    "ServiceTimeout",
    "ServiceUnavailable",
    "SimDrive",
    "Simulation",
    "StaleRead",
    "StoreClockFault",
    "SweepReport",
    "Trace",
    "TraceCheck",
    "TraceChecker",
    "Upstream",
    "UpstreamFailure",
    "UpstreamUnavailable",
    "UserFinding",
    "World",
    "WorldError",
    "WorldFailed",
    "WorldOutcome",
    "WorldSetup",
    "WorldShape",
    "at_most_once",
    "call_back",
    "call_service",
    "carries_the_ledger",
    "check_deploy",
    "check_trace",
    "check_worlds",
    "describe_failure",
    "draw_plan",
    "effect_key",
    "effects_at",
    "effects_in",
    "explore_plans",
    "fault_plans",
    "fault_plans_for",
    "find_scenario",
    "later",
    "load_file",
    "now_ms",
    "once_per_done_run",
    "parse_seeds",
    "plan_from_text",
    "record_effect",
    "record_effect_once",
    "render_html",
    "render_terminal",
    "replay_command",
    "run_keys",
    "run_world",
    "scenario",
    "scenario_names",
    "search",
    "seed_scheduler",
    "service_calls",
    "service_states",
    "shrink_plan",
    "simulate",
    "sometimes",
    "story_lines",
    "sweep",
    "world_shape",
    "write_timeline",
]
