"""From a graph torch hands a backend to a :class:`~minifier.unit.case.GraphCase`.

:func:`make_case` turns a dynamo graph and the real example inputs dynamo passes with
it into a case: its inputs (values, layout, ``requires_grad``, leafness), the dims that
were symbolic and the symbolic ints that are sizes of its tensors
(:func:`graph_inputs`), its constants, and its context (:mod:`minifier.capture.context`).
:mod:`minifier.stages.run` and :mod:`minifier.capture.recorder` make aot-graph cases the same way.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.fx as fx

from ..unit.case import CompileContext, GraphCase, GraphInput, TensorMeta
from ..unit.copies import alias_groups
from ..unit.graphio import exact_constants, subgraphs
from .context import BackendInfo, class_reference, class_sources, custom_op_names, custom_op_sources, non_default_config
from .extract import merge_definitions
from pt2kit.seams import dtensor, special_tensors, static_inputs, symbolic_shapes

#: Plain values a repro writes as literals.
LITERAL_INPUTS = (int, float, bool, str, type(None), torch.dtype, torch.device)
#: The value a jagged tensor's ragged size (a nested int, ``j1``) takes in a repro: not 0 or
#: 1, which the compiler would specialize on.
NESTED_INT_STAND_IN = 7


def _flat_constants(gm: fx.GraphModule) -> dict[str, torch.Tensor]:
    """Give every tensor ``get_attr`` a flat name, so the repro can register it as a buffer.

    The bodies of higher-order ops (a ``cond`` branch that builds an index tensor) have
    constants of their own: each is kept under its body's path, ``true_graph_0._tensor_constant0``
    (:func:`minifier.unit.graphio.constants_of`), and the repro registers it on that body.
    """
    constants: dict[str, torch.Tensor] = {}
    for node in gm.graph.find_nodes(op="get_attr"):
        value = gm
        for part in str(node.target).split("."):
            value = getattr(value, part)
        if not isinstance(value, torch.Tensor):
            continue  # submodules of higher-order ops: their own constants come below
        name = str(node.target).replace(".", "_")
        if name != node.target:
            gm.register_buffer(name, value)
            node.target = name
        constants[name] = value.detach()
    gm.recompile()
    for path, body in subgraphs(gm).items():
        constants.update({f"{path}.{name}": value for name, value in _flat_constants(body).items()})
    return constants


def _example(node: fx.Node) -> Any:
    """A placeholder's traced value: ``example_value`` (dynamo graphs) or ``val`` (aot graphs)."""
    return node.meta.get("example_value", node.meta.get("val"))


_is_symbolic = symbolic_shapes.is_symbolic


def symbolic_dims(node: fx.Node) -> tuple[int, ...]:
    """Dims of a placeholder's traced value that are symbolic (dynamic shapes)."""
    value = _example(node)
    if not isinstance(value, torch.Tensor):
        return ()
    return tuple(d for d, size in enumerate(value.shape) if _is_symbolic(size))


def derived_sizes(placeholders: list[fx.Node]) -> dict[str, tuple[str, int]]:
    """Symbolic-int placeholders that are a tensor placeholder's size: name -> (tensor's name, dim).

    dynamo (and AOTAutograd) pass the free symbols of a dynamic graph as inputs of their
    own (``s0``); a repro reads them off the tensors instead, so that torch.compile
    sees them as the same symbol, as the program did.
    """
    sizes: dict[Any, tuple[str, int]] = {}
    for node in placeholders:
        value = _example(node)
        if isinstance(value, torch.Tensor):
            for d, size in enumerate(value.shape):
                if _is_symbolic(size):
                    sizes.setdefault(symbolic_shapes.expression(size), (str(node.target), d))
    derived = {}
    for node in placeholders:
        value = _example(node)
        if _is_symbolic(value) and symbolic_shapes.expression(value) in sizes:
            derived[str(node.target)] = sizes[symbolic_shapes.expression(value)]
    return derived


