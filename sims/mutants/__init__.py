"""Mutants: stores and kernels each broken in ONE rule of the spec, to show the checks notice.

What it does: :mod:`._catalog` names every mutant with the rule it breaks; :mod:`._ablation` swaps
one fragment of the real source for the length of one world. docs/mutants.md lists them.

What it may import: ``driver`` and ``scopehost`` (it breaks them). What it must not import:
any other part of ``sims``.
"""
