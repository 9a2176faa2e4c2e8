"""Search: looking for the fault plan that breaks a world, and shrinking it.

What it does: :mod:`._explore` draws fault plans aimed at a world's shape and lets Hypothesis
search and shrink them (``python -m sims explore``, ``fault_plans_for``).

What it may import: the runners and everything below them. What it must not import: the timeline or
the command line.
"""
