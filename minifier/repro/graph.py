"""The graph in a ``repro.py``: ``class Repro``, in FX's own code.

A repro shows the failing graph as code a person can read and edit: the
``forward`` FX generates for it (``graph.python_code``), inside ``class
Repro(torch.nn.Module)``, whose buffers are the graph's constants (from the data
file). The bodies of higher-order ops (``cond``, ``while_loop``, ``wrap``...) are
subgraph modules: each becomes a class of its own, innermost first, named after its
owner (``Repro_true_graph_0``), and a body's own higher-order calls go through
``call_hop`` (:mod:`minifier.unit.runtime`) so that FX can trace the body again
(:data:`HOP_CALL`). With an accuracy check the writer adds ``ReproFloat64``: the
same graph with the dtypes written in it promoted, for the fp64 reference.
"""

from __future__ import annotations

import functools
import operator
import re
import textwrap

import torch
import torch.fx as fx

from pt2kit.seams import ops

from ..unit.case import GraphCase
from ..unit.graphio import subgraphs


def module_class(case: GraphCase, gm: fx.GraphModule | None = None, name: str = "Repro") -> str:
    """``class Repro``: the graph as FX's readable code, its constants, and its subgraph modules."""
    gm = case.gm if gm is None else gm
    code = gm.graph.python_code(root_module="self")
    lines = [f"class {name}(torch.nn.Module):", "    def __init__(self, data):", "        super().__init__()"]
    bodies = subgraphs(gm)
    for constant in case.constants:
        if not any(constant.startswith(f"{attr}.") for attr in bodies):  # (a body registers its own)
            lines.append(f"        self.register_buffer({constant!r}, data[{('constant:' + constant)!r}])")
    for attr in bodies:
        lines.append(f"        self.{attr} = graph_module({_subgraph_class(name, attr)}(data))")
    if weighed := weighed_outputs(case):  # (read by forward_backward, never by forward)
        grads = ", ".join(f"{k}: data[{key!r}]" for k, key in weighed.items())
        lines.append(f"        self.output_grads = {{{grads}}}  # the gradients the program's backward gave these outputs")
    source = _reference_helpers(code.src)
    if case.handed:  # FX traces it, as a body, before its backend gets it (see repro.run)
        source = opaque_calls(HOP_CALL.sub(lambda m: f"call_hop({m.group(1)!r}, ", source), gm.graph)
    body = textwrap.indent(source.strip().rstrip(), "    ")
    return "".join(_subgraph_classes(gm, name, "", list(case.constants))) + "\n".join(lines) + "\n\n" + body


def weighed_outputs(case: GraphCase) -> dict[int, str]:
    """The outputs (by position) whose gradient the program's backward gave (:attr:`GraphCase.output_grads`): their
    data keys. ``Repro`` holds them as ``output_grads``, and the repro's ``forward_backward`` weighs its loss by them."""
    names = (case.output_names() or []) if case.backward and case.boundary == "dynamo" else []
    return {k: f"grad:{name}" for k, name in enumerate(names) if name in case.output_grads}


def _subgraph_class(owner: str, attr: str) -> str:
    return f"{owner}_{attr}"


def _subgraph_classes(gm: fx.GraphModule, owner: str, path: str, constants: list[str]) -> list[str]:
    """A class per subgraph module (the body of a higher-order op), innermost first.

    A body's constants (``path`` + its own name) are registered by its class, from the
    repro's data, before its code is traced (:func:`minifier.unit.runtime.graph_module`).
    """
    out = []
    for attr, sub in subgraphs(gm).items():
        name, where = _subgraph_class(owner, attr), f"{path}{attr}."
        nested = subgraphs(sub)
        out += _subgraph_classes(sub, name, where, constants)
        code = _sizes_as_lists(sub.graph).python_code(root_module="self").src.strip("\n")
        code = HOP_CALL.sub(lambda m: f"call_hop({m.group(1)!r}, ", _reference_helpers(code))  # a body's own higher-order ops
        code = opaque_calls(code, sub.graph)
        own = [
            c
            for c in constants
            if c.startswith(where) and not any(c.startswith(f"{where}{inner}.") for inner in nested)
        ]
        lines = [f"class {name}(torch.nn.Module):", "    def __init__(self, data):", "        super().__init__()"]
        lines += [
            f"        self.register_buffer({c[len(where):]!r}, data[{('constant:' + c)!r}])" for c in own
        ]
        lines += [f"        self.{inner} = graph_module({_subgraph_class(name, inner)}(data))" for inner in nested]
        lines.append("")
        out.append("\n".join(lines) + "\n" + textwrap.indent(code.rstrip(), "    ") + "\n\n\n")
    return out


