"""The world: one seeded simulation of scopes, drives, jobs and an upstream, with its trace.

What it does: :mod:`._world` builds the scopes on one host and the drives that call them through
faulty links, applies a fault plan, and writes every event into the trace; :mod:`._recording` is the
drive that tells the trace what it was asked (which jobs, which leases, what each call returned),
so the oracle can judge the kernel's decisions from outside; :mod:`._effects` is how a step body
records what it did; :mod:`._wire` reads a world's service calls and its services' final states
back from its trace, for a user's check; :mod:`._upstream` is a flaky outside service;
:mod:`._provider`, :mod:`._own_work`, :mod:`._lag` and :mod:`._callbacks` give a service
a real provider's behaviour (its clock and its own later work, reads that lag, callbacks into the
job's world); :mod:`._scheduling` seeds Trio's scheduler; :mod:`._fence` makes a crash a kill (a
killed drive's leftover code reaches nothing).

What it may import: ``driver``, ``scopehost``, ``sims._trace``, ``sims._numbers``, ``sims._seeds``
and ``sims.faults`` (the plan it applies). What it must not import: the oracle, the timeline, the
runners or the search; they read what a world wrote, never the other way round
(``tests/sims/test_layout.py``).

Its public names are re-exported from :mod:`sims`.
"""
