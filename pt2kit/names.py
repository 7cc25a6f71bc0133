"""How pt2kit names a graph's ops to a user, in every tool's report alike.

``aten.relu.default`` in ``report.json``'s ``ops_after`` is the same name that
``python -m explain`` gives the op in its graph listing and that a replay prints.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .seams import ops


def op_name(node: fx.Node, gm: fx.GraphModule | None = None) -> str:
    """The name a user would recognise for one op node.

    ``aten.relu.default`` for aten overloads (``report.json``'s ``ops_after``), torch's
    qualified name for functions (``torch.sin``, ``torch._C._nn.linear``,
    ``operator.add``), ``Tensor.sin`` for method calls on tensors, and the module
    class (``nn.Linear``) for ``call_module`` nodes when the graph module is given.
    """
    if node.op == "call_method":
        receiver = node.args[0] if node.args else None
        example = receiver.meta.get("example_value") if isinstance(receiver, fx.Node) else None
        owner = "Tensor" if example is None or isinstance(example, torch.Tensor) else type(example).__name__
        return f"{owner}.{node.target}"
    if node.op == "call_module":
        if gm is None:
            return f"module.{node.target}"
        module_type = type(gm.get_submodule(str(node.target)))
        if module_type.__module__.startswith("torch.nn."):
            return f"nn.{module_type.__name__}"
        return f"{module_type.__module__}.{module_type.__qualname__}"
    if node.op != "call_function":
        raise ValueError(f"not an op node: {node.op}")
    target = node.target
    if ops.is_overload(target):
        return ".".join(ops.overload_name(target))
    if ops.is_packet(target):
        return ".".join(ops.packet_name(target))
    try:
        name = ops.qualified_name(target)
    except Exception:  # noqa: BLE001 - torch raises for callables it did not create (lambdas)
        name = getattr(target, "__qualname__", None) or repr(target)
    # builtins live in C modules with a leading underscore; users import them without it
    for c_module, public in (("_operator.", "operator."), ("builtins.", "")):
        if name.startswith(c_module):
            return public + name[len(c_module) :]
    return name


def ops_of_nodes_named(gm: fx.GraphModule, name: str) -> tuple[str, ...]:
    """The ops of the call nodes named ``name`` in ``gm`` and in its higher-order ops' bodies, each once, sorted.

    (A body's nodes are named apart from the outer graph's: a cond branch and the graph around it
    may each have a ``sum_1``.)
    """
    return tuple(
        sorted(
            {
                op_name(n, sub)
                for sub in gm.modules()
                if isinstance(sub, fx.GraphModule)
                for n in sub.graph.nodes
                if n.name == name and n.op == "call_function"
            }
        )
    )
