"""Seam: the inputs dynamo marks as static addresses (a module's parameters and buffers).

dynamo marks every parameter and buffer it lifts into a graph, and every tensor the user
passed to ``torch._dynamo.mark_static_address``, as a *static input*: it writes
``"unguarded"`` (or ``"guarded"``) under ``_dynamo_static_input_type`` in the
placeholder's ``meta["tensor_dict"]``. AOTAutograd reads it there
(``static_input_indices``), and its min-cut partitioner treats such an input as live for
the whole step, so it may recompute a read of it in the backward instead of saving it.
The same graph over plain tensors is partitioned differently; a bug in that choice (a
mutated buffer read again after its update) shows only with the mark. A repro marks the
same inputs with the public ``torch._dynamo.mark_static_address`` before compiling.
"""

from __future__ import annotations

from typing import Any

from . import Seam

SEAM = Seam(
    wraps="placeholder.meta['tensor_dict']['_dynamo_static_input_type'] (torch._dynamo.mark_static_address)",
    features=("minify run and the hook: a module's buffers and parameters stay static inputs in the repro",),
)

#: Where dynamo writes the mark, in a placeholder's ``meta["tensor_dict"]``.
STATIC_INPUT_TYPE = "_dynamo_static_input_type"


def probe() -> None:
    import torch

    seen: list[Any] = []

    def capture(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        seen.extend(static_input_type(n) for n in gm.graph.find_nodes(op="placeholder"))
        return gm.forward

    y = torch.ones(2)
    torch._dynamo.mark_static_address(y, guard=False)
    torch.compile(_probe_add, backend=capture, fullgraph=True)(torch.ones(2), y)
    if sorted(map(str, seen)) != ["None", "unguarded"]:
        raise AttributeError(
            f"dynamo's placeholders no longer carry {STATIC_INPUT_TYPE} in meta['tensor_dict'] (saw {seen})"
        )


def _probe_add(x: Any, y: Any) -> Any:
    return x + y


def static_input_type(node: Any) -> str | None:
    """``"guarded"`` or ``"unguarded"`` for a placeholder dynamo marked static, else None."""
    marked = (node.meta.get("tensor_dict") or {}).get(STATIC_INPUT_TYPE)
    return str(marked) if marked else None
