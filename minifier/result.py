"""What a minification produced: :class:`MinifyResult`, and its ``report.json`` (docs/minify.md).

Data only: :func:`minifier.minification.minify_case` fills one in, :mod:`minifier.report`
prints it for people, and :meth:`MinifyResult.to_json` is ``report.json`` and the
``--json`` twin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .bisect.report import BisectReport, Row
from .unit.case import GraphCase
from .capture.context import missing_config
from .stages.run import Outcome, stage_names
from .bisect.subsystem import Below

if TYPE_CHECKING:
    from .unit.accuracy import Accuracy


@dataclass
class MinifyResult:
    """What a minification produced; ``to_json()`` is ``report.json`` (docs/minify.md)."""

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
    run_dir: Path | None = None
    notes: list[str] = field(default_factory=list)
    failure_rate: float | None = None  # a flaky failure: how often it failed when measured (minifier.stages.flaky)
    below: Below | None = None  # the subsystem that breaks the graph, and a workaround (minifier.bisect.subsystem)
    timeline: list[tuple[str, float, float | None]] = field(default_factory=list)

    def distributed(self) -> dict[str, Any]:
        """Where a distributed job's repro comes from, and what it runs its collectives on."""
        from .repro.writer import needs_process_group

        job = self.after.distributed or {}
        out = dict(self.bisect.distributed() or {}) if self.bisect is not None else {}
        out.update({k: v for k, v in job.items()})
        out["process_group"] = "fake" if needs_process_group(self.after) else None  # none left: the repro needs none
        return out

    def inputs_summary(self) -> str:
        tensors = [i for i in self.after.inputs if i.is_tensor]
        real = [i.name for i in tensors if not i.is_random]
        if not real:
            return f"{len(tensors)} random tensors (no data file)"
        return f"{len(tensors) - len(real)} random, {len(real)} real ({', '.join(real)}) in a data file"

    def _dynamo_row(self) -> Row | None:
        if self.bisect is None:
            return None
        return next(
            (
                r
                for r in self.bisect.rows
                if r.boundary == "dynamo" and r.case is not None and r.case.index == self.before.index
            ),
            None,
        )

    def to_json(self) -> dict[str, Any]:
        signature = self.failure.failure.signature if self.failure.failure else None
        stages = stage_names(self.before.backend)
        statuses = {self.failure.stage: "fail"}
        dynamo_row = self._dynamo_row()
        if dynamo_row is not None:  # it ran all four stages; an aot row only two
            statuses = {s: ("pass" if o.passed else "fail") for s, o in dynamo_row.outcomes.items()}
        return {
            "status": "minified",
            "failure": {
                "kind": signature.kind if signature else None,
                "stage": self.failure.stage,
                "exception": signature.exception if signature else None,
                "message": signature.message if signature else None,
            },
            "stages": {s: statuses[s] for s in stages if s in statuses},
            "graph": {"boundary": self.before.boundary, "index": self.before.index, "kind": self.before.kind},
            "nodes_before": self.before.node_count,
            "nodes_after": self.after.node_count,
            "ops_after": self.after.op_names(),
            "inputs_after": [
                {
                    "name": i.name,
                    "shape": list(i.meta.shape) if i.meta else None,
                    "stride": list(i.meta.stride) if i.meta else None,
                    "dtype": i.meta.dtype if i.meta else type(i.value).__name__,
                    "dynamic_dims": list(i.symbolic_dims),
                }
                for i in self.after.inputs
            ],
            "queries": self.queries,
            "reduction_queries": self.reduction_queries,
            "seconds": round(self.seconds, 2),
            "repro": str(self.repro),
            "verified": self.verified,
            **({"failure_rate": round(self.failure_rate, 3)} if self.failure_rate is not None else {}),
            **(self.below or Below()).to_json(),
            "accuracy": self.accuracy,
            "inputs": "random" if all(i.is_random for i in self.after.inputs if i.is_tensor) else "real",
            **(
                {"distributed": self.distributed()}
                if self.after.distributed or (self.bisect and self.bisect.nproc > 1)
                else {}
            ),
            "config": self.after.config,
            "config_missing": missing_config(self.after.config),
            "run_dir": str(self.run_dir) if self.run_dir else None,
            "resumed_from": self.resumed_from,
            "kernel": self.bisect.kernel if self.bisect is not None else None,
            "notes": self.notes,
            **(
                {"script": self.bisect.script, "graphs": [row.to_json(self.bisect.stages) for row in self.bisect.rows]}
                if self.bisect is not None
                else {}
            ),
            "timeline": [
                {"step": step, "seconds": seconds, **({"ended": ended} if ended is not None else {})}
                for step, seconds, ended in self.timeline
            ],
        }