#: A float64 reference's helpers (:func:`minifier.unit.float64.float64_graph`), which FX names by
#: their module: the repro defines them under their own names.
REFERENCE_HELPER = re.compile(r"\bminifier_unit_float64_(\w+)\(")


def _reference_helpers(code: str) -> str:
    return REFERENCE_HELPER.sub(lambda m: f"{m.group(1)}(", code)


#: A higher-order op called in a body's code: routed through ``call_hop`` so that FX can trace the body.
HOP_CALL = re.compile(r"torch\.ops\.higher_order\.(\w+)\(")


def opaque_calls(code: str, graph: fx.Graph) -> str:
    """``code`` with each call FX's tracing would run rather than record written through ``call_opaque``.

    FX traces a body by running its code on proxies; a function of torch's outside
    ``__torch_function__`` (vmap's ``_add_batch_dim`` and its levels, grad mode,
    ``torch._check``) would run there, on proxies or once for good, and drop out of
    the body. ``call_opaque(fn, ...)`` is recorded as the call to ``fn`` that dynamo
    recorded (:func:`minifier.unit.runtime.graph_module`).
    """
    for target in {n.target for n in graph.nodes if n.op == "call_function" and _opaque_to_fx(n.target)}:
        name = ops.qualified_name(target)
        code = re.sub(rf"(?<![\w.]){re.escape(name)}\(", f"call_opaque({name}, ", code)
    lines = code.split("\n")
    for node in graph.nodes:
        if node.op == "call_function" and node.target in IN_PLACE_BUILTINS:
            lines = [_opaque_in_place(line, node.name, node.target.__name__) for line in lines]
    return "\n".join(lines)


#: The in-place builtins dynamo records (``x[i] = v``, ``x += y``), which FX writes as statements
#: (``x[i] = v;  setitem = x``) and a proxy cannot take: written through ``call_opaque`` too.
IN_PLACE_BUILTINS = (operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv)


def _opaque_in_place(line: str, name: str, builtin: str) -> str:
    """``line``, where it is FX's statement for in-place node ``name``, as a ``call_opaque`` of ``builtin``."""
    head, sep, tail = line.partition(f";  {name} = ")
    if not sep:
        return line
    target, semicolon, freed = tail.partition(";")  # (what FX frees after the node: ``;  x = y = None``)
    indent = head[: len(head) - len(head.lstrip())]
    statement = head.strip()
    if builtin == "setitem":
        value = statement.rsplit(" = ", 1)[1]
        index = statement[len(target) + 1 : -len(f"] = {value}")]
        args = f"{target}, {index}, {value}"
    else:
        args = f"{target}, {statement.split(' ', 2)[2]}"  # (``x += y``)
    return f"{indent}{name} = call_opaque(operator.{builtin}, {args}){semicolon}{freed}"


def _opaque_to_fx(target: object) -> bool:
    module = getattr(target, "__module__", None) or ""
    if not callable(target) or not module.startswith("torch") or module.startswith(("torch._ops", "torch.ops")):
        return False  # (an operator or a builtin FX records itself; an op's overload or packet)
    return target not in _traced_by_fx()


@functools.cache
def _traced_by_fx() -> frozenset[object]:
    """torch's functions FX's proxies take part in (``__torch_function__``), and those its body tracer keeps as calls."""
    overridable = [f for fs in torch.overrides.get_overridable_functions().values() for f in fs]
    return frozenset([*overridable, *torch.overrides.get_ignored_functions()])


#: Factories that take a size as varargs (``torch.ones(n, m)``): FX cannot trace such a call
#: when the sizes are symbolic (its proxies are no ints), but can the same call with the size
#: as one list (``torch.ones([n, m])``), which is what a body's class is written with.
VARARG_SIZE_FACTORIES = (torch.ones, torch.zeros, torch.empty, torch.rand, torch.randn)


def _sizes_as_lists(graph: fx.Graph) -> fx.Graph:
    """``graph``, or a copy in which each varargs size of a factory call is one list."""
    calls = [
        n
        for n in graph.nodes
        if n.op == "call_function"
        and n.target in VARARG_SIZE_FACTORIES
        and len(n.args) > 1
        and any(isinstance(a, fx.Node) for a in n.args)
    ]
    if not calls:
        return graph
    copy = fx.Graph()
    mapping: dict[fx.Node, fx.Node] = {}
    output = copy.graph_copy(graph, mapping)
    copy.output(output)
    for node in calls:
        new = mapping[node]
        new.args = (list(new.args),)
    return copy
