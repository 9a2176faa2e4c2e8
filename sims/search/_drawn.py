"""Stage 6: the plans Hypothesis draws (:mod:`._aimed`), in rounds, first of one fault, then of
several.

Hypothesis's ``find`` calls its test function one plan at a time and waits for each answer, which
would keep a search to one core. But without its ``target`` phase (not used: see
:mod:`._explore`), what Hypothesis draws next does not depend on the answers, only on its seed,
until an answer is yes. So a round is drawn first, by a ``find`` whose test says no to every plan
and keeps it, and the search runs the round's plans on as many workers as it has. When one of
them fails, the same round is drawn again with the same seed: the test says no again up to that
plan, yes to it, and from there Hypothesis shrinks it as its own, each candidate run in this
process (:meth:`Drawn.shrink`). Its shrinking runs one world after another, here, whatever the
number of workers.

Each round is a ``find`` of its own with its own seed: a bounded number of plans each (so a long
search holds one round's data, not Hypothesis's record of every plan it ever drew), and no plan
the search already ran (the same plan again teaches it nothing).

A scenario with inputs (``@scenario(inputs=...)``) has them drawn with the plans: each round
draws (inputs, plan) pairs, :class:`Varied`, from the one strategy, so Hypothesis shrinks both
together. Drawn with no faults at all (``inputs_only``), the rounds are the search's early stage
of inputs alone: a bug that needs no fault, only inputs such as two orders sharing an address, is
found there for the cost of a few dozen clean worlds.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from random import Random
from typing import Any, TypeAlias

import attrs
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from .._seeded import seed_only
from ..faults._plan import NO_FAULTS, FaultPlan
from ..scenarios._registry import inputs_text
from ._aimed import aimed_plans
from ._shape import WorldShape

#: The most plans of one fault Hypothesis draws: past a couple of hundred, it mostly draws plans
#: it has drawn already.
ONE_FAULT_PLANS = 200
#: How many plans each later round draws.
ROUND_PLANS = 100
#: The most worlds of inputs alone, with no fault, the search's early stage runs.
INPUTS_ONLY_WORLDS = 50
#: The fewest plans a round draws.
_FEWEST = 50
#: How many plans the search remembers having run, so as not to run one again (the oldest are
#: forgotten first: a long search's memory stays flat).
REMEMBERED = 100_000


@attrs.frozen
class Varied:
    """A plan to run on inputs of its own: the scenario's inputs as JSON text (hashable, and one
    text for one value in every process), with the plan."""

    inputs: str
    plan: FaultPlan


#: What a search runs a world under: a plan (on the search's current inputs), or a plan with
#: inputs of its own.
Trial: TypeAlias = FaultPlan | Varied


def _varied(pair: tuple[Any, FaultPlan]) -> Varied:
    """What Hypothesis drew, as the search runs it; a drawn value that is not JSON is refused
    with the remedy (:func:`inputs_text`)."""
    return Varied(inputs_text(pair[0]), pair[1])


class Stopped(BaseException):
    """Raised inside Hypothesis's test function to stop ``find`` at once (the time budget ran
    out, or Ctrl-C) and caught right outside it. A BaseException, not an Exception: Hypothesis
    takes an Exception for a failure of the test and shrinks it, where this one it lets through."""


@attrs.frozen
class Round:
    """One ``find``: plans of up to ``max_faults`` faults (none: inputs alone), drawn with
    ``seed``, at most ``size``."""

    max_faults: int
    seed: int
    size: int


class Tried:
    """The plans a search has run or is about to, by a digest of their text: a plan drawn again is
    not run again. Bounded: past :data:`REMEMBERED` plans, the oldest are forgotten."""

    def __init__(self, most: int = REMEMBERED) -> None:
        self._most = most
        # An OrderedDict, not a dict: forgetting a dict's oldest key scans the slots its earlier
        # deletions left, so past the bound every plan cost more (400 000 plans took 115 s).
        self._digests: OrderedDict[bytes, None] = OrderedDict()

    def add(self, plan: Trial) -> bool:
        """Remember ``plan``; False when it was remembered already."""
        digest = hashlib.blake2b(repr(plan).encode(), digest_size=12).digest()
        if digest in self._digests:
            return False
        self._digests[digest] = None
        if len(self._digests) > self._most:
            self._digests.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._digests)


def _settings(size: int, *phases: Phase) -> settings:
    return settings(
        max_examples=max(1, size),
        database=None,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        # One failing plan is shrunk. Looking on for other bugs, Hypothesis stops once ten
        # seconds of real time have passed since the first: how many worlds a shrink ran, and
        # the plan it shrank to, then hung on the machine's load, not on the seed.
        report_multiple_bugs=False,
    )


@attrs.define
class Drawn:
    """Stage 6's plans, round by round: :meth:`plans` yields them, :meth:`shrink` shrinks one
    that failed as Hypothesis shrinks what it drew."""

    shape: WorldShape
    max_faults: int
    #: The most plans to yield in all (what is left of the search's world budget).
    most: int
    tried: Tried
    #: Raises :class:`Stopped` when the search must stop (the time budget, Ctrl-C).
    check: Callable[[], None]
    #: The scenario's inputs strategy, drawn with each plan (None: the plans alone).
    inputs: st.SearchStrategy[Any] | None = None
    #: Draw inputs alone, each with no fault, in one round (the search's early stage).
    inputs_only: bool = False
    #: Whether a round of several faults drew no plan the search had not run: nothing new left.
    exhausted: bool = False
    #: The round each plan of the last two rounds came from (older plans are forgotten).
    _origin: dict[Trial, Round] = attrs.field(factory=dict)
    _previous: dict[Trial, Round] = attrs.field(factory=dict)
    #: Each strategy built once: Hypothesis validates a new one, at a cost, in every round.
    _strategies: dict[int, st.SearchStrategy[Any]] = attrs.field(factory=dict)

    def _strategy(self, max_faults: int) -> st.SearchStrategy[Any]:
        """Plans of up to ``max_faults`` faults; with inputs, (inputs, plan) pairs, drawn as
        they come (made :class:`Varied` by :func:`_trial`, so a value that is not JSON is told
        as the user's mistake, not taken by Hypothesis for a failing example)."""
        if max_faults not in self._strategies:
            plans = (
                st.just(NO_FAULTS)
                if max_faults == 0
                else aimed_plans(self.shape, max_faults=max_faults)
            )
            self._strategies[max_faults] = (
                plans if self.inputs is None else st.tuples(self.inputs, plans)
            )
        return self._strategies[max_faults]

    def _trial(self, drawn: Any) -> Trial:
        if self.inputs is None:
            assert isinstance(drawn, FaultPlan)
            return drawn
        return _varied(drawn)

    def plans(self) -> Iterator[FaultPlan]:
        """The plans of a search whose scenario takes no inputs (:meth:`trials`, typed so)."""
        for trial in self.trials():
            assert isinstance(trial, FaultPlan), "a scenario with inputs: read trials()"
            yield trial

    def trials(self) -> Iterator[Trial]:
        """The plans (with inputs, for a scenario that takes them), round by round."""
        yielded = 0
        for round_ in self._rounds():
            wanted = self.most - yielded
            if wanted <= 0:
                return
            # Never a round of a few: each begins with the simplest plans, which have run, and a
            # round of nothing new must mean there is nothing new. Its size is kept: it steers
            # Hypothesis, and the round is drawn again at the same size to shrink.
            round_ = attrs.evolve(round_, size=min(round_.size, max(wanted, _FEWEST)))
            # The clean world ran (a plan of no faults on inputs of its own has not).
            fresh = [plan for plan in self._draw(round_) if _new(plan)][:wanted]
            if not fresh and round_.max_faults > 1:
                self.exhausted = True
                return
            self._previous, self._origin = self._origin, dict.fromkeys(fresh, round_)
            yielded += len(fresh)
            yield from fresh

    def _rounds(self) -> Iterator[Round]:
        if self.inputs_only:
            yield Round(max_faults=0, seed=0, size=min(self.most, INPUTS_ONLY_WORLDS))
            return
        yield Round(max_faults=1, seed=0, size=ONE_FAULT_PLANS)
        seed = 1
        while True:
            yield Round(max_faults=self.max_faults, seed=seed, size=ROUND_PLANS)
            seed += 1

    def _draw(self, round_: Round) -> list[Trial]:
        """The plans ``round_`` draws that the search has not run, in Hypothesis's order."""
        drawn: list[Trial] = []

        def keep(value: Any) -> bool:
            self.check()
            plan = self._trial(value)
            if self.tried.add(plan):
                drawn.append(plan)
            return False

        # NoSuchExample: every plan drawn; Stopped: the search must stop. Either way the plans
        # drawn so far are run.
        with contextlib.suppress(NoSuchExample, Stopped), seed_only():
            find(
                self._strategy(round_.max_faults),
                keep,
                settings=_settings(round_.size, Phase.generate),
                random=Random(round_.seed),
            )
        return drawn

    def shrink(self, plan: FaultPlan, fails: Callable[[FaultPlan], bool]) -> FaultPlan:
        """:meth:`shrink_trial` for a scenario that takes no inputs, typed so."""
        found = self.shrink_trial(plan, lambda trial: isinstance(trial, FaultPlan) and fails(trial))
        assert isinstance(found, FaultPlan)
        return found

    def shrink_trial(self, plan: Trial, fails: Callable[[Trial], bool]) -> Trial:
        """``plan``, which failed, shrunk by Hypothesis from the round that drew it; each
        candidate is run by ``fails`` (which raises :class:`Stopped` when the search must stop:
        the smallest failing plan so far is kept). Hypothesis's ``Flaky`` is let through."""
        round_ = self._origin.get(plan) or self._previous.get(plan)
        if round_ is None:
            return plan
        smallest = plan
        replaying = True

        def condition(value: Any) -> bool:
            nonlocal smallest, replaying
            candidate = self._trial(value)
            if replaying:
                # Drawn again in the same order: every plan before it passed (or ran already).
                replaying = candidate != plan
                return not replaying
            if candidate == plan:
                return True  # known to fail: Hypothesis asks again as it begins to shrink
            if fails(candidate):
                smallest = candidate
                return True
            return False

        try:
            with seed_only():
                found = find(
                    self._strategy(round_.max_faults),
                    condition,
                    settings=_settings(round_.size, Phase.generate, Phase.shrink),
                    random=Random(round_.seed),
                )
        except NoSuchExample:
            return plan  # not drawn again where it was: shrunk by the search's own shrinker only
        except Stopped:
            return smallest
        return self._trial(found)


def _new(plan: Trial) -> bool:
    """Whether ``plan`` is not the clean world, which the search ran first."""
    return isinstance(plan, Varied) or bool(plan)
