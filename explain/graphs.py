"""What one dynamo graph holds, summarized for people and tools.

``torch._dynamo.explain`` counts only ``call_function`` nodes, so ``x.sin()`` (a
``call_method`` node) and a submodule call (``call_module``) vanish from its op count.
A :class:`GraphSummary` names *every* op node, in graph order, the way the user wrote it:

- ``call_function`` nodes by torch's own qualified name (``torch.sin``, ``operator.add``);
- ``call_method`` nodes by receiver type and method (``Tensor.sin``);
- ``call_module`` nodes by module class (``nn.Linear``).

It also carries what PyTorch/XLA's compilation analysis showed per graph: the number of
graph inputs and outputs, and a graph hash that tells two recompiles apart. The hash is
taken over the graph's readable code *with* tensor shapes, dtypes and strides, so a
recompile for a new dtype or size gets a new hash even though its code is the same.

A :class:`CapturedGraph` is one graph of an explanation: its summary, the function (or
resume function) it came from, the guards of its cache entry and what compiling it cost.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Mapping
from typing import Any

import torch
import torch.fx

from pt2kit.names import op_name

from .guards import GuardLine

OP_NODE_KINDS = ("call_function", "call_method", "call_module")
"""The fx node kinds that are ops (reports count these, not placeholders or outputs)."""


@dataclasses.dataclass(frozen=True)
class GraphSummary:
    """The ops, arity and identity of one captured dynamo graph."""

    hash: str
    ops: tuple[str, ...]
    inputs: int
    outputs: int

    @property
    def op_count(self) -> int:
        return len(self.ops)

    @property
    def op_counts(self) -> dict[str, int]:
        """How many times each op occurs, most frequent first."""
        return dict(Counter(self.ops).most_common())

    def to_dict(self) -> dict[str, object]:
        return {
            "hash": self.hash,
            "ops": list(self.ops),
            "op_count": self.op_count,
            "op_counts": self.op_counts,
            "inputs": self.inputs,
            "outputs": self.outputs,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraphSummary:
        """The summary :meth:`to_dict` wrote (``op_count`` and ``op_counts`` follow from ``ops`` again)."""
        return cls(hash=data["hash"], ops=tuple(data["ops"]), inputs=data["inputs"], outputs=data["outputs"])


@dataclasses.dataclass(frozen=True)
class CapturedGraph:
    """One graph dynamo captured: where from, its ops and guards, and what compiling it cost."""

    index: int
    compile_id: str
    function: str
    filename: str
    firstlineno: int
    resumed_at: int | None
    summary: GraphSummary
    guards: tuple[GuardLine, ...]
    compile_seconds: float
    backend_seconds: float

    @property
    def ops(self) -> tuple[str, ...]:
        return self.summary.ops

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "compile_id": self.compile_id,
            "function": self.function,
            "filename": self.filename,
            "firstlineno": self.firstlineno,
            "resumed_at": self.resumed_at,
            **self.summary.to_dict(),
            "guards": [guard.to_dict() for guard in self.guards],
            "compile_seconds": self.compile_seconds,
            "backend_seconds": self.backend_seconds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapturedGraph:
        """The graph :meth:`to_dict` wrote, its summary read from the same (flat) mapping; every field is
        in the JSON, so a graph read back equals the one written."""
        return cls(
            index=data["index"],
            compile_id=data["compile_id"],
            function=data["function"],
            filename=data["filename"],
            firstlineno=data["firstlineno"],
            resumed_at=data["resumed_at"],
            summary=GraphSummary.from_dict(data),
            guards=tuple(GuardLine.from_dict(guard) for guard in data["guards"]),
            compile_seconds=data["compile_seconds"],
            backend_seconds=data["backend_seconds"],
        )


def summarize_graph(gm: torch.fx.GraphModule) -> GraphSummary:
    """Summarize ``gm`` as dynamo hands it to the backend (before any backend pass)."""
    nodes = list(gm.graph.nodes)
    ops = tuple(op_name(node, gm) for node in nodes if node.op in OP_NODE_KINDS)
    inputs = sum(1 for node in nodes if node.op == "placeholder")
    outputs = sum(_count_output_leaves(node.args[0]) for node in nodes if node.op == "output")
    return GraphSummary(hash=graph_hash(gm), ops=ops, inputs=inputs, outputs=outputs)


def graph_hash(gm: torch.fx.GraphModule) -> str:
    """A short, stable hash of the graph's code together with its tensor metadata."""
    readable = gm.print_readable(print_output=False, include_stride=True, include_device=True)
    return hashlib.sha256(readable.encode()).hexdigest()[:16]


def _count_output_leaves(value: object) -> int:
    """Graph outputs are a (possibly nested) tuple of nodes; count the nodes."""
    if isinstance(value, (tuple, list)):
        return sum(_count_output_leaves(item) for item in value)
    if isinstance(value, dict):
        return sum(_count_output_leaves(item) for item in value.values())
    return 1 if isinstance(value, torch.fx.Node) else 0


__all__ = ["GraphSummary", "CapturedGraph", "summarize_graph", "graph_hash", "op_name", "OP_NODE_KINDS"]
