"""FX graphs as plain literals: how a repro's graph is read back exactly, without re-tracing its code.

A repro holds its graph twice: as readable code (what the user runs) and, inside its
``PT2KIT = {...}`` literal, as this structure (what pt2kit reads). Reading code back
means executing and re-tracing it, and FX's tracer cannot do that faithfully:
higher-order ops reject proxies (``cond``, ``tag_activation_checkpoint``), ``torch.Size``
rejects symbolic sizes, constant calls get baked in, ``node.meta`` is lost. The
structure has none of these problems: :func:`dump_graph` writes each node's op,
target, arguments and name, and each subgraph module (the bodies of higher-order
ops) recursively; :func:`load_graph` rebuilds the very same graph.

Values are plain literals (``ast.literal_eval`` reads them). Anything that is not a
``None``/``bool``/``int``/``str``/finite ``float`` is a tagged tuple: ``("n", name)`` a
node, ``("t", [...])`` a tuple, ``("l", [...])`` a list, ``("d", [[k, v], ...])`` a dict,
``("dtype", "float32")``, ``("device", "cpu")``, ``("layout", ...)``,
``("memory_format", ...)``, ``("slice", [start, stop, step])``, ``("size", [...])``,
``("float", "inf")``, ``("complex", [re, im])``, ``("ellipsis",)``, ``("placement", "Shard(0)")``
(a DTensor placement).

Targets are qualified names (``torch.ops.aten.relu.default``, ``torch.sin``,
``_operator.add``, ``torch.ops.higher_order.cond``) resolved by import; a custom op
resolves once the user module or carried definitions that register it have run.
"""

from __future__ import annotations

import builtins
import copy
import importlib
import inspect
import math
from typing import Any

import torch
import torch.fx as fx

from pt2kit.seams import ops


class GraphFormatError(ValueError):
    """A graph holds something this format cannot write, or a written graph cannot be read."""


# --------------------------------------------------------------------------- #
# Targets
# --------------------------------------------------------------------------- #


def target_name(target: Any) -> str:
    """The qualified name of a ``call_function`` target, the way :func:`resolve` reads it back."""
    if ops.is_overload(target):
        return "torch.ops." + ".".join(ops.overload_name(target))
    if ops.is_packet(target):
        return "torch.ops." + ".".join(ops.packet_name(target))
    if ops.is_higher_order(target):
        return f"torch.ops.higher_order.{target.name()}"
    try:
        name = ops.qualified_name(target)
    except Exception as e:  # noqa: BLE001 - torch raises for callables it did not create
        raise GraphFormatError(f"cannot name the function {target!r}: {e}") from None
    if name.startswith(("__main__.", "__mp_main__.")) or "<locals>" in name or "<lambda>" in name:
        raise GraphFormatError(f"the function {name} has no importable name")  # (the program's own: carried otherwise)
    if not _reaches(name, target):  # defined inside another function (dynamo's own, for ``x.data = y``)
        if ops.standalone_source(target) is not None:  # (the repro defines it from its source: writer._imports)
            return DEFINED + target.__name__
        raise GraphFormatError(f"the function {name} has no importable name")
    return name


#: A target the repro defines itself, from the function's source: ``defined:<its name>``.
DEFINED = "defined:"


def _reaches(name: str, target: Any) -> bool:
    """Does the qualified name of a Python function lead back to it? (A function defined inside another does not.)"""
    if not inspect.isfunction(target):
        return True
    try:
        return resolve(name) is target
    except Exception:  # noqa: BLE001 - any failure to follow the name: it does not lead there
        return False


