"""The inputs of a ``repro.py``: ``load_data()``, ``make_inputs(data)``, and the sizes they keep.

A repro rebuilds the graph's inputs itself, each as simply as still reproduces
the failure:

- a tensor with a ``seed`` is drawn again by ``rand_tensor`` (the same shape,
  strides, dtype, value range and seed): no data file needed;
- any other tensor is its real value, from the sibling ``inputs-<sha>.pt`` that
  ``load_data()`` reads with ``weights_only=True`` (that file holds :func:`data_of`:
  the real inputs and the graph's constants), cloned strides and all, since a graph
  may write into its inputs;
- a non-tensor is a literal; a DTensor is its local shard placed on a mesh
  (``make_mesh``, over the fake process group); inputs that required grad, or were
  non-leaves, are made so again.

A dynamo graph may take symbolic sizes as inputs of their own. The repro makes only
the tensors (:func:`program_inputs`) and reads those sizes off them, in
``make_inputs`` and in ``class Program``, the program's view of the graph; which
dims are dynamic is said where the graph is compiled (:mod:`minifier.repro.run`).
An aot graph compiled with symbolic sizes (:func:`is_symbolic`) is handed fake
inputs with exactly those dims symbolic (``symbolic_inputs``), as its compiler saw
them in the program.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import torch

from ..unit.case import Boundary, GraphCase, GraphInput
from ..unit.copies import compact_tensor
from pt2kit.seams import special_tensors
from .graph import weighed_outputs


def data_of(case: GraphCase) -> dict[str, torch.Tensor]:
    """The tensors a case's repro reads from its data file: real inputs, constants, and the gradients the program's
    backward gave its outputs (:attr:`~minifier.unit.case.GraphCase.output_grads`, those the repro weighs)."""
    data = {
        f"input:{i.name}": compact_tensor(i.value, window=i.meta is not None and i.meta.storage is not None)
        for i in case.inputs
        if i.is_tensor and not i.is_random and i.value is not None
    }
    data.update({f"constant:{name}": compact_tensor(t) for name, t in case.constants.items()})
    data.update({key: case.output_grads[key.removeprefix("grad:")] for key in weighed_outputs(case).values()})
    return data


#: The most real values a repro holds as literals, all its tensors together, instead of in a data file: then it
#: runs alone, copied anywhere, and its issue needs no attachment (GitHub takes no ``.pt``).
INLINE_LIMIT = 512
#: The dtypes whose every value a Python literal gives back exactly (through float64, or a Python int or bool).
INLINE_DTYPES = frozenset(
    {torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool}
)


def inline_data(case: GraphCase) -> dict[str, torch.Tensor] | None:
    """The real values a case's repro holds as literals (:data:`INLINE_LIMIT`), or None: none, or a data file's.

    The sizes are read off the inputs before anything is copied: a model's are never inlined.
    """
    values = [i.value for i in case.inputs if i.is_tensor and not i.is_random and i.value is not None]
    tensors = [*values, *case.constants.values(), *case.output_grads.values()]
    if not tensors or not all(_literal(t) for t in tensors):
        return None
    try:
        if sum(t.untyped_storage().nbytes() // t.element_size() for t in tensors) > INLINE_LIMIT:
            return None
    except (RuntimeError, NotImplementedError):  # (a storage that cannot be read: its data file says what it can)
        return None
    data = data_of(case)
    return data if data and all(_literal(t) for t in data.values()) else None


def _literal(t: object) -> bool:
    return (
        type(t) is torch.Tensor and t.device.type == "cpu" and t.layout == torch.strided and t.dtype in INLINE_DTYPES
        and not t.is_conj() and not t.is_neg() and not t._is_zerotensor()
    )  # fmt: skip


def _values(t: torch.Tensor) -> str:
    """The literal of ``t``'s whole storage, then its view: ``torch.tensor([...]).as_strided(...)``."""
    size = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (size,), (1,))
    special = {"nan": "float('nan')", "inf": "float('inf')", "-inf": "-float('inf')"}
    said = ", ".join(special.get(v, v) for v in _shortest(flat))
    return f"torch.tensor([{said}], dtype=torch.{str(t.dtype).removeprefix('torch.')}).as_strided({tuple(t.shape)!r}, {tuple(t.stride())!r}, {t.storage_offset()})"


