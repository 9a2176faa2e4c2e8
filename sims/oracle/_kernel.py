"""The oracle's kernel: every decision a drive and a pass must make, recomputed from the trace.

Theory of operation
-------------------
A pass is followed by its lease owner from the claim the drive sent to the outcome it wrote. The
model knows, from the trace and never from the kernel's own state: the job's registration (policy,
lease), the drive call's budget, the claimed row as the store returned it, what the handler asked
for (``hx.*`` events: steps with their own policies, bodies that ran, counts, what it returned or
threw), and every reply the drive received. From those it says what the spec makes the kernel do
next — BEGIN or miss, takeover exhaustion, run a step body or return its memo, a spent step, a
reused step name, lost, retry or fail (by the job's policy AND the step's own), the backoff window
and its jitter bounds, the omitted cursor kept, counters merged, a deferral charging nothing — and
compares it with what the kernel sent. Each difference is reported naming the rule.

The rules live in one module per concern: the drive call, the claim and BEGIN or miss
(``_model_drive``); starts and joins (``_model_starts``); the step ledger (``_model_steps``); and
the outcome a pass writes (``_model_outcome``). They share the records of ``_model_records``.
"""

from __future__ import annotations

from ._drive import DriveRules
from ._outcome import OutcomeRules
from ._starts import StartRules
from ._steps import StepRules


class KernelModel(DriveRules, StartRules, StepRules, OutcomeRules):
    """Follows drives and passes through the trace and reports every decision the spec forbids."""