def resolve(name: str) -> Any:
    """The object a qualified name refers to: import the longest module prefix, then getattr."""
    parts = name.split(".")
    if parts[0] == "torch" and len(parts) > 1 and parts[1] == "ops":
        value: Any = torch.ops
        for part in parts[2:]:
            try:
                value = getattr(value, part)
            except AttributeError:
                if parts[2] != "prims":
                    raise
                ops.load_inductor_prims()  # one of Inductor's own prims: registered by its module
                value = getattr(value, part)
        return value
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            value = getattr(value, part)
        return value
    if len(parts) == 1 and hasattr(builtins, name):
        return getattr(builtins, name)
    raise GraphFormatError(f"cannot resolve {name!r}")


# --------------------------------------------------------------------------- #
# Values
# --------------------------------------------------------------------------- #


def encode(value: Any) -> Any:
    """One argument value as a literal (see the module docstring)."""
    if isinstance(value, fx.Node):
        return ("n", value.name)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else ("float", repr(value))
    if isinstance(value, torch.Size):
        return ("size", [encode(v) for v in value])
    if isinstance(value, tuple):
        return ("t", [encode(v) for v in value])
    if isinstance(value, list):
        return ("l", [encode(v) for v in value])
    if isinstance(value, dict):
        return ("d", [[encode(k), encode(v)] for k, v in value.items()])
    if isinstance(value, torch.dtype):
        return ("dtype", str(value).removeprefix("torch."))
    if isinstance(value, torch.device):
        return ("device", str(value))
    if isinstance(value, torch.layout):
        return ("layout", str(value).removeprefix("torch."))
    if isinstance(value, torch.memory_format):
        return ("memory_format", str(value).removeprefix("torch."))
    if isinstance(value, slice):
        return ("slice", [encode(value.start), encode(value.stop), encode(value.step)])
    if isinstance(value, complex):
        return ("complex", [encode(value.real), encode(value.imag)])
    if value is Ellipsis:
        return ("ellipsis",)
    if type(value).__name__ in ("Shard", "Replicate", "Partial") and type(value).__module__.startswith(
        "torch.distributed"
    ):
        from pt2kit.seams.dtensor import placement_code

        return ("placement", placement_code(value))
    raise GraphFormatError(f"cannot write a graph argument of type {type(value).__name__}: {value!r}")


def decode(value: Any, nodes: dict[str, fx.Node]) -> Any:
    """The inverse of :func:`encode`; ``nodes`` maps names to the nodes built so far."""
    if not isinstance(value, tuple):
        return value
    tag, *rest = value
    if tag == "n":
        return nodes[rest[0]]
    if tag == "t":
        return tuple(decode(v, nodes) for v in rest[0])
    if tag == "l":
        return [decode(v, nodes) for v in rest[0]]
    if tag == "d":
        return {decode(k, nodes): decode(v, nodes) for k, v in rest[0]}
    if tag == "size":
        return torch.Size([decode(v, nodes) for v in rest[0]])
    if tag in ("dtype", "layout", "memory_format"):
        return getattr(torch, rest[0])
    if tag == "device":
        return torch.device(rest[0])
    if tag == "slice":
        return slice(*(decode(v, nodes) for v in rest[0]))
    if tag == "float":
        return float(rest[0])
    if tag == "complex":
        return ExactComplex(*(decode(v, nodes) for v in rest[0]))
    if tag == "ellipsis":
        return Ellipsis
    if tag == "placement":
        from pt2kit.seams.dtensor import placement

        return placement(rest[0])
    raise GraphFormatError(f"unknown tag {tag!r} in a written graph")


class ExactComplex(complex):
    """A complex constant that FX writes into a graph's code as it is.

    FX's code generation writes a constant's ``repr``: ``complex(-0.0, 0.0)`` becomes
    ``(-0+0j)``, which Python reads as ``0j`` (the sign of a zero part is lost,
    pytorch#197586), and ``complex(inf, nan)`` becomes ``(inf+nanj)``, which does not
    run. A graph pt2kit rebuilds or writes must run the values the program ran, or
    its eager reference goes wrong with the compiled code: this repr is
    ``complex(-0.0, 0.0)``, and ``inf`` and ``nan`` are names FX's code defines.
    """

    def __repr__(self) -> str:
        return f"complex({self.real!r}, {self.imag!r})"


