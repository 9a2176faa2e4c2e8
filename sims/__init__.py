"""The deterministic simulator of the job-run system.

One seed determines a whole world — Trio's scheduling, every latency and fault, every id — so any
interleaving of drives, scopes and faults can be produced, checked against the spec's guarantees,
replayed byte for byte, shrunk and looked at. ``python -m sims list`` shows the scenarios.
"""

from ._checks import CheckReport, Finding, TraceChecker, check_trace
from ._explore import explore_plans, fault_plans
from ._faults import (
    CrashDrive,
    DelayLeg,
    DropLeg,
    Evict,
    Fault,
    FaultPlan,
    LateRequest,
    PauseDrive,
    StoreClockFault,
    UpstreamFailure,
    draw_plan,
    plan_from_text,
)
from ._mutants import MUTANTS
from ._outcome import Facts, Simulation
from ._run import WorldOutcome, WorldSetup, run_world, seed_scheduler
from ._scenarios import SCENARIOS, Scenario, scenario
from ._simulate import scenario_names, simulate
from ._story import story_lines
from ._sweep import SeedSummary, SweepReport, parse_seeds, sweep
from ._timeline import render_html, render_terminal, write_timeline
from ._trace import Trace
from ._upstream import Upstream, UpstreamUnavailable
from ._world import DriveSpec, SimDrive, World

__all__ = [
    "MUTANTS",
    "SCENARIOS",
    "CheckReport",
    "CrashDrive",
    "DelayLeg",
    "DriveSpec",
    "DropLeg",
    "Evict",
    "Facts",
    "Fault",
    "FaultPlan",
    "Finding",
    "LateRequest",
    "PauseDrive",
    "Scenario",
    "SeedSummary",
    "SimDrive",
    "Simulation",
    "StoreClockFault",
    "SweepReport",
    "Trace",
    "TraceChecker",
    "Upstream",
    "UpstreamFailure",
    "UpstreamUnavailable",
    "World",
    "WorldOutcome",
    "WorldSetup",
    "check_trace",
    "draw_plan",
    "explore_plans",
    "fault_plans",
    "parse_seeds",
    "plan_from_text",
    "render_html",
    "render_terminal",
    "run_world",
    "scenario",
    "scenario_names",
    "seed_scheduler",
    "simulate",
    "story_lines",
    "sweep",
    "write_timeline",
]