def _shortest(flat: torch.Tensor) -> list[str]:
    """Each value's shortest literal that gives it back in its own dtype (``0.1``, where float64's is ``0.10000000149011612``)."""
    values = flat.tolist()
    if not flat.is_floating_point() or flat.dtype == torch.float64:
        return [repr(v) for v in values]
    said: list[str | None] = [None] * len(values)
    for digits in range(1, 18):  # (17 significant digits give any float64 back)
        tried = [f"{v:.{digits}g}" for v in values]
        back = torch.tensor([float(x) for x in tried], dtype=flat.dtype)
        same = ((back == flat) & (torch.signbit(back) == torch.signbit(flat))) | (back.isnan() & flat.isnan())
        for k in same.nonzero().flatten().tolist():
            said[k] = said[k] or tried[k]
        if all(x is not None for x in said):
            break
    # (a float literal: "-0" would be the int 0, and lose its sign)
    return [x + ".0" if x is not None and not any(c in x for c in ".ein") else x or repr(v) for x, v in zip(said, values)]


def data_function(data_file: str | None, case: GraphCase | None = None) -> str:
    if data_file is None and case is not None and (data := inline_data(case)) is not None:
        values = "".join(f"        {key!r}: {_values(t)},\n" for key, t in data.items())
        return (
            "def load_data():\n"
            '    """Real input values (random stand-ins did not reproduce the failure), few enough to hold here."""\n'
            f"    return {{\n{values}    }}"
        )
    if data_file is None:
        return 'def load_data():\n    """No saved tensors: random inputs reproduce the failure."""\n    return {}'
    return (
        "def load_data():\n"
        '    """Real input values (random stand-ins did not reproduce the failure)."""\n'
        # beside the repro wherever it is run from; pasted into a notebook or exec'd (no __file__): the working directory
        f"    here = pathlib.Path(globals().get('__file__') or {data_file!r})\n"
        f"    return torch.load(here.with_name({data_file!r}), weights_only=True)"
    )


def inputs_function(case: GraphCase) -> str:
    made = program_inputs(case)
    names = [i.name for i in made]
    sizes = [(k, i) for k, i in enumerate(made) if i.derived_from and i.derived_from[0] in names]
    views = [(k, i) for k, i in enumerate(made) if i.view_of and i.view_of[0] in names and i.meta is not None]
    lines = ["def make_inputs(data):", "    inputs = [" if sizes or views else "    return ["]
    for i in made:
        comment = (
            f"  # {i.name}: {i.meta.describe()}"
            if i.meta
            else f"  # {i.name}" + (" (a symbolic int)" if i.symbolic_int else "")
        )
        if i.meta and i.symbolic_dims:
            comment += f", dynamic dims {list(i.symbolic_dims)}"
        if i.static:
            comment += ", a static input (a module's buffer or parameter)"
        if i.opaque:
            comment += f", not supported yet: {i.opaque}"
        lines.append(f"        {_input_expression(i)},{comment}")
    lines.append("    ]")
    for k, i in views:  # the program passed views of one tensor: they share its memory again
        base, offset = cast("tuple[str, int]", i.view_of)  # (views holds inputs that are views)
        m = i.meta
        assert m is not None
        j = names.index(base)
        if i.shares_only:  # (a tensor of its own on that memory, as nn.Parameter(y) is: no view of it)
            lines += [
                f"    inputs[{k}] = torch.empty(0, dtype=torch.{m.dtype}, device=inputs[{j}].device)  # {i.name}: on {base}'s memory",
                "    with torch.no_grad():",
                f"        inputs[{k}].set_(inputs[{j}].untyped_storage(), inputs[{j}].storage_offset() + {offset}, {m.shape!r}, {m.stride!r})",
            ] + ([f"    inputs[{k}].requires_grad_()"] if m.requires_grad else [])
            continue
        held = made[j].meta
        read_as = "" if held is None or held.dtype == m.dtype else f".view(torch.{m.dtype})"  # (same size: grouped so)
        lines.append(
            f"    inputs[{k}] = inputs[{j}]{read_as}.as_strided({m.shape!r}, {m.stride!r}, inputs[{j}].storage_offset() + {offset})  # {i.name}: a view of {base}"
        )
    for k, i in sizes:
        tensor, dim = cast("tuple[str, int]", i.derived_from)  # (sizes holds sizes read from a tensor)
        lines.append(
            f"    inputs[{k}] = inputs[{names.index(tensor)}].size({dim})  # {i.name}: the size of {tensor}, dim {dim}"
        )
    if sizes or views:
        lines.append("    return inputs")
    return "\n".join(lines)