def exact_constants(gm: fx.GraphModule) -> None:
    """Make every complex constant in ``gm`` and its subgraphs an :class:`ExactComplex`, and its code with them.

    ``gm`` itself is changed (a copy of the program's graph); a subgraph that needs a
    change is copied first, since ``gm`` shares it with the program's own graph.
    """
    for name, child in list(gm.named_children()):
        if isinstance(child, fx.GraphModule) and _has_plain_complex(child):
            child = fx.GraphModule(child, copy.deepcopy(child.graph))
            exact_constants(child)
            setattr(gm, name, child)
    nodes = [n for n in gm.graph.nodes if _plain_complex_in((n.args, n.kwargs))]
    for node in nodes:
        node.args, node.kwargs = fx.node.map_aggregate((node.args, node.kwargs), _exact)
    if nodes:
        gm.recompile()


def _has_plain_complex(gm: fx.GraphModule) -> bool:
    return any(_plain_complex_in((n.args, n.kwargs)) for m in gm.modules() if isinstance(m, fx.GraphModule) for n in m.graph.nodes)


def _exact(value: Any) -> Any:
    return ExactComplex(value) if isinstance(value, complex) and not isinstance(value, ExactComplex) else value


def _plain_complex_in(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_plain_complex_in(v) for v in value)
    if isinstance(value, dict):
        return any(_plain_complex_in(v) for v in value.values())
    return isinstance(value, complex) and not isinstance(value, ExactComplex)


# --------------------------------------------------------------------------- #
# Graphs
# --------------------------------------------------------------------------- #


def subgraphs(gm: fx.GraphModule) -> dict[str, fx.GraphModule]:
    """The graph modules a graph reads with ``get_attr`` or calls with ``call_module``."""
    found: dict[str, fx.GraphModule] = {}
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            try:
                value = gm.get_submodule(str(node.target)) if node.op == "call_module" else attribute_at(gm, str(node.target))
            except AttributeError:
                continue
            if isinstance(value, fx.GraphModule):
                found[str(node.target)] = value
    return found


def all_call_nodes(gm: fx.GraphModule) -> list[fx.Node]:
    """The ``call_function`` nodes of a graph and of all its bodies (higher-order ops' subgraphs).

    What the writer or the accuracy rules ask about the ops a graph calls (Inductor's own
    prims, collectives, random ops), they ask of every level.
    """
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    for sub in subgraphs(gm).values():
        nodes += all_call_nodes(sub)
    return nodes


def attribute_at(module: Any, path: str) -> Any:
    """The attribute at a dotted ``path`` of ``module`` (a ``get_attr`` node's target)."""
    for part in path.split("."):
        module = getattr(module, part)
    return module


def dump_graph(gm: fx.GraphModule) -> dict[str, Any]:
    """A graph (and its subgraph modules, recursively) as a literal."""
    nodes = []
    for node in gm.graph.nodes:
        target = node.target if node.op != "call_function" else target_name(node.target)
        entry = [node.name, node.op, str(target), encode(node.args), encode(node.kwargs)]
        meta = node_meta(node)
        if meta:
            entry.append(meta)
        nodes.append(entry)
    out: dict[str, Any] = {"nodes": nodes}
    children = {name: dump_graph(child) for name, child in subgraphs(gm).items()}
    if children:
        out["subgraphs"] = children
    return out


#: The ``node.meta`` keys pt2kit keeps (and where it keeps them): what dynamic shapes looked like.
DYNAMIC_DIMS = "pt2kit_dynamic_dims"  # a tensor value's symbolic dims
SYMINT = "pt2kit_symint"  # the value is a symbolic int


