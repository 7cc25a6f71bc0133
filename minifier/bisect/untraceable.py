"""Dynamo graphs that dynamo cannot trace again, and the failures they would hide.

A repro hands a dynamo graph to ``torch.compile``, so dynamo traces it a second
time. Some graphs do not survive that: a higher-order op dynamo made itself
(``autograd_function_apply`` from a custom ``autograd.Function``) breaks the graph
there, that part runs eagerly in every stage, and a failure in it never shows in
isolation. When no graph fails the program's way, the bisection tries two other
ways in, in turn:

- :func:`inlined_culprit`: the graph with its higher-order ops inlined, which
  dynamo traces whole (right when the failure is in the ops, not in the op itself);
- :func:`handed_if_refused`: before any culprit is chosen, a graph whose first failing
  stage fails because dynamo will not trace it again (a failure the program never
  met) is handed to its backend instead, so its stages say something of it;
- :func:`handed_culprit`: the graph compiled with ``fullgraph=True``, so that dynamo
  traces on where it would break, as it did in the program; else *handed* to each stage's
  backend as dynamo handed it, with no dynamo in between (:attr:`~minifier.unit.case.GraphCase.handed`,
  written by :mod:`minifier.repro.run`). A failure in how AOTAutograd or Inductor
  treats the op itself shows only this way (pytorch#172956: the partitioner asserts
  on a saved tensor that the Function's backward writes into).

:func:`replay_breaks_of` asks dynamo once per graph where it breaks;
:func:`replayed_in_pieces` words the answer when neither way shows the failure.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .report import BisectReport, Row, first_fails, matches
from .steps import run_stages_of
from ..isolation.session import Session
from pt2kit.signature import Failure
from ..stages.run import replay_breaks, retrace_refused
from ..unit.case import Boundary, GraphCase

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


@dataclass(frozen=True)
class Broken:
    """A dynamo graph that dynamo breaks when a repro compiles it again, and the first reason it gives (or one compiled whole)."""

    label: str
    case: GraphCase
    why: str
    whole: bool = False  # not broken: the program compiled it with fullgraph=True (:func:`compiled_whole`)

    def said(self) -> str:
        return f"the program compiled {self.label} with fullgraph=True" if self.whole else f"dynamo breaks {self.label} when compiled again ({self.why})"


def replay_breaks_of(session: Session, graphs: list[tuple[str, GraphCase]]) -> list[Broken]:
    """The dynamo ``graphs`` (label, case) that dynamo breaks when compiled again, asked side by side."""
    dynamo = [(label, case) for label, case in graphs if case.boundary == Boundary.DYNAMO and not case.handed]
    results = session.query_all([(functools.partial(replay_breaks, c), f"{label}: compiled again whole?") for label, c in dynamo])
    return [
        Broken(label, case, q.value[0])
        for (label, case), q in zip(dynamo, results)
        if q is not None and q.ok and q.value
    ]


def compiled_whole(graphs: list[tuple[str, GraphCase]], broken: list[Broken]) -> list[Broken]:
    """``broken``, then the dynamo ``graphs`` the program compiled with ``fullgraph=True`` that dynamo does not break:
    a backend's failure reached the program there, where a plain compile (a stage's) breaks the graph at it and
    runs that part eagerly (:func:`~pt2kit.seams.convert_frame.compiling_whole`)."""
    seen = {id(b.case) for b in broken}
    return broken + [
        Broken(label, case, "", whole=True)
        for label, case in graphs
        if case.boundary == Boundary.DYNAMO and (case.frame or {}).get("fullgraph") and id(case) not in seen
    ]


def replayed_in_pieces(session: Session, graphs: list[tuple[str, GraphCase]], broken: list[Broken] | None = None) -> str | None:
    """Why the first dynamo graph that dynamo breaks when compiled again cannot fail in isolation; None when none breaks.

    ``broken``: :func:`replay_breaks_of`'s answer, when it was asked already.
    """
    first = next(iter(replay_breaks_of(session, graphs) if broken is None else broken), None)
    return None if first is None else (
        f"dynamo breaks {first.label} when pt2kit compiles it again ({first.why}), where the program compiled it whole: that part "
        "runs eagerly in every stage, so the failure cannot show in isolation"
    )  # fmt: skip


def handed(case: GraphCase) -> GraphCase | None:
    """``case`` to be handed to its backend without dynamo; None where a handed graph could not stand for it.

    Dynamo makes the sizes a graph is compiled with symbolic, and the inputs a
    wrapper derives; a graph handed directly gets its inputs' static sizes as they are,
    so only a graph with neither can be handed.
    """
    if case.dynamic or any(i.symbolic_dims or i.symbolic_int or i.derived_from for i in case.inputs):
        return None
    return case.replace(handed=True)


def handed_if_refused(session: Session, report: BisectReport, row: Row, failure: Failure | None, *, accuracy: Accuracy) -> Row:
    """``row``, or, where dynamo refuses to trace its graph again, the graph handed to its backend instead.

    Dynamo traced the program's code into the graph; tracing the graph's own code again
    can fail (``Unsupported: torch.while_loop: improper args/kwargs``: the loop in the
    form dynamo wrote it; or an ``InternalTorchDynamoError`` around a ``ValueError``, a
    ``flex_attention`` call's arguments as dynamo wrote them), and then its first failing
    stage fails that way, a failure of pt2kit's rebuild that the program never met
    (``failure``; None: a saved graph's, whose program is not known). Handed to the backend as dynamo handed it
    (:func:`handed`), its stages run, with a note; a graph that cannot be handed stays as it was.
    """
    first = next((o for o in row.outcomes.values() if o.failure is not None), None)  # (in stage order)
    if (
        row.boundary != Boundary.DYNAMO
        or row.case is None
        or first is None
        or first.failure is None
        or not retrace_refused(first.failure)
        or (failure is not None and first.failure.signature == failure.signature)
        or (case := handed(row.case)) is None
    ):
        return row
    (new,) = run_stages_of(session, [(case, None)], accuracy=accuracy)
    new.label = f"{row.label} (handed to the backend)"
    report.add_note(
        f"dynamo will not trace {row.label} again ({first.failure.signature}); handed to the backend as dynamo handed it, "
        "with no dynamo in between"
    )
    return new


def handed_culprit(
    session: Session, report: BisectReport, target: Failure | None, broken: list[Broken], *, accuracy: Accuracy
) -> Row | None:
    """The first ``broken`` graph that fails like ``target`` once traced whole, or handed to its backend (see the module).

    Compiled with ``fullgraph=True`` first: dynamo then traces on where it would break, as it traced the
    program's frame into this one graph (under ``fullgraph=True``, a fake kernel reading a value gives an
    unbacked size where a plain compile breaks, and AOTAutograd fails on it). It refuses some of what it
    made itself (``autograd_function_apply``): handed to the backend directly, with no dynamo in between.
    The graph joins ``report`` as the culprit, after the graph it stands for, with a note.
    ``target`` None: any failure (a saved graph's bisection, where the first to fail is the one).
    """
    ways = (
        ("compiled whole", lambda c: None if c.fullgraph else c.replace(fullgraph=True), "compiled alone with fullgraph=True (dynamo traces it whole, and a backend's failure is an error, not a graph break)"),
        ("handed to the backend", handed, "handed to the backend as dynamo handed it, with no dynamo in between"),
    )  # fmt: skip
    for item in broken:
        for how, remake, said in ways:
            case = remake(item.case)
            if case is None:
                continue
            (row,) = run_stages_of(session, [(case, None)], accuracy=accuracy)
            first = row.first_failure
            if first is None or not (matches(first, target, accuracy) if target is not None else first.failure is not None):
                continue
            if case.fullgraph and not item.case.fullgraph and retrace_refused(first.failure):
                continue  # (dynamo refusing what it made itself, as a break is now an error: never the program's)
            row.label = f"{item.label} ({how})"
            at = next((k + 1 for k, r in enumerate(report.rows) if r.case is item.case), len(report.rows))
            report.rows.insert(at, row)
            report.culprit = row
            report.add_note(f"{item.said()}; {said}, it fails")
            session.log(f"  {row.label}: {first_fails(first)}")
            return row
    return None


def inlined_culprit(session: Session, report: BisectReport, captured_failure: Failure | None) -> Row | None:
    """A graph that fails the program's way once its higher-order ops are inlined.

    Inlined (see :mod:`minifier.stages.inline`), a graph runs its bodies' ops itself,
    and dynamo traces it whole; if it then fails the same way it becomes the
    culprit, with a note.
    """
    from ..stages.inline import variants

    cases = [(row, flat) for row in report.rows if row.case is not None for flat in variants(row.case.gm)]
    for row, flat in cases:
        assert row.case is not None
        candidate = row.case.replace(gm=flat)
        (new,) = run_stages_of(session, [(candidate, None)], accuracy=report.accuracy)
        first = new.first_failure
        if first is not None and matches(first, captured_failure, report.accuracy):
            new.label = f"{row.label} (inlined)"
            report.rows.insert(report.rows.index(row) + 1, new)
            report.culprit = new
            report.add_note(f"{row.label} fails this way only with its higher-order ops inlined (torch.compile cannot trace them when called directly)")
            return new
    return None
