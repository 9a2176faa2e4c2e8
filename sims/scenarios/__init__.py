"""Scenarios: named worlds, each with the outcome the spec promises for it.

What it does: :mod:`._registry` is ``@scenario``, the registry and the loading of a user's world
file; :mod:`._catalog` holds the built-in scenarios (``python -m sims list``); :mod:`._swarm` is the
``random`` scenario's world, which switches on a random subset of every feature the spec has a rule
for.

What it may import: the world, the faults and the runners' outcome types. What it must not import:
the timeline or the command line.
"""
