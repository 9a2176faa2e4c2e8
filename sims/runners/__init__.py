"""Runners: a world run with a seed, checked, and run again over many seeds.

What it does: :mod:`._run` runs one world under a seeded scheduler on virtual time;
:mod:`._simulate` runs a scenario and checks it (what every command and test calls);
:mod:`._outcome` is what a world came to and the command that replays it; :mod:`._sweep` and
:mod:`._dask` run seeds in processes or on a Dask cluster; :mod:`._testing` runs worlds inside a
user's own tests.

What it may import: every part below it (world, faults, oracle, mutants, scenarios) and the
timeline's story (a world that fails in a user's test is told in sentences). What it must not
import: the search or the command line.
"""
