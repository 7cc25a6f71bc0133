"""The reducer's questions, asked of the real compiler: each candidate an isolated query.

:class:`CandidateQuery` is the ``query`` a :class:`~minifier.reduce.engine.Reducer`
calls with a batch of candidates: each becomes a child that fills in the candidate's
cut inputs (:class:`OriginRef`: from the original graph's profiled values, else by
running the original) and runs it through the failing stage (:func:`run_candidate`).
A flaky failure's candidates are asked several times each. :func:`write_best` writes
the best candidate as the run's ``repro.py``, its cut inputs filled with their values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pt2kit.errors import NotReproducible, plural
from ..isolation.session import Session
from ..repro.files import load_repro, write_repro
from ..stages.flaky import repeated
from ..stages.profile import realize
from ..stages.run import Outcome, Reach, run_case
from ..unit.accuracy import EAGER_DRAWS
from ..unit.case import GraphCase
from ..unit.check import Check
from .engine import Reducer

if TYPE_CHECKING:
    from ..isolation.worker import QueryResult
    from ..unit.accuracy import Accuracy


class CandidateQuery:
    """The reducer's question, asked of a batch of candidates: each as an isolated query, :attr:`check`.

    ``check`` is the run's, judging outputs only when the failure is a wrong answer
    (:meth:`~minifier.unit.check.Check.judging`). A flaky failure's candidates
    (``tries`` > 1) are each asked several times, and fail when any of their runs does.
    """

    def __init__(self, session: Session, origin: OriginRef, check: Check) -> None:
        self.session, self.origin, self.check = session, origin, check.judging()
        self.reducer: Reducer | None = None  # set once the reducer exists: progress labels read it
        self.current_pass = "starting"

    def __call__(
        self, candidates: list[tuple[GraphCase, str, tuple[str, ...]]], until: Callable[[Outcome], bool] | None = None
    ) -> list[Outcome | None]:
        """Each candidate's outcome, in order. ``until``: the batch ends at the first outcome, in
        order, that satisfies it; the queries still running then are stopped and come back None."""
        check = self.check
        asked = [
            (
                functools.partial(
                    run_candidate, candidate, self.origin, check.stage, check.accuracy, check.strict, outputs
                ),
                f"{self.progress()} · {label}",
            )
            for candidate, label, outputs in candidates
        ]
        if check.tries > 1:
            outcomes: list[Outcome | None] = []
            for fn, label in asked:
                outcomes.append(outcome := repeated(self.session, fn, label, check))
                if until is not None and until(outcome):
                    break
            return outcomes + [None] * (len(asked) - len(outcomes))
        enough = None if until is None else functools.partial(_decided, check.stage, until)
        return [
            None if r is None else Outcome.of_query(check.stage, r) for r in self.session.query_all(asked, enough=enough)
        ]

    def progress(self) -> str:
        if self.reducer is None:
            return self.current_pass
        return f"{self.current_pass} · {plural(len(self.reducer.best.kept), 'node')} left · {self.reducer.queries} queries"


def _decided(stage: str, until: Callable[[Outcome], bool], results: list[QueryResult[Any] | None]) -> bool:
    """Has the batch's first outcome, in order, that satisfies ``until`` come in, every one before it too?"""
    for result in results:
        if result is None:
            return False
        if until(Outcome.of_query(stage, result)):
            return True
    return False


def run_candidate(
    candidate: GraphCase, origin: OriginRef, stage: str, accuracy: Accuracy, strict: bool, outputs: tuple[str, ...]
) -> Outcome:
    """(In a worker child) one reducer question: the candidate, its cut inputs filled in, through the stage."""
    reach = Reach(origin.load, outputs, origin.references) if accuracy else None
    return run_case(origin.realize(candidate), stage, accuracy=accuracy, strict=strict, reach=reach)


@dataclass(frozen=True)
class OriginRef:
    """The graph being minified, by the path of its saved repro: children read it from disk
    (once per query) instead of receiving all of its tensors in every query's payload."""

    path: Path
    values: Path | None = None  # the original graph's node values, saved by the profiling query

    def load(self) -> GraphCase:
        return load_repro(self.path).case

    @property
    def references(self) -> Path:
        """Where the original's reference outputs are kept, once a query computed them (see :class:`~minifier.stages.run.Reach`)."""
        return self.path.parent / "references.pt"

    def realize(self, candidate: GraphCase) -> GraphCase:
        """The candidate's cut inputs filled in: from the saved values, else from the original graph."""
        realized = realize(candidate, None, self.values)
        if any(i.source is not None and i.seed is None and i.value is None for i in realized.inputs):
            realized = realize(candidate, self.load(), self.values)
        return realized


def write_best(session: Session, reducer: Reducer, origin: OriginRef, check: Check) -> Path:
    """Write the best candidate as the run's repro.py, filling cut inputs with their values."""
    best = reducer.best_case()
    needed = [i for i in best.inputs if i.source is not None and not i.is_random]
    if needed:
        result = session.query(
            functools.partial(realized_values, best, origin), "saving the inputs the repro needs", count=False
        )
        if result.value is None:
            raise NotReproducible(
                f"the original graph no longer runs in eager: {result.failure.signature if result.failure else '?'}"
            )
        best = best.replace(
            inputs=[
                i if i.name not in result.value or i.is_random else _with_value(i, result.value[i.name])
                for i in best.inputs
            ]
        )
    return write_run_repro(session, best, check, tries=check.tries)


def write_run_repro(session: Session, case: GraphCase, check: Check, **extra: Any) -> Path:
    """``case`` written as the run's ``repro.py``, failing as ``check`` asks: the accuracy mode
    as a repro records it (judged or not, and bit for bit or not); ``extra``: :func:`write_repro`'s."""
    return write_repro(
        case,
        session.run_dir,
        stage=check.stage,
        failure=check.failure,
        accuracy=EAGER_DRAWS if check.accuracy == EAGER_DRAWS else bool(check.accuracy),
        strict=check.strict,
        **extra,
    )


def realized_values(case: GraphCase, origin: OriginRef) -> dict[str, Any]:
    """(In a worker child) the values of a candidate's cut inputs, computed by the original graph."""
    return {i.name: i.value for i in origin.realize(case).inputs if i.source is not None}


def _with_value(i: Any, value: Any) -> Any:
    return replace(i, value=value, source=None)
