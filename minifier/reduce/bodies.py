"""The bodies of higher-order ops, reduced: each op in a body replaced by one of its operands.

The reducer's cuts work on the top-level graph, where a ``cond``, ``while_loop``, ``map``
or checkpoint is one node; its branches and bodies are subgraph modules that ride
whole. A bug in ``cond``'s merging of its branches' outputs needs neither branch's
arithmetic, yet the repro kept both. A body cannot lose a node the way the top level
does (a cut there would change the op's signature: every branch takes the same
operands and returns the same structure), but a body op's readers can read its operand
instead, and the op is then dead code: the same substitution
:func:`~minifier.reduce.passes.replace_by_operands` makes at the top level.

A :class:`~minifier.reduce.candidate.Candidate` names such edits as ``(body path, op
node, stand-in node)``; :func:`apply_body_edits` makes them on a copy of the body when
the reducer builds the graph (the original's bodies are never touched).
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, cast

import torch.fx as fx

from ..unit.graphio import subgraphs

if TYPE_CHECKING:
    from .engine import Reducer

#: One body edit: the body's attribute path from the graph (``true_graph_0``, ``body_fn_0.cond_fn_0``),
#: the op node whose readers read the stand-in instead, and the stand-in (an operand of the op).
BodyEdit = tuple[str, str, str]


def bodies(gm: fx.GraphModule, prefix: str = "") -> Iterator[tuple[str, fx.GraphModule]]:
    """Every body of ``gm``'s higher-order ops, nested ones too, with its attribute path."""
    for attr, sub in subgraphs(gm).items():
        yield f"{prefix}{attr}", sub
        yield from bodies(sub, f"{prefix}{attr}.")


def stand_in(node: fx.Node) -> fx.Node | None:
    """The operand an op's readers can read instead: its first tensor-valued operand (None: there is none).

    An op whose value is a tuple (its readers are ``getitem``\\ s) has no single stand-in.
    An op the body returns takes one only where the higher-order op cannot tell: the
    higher-order op checks what its body returns (a ``while_loop`` predicate must be a
    bool, branches must agree, no output may alias an input or another output), and a
    stand-in that breaks that makes a program eager rejects too, which an Inductor
    failure may still hide. So a returned op's stand-in has its value's shape, strides
    and dtype (as recorded on the nodes) and memory of its own (:func:`_returnable`).
    """
    if node.op not in ("call_function", "call_method"):
        return None
    if node.users and all(u.target is operator.getitem for u in node.users):
        return None
    operands = [a for a in node.all_input_nodes if a.op != "get_attr"]
    if not any(u.op == "output" for u in node.users):
        return next(iter(operands), None)
    return next((a for a in operands if _returnable(a, node)), None)


def _value(node: fx.Node) -> object:
    return node.meta.get("val", node.meta.get("example_value"))


def _layout(t: object) -> tuple[str, ...]:
    """Shape, strides and dtype as text: symbolic sizes compare as expressions, adding no guard."""
    import torch

    assert isinstance(t, torch.Tensor)
    return (*map(str, t.shape), "/", *map(str, t.stride()), str(t.dtype))


def _returnable(operand: fx.Node, returned: fx.Node) -> bool:
    """Can the body return ``operand`` where it returned ``returned``, unseen by its higher-order op?"""
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef

    new, old = _value(operand), _value(returned)
    if not (isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor)) or operand.op == "placeholder":
        return False
    if _layout(new) != _layout(old):
        return False
    outputs = [n for n in returned.graph.nodes if n.op == "output"]
    others = [n for o in outputs for n in o.all_input_nodes if n is not returned]
    inputs = [n for n in returned.graph.nodes if n.op == "placeholder"]
    try:
        storage = StorageWeakRef(new.untyped_storage())
        return all(
            not isinstance(v := _value(n), torch.Tensor) or StorageWeakRef(v.untyped_storage()) != storage
            for n in inputs + others
        )
    except (RuntimeError, NotImplementedError):  # (a value without storage: a tensor subclass's)
        return False


def apply_body_edits(gm: fx.GraphModule, edits: frozenset[BodyEdit]) -> fx.GraphModule:
    """``gm`` with ``edits`` made in copies of its bodies; an edit whose nodes are gone is skipped."""
    for top in sorted({path.split(".")[0] for path, _, _ in edits}):
        setattr(gm, top, copy.deepcopy(getattr(gm, top)))
    for path, name, instead in sorted(edits):
        body = cast(fx.GraphModule, gm.get_submodule(path))  # (a path of :func:`bodies`)
        nodes = {n.name: n for n in body.graph.nodes}
        if name not in nodes or instead not in nodes:
            continue
        nodes[name].replace_all_uses_with(nodes[instead])
        body.graph.eliminate_dead_code()
        body.recompile()
    return gm


def reduce_bodies(r: Reducer) -> None:
    """Each op of each body replaced by its operand, last op first: one query an op, once per settled graph."""
    c = r.normalize(r.best)
    structure = ("bodies", *r._structure(c))
    if not r.settled() or structure in r.replaced_structures:
        return
    asked = [
        (path, node.name, instead.name)
        for path, body in bodies(r.build(c).gm)
        for node in reversed(list(body.graph.nodes))
        if (instead := stand_in(node)) is not None
    ]
    for edit in asked:
        path, name, _ = edit
        current = cast(fx.GraphModule, r.build(r.normalize(r.best)).gm.get_submodule(path))
        if any(n.name == name for n in current.graph.nodes):
            r.consider(replace(r.best, body_edits=r.best.body_edits | {edit}))
    r.replaced_structures.add(structure)
    r.replaced_structures.add(("bodies", *r._structure(r.normalize(r.best))))
