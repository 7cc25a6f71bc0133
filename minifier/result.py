"""What a minification produced: :class:`MinifyResult`, and its ``report.json`` (docs/minify.md).

Data only: :func:`minifier.minification.minify_case` fills one in, :mod:`minifier.report`
prints it for people, and :meth:`MinifyResult.record` is ``report.json`` and the ``--json``
twin: a :class:`MinifyRecord`, frozen data that is that JSON, key for key, and the only
writer of it (``from_json(r.to_json()) == r``). :func:`read_report` reads a report.json
back as its record: a minification's or a bisection's
(:class:`~minifier.bisect.report.BisectRecord`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pt2kit.errors import CorruptRecord
from pt2kit.signature import Signature
from .bisect.report import REPORT_SCHEMA, BelowRecord, BisectRecord, BisectReport, GraphRecord, GraphRef, plain_json
from .isolation.timeline import TimelineStep
from .unit.case import Boundary, GraphCase, GraphInput
from .capture.context import missing_config
from .stages.run import Outcome, stage_names
from .bisect.subsystem import Below
from .releases.checks import Releases

if TYPE_CHECKING:
    from .unit.accuracy import Accuracy


@dataclass(frozen=True)
class Bisected:
    """What a minification's record takes from the bisection that chose its graph.

    Saved beside the reducer's checkpoint (:data:`BISECTED`), so that a resumed run, which
    does not bisect again, still reports the program's stage table. ``statuses``: the
    dynamo row's stage outcomes, when that row fails the way the minified graph does (an
    aot row ran only two stages, the dynamo row all four).
    """

    script: str | None
    kernel: str | None
    graphs: tuple[GraphRecord, ...]
    statuses: dict[str, str] | None
    distributed: dict[str, Any] | None
    nproc: int = 1

    @classmethod
    def of(cls, bisect: BisectReport, before: GraphCase, signature: Signature | None, *, asked_only: bool = False) -> Bisected:
        """``asked_only``: a stage that passed unasked, implied by a higher one
        (:mod:`minifier.bisect.implied`), is left out, as not asked: what a resumed run
        reports, since it never asks them."""
        row = next(  # (the culprit first: a graph compiled whole, handed or inlined stands beside the one it was)
            (
                r
                for r in [bisect.culprit, *bisect.rows]
                if r is not None and r.boundary == Boundary.DYNAMO and r.case is not None and r.case.index == before.index
            ),
            None,
        )
        first = row.first_failure if row is not None else None
        speaks = row is not None and first is not None and first.failure is not None and first.failure.signature == signature
        culprit = bisect.culprit.first_failure if bisect.culprit is not None else None
        if not speaks and culprit is not None and culprit.failure is not None and culprit.failure.signature == signature:
            row, speaks = bisect.culprit, True  # (its dynamo graph fails otherwise alone: the aot graph's own stages)
        graphs = tuple(r.record(bisect.stages, asked_only=asked_only) for r in bisect.rows)
        asked = list(row.asked() if asked_only else row.outcomes) if row is not None else []
        return cls(
            script=bisect.script,
            kernel=bisect.kernel,
            graphs=graphs,
            statuses=row.table(asked) if speaks and row else None,
            distributed=plain_json(bisect.distributed()),
            nproc=bisect.nproc,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "script": self.script,
            "kernel": self.kernel,
            "graphs": [g.to_json() for g in self.graphs],
            "statuses": self.statuses,
            "distributed": self.distributed,
            "nproc": self.nproc,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Bisected:
        """What :meth:`to_json` wrote; KeyError or TypeError when it is malformed."""
        graphs = tuple(GraphRecord.from_json(g) for g in data["graphs"])
        return cls(data["script"], data["kernel"], graphs, data["statuses"], data["distributed"], int(data["nproc"]))


#: Where a run keeps its :class:`Bisected`, beside the reducer's checkpoint.
BISECTED = "bisected.json"


def save_bisected(run_dir: Path, bisect: BisectReport, before: GraphCase, signature: Signature | None) -> None:
    """What a resumed run reports of the bisection (:data:`BISECTED`), the stages asked so far: saved as the
    reduction starts, and again once the lower stages a higher one vouched for were asked."""
    (run_dir / BISECTED).write_text(json.dumps(Bisected.of(bisect, before, signature, asked_only=True).to_json()))


@dataclass
class MinifyResult:
    """What a minification produced; ``record()`` is ``report.json`` (docs/minify.md)."""

    failure: Outcome
    before: GraphCase
    after: GraphCase
    repro: Path
    queries: int  # every isolated query of the run (capture, stages, reduction, checks)
    reduction_queries: int  # those the reducer asked (cache misses)
    seconds: float
    verified: bool
    accuracy: Accuracy
    bisect: BisectReport | None = None
    resumed_from: str | None = None
    bisected: Bisected | None = None  # a resumed run's: the interrupted run's bisection, as it saved it
    run_dir: Path | None = None
    notes: list[str] = field(default_factory=list)
    failure_rate: float | None = None  # a flaky failure: how often it failed when measured (minifier.stages.flaky)
    below: Below | None = None  # the subsystem that breaks the graph, and a workaround (minifier.bisect.subsystem)
    timeline: list[TimelineStep] = field(default_factory=list)
    releases: Releases | None = None  # the repro under other torch releases (--torch-versions)
    pending: list[str] = field(default_factory=list)  # what is still being looked at, the repro written (afterwards)

    def distributed(self, bisected: Bisected | None) -> dict[str, Any]:
        """Where a distributed job's repro comes from, and what it runs its collectives on."""
        from .repro.writer import needs_process_group

        job = self.after.distributed or {}
        out = dict(bisected.distributed or {}) if bisected is not None else {}
        out.update({k: v for k, v in job.items()})
        out["process_group"] = "fake" if needs_process_group(self.after) else None  # none left: the repro needs none
        return out

    def record(self) -> MinifyRecord:
        """What this minification produced, as data: report.json's (docs/minify.md)."""
        signature = self.failure.failure.signature if self.failure.failure else None
        stages = stage_names(self.before.backend)
        bisected = Bisected.of(self.bisect, self.before, signature) if self.bisect is not None else self.bisected
        statuses = (bisected.statuses if bisected is not None else None) or {self.failure.stage: "fail"}
        from_a_job = self.after.distributed or (bisected is not None and bisected.nproc > 1)
        return MinifyRecord(
            failure=FailureSummary(
                kind=signature.kind if signature else None,
                stage=self.failure.stage,
                exception=signature.exception if signature else None,
                message=signature.message if signature else None,
            ),
            stages={s: statuses[s] for s in stages if s in statuses},
            graph=GraphRef(self.before.boundary, self.before.index, self.before.kind),
            nodes_before=self.before.node_count,
            nodes_after=self.after.node_count,
            ops_after=tuple(self.after.op_names()),
            inputs_after=tuple(InputRecord.of(i) for i in self.after.inputs),
            queries=self.queries,
            reduction_queries=self.reduction_queries,
            seconds=round(self.seconds, 2),
            repro=str(self.repro),
            verified=self.verified,
            failure_rate=None if self.failure_rate is None else round(self.failure_rate, 3),
            below=BelowRecord.of(self.below or Below()),
            accuracy=self.accuracy,
            inputs="random" if all(i.is_random for i in self.after.inputs if i.is_tensor) else "real",
            distributed=plain_json(self.distributed(bisected)) if from_a_job else None,
            config=plain_json(self.after.config),
            config_missing=tuple(missing_config(self.after.config)),
            run_dir=str(self.run_dir) if self.run_dir else None,
            resumed_from=self.resumed_from,
            kernel=bisected.kernel if bisected is not None else None,
            notes=tuple(self.notes),
            script=bisected.script if bisected is not None else None,
            graphs=None if bisected is None else bisected.graphs,
            timeline=tuple(self.timeline),
            releases=self.releases,
            pending=tuple(self.pending),
        )

    def to_json(self) -> dict[str, Any]:
        return self.record().to_json()


