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

An output of a ``scan`` (one of its per-step ``ys``), a ``map`` or a ``cond`` that
nothing at the top level reads is computed all the same, and keeps its body's ops
alive. :func:`drop_unused_outputs` asks without it: the Candidate's ``dropped_outputs``
``(higher-order op node, output index)``, made by :func:`apply_output_drops` (the
body, or both branches, return one value fewer; the top level's ``getitem`` nodes of
later outputs are renumbered). A ``scan``'s carries are its next step's inputs, and
stay. A ``while_loop``'s carried value is dropped whole (its operand, its input in both
bodies and what its body returns for it) where nothing else needs it: its predicate
does not read it, and the body's other results do not (:func:`_free_carry`).

An operand no body reads (a ``cond``'s, a ``while_loop``'s or a ``scan``'s additional
input, a ``map``'s positional argument, a ``scan``'s or ``map``'s sliced ``xs`` beside
another) still keeps the top-level ops that compute it. :func:`drop_unread_operands`
asks without it: the Candidate's ``dropped_operands`` ``(higher-order op node, its
argument, index there)``, made by :func:`apply_operand_drops` (the input goes from
every body that takes it, the operand from the op's argument).
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

import torch.fx as fx

from ..unit.case import has_effect
from ..unit.graphio import subgraphs

if TYPE_CHECKING:
    from ..unit.case import TensorMeta
    from .candidate import Candidate
    from .engine import Reducer

#: One body edit: the body's attribute path from the graph (``true_graph_0``, ``body_fn_0.cond_fn_0``),
#: the op node whose readers read the stand-in instead, and the stand-in (an operand of the op).
BodyEdit = tuple[str, str, str]


def bodies(gm: fx.GraphModule, prefix: str = "") -> Iterator[tuple[str, fx.GraphModule]]:
    """Every body of ``gm``'s higher-order ops, nested ones too, with its attribute path."""
    for attr, sub in subgraphs(gm).items():
        yield f"{prefix}{attr}", sub
        yield from bodies(sub, f"{prefix}{attr}.")


def returned_stand_ins(gm: fx.GraphModule, meta_of: Callable[[str], TensorMeta | None]) -> dict[tuple[str, str], str]:
    """Stand-ins for the ops ``gm``'s bodies return, where the body's values are known: {(path, op): operand}.

    A body traced from the repro's code holds no values on its nodes (dynamo's own bodies
    do), so each body a ``cond``, ``while_loop``, ``invoke_subgraph``, ``scan`` or ``map`` calls is run on
    fake tensors laid out as its operands were (``meta_of`` a top-level node: the
    profile's), on a copy: no fake value is left on the graph, which queries pickle.
    A body that cannot run so (a nested higher-order op, an operand of unknown layout)
    has no stand-in for the ops it returns.
    """
    from pt2kit.seams.fake_tensor import quiet, static_mode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    found: dict[tuple[str, str], str] = {}
    for attr, operands in (call for node in gm.graph.nodes for call in _body_calls(node)):
        try:
            body = copy.deepcopy(cast(fx.GraphModule, gm.get_submodule(attr)))
            mode = static_mode()
            fakes = [_fake(mode, a, meta_of) for a in operands]
            with quiet():
                FakeTensorProp(body, mode).propagate_dont_convert_inputs(*fakes)
        except Exception:  # noqa: BLE001 - an unknown layout, or a body fake tensors cannot run: no stand-ins
            continue
        for op in body.graph.nodes:
            if (instead := stand_in(op)) is not None and any(u.op == "output" for u in op.users):
                found[(attr, op.name)] = instead.name
    return found


def _body_attr(a: object) -> str | None:
    """The attribute a higher-order op's body argument names (None: the argument is not a body)."""
    return str(a.target) if isinstance(a, fx.Node) and a.op == "get_attr" else None


def _body_calls(node: fx.Node) -> list[tuple[str, list[object]]]:
    """(body attribute, the operands it is called with) for each body the higher-order op ``node`` calls.

    Besides those named, a higher-order op with one body called on the arguments after it
    (checkpoint's ``tag_activation_checkpoint``, ``wrap_with_set_grad_enabled``,
    ``wrap_with_autocast``): its arguments before the body are its own (a flag, a dtype).
    """
    from pt2kit.names import op_name

    if node.op != "call_function":
        return []
    name, args = op_name(node), node.args
    at = [k for k, a in enumerate(args) if _body_attr(a) is not None]
    if name.startswith("torch.ops.higher_order.") and name not in _NAMED_BODIES and len(at) == 1:
        return [(cast(str, _body_attr(args[at[0]])), list(args[at[0] + 1 :]))]
    if not all(isinstance(a, (fx.Node, tuple, list)) for a in node.args[:4]):
        return []

    if name == "torch.ops.higher_order.cond" and len(args) >= 4:
        calls = [(_body_attr(args[1]), list(cast(tuple, args[3]))), (_body_attr(args[2]), list(cast(tuple, args[3])))]
    elif name == "torch.ops.higher_order.while_loop" and len(args) >= 4:
        carried = [*cast(tuple, args[2]), *cast(tuple, args[3])]
        calls = [(_body_attr(args[0]), carried), (_body_attr(args[1]), carried)]
    elif name == "torch.ops.higher_order.invoke_subgraph" and args:
        calls = [(_body_attr(args[0]), list(args[2:]))]
    elif name == "torch.ops.higher_order.scan" and len(args) >= 4:  # (each step sees one row of each xs)
        init, xs, extra = (list(cast(Sequence[object], a)) for a in args[1:4])
        calls = [(_body_attr(args[0]), [*init, *(Row(x) for x in xs), *extra])]
    elif name == "torch.ops.higher_order.map_impl" and len(args) >= 3:
        xs, extra = (list(cast(Sequence[object], a)) for a in args[1:3])
        calls = [(_body_attr(args[0]), [*(Row(x) for x in xs), *extra])]
    else:
        return []
    return [(a, operands) for a, operands in calls if a is not None]


#: The higher-order ops whose bodies :func:`_body_calls` knows one by one (others: one body, its operands after it).
_NAMED_BODIES = {
    f"torch.ops.higher_order.{name}" for name in ("cond", "while_loop", "invoke_subgraph", "scan", "map_impl", "flex_attention")
}


@dataclass(frozen=True)
class Row:
    """One row (along dim 0) of the node's tensor: what a ``scan`` or ``map`` body sees of an ``xs`` each step."""

    node: object


def _fake(mode: object, value: object, meta_of: Callable[[str], TensorMeta | None]) -> object:
    """A fake tensor laid out as the node ``value``'s tensor was (or one :class:`Row` of it), or a literal as it is."""
    import torch

    row = isinstance(value, Row)
    node = value.node if isinstance(value, Row) else value
    if not isinstance(node, fx.Node):
        return node
    meta = meta_of(node.name)
    if meta is None or meta.special is not None or (row and not meta.shape):
        raise LookupError(node.name)
    shape, stride = (meta.shape[1:], meta.stride[1:]) if row else (meta.shape, meta.stride)
    with cast(Any, mode):
        return torch.empty_strided(shape, stride, dtype=meta.torch_dtype, device=meta.device)


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
    """``gm`` with ``edits`` made in copies of its bodies; an edit whose nodes, or whose body, are gone is skipped."""
    present = {name for name, _ in gm.named_children()}  # (a body no node of the candidate reads is not kept)
    edits = frozenset(edit for edit in edits if edit[0].split(".")[0] in present)
    for top in sorted({path.split(".")[0] for path, _, _ in edits}):
        setattr(gm, top, copy.deepcopy(getattr(gm, top)))
    replaced: dict[tuple[str, str], str] = {(path, name): instead for path, name, instead in edits}
    for path, name, instead in sorted(edits):
        body = cast(fx.GraphModule, gm.get_submodule(path))  # (a path of :func:`bodies`)
        nodes = {n.name: n for n in body.graph.nodes}
        while (path, instead) in replaced and instead not in nodes:  # (its own stand-in, edited away first)
            instead = replaced[(path, instead)]
        if name not in nodes or instead not in nodes:
            continue
        nodes[name].replace_all_uses_with(nodes[instead])
        body.graph.eliminate_dead_code(has_effect)  # (a body's x.mul_(y) is no dead code)
        body.recompile()
    return gm


def reduce_bodies(r: Reducer) -> None:
    """Each op of each body replaced by its operand, last op first: one query an op, once per settled graph.

    Each op's stand-in is chosen in the graph as it is when the op's turn comes: an op
    whose readers were edited away may have become one its body returns.
    """
    c = r.normalize(r.best)
    structure = ("bodies", *r._structure(c), c.shapes)  # (asked again at new sizes, as the top level's stand-ins are)
    if not r.settled() or structure in r.replaced_structures:
        return
    first = body_stand_ins(r, c)
    gm = r.build(c).gm
    order = [(path, node.name) for path, body in bodies(gm) for node in reversed(list(body.graph.nodes)) if (path, node.name) in first]
    for path, name in order:
        instead = body_stand_ins(r, r.normalize(r.best)).get((path, name))
        if instead is not None:
            r.consider(replace(r.best, body_edits=r.best.body_edits | {(path, name, instead)}))
    r.replaced_structures.add(structure)
    r.replaced_structures.add(("bodies", *r._structure(best := r.normalize(r.best)), best.shapes))


def body_stand_ins(r: Reducer, c: Candidate) -> dict[tuple[str, str], str]:
    """{(body path, op): its stand-in} in ``c``'s graph, its bodies run at ``c``'s sizes (an op a body returns
    takes an operand of its very layout, which a resized input can make so: a keepdim sum of one column)."""
    gm = r.build(c).gm
    returned = returned_stand_ins(gm, lambda name: r._meta(name, c) if name in r._nodes else None)
    return {
        (path, node.name): instead
        for path, body in bodies(gm)
        for node in body.graph.nodes
        if (instead := returned.get((path, node.name)) or getattr(stand_in(node), "name", None)) is not None
    }


@dataclass(frozen=True)
class Outputs:
    """Where a scan's, map's, cond's or while_loop's outputs come from, for :func:`apply_output_drops`."""

    returning: list[str]  # the bodies that return them (a cond's two branches)
    first: int  # the first output index that may go (a scan's carries come before it)
    predicate: str | None = None  # a while_loop's: its outputs are carried values, dropped whole


def _outputs_of(node: fx.Node) -> Outputs | None:
    """How ``node``'s outputs come from its bodies, for a scan, map, cond or while_loop (None: another node)."""
    from pt2kit.names import op_name

    name, args = op_name(node), node.args
    predicate = None
    if name == "torch.ops.higher_order.while_loop" and len(args) >= 4 and isinstance(args[2], (list, tuple)):
        found, first, predicate = [_body_attr(args[1])], 0, _body_attr(args[0])
        if predicate is None:
            return None
    elif name == "torch.ops.higher_order.scan" and len(args) >= 2 and isinstance(args[1], (list, tuple)):
        found, first = [_body_attr(args[0])], len(args[1])  # (its carries come first)
    elif name == "torch.ops.higher_order.map_impl" and args:
        found, first = [_body_attr(args[0])], 0
    elif name == "torch.ops.higher_order.cond" and len(args) >= 3:
        found, first = [_body_attr(args[1]), _body_attr(args[2])], 0
    else:
        return None
    return Outputs([a for a in found if a is not None], first, predicate) if all(found) else None


def unused_outputs(gm: fx.GraphModule) -> list[tuple[str, int]]:
    """``(op node, output index)`` of each scan, map, cond or while_loop output no top-level node reads (a while_loop's
    only where nothing else needs the carried value: :func:`_free_carry`)."""
    found = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or (outputs := _outputs_of(node)) is None:
            continue
        if not node.users or not all(u.target is operator.getitem and isinstance(u.args[1], int) for u in node.users):
            continue
        body = cast(fx.GraphModule, gm.get_submodule(outputs.returning[-1]))
        predicate = None if outputs.predicate is None else cast(fx.GraphModule, gm.get_submodule(outputs.predicate))
        read = {u.args[1] for u in node.users}
        found += [
            (node.name, i)
            for i in range(outputs.first, len(_returned(body) or ()))
            if i not in read and (predicate is None or _free_carry(predicate, body, i))
        ]
    return found


def _free_carry(predicate: fx.GraphModule, body: fx.GraphModule, index: int) -> bool:
    """Does nothing but its own next value need the ``while_loop``'s carried value ``index``?"""
    inputs = [[n for n in g.graph.nodes if n.op == "placeholder"] for g in (predicate, body)]
    returned = _returned(body) or []
    if index >= min(len(inputs[0]), len(inputs[1]), len(returned)) or inputs[0][index].users:
        return False
    needed, todo = set(), [r for i, r in enumerate(returned) if i != index and isinstance(r, fx.Node)]
    while todo:
        n = todo.pop()
        if n not in needed:
            needed.add(n)
            todo.extend(n.all_input_nodes)
    return inputs[1][index] not in needed


def _returned(body: fx.GraphModule) -> list[Any] | None:
    """What ``body`` returns, as a list (None: it returns one value, not a list or tuple of them)."""
    returned = body.graph.output_node().args[0]
    return list(returned) if isinstance(returned, (list, tuple)) else None


def apply_output_drops(gm: fx.GraphModule, drops: frozenset[tuple[str, int]]) -> fx.GraphModule:
    """``gm`` with each dropped output gone from copies of its bodies, later ``getitem`` nodes renumbered."""
    nodes = {n.name: n for n in gm.graph.nodes}
    for name, index in sorted(drops, key=lambda d: -d[1]):  # (the last first: earlier indices stay put)
        node = nodes.get(name)
        outputs = _outputs_of(node) if node is not None else None
        if node is None or outputs is None or index < outputs.first:
            continue
        if any(u.target is not operator.getitem or u.args[1] == index for u in node.users):
            continue
        paths = outputs.returning + ([outputs.predicate] if outputs.predicate else [])
        copies = {path: copy.deepcopy(cast(fx.GraphModule, gm.get_submodule(path))) for path in paths}
        if outputs.predicate and not _free_carry(copies[outputs.predicate], copies[outputs.returning[0]], index):
            continue
        if any(index >= len(_returned(copies[path]) or ()) for path in outputs.returning):
            continue  # (every body, or none: a cond's branches return alike)
        for path, body in copies.items():
            output = next(n for n in body.graph.nodes if n.op == "output")
            if path in outputs.returning:
                returned = list(output.args[0])
                del returned[index]
                output.args = (type(output.args[0])(returned),)
            body.graph.eliminate_dead_code(has_effect)  # (a body's x.mul_(y) is no dead code)
            if outputs.predicate:  # a carried value: its input goes too, and so does its operand
                body.graph.erase_node([n for n in body.graph.nodes if n.op == "placeholder"][index])
            body.recompile()
            setattr(gm, path, body)
        if outputs.predicate:
            carried = list(cast(Sequence[object], node.args[2]))
            del carried[index]
            node.args = (*node.args[:2], tuple(carried), *node.args[3:])
        for user in list(node.users):  # (setting args edits the users)
            if user.args[1] > index:
                user.args = (node, user.args[1] - 1)
    gm.recompile()
    return gm


@dataclass(frozen=True)
class Operands:
    """One argument of a higher-order op whose operands its bodies take, for :func:`apply_operand_drops`."""

    arg: int  # the op's argument holding them (a list or tuple)
    taking: list[str]  # the bodies that take them: each as its placeholders from ``offset`` on
    offset: int
    keep_one: bool = False  # (a loop's sliced xs: its length comes from them)


def _operands_of(node: fx.Node) -> list[Operands]:
    """The arguments of a cond, while_loop, scan or map whose operands its bodies take as placeholders."""
    from pt2kit.names import op_name

    name, args = op_name(node), node.args
    sequences = [isinstance(a, (list, tuple)) for a in args]
    bodies = [_body_attr(a) for a in args]
    if name == "torch.ops.higher_order.cond" and len(args) == 4 and sequences[3]:
        specs, taking = [Operands(3, [], 0)], bodies[1:3]
    elif name == "torch.ops.higher_order.while_loop" and len(args) == 4 and sequences[2] and sequences[3]:
        specs, taking = [Operands(3, [], len(cast(Sequence[object], args[2])))], bodies[0:2]
    elif name == "torch.ops.higher_order.scan" and len(args) == 4 and all(sequences[1:]):
        first = len(cast(Sequence[object], args[1]))
        specs = [Operands(2, [], first, keep_one=True), Operands(3, [], first + len(cast(Sequence[object], args[2])))]
        taking = bodies[0:1]
    elif name == "torch.ops.higher_order.map_impl" and len(args) == 3 and all(sequences[1:]):
        specs = [Operands(1, [], 0, keep_one=True), Operands(2, [], len(cast(Sequence[object], args[1])))]
        taking = bodies[0:1]
    else:
        return []
    return [replace(spec, taking=cast(list[str], taking)) for spec in specs] if all(taking) else []


def _unread(body: fx.GraphModule, index: int) -> bool:
    inputs = [n for n in body.graph.nodes if n.op == "placeholder"]
    return index < len(inputs) and not inputs[index].users


def unread_operands(gm: fx.GraphModule) -> list[tuple[str, int, int]]:
    """``(op node, argument, index)`` of each operand of a top-level higher-order op that none of its bodies read."""
    found = []
    for node in gm.graph.nodes:
        for spec in _operands_of(node) if node.op == "call_function" else []:
            taking = [cast(fx.GraphModule, gm.get_submodule(path)) for path in spec.taking]
            count = len(cast(Sequence[object], node.args[spec.arg]))
            unread = [i for i in range(count) if all(_unread(body, spec.offset + i) for body in taking)]
            found += [(node.name, spec.arg, i) for i in unread[: count - 1 if spec.keep_one else count]]
    return found


def apply_operand_drops(gm: fx.GraphModule, drops: frozenset[tuple[str, int, int]]) -> fx.GraphModule:
    """``gm`` with each dropped operand gone from its op's argument and its input from copies of the bodies."""
    nodes = {n.name: n for n in gm.graph.nodes}
    for name, arg, index in sorted(drops, key=lambda d: (d[0], -d[1], -d[2])):  # (later ones first: offsets stay)
        node = nodes.get(name)
        spec = next((s for s in _operands_of(node) if s.arg == arg), None) if node is not None else None
        if node is None or spec is None or index >= len(operands := list(cast(Sequence[object], node.args[arg]))):
            continue
        copies = {path: copy.deepcopy(cast(fx.GraphModule, gm.get_submodule(path))) for path in spec.taking}
        if (spec.keep_one and len(operands) == 1) or not all(_unread(b, spec.offset + index) for b in copies.values()):
            continue
        for path, body in copies.items():
            body.graph.erase_node([n for n in body.graph.nodes if n.op == "placeholder"][spec.offset + index])
            body.recompile()
            setattr(gm, path, body)
        del operands[index]
        node.args = (*node.args[:arg], type(node.args[arg])(operands), *node.args[arg + 1 :])
    gm.recompile()
    return gm


def _before_drops(earlier: list[int], index: int) -> int:
    """The original position of what is at ``index`` once the positions ``earlier`` were dropped: a Candidate's
    drops name positions in the original graph, which every build starts from."""
    for dropped in sorted(earlier):
        index += dropped <= index
    return index


def drop_unread_operands(r: Reducer) -> None:
    """The operands of higher-order ops no body reads, dropped with their bodies' inputs: all at once, else one by one."""
    dropped = r.best.dropped_operands
    unread = [
        (name, arg, _before_drops([j for n, a, j in dropped if (n, a) == (name, arg)], i))
        for name, arg, i in unread_operands(r.build(r.best).gm)
    ]
    _all_then_each(r, unread, lambda more: replace(r.best, dropped_operands=r.best.dropped_operands | more))


def drop_unused_outputs(r: Reducer) -> None:
    """The outputs of higher-order ops nothing reads (a while_loop's carried values nothing else needs), dropped from
    their bodies: all at once, else one by one."""
    dropped = r.best.dropped_outputs
    unused = [(name, _before_drops([j for n, j in dropped if n == name], i)) for name, i in unused_outputs(r.build(r.best).gm)]
    _all_then_each(r, unused, lambda more: replace(r.best, dropped_outputs=r.best.dropped_outputs | more))


def _all_then_each(r: Reducer, found: Sequence[Any], dropping: Callable[[set[Any]], Any]) -> None:
    """Ask ``dropping(found)`` (the best with all of ``found`` dropped); where that does not fail, each alone."""
    if not found or r.consider(dropping(set(found))):
        return
    for drop in found if len(found) > 1 else ():
        r.consider(dropping({drop}))

