"""Stages a higher stage vouches for: asked once the repro is ready, not before the reduction.

For a failure that is not a wrong answer, the stages nest: ``aot_eager`` runs what ``eager`` runs, through
AOTAutograd, and ``aot_eager_decomp_partition`` runs that again, decomposed and
partitioned. A graph that runs right at a stage all but always runs at every stage
below it, and a minification needs only the stage where the program's failure first
shows before it can start. So once a dynamo graph has passed
``aot_eager_decomp_partition`` (while the program still ran, usually), its ``eager`` and
``aot_eager`` are not asked before the reduction, and neither is the one eager stage of
an aot graph lowered from it. A program that failed compiling an aot graph, inside its
backend's own compiler, vouches for all of them at once: it traced that graph through
dynamo, AOTAutograd and the backend's decompositions on the way, and a lighter stage
only runs a graph, which cannot fail that compile's way. Each is an :class:`~minifier.stages.run.Outcome` that passed
with :attr:`~minifier.stages.run.Outcome.implied_by` saying which stage vouched for it
(:func:`voucher`). On a loaded machine those queries cost the second or so between the
program's end and the reduction's first query.

Every implied stage is asked once the repro is ready (:func:`take_answers`, before
below the stage); the report's stage table then holds the answers, and a stage that
fails after all is said in a note. Only for failures that are not wrong answers, and only
in ``minify run``: a wrong answer is judged against eager itself, and ``minify bisect``'s answer is the
table, so there every stage is asked before anything is said.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from .report import BisectReport, Row
from ..stages.run import Outcome, retrace_refused, stages_for
from ..unit.case import Boundary, GraphCase
from ..unit.check import Stage

#: The stage whose pass vouches for the eager stages below it.
VOUCHING = Stage.AOT_EAGER_DECOMP_PARTITION


def voucher(
    case: GraphCase,
    stage: str,
    outcomes: Mapping[str, Outcome],
    owner: Mapping[str, Outcome] | None = None,
    failed_compile: str | None = None,
) -> str | None:
    """What vouches for ``case`` passing ``stage`` without a query, or None.

    ``outcomes``: the case's own answers by stage; ``owner``: those of the dynamo graph an
    aot case was lowered from. Only answers from a query (or the program) vouch, never an
    implied one. ``failed_compile``: the aot graph of the same dynamo graph whose compile
    failed in the program, inside the final backend's own compiler: the program traced it
    through every lighter stage's machinery on the way, and those stages only run a graph,
    which cannot fail that compile's way.
    """
    stages = stages_for(case)
    if stage not in stages[:-1]:
        return None
    if failed_compile is not None:
        return f"the program's {failed_compile} reached {case.backend}'s own compiler"
    if case.boundary == Boundary.DYNAMO:
        above = stages[stages.index(stage) + 1 : -1]
        return (
            f"{case.label()} passed {VOUCHING}"
            if VOUCHING in above and _asked_and_passed(outcomes.get(VOUCHING))
            else None
        )
    if _asked_and_passed((owner or {}).get(VOUCHING)):
        return f"{case.graph_id.owner} passed {VOUCHING}"
    return None


def _asked_and_passed(outcome: Outcome | None) -> bool:
    return outcome is not None and outcome.passed and outcome.implied_by is None


def implied(report: BisectReport | None) -> list[tuple[Row, str]]:
    """The (row, stage) cells of ``report`` that passed by implication, in the table's order."""
    if report is None:
        return []
    return [
        (row, stage)
        for row in report.rows
        if row.case is not None
        for stage, outcome in row.outcomes.items()
        if outcome.implied_by is not None
    ]


def take_answers(cells: list[tuple[Row, str]], answers: Mapping[tuple[int, str], Outcome]) -> list[str]:
    """Put the answers to implied ``cells`` (by ``(id(case), stage)``, as
    :func:`~minifier.bisect.steps.run_each` gives them) in their rows; a note for each stage that fails after all.
    A cell left unanswered (an interrupted batch) keeps saying what vouched for it."""
    failing: dict[tuple[str, str, str | None], list[str]] = {}  # (row, signature, what vouched) -> its stages
    for row, stage in cells:
        vouched = row.outcomes[stage].implied_by
        answer = answers.get((id(row.case), stage))
        if answer is None:
            continue
        row.outcomes[stage] = replace(answer, implied_by=None)
        if answer.failure is not None:
            refused = retrace_refused(answer.failure)
            said = f"{answer.failure.signature}" + (": dynamo refuses pt2kit's rebuild of it, which says nothing of the program's" if refused else "")
            failing.setdefault((row.label, said, vouched), []).append(stage)
    return [
        f"{label} fails at {_listed(stages)} ({said}), though {vouched}: "
        + ("those stages were" if len(stages) > 1 else "that stage was")
        + " asked only once the repro was ready, and the stage table now says so"
        for (label, said, vouched), stages in failing.items()
    ]


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
