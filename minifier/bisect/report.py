"""What a stage bisection found: a :class:`Row` per graph, and the :class:`BisectReport`.

A bisection's result is a table. Each row is one graph the program compiled (a
dynamo graph, or an aot graph AOTAutograd made from one), or a frame dynamo could
not turn into a graph; its cells are the :class:`~minifier.stages.run.Outcome` of each
stage the graph went through, in stage order, so the row's *first failure* is the
stage where that graph breaks. The report holds the rows, how the program itself
ended (the *original* failure), the row chosen as the culprit, and what it cost
(queries, seconds), with a note when the answer needs one.

This module is data only and runs nothing: :mod:`minifier.bisect.steps` fills rows
in, :mod:`minifier.bisect.culprit` chooses the culprit, :mod:`minifier.report` prints the
table for people, and :meth:`BisectReport.to_json` is its ``--json`` twin
(docs/minify.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..unit.case import GraphCase
from ..unit.signature import Failure, Signature
from ..stages.run import Outcome, stage_names
from .subsystem import Below

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


@dataclass
class Row:
    """One captured graph (or a frame that dynamo failed to capture) and its stage outcomes."""

    label: str
    boundary: str
    kind: str
    nodes: int | None
    frame: dict[str, Any] | None
    outcomes: dict[str, Outcome]
    case: GraphCase | None = None
    case_path: Path | None = None

    @property
    def first_failure(self) -> Outcome | None:
        return next((o for o in self.outcomes.values() if not o.passed), None)

    def to_json(self, stages: list[str]) -> dict[str, Any]:
        first = self.first_failure
        return {
            "label": self.label,
            "boundary": self.boundary,
            "kind": self.kind,
            "nodes": self.nodes,
            "frame": self.frame,
            "stages": {s: (self.outcomes[s].status if s in self.outcomes else None) for s in stages},
            "first_failure": None if first is None else first.stage,
            "failure": None if first is None else _failure_json(first.failure, first.stage),
            "repro": str(self.case_path) if self.case_path else None,
        }


def _failure_json(failure: Failure | None, stage: str | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    return {"stage": stage, **failure.signature.to_json(), "details": failure.details[:2000]}


@dataclass(frozen=True)
class PinDownRetry:
    """A report as it stood before its culprit was pinned down on the program's word."""

    rows: list[Row]
    culprit: Row
    note: str
    aot_rows_wanted: bool
    captured: Any  # the CaptureResult the first pin-down read (minifier.capture.result)


@dataclass
class BisectReport:
    """Everything ``minify bisect`` found."""

    script: str
    backend: str
    accuracy: Accuracy
    run_dir: Path
    original: Failure | None
    rows: list[Row] = field(default_factory=list)
    culprit: Row | None = None
    queries: int = 0
    seconds: float = 0.0
    note: str = ""
    nproc: int = 1  # a distributed job's ranks
    rank: int | None = None  # the rank minified
    ranks: dict[int, str] = field(default_factory=dict)  # how each rank ended
    kernel: str | None = (
        None  # the Inductor kernel the program failed in, when the failure names one (minifier.capture.blame)
    )
    failed_graph: str | None = None  # the graph the program failed in ("g0.forward"), when known
    failure_rate: float | None = None  # a flaky culprit: how often it failed when measured (culprit.second_look)
    below: Below | None = None  # the culprit's subsystem and a workaround, when asked (minifier.bisect.subsystem)
    # graph file -> its profile, asked beside the stages (a minification's)
    profiled: dict[str, Any] = field(default_factory=dict, repr=False)
    # Set when the culprit was pinned down on the program's own word (its failing compile
    # trusted, not repeated): minification.py pins it down again from here when that graph
    # does not fail alone (minifier.bisect.culprit.pin_down_again). Not part of the JSON.
    retry: PinDownRetry | None = field(default=None, repr=False, compare=False)

    def distributed(self) -> dict[str, Any] | None:
        """The ``distributed`` entry of a report (docs/distributed.md)."""
        if self.nproc <= 1:
            return None
        return {
            "world_size": self.nproc,
            "rank": self.rank,
            "process_group": "fake",
            "ranks": {str(k): v for k, v in self.ranks.items()},
        }

    @property
    def stages(self) -> list[str]:
        return stage_names(self.backend)

    @property
    def failure(self) -> Outcome | None:
        return self.culprit.first_failure if self.culprit else None

    def to_json(self) -> dict[str, Any]:
        culprit, failure = self.culprit, self.failure
        stages = self.stages
        return {
            "status": "bisected" if culprit else "no-failure",
            "script": self.script,
            "backend": self.backend,
            "accuracy": self.accuracy,
            "failure": None if failure is None else _failure_json(failure.failure, failure.stage),
            "stages": {} if culprit is None else {s: _stage_status(culprit, s) for s in stages_of(culprit, stages)},
            "graph": None
            if culprit is None
            else {"boundary": culprit.boundary, "index": _index(culprit), "kind": culprit.kind, "label": culprit.label},
            "original_failure": None if self.original is None else self.original.signature.to_json(),
            "graphs": [row.to_json(stages) for row in self.rows],
            "queries": self.queries,
            "seconds": round(self.seconds, 2),
            "run_dir": str(self.run_dir),
            "note": self.note,
            "kernel": self.kernel,
            **({"failure_rate": round(self.failure_rate, 3)} if self.failure_rate is not None else {}),
            **({"distributed": self.distributed()} if self.nproc > 1 else {}),
            **({**self.below.to_json(), "notes": self.below.notes} if self.below is not None else {}),
        }


def stages_of(row: Row, stages: list[str]) -> list[str]:
    return [s for s in stages if s in row.outcomes]


def _stage_status(row: Row, stage: str) -> str:
    outcome = row.outcomes[stage]
    return "pass" if outcome.passed else "fail"


def _index(row: Row) -> int | None:
    return None if row.case is None else row.case.index


def signature_of(outcome: Outcome) -> Signature | None:
    """The signature of an outcome's failure; None when it passed."""
    return outcome.failure.signature if outcome.failure else None
