"""Which graph a run minifies: the culprit the bisection found, at the boundary ``--after`` asks for.

``--after auto`` takes the aot graph when the failure reproduces after AOTAutograd,
and falls back to the dynamo graph it was lowered from when that aot graph cannot be
made to fail alone (:func:`lowered_from`).
"""

from __future__ import annotations

from pt2kit.errors import NoFailure, NotReproducible, UsageError
from .report import BisectReport, FailureRecord, Row, signature_of
from ..unit.case import Boundary

AFTER_CHOICES = ("auto", "dynamo", "aot")


def check_after(after: str) -> None:
    """``--after`` (the command line's choice, or the Python API's argument) names a boundary pt2kit knows."""
    if after not in AFTER_CHOICES:
        raise UsageError(f"--after must be one of {', '.join(AFTER_CHOICES)}")


def choose_graph(report: BisectReport, after: str) -> Row:
    """The row to minify: its graph and its first failing stage."""
    culprit = report.culprit
    if culprit is None or culprit.first_failure is None:
        raise NoFailure("no graph fails")
    if culprit.case is None:
        why = str((culprit.frame or {}).get("lift_error") or "").split(". ")[0][:300]  # (its first sentence)
        workaround = (
            "; compiled autograd traces the backward as it runs: with torch._dynamo.config.compiled_autograd = False"
            " the backward compiles through AOTAutograd instead"
            if (culprit.frame or {}).get("compiled_autograd")
            else ""
        )
        failed = FailureRecord.of(culprit.first_failure.failure, culprit.first_failure.stage)
        raise NotReproducible(
            f"the failure is in dynamo's own tracing of {culprit.label} ({signature_of(culprit.first_failure)}); "
            "there is no graph to minify" + (f" (pt2kit could not lift the frame to one, a limit of pt2kit's and not a second bug: {why})" if why else "") + workaround,
            failure=failed.to_json() if failed is not None else None,  # (report.json's, as a minified run's)
        )
    if after == "aot" and culprit.boundary != Boundary.AOT:  # (the flags were right: what the graphs do decides)
        why = next((n for n in report.note.split("; ") if "aot graph" in n), "no aot graph fails the same way in isolation")
        raise NotReproducible(f"--after aot: {why}; --after dynamo (or auto) minifies {culprit.label}, the dynamo graph that fails")
    if after == "dynamo" and culprit.boundary == Boundary.AOT:
        return next(
            r
            for r in report.rows
            if r.boundary == Boundary.DYNAMO and r.case is not None and r.case.index == culprit.case.parent
        )
    return culprit


def lowered_from(report: BisectReport, row: Row, after: str) -> Row | None:
    """The failing dynamo graph an aot graph was lowered from, when ``--after`` leaves pt2kit the choice.

    An aot graph that pt2kit cannot make fail alone (a ``while_loop`` whose Python-int
    carry its rebuild cannot trace the same way) is not the end of the run: the dynamo
    graph it came from holds the same failure, one stage of tracing earlier.
    """
    if after != "auto" or row.boundary != Boundary.AOT or row.case is None:
        return None
    return next(
        (
            r
            for r in report.rows
            if r.boundary == Boundary.DYNAMO and r.case is not None and r.case.index == row.case.parent
            and r.first_failure is not None and r.first_failure.failure is not None
        ),
        None,
    )
