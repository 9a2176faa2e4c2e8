"""The oracle: the spec, restated as an executable model, that judges a trace.

What it does: :mod:`._spec` states the spec's constants (read it beside the spec); :mod:`._model`
and its rule modules (``_kernel``, ``_drive``, ``_starts``,
``_steps``, ``_outcome``, ``_records``, ``_erasure``) predict what the store and the kernel must
answer; :mod:`._oracle` replays a trace through that model; :mod:`._checks` adds the invariant
checks and explains what it allows (a late-BEGIN double run); :mod:`._probes` names every edge of
the spec the oracle has a rule for and counts the worlds that reach it.

What it may import: the standard library, attrs, ``sims._trace`` and ``sims._numbers``, and from
``driver`` only the ISO time spelling. What it must not import: any decision code of ``driver``
(the kernel, the drive, the coordinator), its constants (a changed constant would move the model
with the code), ``scopehost``, or another part of ``sims``. It judges the code, so it must not
share the code's mistakes; ``tests/sims/test_layout.py`` holds these rules.

Its public names are re-exported from :mod:`sims`.
"""
