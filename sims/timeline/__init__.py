"""The timeline and the story: a trace, drawn as a page and a text and told as sentences.

What it does: :mod:`._reader` reads a trace into the timeline's model (:mod:`._model`), with
:mod:`._calls` for the calls to the world's services and :mod:`._world_end` for the world's end;
:mod:`._page` draws the HTML page from it (with :mod:`._head`, :mod:`._lanes`,
:mod:`._service_lanes`, :mod:`._legend`, :mod:`._svg`, :mod:`._scale` and the page's script in
:mod:`._script`); :mod:`._text` draws it for a terminal; :mod:`._story` tells a trace as numbered
sentences; :mod:`._holds` says what let a held leg go; :mod:`._render` is the entry.

What it may import: ``sims._trace`` and ``sims._numbers``, the oracle (to judge the trace it draws),
the faults (a plan's text read back from the trace) and the mutants' catalogue (a mutant's
description). What it must not import: the world, the runners, the scenarios, the search,
``scopehost`` or ``driver``: it reads only the trace, so a trace from anywhere draws the same
(``tests/sims/test_layout.py``).

Its public names are re-exported from :mod:`sims`.
"""
