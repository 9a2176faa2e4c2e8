"""Search: looking for the fault plan that breaks a world, and shrinking it.

What it does: :mod:`._explore` searches fault plans aimed at a world's shape (:mod:`._shape`,
:mod:`._aimed`) in stages (:mod:`._stages`, Hypothesis's in :mod:`._drawn`), runs their worlds
through one executor, in this process or on many (:mod:`._executor`), and shrinks what fails
(:mod:`._shrink`) (``python -m sims explore``, ``fault_plans_for``).

What it may import: the runners and everything below them. What it must not import: the timeline or
the command line.
"""
