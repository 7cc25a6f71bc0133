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
table for people, and :meth:`BisectReport.record` is its ``--json`` twin
(docs/minify.md): a :class:`BisectRecord`, frozen data that is that JSON, key for key.
A record's ``to_json()`` is the only writer of its shape, and ``from_json(r.to_json()) == r``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from ..unit.case import GraphCase
from pt2kit.signature import Failure, Kind, Signature
from ..stages.run import Outcome, raises_in_eager, stage_names
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
    #: the stage whose failure is the program's, where a lighter stage fails otherwise (:func:`program_failure`)
    program_stage: str | None = None

    @property
    def first_failure(self) -> Outcome | None:
        """The failure this graph is minified for: its first, or the program's where a lighter stage fails otherwise."""
        if self.program_stage is not None:
            return self.outcomes[self.program_stage]
        return next((o for o in self.outcomes.values() if not o.passed), None)

    def table(self, stages: list[str]) -> dict[str, str]:
        """report.json's ``stages``: ``pass``, ``fail``, or ``other`` for a lighter stage failing otherwise.

        A stage before :attr:`program_stage` holds another bug than the program's: read as
        ``fail``, the table would name it as the stage that broke.
        """
        order = list(self.outcomes)
        lighter = order.index(self.program_stage) if self.program_stage in self.outcomes else 0
        return {
            s: "pass" if self.outcomes[s].passed else ("other" if order.index(s) < lighter else "fail") for s in stages
        }

    def asked(self) -> dict[str, Outcome]:
        """The outcomes of the stages asked so far: those a higher stage implied (:mod:`minifier.bisect.implied`) left out."""
        return {s: o for s, o in self.outcomes.items() if o.implied_by is None}

    def record(self, stages: list[str], *, asked_only: bool = False) -> GraphRecord:
        """This row as one entry of a report's ``graphs``; ``stages`` are the backend's, in order.
        ``asked_only``: a stage that passed by implication, not asked yet, is None (not asked)."""
        first = self.first_failure
        outcomes = self.asked() if asked_only else self.outcomes
        return GraphRecord(
            label=self.label,
            boundary=self.boundary,
            kind=self.kind,
            nodes=self.nodes,
            frame=plain_json(self.frame),
            stages={s: (outcomes[s].status if s in outcomes else None) for s in stages},
            first_failure=None if first is None else first.stage,
            failure=None if first is None else FailureRecord.of(first.failure, first.stage),
            repro=str(self.case_path) if self.case_path else None,
        )

    def to_json(self, stages: list[str]) -> dict[str, Any]:
        return self.record(stages).to_json()


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

    def add_note(self, note: str) -> None:
        """Say ``note`` after what the bisection noted already (each step that finds something says it; none unsays another's;
        a note said already is not said twice)."""
        if note not in self.note:
            self.note = f"{self.note}; {note}" if self.note else note

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

    def record(self) -> BisectRecord:
        """What this bisection found, as data (the JSON of ``minify bisect --json`` and its report.json)."""
        culprit, failure, stages = self.culprit, self.failure, self.stages
        return BisectRecord(
            status="bisected" if culprit else "no-failure",
            script=self.script,
            backend=self.backend,
            accuracy=self.accuracy,
            failure=None if failure is None else FailureRecord.of(failure.failure, failure.stage),
            stages={} if culprit is None else culprit.table(stages_of(culprit, stages)),
            graph=None if culprit is None else GraphRef(culprit.boundary, _index(culprit), culprit.kind, culprit.label),
            original_failure=None if self.original is None else self.original.signature,
            graphs=tuple(row.record(stages) for row in self.rows),
            queries=self.queries,
            seconds=round(self.seconds, 2),
            run_dir=str(self.run_dir),
            note=self.note,
            kernel=self.kernel,
            failure_rate=None if self.failure_rate is None else round(self.failure_rate, 3),
            distributed=plain_json(self.distributed()),
            below=None if self.below is None else BelowRecord.of(self.below),
            notes=None if self.below is None else tuple(self.below.notes),
        )

    def to_json(self) -> dict[str, Any]:
        return self.record().to_json()


def stages_of(row: Row, stages: list[str]) -> list[str]:
    return [s for s in stages if s in row.outcomes]


def _index(row: Row) -> int | None:
    return None if row.case is None else row.case.index


def signature_of(outcome: Outcome) -> Signature | None:
    """The signature of an outcome's failure; None when it passed."""
    return outcome.failure.signature if outcome.failure else None