def _input_expression(i: GraphInput) -> str:
    if i.opaque:
        return "None"  # (what it is: in the line's comment)
    if i.dtensor is not None and i.meta is None:  # a DeviceMesh
        return f"make_mesh({tuple(i.dtensor['mesh_shape'])!r})"
    if i.meta is None:
        return repr(i.value)
    if i.dtensor is not None:
        placements = ", ".join(i.dtensor["placements"])
        local = _tensor_expression(i)
        return f"DTensor.from_local({local}, make_mesh({tuple(i.dtensor['mesh_shape'])!r}), [{placements}], run_check=False)"
    if i.meta.view is not None:  # (made from the tensor it views, as the program made it)
        named = f", {i.meta.view_function!r}" if i.meta.view_function else ""
        return f"guarded_view({_tensor_expression(i)}, {i.meta.view!r}{named})"
    return _tensor_expression(i)


def _tensor_expression(i: GraphInput) -> str:
    assert i.meta is not None
    m = i.meta
    if m.subclass is not None:  # a plain tensor subclass: its data, viewed as the class
        plain = _tensor_expression(replace(i, meta=replace(m, subclass=None)))
        return f"{plain}.as_subclass({m.subclass})"
    if m.special is not None:  # a ZeroTensor, a conjugate or negative view: the plain tensor, marked again
        plain = _tensor_expression(replace(i, meta=replace(m, special=None, requires_grad=False, is_leaf=True)))
        expr = special_tensors.expression(m.special, plain, m.shape, m.dtype, m.device)
        return expr + (".requires_grad_()" if m.requires_grad else "")
    if i.seed is not None:
        extra = "".join(f", {k}={v!r}" for k, v in (("low", m.low), ("high", m.high)) if v is not None) + (
            "" if m.device == "cpu" else f", device={m.device!r}"
        )
        extra += f", storage={m.storage!r}" if m.storage else ""
        extra += ", distinct=True" if m.distinct else ""
        extra += ", ordered=True" if m.ordered else ""
        grad = ", requires_grad=True" if m.requires_grad and m.is_leaf else ""
        expr = f"rand_tensor({m.shape!r}, {m.stride!r}, torch.{m.dtype}{grad}, seed={i.seed}{extra})"
        return f"non_leaf({expr})" if m.requires_grad and not m.is_leaf else expr
    expr = f"clone_input(data[{('input:' + i.name)!r}])"
    if m.requires_grad and not m.is_leaf:
        return f"non_leaf({expr})"
    return expr + (".requires_grad_()" if m.requires_grad else "")


def program_inputs(case: GraphCase) -> list[GraphInput]:
    """The inputs a repro makes: a dynamo graph's symbolic sizes are read off its tensors instead."""
    if case.boundary == Boundary.DYNAMO:
        return [i for i in case.inputs if i.derived_from is None]
    return list(case.inputs)


def program_class(case: GraphCase) -> str:
    """``Program``: what torch.compile is handed when the graph also takes sizes of its tensors."""
    if not any(i.derived_from for i in case.inputs):
        return ""
    names = [i.name for i in program_inputs(case)]
    arguments = [f"{i.derived_from[0]}.size({i.derived_from[1]})" if i.derived_from else i.name for i in case.inputs]
    return (
        "class Program(torch.nn.Module):\n"
        '    """The program\'s view of the graph: tensors in; the symbolic sizes the graph takes are read off them."""\n\n'
        "    def __init__(self, graph):\n"
        "        super().__init__()\n"
        "        self.graph = graph\n\n"
        f"    def forward(self, {', '.join(names)}):\n"
        f"        return self.graph({', '.join(arguments)})"
    )


