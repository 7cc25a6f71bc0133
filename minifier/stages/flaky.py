"""Flaky failures: how often one shows, and minifying it with repeated questions (docs/minify.md, "What happens").

A failure that shows in some runs only (a race, a random choice in a compiler, a
resource limit) must get the same verdict on every run of pt2kit. Its questions are
asked one at a time, in a fixed order: a failure decided by state the program's
compiles share (a counter file, a cache) would otherwise hang on which of two
side-by-side compiles reaches it first. When the culprit's second look does not
fail, :func:`failure_rate` measures it over :data:`LOOKS` runs: a failure seen again
is minified, one seen once only is :class:`~pt2kit.errors.FlakyFailure` (exit 1),
unless every other look failed the same other way: that is no flake but a graph that
runs alone otherwise than in the program (:class:`~pt2kit.errors.NotReproducible`,
exit 5); nor is one the program shows again when run once more
(:func:`minifier.bisect.bisection.flaky_or_not_alone`, exit 5). Minifying a flaky failure, every question is asked up to :func:`tries_for`
times and counts as failing when any run fails that way (:func:`repeated`): enough
runs that a candidate failing as often as the original is caught with
:data:`CONFIDENCE`. The repro loops the same number of times
(:func:`minifier.repro.writer.render`'s ``tries``), and ``report.json`` carries the ``failure_rate``.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

from ..unit.case import GraphCase
from ..unit.check import Check
from pt2kit.errors import FlakyFailure, NotReproducible
from ..isolation.session import Session
from pt2kit.signature import Kind, Signature
from .run import Outcome, run_case

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


#: Looks at a failure that did not repeat, to measure how often it shows (docs/minify.md, "What happens").
LOOKS = 8


def failure_rate(
    session: Session, case: GraphCase, stage: str, first: Outcome, second: Outcome, *, accuracy: Accuracy, label: str
) -> float:
    """How often ``case`` fails through ``stage`` the way it first did, over :data:`LOOKS` runs (the first two included).

    Raises :class:`FlakyFailure` when only one of them failed that way (the program's own):
    too rare to minify, and the same verdict on every run of pt2kit.
    """
    more = [
        (
            functools.partial(run_case, case, stage, accuracy=accuracy),
            f"{label} through {stage}: look {n + 3} of {LOOKS}, measuring how often it fails",
        )
        for n in range(LOOKS - 2)
    ]
    target = _signature(first)
    outcomes = [second] + [Outcome.of_query(stage, r) for r in session.query_all(more, slots=1) if r is not None]
    failing = 1 + sum(_signature(o) == target for o in outcomes)
    others = {_signature(o) for o in outcomes}
    if failing == 1 and len(others) == 1 and None not in others:
        # the same other failure on every look: deterministic, not flaky; what runs alone is not what failed
        raise NotReproducible(
            f"{label} failed in the program ({target}), but alone it fails through {stage} with {others.pop()} "
            f"in every one of {len(outcomes)} runs: the graph rebuilt alone is not the one the program compiled"
        )
    if failing == 1:
        raise FlakyFailure(
            f"flaky: {label} through {stage} gave {first.failure.signature if first.failure else 'a pass'} once, then passed or failed otherwise {len(outcomes)} times alone",
            failure_rate=round(failing / (1 + len(outcomes)), 3),
        )
    session.log(
        f"{label} fails through {stage} in {failing} of {1 + len(outcomes)} runs"
        + (": flaky, minified with repeated queries" if failing <= len(outcomes) else "")
    )
    return failing / (1 + len(outcomes))


#: How sure a flaky failure's repeated queries make pt2kit that a candidate does not fail.
CONFIDENCE = 0.99
#: ... within this many runs of a candidate (and of the repro's own loop).
MAX_TRIES = 12


def tries_for(rate: float | None) -> int:
    """Runs per question for a failure seen in ``rate`` of runs: enough that a candidate failing as often is seen to fail with :data:`CONFIDENCE`."""
    if rate is None or rate >= 1.0:
        return 1
    return max(1, min(MAX_TRIES, math.ceil(math.log(1 - CONFIDENCE) / math.log(1 - rate))))


def repeated(session: Session, fn: Any, label: str, check: Check) -> Outcome:
    """``fn``'s outcome over up to ``check.tries`` runs, one after another: the first that fails as ``check`` asks,
    else the last.

    One at a time: two side by side may both see the same state of the program (a
    counter read by both before either writes it), and then which of them fails depends
    on the scheduler, not on the candidate.
    """
    outcome = Outcome(check.stage, None, 0.0)
    for n in range(check.tries):
        outcome = Outcome.of_query(check.stage, session.query(fn, f"{label} · try {n + 1} of {check.tries}"))
        if outcome.failure is not None and outcome.failure.signature == check.failure:
            return outcome
    return outcome


def _signature(outcome: Outcome) -> Signature | None:
    return outcome.failure.signature if outcome.failure else None


def measured_rate(session: Session, case: GraphCase, check: Check) -> float:
    """The fraction of :data:`LOOKS` runs of ``case`` that fail as ``check`` asks."""
    looks = [
        (
            functools.partial(run_case, case, check.stage, accuracy=check.accuracy),
            f"{case.label()} through {check.stage}: run {n + 1} of {LOOKS}, measuring how often it fails",
        )
        for n in range(LOOKS)
    ]
    outcomes = [Outcome.of_query(check.stage, r) for r in session.query_all(looks, slots=1) if r is not None]
    return sum(_signature(o) == check.failure for o in outcomes) / max(1, len(outcomes))


#: A stage query that runs out of time is asked once more with this many times the limit.
LONGER_LOOK = 2.0


def longer_look(
    session: Session, asked: list[tuple[Any, str, str]], outcomes: list[Outcome | None]
) -> list[Outcome | None]:
    """``outcomes`` of the queries ``asked`` (query, label, stage), each timeout replaced by a second, longer look.

    A timeout is a verdict about the machine as much as about the graph: a compile
    that takes 25 s on a loaded machine is not a hang under ``--timeout 20``. A stage
    is called a hang only when a look given :data:`LONGER_LOOK` times the limit hangs
    too; if it then fails otherwise (or passes), that is its outcome.
    """
    again = [
        i
        for i, o in enumerate(outcomes)
        if o is not None and o.failure is not None and o.failure.signature.kind == Kind.TIMEOUT
    ]
    if session.timeout is None or not again:
        return outcomes
    results = session.query_all(
        [(asked[i][0], f"{asked[i][1]}: timed out, a longer look") for i in again],
        timeout=session.timeout * LONGER_LOOK,
    )
    looked = list(outcomes)
    for i, result in zip(again, results):
        if result is not None:
            looked[i] = Outcome.of_query(asked[i][2], result)
    return looked