def first_fails(outcome: Outcome) -> str:
    """The console's line for where a graph first fails (escaped: torch's messages hold brackets, ``[s0, 4]``)."""
    return f"first fails at [bold]{outcome.stage}[/]: {escape(str(signature_of(outcome)))}"


def program_failure(row: Row, original: Failure | None, accuracy: Accuracy) -> str | None:
    """Point ``row`` at its stage that fails the program's way, where a lighter stage fails otherwise; what to note.

    A lighter stage can hold another bug than the program's (``aot_eager_decomp_partition``
    dropping an effect token the program's Inductor never meets, pytorch#190908): its
    failure is not the program's, and the graph is minified where it fails the
    program's way. None where the first failure is the program's, or none is.
    """
    first = row.first_failure
    if first is None or matches(first, original, accuracy):
        return None
    later = next((o for o in row.outcomes.values() if not o.passed and matches(o, original, accuracy)), None)
    if later is None:
        return None
    row.program_stage = later.stage
    if original is None:
        return f"{row.label} raises at {first.stage} as plain eager does; it is minified at {later.stage}, where the compiler fails"
    if raises_in_eager(first.failure):  # (the program may well have met it: eager raising is what it expected)
        return f"{row.label} raises at {first.stage} as plain eager does; it is minified at {later.stage}, where it fails the program's way"
    return (
        f"{row.label} fails otherwise at {first.stage} ({signature_of(first)}), a failure the program never "
        f"met; it is minified at {later.stage}, where it fails the program's way"
    )


def matches(outcome: Outcome, original: Failure | None, accuracy: Accuracy) -> Accuracy:
    """Is a graph's failure the program's failure (or, with no program's failure known, any failure eager does not share)? (Read as a bool.)"""
    if outcome.failure is None:
        return False
    if original is None:  # (a graph that raises in plain eager too shows no compiler's failure, however it is judged)
        return not raises_in_eager(outcome.failure)
    return outcome.failure.signature == original.signature or (
        accuracy and outcome.failure.signature.kind == Kind.ACCURACY
    )


# --------------------------------------------------------------------------- #
# The records: a report's JSON as frozen data
# --------------------------------------------------------------------------- #


def plain_json(value: Any) -> Any:
    """``value`` as a report's JSON holds it: lists for tuples, string keys, ``str()`` of what JSON cannot hold.

    The free-form parts of a record are kept in this form, so that a record read back from
    its JSON equals it.
    """
    return json.loads(json.dumps(value, default=str))


def _optional(read: Any, data: Any) -> Any:
    return None if data is None else read(data)


@dataclass(frozen=True)
class FailureRecord:
    """A stage's failure in a report: the stage, the :class:`Signature`'s fields, at most 2000 characters of details."""

    stage: str | None
    kind: str
    exception: str
    message: str
    details: str = ""

    @classmethod
    def of(cls, failure: Failure | None, stage: str | None) -> FailureRecord | None:
        if failure is None:
            return None
        signature = failure.signature
        return cls(stage, signature.kind, signature.exception, signature.message, failure.details[:2000])

    @property
    def signature(self) -> Signature:
        return Signature(self.kind, self.exception, self.message)

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, **self.signature.to_json(), "details": self.details}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FailureRecord:
        signature = Signature.from_json(data)
        return cls(data.get("stage"), signature.kind, signature.exception, signature.message, data.get("details", ""))


@dataclass(frozen=True)
class GraphRef:
    """The graph a report is about (``graph``): boundary, index and kind; a bisection's names its row's label too."""

    boundary: str
    index: int | None
    kind: str
    label: str | None = None  # a bisection's culprit row; a minification's report has no label key

    def to_json(self) -> dict[str, Any]:
        out = {"boundary": self.boundary, "index": self.index, "kind": self.kind}
        return out if self.label is None else {**out, "label": self.label}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GraphRef:
        return cls(data["boundary"], data.get("index"), data["kind"], data.get("label"))


@dataclass(frozen=True)
class GraphRecord:
    """One row of the stage table (an entry of a report's ``graphs``).

    ``stages`` holds every stage of the backend, in order: the outcome's status, None for
    a stage the graph was not run through. ``frame`` (the user frame dynamo compiled:
    name, filename, lineno) is free-form JSON, as capture recorded it.
    """

    label: str
    boundary: str
    kind: str
    nodes: int | None
    frame: dict[str, Any] | None
    stages: dict[str, str | None]
    first_failure: str | None
    failure: FailureRecord | None
    repro: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "boundary": self.boundary,
            "kind": self.kind,
            "nodes": self.nodes,
            "frame": self.frame,
            "stages": dict(self.stages),
            "first_failure": self.first_failure,
            "failure": None if self.failure is None else self.failure.to_json(),
            "repro": self.repro,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GraphRecord:
        return cls(
            label=data["label"],
            boundary=data["boundary"],
            kind=data["kind"],
            nodes=data.get("nodes"),
            frame=data.get("frame"),
            stages=dict(data.get("stages") or {}),
            first_failure=data.get("first_failure"),
            failure=_optional(FailureRecord.from_json, data.get("failure")),
            repro=data.get("repro"),
        )