def node_meta(node: fx.Node) -> dict[str, Any]:
    """What pt2kit keeps of a node's traced value: which of its sizes were symbolic."""
    if DYNAMIC_DIMS in node.meta or SYMINT in node.meta:
        return {k: node.meta[k] for k in (DYNAMIC_DIMS, SYMINT) if k in node.meta}
    from pt2kit.seams.symbolic_shapes import is_symbolic

    value = node.meta.get("example_value", node.meta.get("val"))
    if isinstance(value, torch.Tensor):
        dims = [d for d, size in enumerate(value.shape) if is_symbolic(size)]
        return {DYNAMIC_DIMS: dims} if dims else {}
    if is_symbolic(value):
        return {SYMINT: True}
    return {}


def constants_of(gm: fx.GraphModule, constants: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Those of ``constants`` that ``gm`` reads: its own ``get_attr`` targets, and its bodies'
    constants, each kept under its body's path (``true_graph_0._tensor_constant0``)."""
    targets = {str(n.target) for n in gm.graph.find_nodes(op="get_attr")}
    return {k: v for k, v in constants.items() if k in targets or any(k.startswith(f"{t}.") for t in targets)}


def _within(constants: dict[str, torch.Tensor], path: str) -> dict[str, torch.Tensor]:
    """The constants of the body at ``path``, named as the body names them."""
    return {k[len(path) + 1 :]: v for k, v in constants.items() if k.startswith(f"{path}.")}


def load_graph(
    data: dict[str, Any], constants: dict[str, torch.Tensor] | None = None, defined: dict[str, Any] | None = None
) -> fx.GraphModule:
    """The graph module :func:`dump_graph` wrote, with ``constants`` as its tensor attributes (its bodies' under their paths).

    ``defined``: the repro's own namespace, where a ``defined:`` target (:data:`DEFINED`) is found.
    """
    constants, defined = constants or {}, defined or {}
    root = torch.nn.Module()
    bodies = data.get("subgraphs", {})
    for name, sub in bodies.items():
        _set_attr(root, name, load_graph(sub, _within(constants, name), defined))
    for name, tensor in constants.items():
        if not any(name.startswith(f"{body}.") for body in bodies):
            _set_buffer(root, name, tensor)  # (a dotted one: a body's constant that the graph reads inlined)
    graph = fx.Graph()
    nodes: dict[str, fx.Node] = {}
    try:
        for name, op, target, args, kwargs, *meta in data["nodes"]:
            fn = (defined[target.removeprefix(DEFINED)] if target.startswith(DEFINED) else resolve(target)) if op == "call_function" else target
            node = graph.create_node(op, fn, decode(args, nodes), decode(kwargs, nodes), name=name)
            node.meta.update(meta[0] if meta else {})
            if node.name != name:
                raise GraphFormatError(f"node {name!r} was renamed to {node.name!r}")
            nodes[name] = node
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise GraphFormatError(f"the written graph cannot be rebuilt: {type(e).__name__}: {e}") from None
    try:
        graph.lint()
        return fx.GraphModule(root, graph)
    except (KeyError, ValueError, TypeError, AttributeError, RuntimeError) as e:  # (a get_attr of what no repro holds)
        raise GraphFormatError(f"the written graph cannot be rebuilt: {type(e).__name__}: {e}") from None


def _set_attr(root: torch.nn.Module, path: str, value: torch.nn.Module) -> None:
    *parents, last = path.split(".")
    _parent(root, parents).add_module(last, value)


def _set_buffer(root: torch.nn.Module, path: str, tensor: torch.Tensor) -> None:
    *parents, last = path.split(".")
    _parent(root, parents).register_buffer(last, tensor)


def _parent(root: torch.nn.Module, parents: list[str]) -> torch.nn.Module:
    """The module at ``parents`` under ``root``, plain modules made where there are none."""
    module = root
    for part in parents:
        if not hasattr(module, part):
            module.add_module(part, torch.nn.Module())
        module = getattr(module, part)
    return module