def is_symbolic(case: GraphCase) -> bool:
    """Does the case keep symbolic sizes (dynamic shapes)?"""
    return any(i.symbolic_dims or i.derived_from or i.symbolic_int for i in case.inputs)


#: Ops whose output, or whose output's size, depends on the data (``x.item()``, ``nonzero``):
#: traced, each makes an unbacked symbol, which only a shape environment can hold.
DATA_DEPENDENT_TAGS = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)


def reads_data(case: GraphCase) -> bool:
    """Does the graph (or a higher-order op's body in it) hold an op whose result depends on the data?

    An aot graph of such ops cannot be traced again on real tensors
    (``make_fx(tracing_mode='real')`` refuses ``_local_scalar_dense``); it is traced on fake
    ones in a shape environment, static sizes and all (:func:`traces_on_fakes`), as AOTAutograd did.
    """
    from ..unit.graphio import all_call_nodes

    return any(tag in getattr(n.target, "tags", ()) for n in all_call_nodes(case.gm) for tag in DATA_DEPENDENT_TAGS)


def traces_on_fakes(case: GraphCase) -> bool:
    """Is an aot graph handed to its compiler as fake inputs in a shape environment (``symbolic_inputs``)?

    When sizes are symbolic, and when an op makes a size out of the data (:func:`reads_data`).
    """
    return is_symbolic(case) or reads_data(case) or makes_zero_tensors(case)


def makes_zero_tensors(case: GraphCase) -> bool:
    """Does the graph make ZeroTensors (``aten._efficientzerotensor``, forward-mode AD's zero tangents)?

    ``make_fx`` on real tensors turns what is computed from one into a constant of the
    traced graph (``_tensor_constant0``), whose data Inductor then reads and cannot: the
    aot graph is traced on fake ones, as AOTAutograd did.
    """
    from ..unit.graphio import all_call_nodes

    return any(getattr(n.target, "__name__", "").startswith("_efficientzerotensor") for n in all_call_nodes(case.gm))


def symbolic_inputs_function(case: GraphCase) -> str:
    """``symbolic_inputs``: an aot graph's fake inputs with exactly the dims that were symbolic."""
    dims = {k: list(i.symbolic_dims) for k, i in enumerate(case.inputs) if i.symbolic_dims}
    names = [i.name for i in case.inputs]
    sizes = {
        k: (names.index(i.derived_from[0]), i.derived_from[1])
        for k, i in enumerate(case.inputs)
        if i.derived_from and i.derived_from[0] in names
    }
    free = [k for k, i in enumerate(case.inputs) if i.symbolic_int]
    return (
        f"DYNAMIC_DIMS = {dims!r}  # input -> its symbolic dims\n"
        f"SIZES_OF = {sizes!r}  # symbolic-int input -> (tensor input, dim) whose size it is\n"
        f"FREE_SYMBOLS = {free!r}  # symbolic-int inputs no tensor's size gives\n\n\n"
        "def symbolic_inputs(inputs):\n"
        '    """Fake inputs with exactly the symbolic sizes the compiler saw in the program."""\n'
        "    from torch._dynamo.source import ConstantSource\n"
        "    from torch._subclasses.fake_tensor import FakeTensorMode\n"
        "    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext\n\n"
        "    mode = FakeTensorMode(shape_env=ShapeEnv())\n"
        "    fakes = []\n"
        "    for k, value in enumerate(inputs):\n"
        "        if isinstance(value, torch.Tensor):\n"
        "            sizes = [DimDynamic.DYNAMIC if d in DYNAMIC_DIMS.get(k, ()) else DimDynamic.STATIC for d in range(value.dim())]\n"
        "            fakes.append(mode.from_tensor(value, symbolic_context=StatelessSymbolicContext(dynamic_sizes=sizes)))\n"
        "        elif k in FREE_SYMBOLS:\n"
        "            source = ConstantSource(f'input{k}')  # (a symbol needs a source with a name)\n"
        "            fakes.append(mode.shape_env.create_unspecified_symint_and_symbol(value, source, DimDynamic.DYNAMIC))\n"
        "        else:\n"
        "            fakes.append(value)\n"
        "    for k, (tensor, dim) in SIZES_OF.items():\n"
        "        fakes[k] = fakes[tensor].shape[dim]\n"
        "    return mode, fakes"
    )
