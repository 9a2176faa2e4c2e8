"""Fault plans: the faults a world can suffer, as values, their grammar and their checks.

What it does: :mod:`._plan` defines every fault kind, :class:`FaultPlan`, ``draw_plan`` (a seed's
random plan) and ``plan_from_text`` (a plan read back from its printed code, without running it);
:mod:`._check` checks a plan against the world it strikes (each fault names a drive, an operation
and a call that exist).

What it may import: the standard library, attrs, and ``driver``'s names for the store port's
operations. What it must not import: any other part of ``sims`` (the world, the timeline and the
search all read plans; a plan reads nothing of theirs).

Its public names are re-exported from :mod:`sims`.
"""