# --------------------------------------------------------------------------- #
# The record: report.json as frozen data, and reading it back
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class FailureSummary:
    """report.json's ``failure``: the failure minified and the stage it fails at.

    A shape of its own, not a :class:`~minifier.bisect.report.FailureRecord`: ``kind``
    comes first and there are no details (docs/minify.md). ``kind``, ``exception`` and
    ``message`` are null when the outcome carried no failure.
    """

    kind: str | None
    stage: str
    exception: str | None
    message: str | None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "stage": self.stage, "exception": self.exception, "message": self.message}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FailureSummary:
        return cls(data.get("kind"), data["stage"], data.get("exception"), data.get("message"))


@dataclass(frozen=True)
class InputRecord:
    """An input of the minimized graph (an entry of ``inputs_after``); a scalar's shape and stride are null.

    ``dtype``: a tensor's dtype (``float32``), or a scalar's Python type name (``int``).
    ``dynamic_dims``: the dims kept symbolic.
    """

    name: str
    shape: tuple[int, ...] | None
    stride: tuple[int, ...] | None
    dtype: str
    dynamic_dims: tuple[int, ...] = ()

    @classmethod
    def of(cls, graph_input: GraphInput) -> InputRecord:
        meta = graph_input.meta
        return cls(
            name=graph_input.name,
            shape=None if meta is None else tuple(meta.shape),
            stride=None if meta is None else tuple(meta.stride),
            dtype=meta.dtype if meta is not None else type(graph_input.value).__name__,
            dynamic_dims=tuple(graph_input.symbolic_dims),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": None if self.shape is None else list(self.shape),
            "stride": None if self.stride is None else list(self.stride),
            "dtype": self.dtype,
            "dynamic_dims": list(self.dynamic_dims),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InputRecord:
        shape, stride = data.get("shape"), data.get("stride")
        return cls(
            name=data["name"],
            shape=None if shape is None else tuple(shape),
            stride=None if stride is None else tuple(stride),
            dtype=data.get("dtype", ""),
            dynamic_dims=tuple(data.get("dynamic_dims") or ()),
        )


@dataclass(frozen=True, kw_only=True)
class MinifyRecord:
    """report.json of ``minify run`` and ``minify repro`` (and their ``--json``), as data (docs/minify.md).

    Fields are the JSON's keys, in its order. Keys written only when set:
    ``failure_rate`` (a flaky failure), ``distributed`` (a distributed job's graph),
    ``script`` with ``graphs`` (a bisection came first: its stage table) and ``versions``
    with ``fixed_in`` and ``regressed_in`` (``--torch-versions``), ``pending`` (what was still
    being looked at when it was written: the repro is written first). ``subsystem``
    and ``workaround`` (``below``) are always written, null when not searched.

    Free-form JSON, kept as read: ``distributed`` (the job's keys, docs/distributed.md),
    ``config`` (module -> key -> a literal or a marker of why the repro cannot set it:
    whatever the program's config held), and the parts of :class:`BelowRecord` and
    :class:`GraphRecord` they say. A reader of an older report.json gets defaults for
    the keys it lacks.
    """

    status: str = "minified"
    failure: FailureSummary
    stages: dict[str, str]
    graph: GraphRef
    nodes_before: int
    nodes_after: int
    ops_after: tuple[str, ...]
    inputs_after: tuple[InputRecord, ...]
    queries: int
    reduction_queries: int
    seconds: float
    repro: str
    verified: bool
    failure_rate: float | None = None
    below: BelowRecord = BelowRecord()
    accuracy: bool | str = False
    inputs: str = "random"
    distributed: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    config_missing: tuple[str, ...] = ()
    run_dir: str | None = None
    resumed_from: str | None = None
    kernel: str | None = None
    notes: tuple[str, ...] = ()
    script: str | None = None
    graphs: tuple[GraphRecord, ...] | None = None
    timeline: tuple[TimelineStep, ...] = ()
    releases: Releases | None = None
    pending: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "schema": REPORT_SCHEMA,
            "failure": self.failure.to_json(),
            "stages": dict(self.stages),
            "graph": self.graph.to_json(),
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "ops_after": list(self.ops_after),
            "inputs_after": [i.to_json() for i in self.inputs_after],
            "queries": self.queries,
            "reduction_queries": self.reduction_queries,
            "seconds": self.seconds,
            "repro": self.repro,
            "verified": self.verified,
            **({"failure_rate": self.failure_rate} if self.failure_rate is not None else {}),
            **self.below.to_json(),
            "accuracy": self.accuracy,
            "inputs": self.inputs,
            **({"distributed": self.distributed} if self.distributed is not None else {}),
            "config": self.config,
            "config_missing": list(self.config_missing),
            "run_dir": self.run_dir,
            "resumed_from": self.resumed_from,
            "kernel": self.kernel,
            "notes": list(self.notes),
            **(
                {"script": self.script, "graphs": [g.to_json() for g in self.graphs]} if self.graphs is not None else {}
            ),
            "timeline": [step.to_json() for step in self.timeline],
            **(self.releases.to_json() if self.releases is not None else {}),
            **({"pending": list(self.pending)} if self.pending else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MinifyRecord:
        graphs = data.get("graphs")
        return cls(
            status=data["status"],
            failure=FailureSummary.from_json(data["failure"]),
            stages=dict(data.get("stages") or {}),
            graph=GraphRef.from_json(data["graph"]),
            nodes_before=data["nodes_before"],
            nodes_after=data["nodes_after"],
            ops_after=tuple(data.get("ops_after") or ()),
            inputs_after=tuple(InputRecord.from_json(i) for i in data.get("inputs_after") or ()),
            queries=data.get("queries", 0),
            reduction_queries=data.get("reduction_queries", 0),
            seconds=data.get("seconds", 0.0),
            repro=data["repro"],
            verified=data.get("verified", False),
            failure_rate=data.get("failure_rate"),
            below=BelowRecord.from_json(data),
            accuracy=data.get("accuracy", False),
            inputs=data.get("inputs", "random"),
            distributed=data.get("distributed"),
            config=data.get("config") or {},
            config_missing=tuple(data.get("config_missing") or ()),
            run_dir=data.get("run_dir"),
            resumed_from=data.get("resumed_from"),
            kernel=data.get("kernel"),
            notes=tuple(data.get("notes") or ()),
            script=data.get("script"),
            graphs=None if graphs is None else tuple(GraphRecord.from_json(g) for g in graphs),
            timeline=tuple(TimelineStep.from_json(t) for t in data.get("timeline") or ()),
            releases=Releases.from_json(data),
            pending=tuple(data.get("pending") or ()),
        )


def read_report(path: str | os.PathLike[str]) -> MinifyRecord | BisectRecord:
    """The record a report.json holds, read as JSON (never unpickled), chosen by its ``status``.

    ``minified``: a :class:`MinifyRecord`; ``bisected``, or ``no-failure`` with a stage
    table (``graphs``): a :class:`BisectRecord`. Anything else (the ``error``,
    ``no-failure``, ``flaky`` or ``interrupted`` report of a run that ended without a
    result, or a file that is not a report) raises :class:`~pt2kit.errors.CorruptRecord`.
    """
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise CorruptRecord(f"cannot read {path}: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorruptRecord(f"{path}: not JSON ({e})") from None
    status = data.get("status") if isinstance(data, dict) else None
    schema = data.get("schema", 1) if isinstance(data, dict) else 1
    if not isinstance(schema, int) or schema > REPORT_SCHEMA:
        raise CorruptRecord(
            f"{path}: written by a newer pt2kit (report schema {schema!r}; this one reads up to {REPORT_SCHEMA})"
        )
    if status == "minified":
        read: Any = MinifyRecord.from_json
    elif status == "bisected" or (status == "no-failure" and "graphs" in data):
        read = BisectRecord.from_json
    elif isinstance(status, str):
        said = (str(data.get("message") or "").strip().splitlines() or ["no result"])[0]
        raise CorruptRecord(f"{path}: the report of a run that ended without a result (status {status!r}: {said})")
    else:
        raise CorruptRecord(f"{path}: not a pt2kit report (no status)")
    try:
        return read(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CorruptRecord(f"{path}: a {status!r} report that cannot be read ({type(e).__name__}: {e})") from None