def make_case(
    gm: fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    backend: BackendInfo,
    index: int,
    frame: dict[str, Any] | None = None,
    in_backend: bool = True,
) -> GraphCase:
    """A :class:`GraphCase` of a dynamo graph and the real values dynamo passed with it."""
    gm = fx.GraphModule(gm, copy.deepcopy(gm.graph))  # the backend still gets the original
    exact_constants(gm)  # (the values the program ran, not what FX's code says: pytorch#197586)
    constants = _flat_constants(gm)
    placeholders = gm.graph.find_nodes(op="placeholder")
    inputs = graph_inputs(placeholders, example_inputs)
    dynamic = any(i.symbolic_dims or i.derived_from or _is_symbolic(_example(n)) for i, n in zip(inputs, placeholders))
    op_modules, op_definitions = custom_op_sources(gm)
    class_modules, class_definitions = class_sources([special_tensors.plain_subclass(v) for v in example_inputs])
    op_modules, op_definitions = op_modules + class_modules, merge_definitions(op_definitions, class_definitions)
    config = non_default_config(backend.config, in_backend=in_backend, custom_ops=bool(custom_op_names(gm)))
    # Under no_grad, AOTAutograd makes one inference graph, not a forward and a backward;
    # a repro run with grad on would compile other graphs (and pay for a backward).
    grad_enabled = torch.is_grad_enabled() if in_backend else True
    return GraphCase(
        gm=gm,
        inputs=inputs,
        boundary="dynamo",
        kind="dynamo",
        backend=backend.name,
        config=config.values,
        modules=list(dict.fromkeys(backend.modules + op_modules + config.modules)),
        definitions=merge_definitions(op_definitions, backend.definitions, config.definitions),
        constants=constants,
        backward=grad_enabled and any(i.meta is not None and i.meta.requires_grad for i in inputs),
        grad_enabled=grad_enabled,
        dynamic=bool(dynamic or backend.dynamic),
        index=index,
        frame=frame,
        distributed=job_of_this_process(),
        context=CompileContext.current(),
    )


def graph_inputs(placeholders: list[fx.Node], values: Sequence[Any]) -> list[GraphInput]:
    """One :class:`GraphInput` per placeholder: the real value, its metadata and its dynamic dims.

    A fake value (what a compiler got at compile time) becomes a seeded random
    stand-in with its layout; the real value replaces it once the graph has run.
    """
    derived = derived_sizes(placeholders)
    inputs = []
    for node, value in zip(placeholders, values):
        name = str(node.target)
        if dtensor.is_dtensor(value):  # its local shard, and where it lives on the mesh
            shard = dtensor.local(value)
            meta = fake_meta(shard) if symbolic_shapes.is_fake(shard) else TensorMeta.of(shard)
            real = None if symbolic_shapes.is_fake(shard) else shard.detach()
            inputs.append(
                GraphInput(
                    name, real, meta, random_seed(name) if real is None else None, dtensor=dtensor.describe(value)
                )
            )
        elif isinstance(value, torch.Tensor) and symbolic_shapes.is_fake(value):
            meta = fake_meta(value)
            inputs.append(GraphInput(name, None, meta, random_seed(name), symbolic_dims(node)))
        elif isinstance(value, torch.Tensor) and (why := special_tensors.unsupported(value)):
            inputs.append(GraphInput(name, None, None, opaque=f"{why} (not supported yet)"))
        elif dtensor.is_mesh(value):
            inputs.append(
                GraphInput(
                    name, None, None, dtensor={"mesh_shape": list(value.shape), "device_type": value.device_type}
                )
            )
        elif symbolic_shapes.is_nested_int(value):
            # A jagged tensor's ragged size has no integer value; the aot graphs of a
            # jagged tensor read it (if at all) as one more size, so a free symbolic int
            # stands in, and the repro's check says whether the failure still shows.
            inputs.append(GraphInput(name, NESTED_INT_STAND_IN, None, symbolic_int=True))
        elif not isinstance(value, (torch.Tensor, torch.SymInt, *LITERAL_INPUTS)):
            inputs.append(GraphInput(name, None, None, opaque=type(value).__name__))
        elif isinstance(value, torch.Tensor):
            inputs.append(tensor_input(name, value, symbolic_dims(node)))
        else:
            symbolic = _is_symbolic(_example(node))
            # (never int(value): that would add a guard and specialize the program's graph)
            plain = symbolic_shapes.hint(value) if isinstance(value, torch.SymInt) else value
            inputs.append(
                GraphInput(
                    name, plain, None, derived_from=derived.get(name), symbolic_int=symbolic and name not in derived
                )
            )
    for cover, views in alias_groups(list(values)):  # inputs that are views of one tensor stay so
        for k, offset, as_view in views:
            own = inputs[k].meta  # (its memory is its cover's: no storage window of its own)
            inputs[k] = replace(
                inputs[k],
                view_of=(inputs[cover].name, offset),
                shares_only=not as_view,
                meta=replace(own, storage=None) if own else None,
            )
    for k, node in enumerate(placeholders):  # a module's buffers and parameters: see pt2kit.seams.static_inputs
        if inputs[k].is_tensor and (marked := static_inputs.static_input_type(node)):
            inputs[k] = replace(inputs[k], static=marked)
    return inputs


