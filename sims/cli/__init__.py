"""The command line: ``python -m sims list | run | sweep | replay | explore | conformance``.

What it does: parses the commands and prints what the runners, the search, the timeline and the
conformance kit return, with the exit codes the design brief states (0 clean, 1 a finding, 2 a usage
error). It may import every part of ``sims``; no part of ``sims`` imports it.
"""
