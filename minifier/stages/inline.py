"""Higher-order ops, inlined: the flatter graph the reducer starts from, when the failure allows.

A higher-order op (activation checkpointing's ``tag_activation_checkpoint``, ``wrap``,
``invoke_subgraph``, ``torch.cond``, a custom ``autograd.Function``'s
``autograd_function_apply``) holds its body as a subgraph module. To the reducer
(:mod:`minifier.reduce.engine`) the op is one node: it can keep it or cut it, never look
inside. When the bug lives in the body (Inductor miscompiles a relu under
checkpointing or in a ``cond`` branch), the minimal repro is the body's op, not the
higher-order op around it.

:func:`inlined` rewrites a graph with every such op replaced by a copy of its body
(``cond`` by one of its branches, as the predicate would pick it; an
``autograd.Function`` by its forward). The result computes the same forward values
but is not the same program (no recomputation, no custom backward), so it is used
only if it still fails the same way, and runs under the lowest stage, its backward
included (:func:`flattened`, asked by :func:`minifier.minification.minify_case` before
the reduction starts): inlined, a checkpoint's body that writes in place is a program
eager's autograd rejects.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import torch.fx as fx

if TYPE_CHECKING:
    from ..isolation.session import Session

from ..unit.case import Boundary, GraphCase, has_effect
from ..unit.check import Check, Stage
from .run import ask
from ..unit.graphio import attribute_at, target_name

#: ``torch.ops.higher_order.<name>``: where the body is and where its operands start.
BODY_AND_OPERANDS = {
    "tag_activation_checkpoint": (0, 1),
    "wrap": (0, 1),
    "invoke_subgraph": (0, 2),
    "autograd_function_apply": (0, 2),
}


def _hop_name(node: fx.Node) -> str | None:
    if node.op != "call_function":
        return None
    try:
        name = target_name(node.target)
    except Exception:  # noqa: BLE001 - an unnameable function is no higher-order op of ours
        return None
    prefix = "torch.ops.higher_order."
    return name[len(prefix) :] if name.startswith(prefix) else None


def inlined(gm: fx.GraphModule, cond_branch: int = 0) -> fx.GraphModule | None:
    """A copy of ``gm`` with its higher-order ops inlined (``cond`` takes branch ``cond_branch``: 0 true, 1 false).

    Returns None when nothing could be inlined. A body's own nested bodies (a ``map`` in
    a ``cond`` branch) move to the graph under new names; its constants are read through
    its path. An op whose result is used other than by indexing stays as it is.
    """
    gm = copy.deepcopy(gm)
    graph = gm.graph
    changed = False
    for node in list(graph.nodes):
        name = _hop_name(node)
        if name == "cond":
            body_arg, operands = node.args[1 + cond_branch], list(node.args[3])
        elif name in BODY_AND_OPERANDS:
            body_index, start = BODY_AND_OPERANDS[name]
            body_arg, operands = node.args[body_index], list(node.args[start:])
        else:
            continue
        if not isinstance(body_arg, fx.Node) or body_arg.op != "get_attr":
            continue
        body = gm.get_submodule(str(body_arg.target))
        if not isinstance(body, fx.GraphModule):
            continue
        placeholders = body.graph.find_nodes(op="placeholder")
        if len(placeholders) != len(operands) or not all(
            u.op == "call_function" and u.target is _getitem() for u in node.users
        ):
            continue
        copied: dict[fx.Node, Any] = dict(zip(placeholders, operands))
        with graph.inserting_before(node):
            result: Any = graph.graph_copy(body.graph, copied)  # (the body's outputs)
        for own in body.graph.find_nodes(op="get_attr"):
            if isinstance(value := attribute_at(body, str(own.target)), fx.GraphModule):  # (a nested body: the graph's own)
                copied[own].target = _free_name(gm, f"{body_arg.target}_{own.target}".replace(".", "_"))
                setattr(gm, copied[own].target, value)
            else:  # (a constant: read through the body's path, the name the case's constants know it by)
                copied[own].target = f"{body_arg.target}.{own.target}"
        if name == "autograd_function_apply":  # the forward returns (outputs, saved tensors)
            result = result[0]
        values = list(result) if isinstance(result, (tuple, list)) else [result]
        for user in list(node.users):
            user.replace_all_uses_with(values[user.args[1]])
            graph.erase_node(user)
        graph.erase_node(node)
        changed = True
    if not changed:
        return None
    graph.eliminate_dead_code(has_effect)  # (FX's rule would drop a dynamo graph's x.mul_(y))
    for node in graph.find_nodes(op="get_attr"):
        if not node.users:
            graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return gm


def _free_name(gm: fx.GraphModule, name: str) -> str:
    """``name``, or ``name_N``: an attribute name ``gm`` does not have yet."""
    taken, k = name, 0
    while hasattr(gm, taken):
        k += 1
        taken = f"{name}_{k}"
    return taken


def _getitem() -> Any:
    import operator

    return operator.getitem


def variants(gm: fx.GraphModule) -> list[fx.GraphModule]:
    """The inlined graphs worth asking about: ``cond`` through its true branch, then its false one."""
    found: list[fx.GraphModule] = []
    for branch in (0, 1):
        flat = inlined(gm, branch)
        if flat is not None and all(flat.code != other.code for other in found):
            found.append(flat)
        if not any(_hop_name(n) == "cond" for n in gm.graph.nodes):
            break
    return found


def flattened(session: Session, case: GraphCase, check: Check) -> GraphCase:
    """The case with its higher-order ops inlined (:func:`variants`), when that still fails the same way, and runs
    under the lowest stage with its backward; else ``case``."""
    lowest = Check(Stage.EAGER if case.boundary == Boundary.DYNAMO else Stage.AOT_EAGER, check.failure, check.accuracy)
    for flat in variants(case.gm):
        candidate = case.replace(gm=flat)
        # (inlined, a checkpoint's body that writes in place is a program eager's autograd rejects: asked with its
        # backward, which AOTAutograd traces as it compiles, though the repro may not run it)
        if ask(session, candidate, check, f"{case.label()}: inlining its higher-order ops").fails(check) and (
            check.stage == lowest.stage or ask(session, candidate.replace(backward=True), lowest, f"{case.label()} inlined, under {lowest.stage}").failure is None
        ):
            session.log(
                f"{case.label()}: higher-order ops inlined ({case.node_count} → {candidate.node_count} nodes); the failure holds"
            )
            return candidate
    return case