def tensor_input(name: str, value: torch.Tensor, dims: tuple[int, ...]) -> GraphInput:
    """A real tensor input: its plain value and its metadata (a ZeroTensor needs no value: it is made from its meta).

    A plain tensor subclass is kept as an ordinary tensor and the name its class has in
    a repro (:func:`minifier.capture.context.class_sources` brings the class there).
    """
    cls = special_tensors.plain_subclass(value)
    if cls is not None:
        value = value.as_subclass(torch.Tensor)
    meta = replace(
        TensorMeta.of(value, window=True),
        view=special_tensors.view_kind(value),
        view_function=special_tensors.custom_function_name(value),
    )
    if cls is not None:
        meta = replace(meta, subclass=class_reference(cls))
    if meta.special == "zerotensor":
        return GraphInput(name, None, meta, random_seed(name), dims)
    plain = special_tensors.plain(value.detach())
    return GraphInput(name, plain.detach().requires_grad_(value.requires_grad), meta, None, dims)


def fake_meta(value: torch.Tensor) -> TensorMeta:
    """The layout of a fake tensor, its symbolic sizes at their hints."""
    return TensorMeta(
        shape=symbolic_shapes.concrete(value.shape),
        stride=symbolic_shapes.concrete(value.stride()),
        dtype=str(value.dtype).removeprefix("torch."),
        device=str(value.device),
        requires_grad=bool(value.requires_grad),
        special=special_tensors.kind_of(value),
    )


def random_seed(name: str) -> int:
    """A stable seed per input name, so a random stand-in never changes between runs."""
    import zlib

    return zlib.crc32(name.encode()) % 10_000


def aot_case(
    parent: GraphCase,
    gm: fx.GraphModule,
    values: Sequence[Any],
    *,
    kind: str,
    compile_kwargs: dict[str, Any],
    compiler: str | None,
    donated: tuple[str, ...] = (),
) -> GraphCase:
    """A case of an AOTAutograd graph (``kind``: forward, backward, inference) of dynamo graph ``parent``.

    ``values``: what the graph runs on, real or (at compile time) fake. The
    placeholders' traced values say which sizes the compiler saw as symbolic; a
    parent captured with static sizes keeps its aot graphs static.
    """
    from pt2kit.script import module_import_spec

    gm = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    constants = _flat_constants(gm)
    placeholders = gm.graph.find_nodes(op="placeholder")
    inputs = graph_inputs(placeholders, values)
    if not parent.dynamic and not any(i.symbolic_dims or i.derived_from or i.symbolic_int for i in parent.inputs):
        inputs = [replace(i, symbolic_dims=(), derived_from=None, symbolic_int=False) for i in inputs]
    modules = list(parent.modules)
    if compiler and ":" in compiler and (spec := module_import_spec(compiler.partition(":")[0])):
        modules.append(spec)
    return GraphCase(
        definitions=parent.definitions,
        gm=gm,
        inputs=inputs,
        boundary="aot",
        kind=kind,
        backend=parent.backend,
        config=parent.config,
        modules=list(dict.fromkeys(modules)),
        compile_kwargs=compile_kwargs,
        donated=donated,
        compiler=compiler,
        constants=constants,
        backward=False,
        dynamic=any(i.symbolic_dims or i.derived_from or i.symbolic_int for i in inputs),
        index=parent.index,
        parent=parent.index,
        frame=parent.frame,
        distributed=parent.distributed,
        context=parent.context,  # (its autocast is in its casts; the rest still applies)
    )


def job_of_this_process() -> dict[str, int] | None:
    """``{"rank", "world_size"}`` when this process is one rank of a distributed job."""
    job = dtensor.world()
    return None if job is None else {"rank": job[0], "world_size": job[1]}