@dataclass(frozen=True)
class BelowRecord:
    """What was found below the failing stage: ``subsystem`` and ``workaround``, each null when none was found.

    Both are free-form JSON: :class:`~minifier.bisect.subsystem.Below` writes them
    (``Subsystem.to_json``, ``Workaround.to_json``), and docs/minify.md documents them.
    """

    subsystem: dict[str, Any] | None = None
    workaround: dict[str, Any] | None = None

    @classmethod
    def of(cls, below: Below) -> BelowRecord:
        return cls.from_json(plain_json(below.to_json()))

    def to_json(self) -> dict[str, Any]:
        return {"subsystem": self.subsystem, "workaround": self.workaround}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BelowRecord:
        return cls(data.get("subsystem"), data.get("workaround"))


#: report.json's layout: written as ``"schema"`` beside ``status``. A reader refuses a newer one, in one line,
#: rather than misread it; a report without the key (written before it existed) is schema 1.
REPORT_SCHEMA = 1


@dataclass(frozen=True)
class BisectRecord:
    """What a bisection found, as ``minify bisect --json`` prints it and its report.json holds it (docs/minify.md).

    ``status`` is ``bisected`` (a culprit: ``failure``, ``stages`` and ``graph`` say
    it) or ``no-failure`` (those empty). Keys written only when set: ``failure_rate``
    (a flaky culprit), ``distributed`` (a job of several ranks), ``subsystem`` and
    ``workaround`` (``below``: the bisection went below the failing stage) and
    ``notes`` (below's notes, or a note report.json's writer added).
    ``distributed`` is free-form JSON (docs/distributed.md); so are the parts of
    :class:`BelowRecord` and :class:`GraphRecord` it says.
    """

    status: str
    script: str
    backend: str
    accuracy: bool | str
    failure: FailureRecord | None
    stages: dict[str, str]
    graph: GraphRef | None
    original_failure: Signature | None
    graphs: tuple[GraphRecord, ...]
    queries: int
    seconds: float
    run_dir: str
    note: str
    kernel: str | None
    failure_rate: float | None = None
    distributed: dict[str, Any] | None = None
    below: BelowRecord | None = None
    notes: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "schema": REPORT_SCHEMA,
            "script": self.script,
            "backend": self.backend,
            "accuracy": self.accuracy,
            "failure": None if self.failure is None else self.failure.to_json(),
            "stages": dict(self.stages),
            "graph": None if self.graph is None else self.graph.to_json(),
            "original_failure": None if self.original_failure is None else self.original_failure.to_json(),
            "graphs": [graph.to_json() for graph in self.graphs],
            "queries": self.queries,
            "seconds": self.seconds,
            "run_dir": self.run_dir,
            "note": self.note,
            "kernel": self.kernel,
            **({"failure_rate": self.failure_rate} if self.failure_rate is not None else {}),
            **({"distributed": self.distributed} if self.distributed is not None else {}),
            **(self.below.to_json() if self.below is not None else {}),
            **({"notes": list(self.notes)} if self.notes is not None else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BisectRecord:
        return cls(
            status=data["status"],
            script=data["script"],
            backend=data["backend"],
            accuracy=data.get("accuracy", False),
            failure=_optional(FailureRecord.from_json, data.get("failure")),
            stages=dict(data.get("stages") or {}),
            graph=_optional(GraphRef.from_json, data.get("graph")),
            original_failure=_optional(Signature.from_json, data.get("original_failure")),
            graphs=tuple(GraphRecord.from_json(g) for g in data.get("graphs") or ()),
            queries=data.get("queries", 0),
            seconds=data.get("seconds", 0.0),
            run_dir=data.get("run_dir", ""),
            note=data.get("note", ""),
            kernel=data.get("kernel"),
            failure_rate=data.get("failure_rate"),
            distributed=data.get("distributed"),
            below=BelowRecord.from_json(data) if "subsystem" in data or "workaround" in data else None,
            notes=None if data.get("notes") is None else tuple(data["notes"]),
        )
