"""Rendering a graph case as the text of a ``repro.py`` (docs/repro-format.md).

A repro is a bug report that must run anywhere, so the file pt2kit writes imports
torch and nothing else of ours (plus the user's own modules when the failing
backend or a custom op lives there). Its parts, top to bottom:

- a header naming the torch version, the stage, and the failure;
- ``PT2KIT = {...}``: the case's metadata as a Python literal, which pt2kit reads back
  with :func:`ast.literal_eval` (never by unpickling);
- ``apply_config()``: the non-default compiler config the failure needs, written as
  plain assignments of literal values;
- ``class Repro``: the graph as readable code (FX's own codegen);
- ``load_data()`` and ``make_inputs(data)``: inputs as seeded random tensors where
  that reproduces the failure, real values from a sibling ``inputs-<sha>.pt`` loaded
  with ``weights_only=True`` where it does not;
- ``run(mod, inputs)``: the one stage call that fails;
- for accuracy failures, an fp64 reference check (:func:`accuracy_divergence`).

The same text is what a worker executes for each query
(:func:`minifier.repro_files.exec_repro`), with ``data`` handed over in memory
instead of loaded from disk: every question the minifier asks is answered by the
code the user will finally run. Writing it to disk and reading it back is
:mod:`minifier.repro_files`; the helpers a repro carries live in
:mod:`minifier.repro_runtime`.
"""

from __future__ import annotations

import inspect
import math
import os
import pprint
import re
import textwrap
from typing import Any

import torch
import torch.fx as fx

from .case import CONFIG_CARRIED, CONFIG_IMPORT, CONFIG_MISSING, GraphCase, GraphInput, TensorMeta, compact_tensor
from .graphio import GraphFormatError, dump_graph, subgraphs
from .repro_runtime import call_hop, clone_input, graph_module, non_leaf, rand_tensor
from .signature import ACCURACY_MESSAGE, Signature, accuracy_category, accuracy_divergence, float64_graph

FORMAT_VERSION = 1
#: Said beside each user-module import; :func:`write_repro` copies small modules beside the repro.
MODULE_COMMENT = " (beside this file, or on PYTHONPATH)"
EAGER_STAGES = ("eager", "aot_eager", "aot_eager_decomp_partition")
AOT_COMPILER_KEYS = {"forward": "fw_compiler", "backward": "bw_compiler", "inference": "inference_compiler"}


# --------------------------------------------------------------------------- #
# Rendering
# --------------------------------------------------------------------------- #


def data_of(case: GraphCase) -> dict[str, torch.Tensor]:
    """The tensors a case's repro reads from its data file: real inputs and constants."""
    data = {f"input:{i.name}": compact_tensor(i.value) for i in case.inputs if i.is_tensor and not i.is_random and i.value is not None}
    data.update({f"constant:{name}": compact_tensor(t) for name, t in case.constants.items()})
    return data


def render(
    case: GraphCase,
    *,
    stage: str,
    failure: Signature | None = None,
    accuracy: bool = False,
    data_file: str | None = None,
    note: str = "",
    strict: bool = False,
) -> str:
    """The full text of ``repro.py`` for ``case`` run through ``stage``.

    ``accuracy``: also check the result against an fp64 reference (``"strict"``: bit for bit).
    """
    strict = strict or accuracy == "strict"
    parts = [
        _header(case, stage, failure, accuracy, note),
        _imports(case, stage, accuracy, data_file),
        _definitions(case),
        _config_function(case),
        _module_class(case),
        _program_class(case),
        _symbolic_inputs_function(case) if case.boundary == "aot" and is_symbolic(case) and stage not in EAGER_STAGES else "",
        _data_function(data_file),
        _inputs_function(case),
        _run_functions(case, stage),
    ]
    if needs_process_group(case):
        parts.insert(parts.index(_config_function(case)) + 1, _process_group_functions(case))
    if subgraphs(case.gm):
        parts.append(inspect.getsource(graph_module).strip())
        parts.append(inspect.getsource(call_hop).strip())
    if any(i.is_random for i in case.inputs):
        parts.append(inspect.getsource(rand_tensor).strip())
    if any(i.is_tensor and not i.is_random for i in case.inputs):
        parts.append(inspect.getsource(clone_input).strip())
    if any(i.meta is not None and i.meta.requires_grad and not i.meta.is_leaf for i in case.inputs):
        parts.append(inspect.getsource(non_leaf).strip())
    if accuracy:
        fp64 = float64_graph(case.gm)
        if fp64.code != case.gm.code:  # dtypes written in the graph: the reference promotes them too
            parts.insert(parts.index(_module_class(case)) + 1, _module_class(case, fp64, "ReproFloat64"))
        parts.append(f"ACCURACY_MESSAGE = {ACCURACY_MESSAGE!r}")
        parts.append(f"STRICT = {strict!r}  # True: outputs must equal eager's bit for bit")
        parts.append(inspect.getsource(accuracy_divergence).strip())
        parts.append(inspect.getsource(accuracy_category).strip())
    metadata = _metadata(case, stage, failure, bool(accuracy), data_file)
    metadata["strict"] = strict
    parts.append("# What pt2kit needs to read this file back (`minify repro repro.py`).\nPT2KIT = " + pprint.pformat(metadata, width=110, compact=True, sort_dicts=False))
    parts.append(_main(accuracy, "ReproFloat64" if "class ReproFloat64(" in "".join(parts) else "Repro", distributed=needs_process_group(case)))
    return "\n\n\n".join(p.strip("\n") for p in parts if p) + "\n"


def _header(case: GraphCase, stage: str, failure: Signature | None, accuracy: bool, note: str) -> str:
    what = f"the {case.kind} graph (after aot)" if case.boundary == "aot" else "the dynamo graph"
    lines = [
        f"# pt2kit repro, torch {torch.__version__}",
        f"# {what} fails under {stage}:",
        f"#   {failure}" if failure else "#   (failure not recorded)",
        f"# {case.node_count} op nodes: {', '.join(sorted(set(case.op_names()))) or 'none'}",
        "# Run `python repro.py`: it exits non-zero when the failure reproduces"
        + (" (the compiled result diverges from an fp64 reference)." if accuracy else "."),
    ]
    if note:
        lines += [f"# {line}" for line in note.splitlines()]
    return "\n".join(lines)


def _imports(case: GraphCase, stage: str, accuracy: bool, data_file: str | None) -> str:
    from .seams.ops import import_block

    lines = ["import torch"]
    if case.boundary == "aot" and stage not in EAGER_STAGES:
        lines.append("from torch.fx.experimental.proxy_tensor import make_fx")
    if data_file or accuracy:
        lines.insert(0, "import sys" if not data_file else "import pathlib\nimport sys")
    code = case.gm.graph.python_code(root_module="self")
    block = import_block(code.globals)
    # FX lists every name its codegen might need; keep the ones the graph uses.
    used = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", code.src))
    lines += [line for line in block.splitlines() if line and line != "import torch" and _bound_name(line) in used]
    from .seams.ops import INDUCTOR_PRIMS, needs_inductor_prims

    if any(needs_inductor_prims(n.target) for n in _all_call_nodes(case.gm)):
        lines.append(f"import {INDUCTOR_PRIMS}  # noqa: F401  registers Inductor's own prims, which this graph calls")
    for name, _ in case.modules:
        lines.append(f"import {name}  # noqa: F401  defines a custom backend or op this graph needs{MODULE_COMMENT}")
    return "\n".join(lines)


def _all_call_nodes(gm: fx.GraphModule) -> list[fx.Node]:
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    for sub in subgraphs(gm).values():
        nodes += _all_call_nodes(sub)
    return nodes


def _definitions(case: GraphCase) -> str:
    if not case.definitions.strip():
        return ""
    return (
        "# The user's own definitions this failure needs (a backend or custom op with no\n"
        "# importable name), carried over from their program.\n" + case.definitions.strip("\n")
    )


def _bound_name(import_line: str) -> str:
    """The name an import line (or FX's ``NoneType = type(None)``) binds."""
    words = import_line.replace("=", " ").split()
    return words[-1] if words[0] in ("import", "from") else words[0]


def _metadata(case: GraphCase, stage: str, failure: Signature | None, accuracy: bool, data_file: str | None) -> dict[str, Any]:
    return {
        "version": FORMAT_VERSION,
        "torch": torch.__version__,
        "stage": stage,
        "backend": case.backend,
        "boundary": case.boundary,
        "kind": case.kind,
        "failure": failure.to_json() if failure else None,
        "accuracy": accuracy,
        "data_file": data_file,
        "inputs": [
            {
                "name": i.name,
                "meta": None if i.meta is None else vars(i.meta),
                "value": None if i.is_tensor or i.opaque or i.dtensor is not None else i.value,
                "seed": i.seed,
                "symbolic_dims": list(i.symbolic_dims),
                **({"source": i.source} if i.source is not None else {}),
                **({"derived_from": list(i.derived_from)} if i.derived_from else {}),
                **({"symbolic_int": True} if i.symbolic_int else {}),
                **({"dtensor": i.dtensor} if i.dtensor is not None else {}),
                **({"opaque": i.opaque} if i.opaque else {}),
            }
            for i in case.inputs
        ],
        "constants": {name: vars(TensorMeta.of(t)) for name, t in case.constants.items()},
        "config": case.config,
        "modules": [name for name, _ in case.modules],
        "compile_kwargs": case.compile_kwargs,
        "compiler": case.compiler,
        "backward": case.backward,
        "dynamic": case.dynamic,
        "distributed": case.distributed,
        "index": case.index,
        "parent": case.parent,
        "frame": _portable_frame(case.frame),
        "definitions": case.definitions,
        "graph": _graph_literal(case.gm),
    }


def _portable_frame(frame: dict[str, Any] | None) -> dict[str, Any] | None:
    """The user frame, with its file named without this machine's directories."""
    if not frame or not frame.get("filename"):
        return frame
    return {**frame, "filename": os.path.basename(str(frame["filename"]))}


def _graph_literal(gm: fx.GraphModule) -> dict[str, Any] | None:
    """The graph's structure for reading back (None: it holds something only its code can say)."""
    try:
        return dump_graph(gm)
    except GraphFormatError:
        return None


def _config_function(case: GraphCase) -> str:
    lines = ["def apply_config():", '    """The non-default compiler config this failure needs."""']
    for module, values in sorted(case.config.items()):
        if values:
            lines.append(f"    import {module}")
        for key, value in sorted(values.items()):
            lines.extend(_config_lines(module, key, value))
    if len(lines) == 2:
        lines.append("    pass  # torch's defaults reproduce it")
    return "\n".join(lines)


def _config_lines(module: str, key: str, value: Any) -> list[str]:
    """One config assignment; a non-literal value by reference, by carried name, or as a request to the user."""
    marker = next(iter(value), None) if isinstance(value, dict) and len(value) == 1 else None
    if marker == CONFIG_IMPORT:
        where, _, qualname = value[marker].partition(":")
        return [f"    import {where}", f"    {module}.{key} = {where}.{qualname}"]
    if marker == CONFIG_CARRIED:
        return [f"    {module}.{key} = {value[marker]}  # carried from the user's program (definitions above)"]
    if marker == CONFIG_MISSING:
        return [
            f"    # {module}.{key} is needed but pt2kit could not carry it ({value[marker]}).",
            f"    # Supply it here:  {module}.{key} = ...",
        ]
    return [f"    {module}.{key} = {value!r}"]


def _module_class(case: GraphCase, gm: fx.GraphModule | None = None, name: str = "Repro") -> str:
    """``class Repro``: the graph as FX's readable code, its constants, and its subgraph modules."""
    gm = case.gm if gm is None else gm
    code = gm.graph.python_code(root_module="self")
    lines = [f"class {name}(torch.nn.Module):", "    def __init__(self, data):", "        super().__init__()"]
    for constant in case.constants:
        lines.append(f"        self.register_buffer({constant!r}, data[{('constant:' + constant)!r}])")
    for attr in subgraphs(gm):
        lines.append(f"        self.{attr} = graph_module({_subgraph_class(name, attr)}())")
    body = textwrap.indent(code.src.strip().rstrip(), "    ")
    return "".join(_subgraph_classes(gm, name)) + "\n".join(lines) + "\n\n" + body


def _subgraph_class(owner: str, attr: str) -> str:
    return f"{owner}_{attr}"


def _subgraph_classes(gm: fx.GraphModule, owner: str) -> list[str]:
    """A class per subgraph module (the body of a higher-order op), innermost first."""
    out = []
    for attr, sub in subgraphs(gm).items():
        name = _subgraph_class(owner, attr)
        out += _subgraph_classes(sub, name)
        code = sub.graph.python_code(root_module="self").src.strip("\n")
        code = HOP_CALL.sub(lambda m: f"call_hop({m.group(1)!r}, ", code)  # a body's own higher-order ops
        lines = [f"class {name}(torch.nn.Module):"]
        nested = subgraphs(sub)
        if nested:
            lines += ["    def __init__(self):", "        super().__init__()"]
            lines += [f"        self.{inner} = graph_module({_subgraph_class(name, inner)}())" for inner in nested]
            lines.append("")
        out.append("\n".join(lines) + "\n" + textwrap.indent(code.rstrip(), "    ") + "\n\n\n")
    return out


#: A higher-order op called in a body's code: routed through ``call_hop`` so that FX can trace the body.
HOP_CALL = re.compile(r"torch\.ops\.higher_order\.(\w+)\(")


def _data_function(data_file: str | None) -> str:
    if data_file is None:
        return 'def load_data():\n    """No saved tensors: random inputs reproduce the failure."""\n    return {}'
    return (
        "def load_data():\n"
        '    """Real input values (random stand-ins did not reproduce the failure)."""\n'
        f"    return torch.load(pathlib.Path(__file__).with_name({data_file!r}), weights_only=True)"
    )


def _input_expression(i: GraphInput) -> str:
    if i.opaque:
        return "None  # not supported yet: " + i.opaque
    if i.dtensor is not None and i.meta is None:  # a DeviceMesh
        return f"make_mesh({tuple(i.dtensor['mesh_shape'])!r})"
    if i.meta is None:
        return repr(i.value)
    if i.dtensor is not None:
        placements = ", ".join(i.dtensor["placements"])
        local = _tensor_expression(i)
        return f"DTensor.from_local({local}, make_mesh({tuple(i.dtensor['mesh_shape'])!r}), [{placements}], run_check=False)"
    return _tensor_expression(i)


def _tensor_expression(i: GraphInput) -> str:
    assert i.meta is not None
    m = i.meta
    if i.seed is not None:
        extra = "".join(
            f", {k}={v!r}" for k, v in (("low", m.low), ("high", m.high)) if v is not None
        ) + ("" if m.device == "cpu" else f", device={m.device!r}")
        grad = ", requires_grad=True" if m.requires_grad and m.is_leaf else ""
        expr = f"rand_tensor({m.shape!r}, {m.stride!r}, torch.{m.dtype}{grad}, seed={i.seed}{extra})"
        return f"non_leaf({expr})" if m.requires_grad and not m.is_leaf else expr
    expr = f"clone_input(data[{('input:' + i.name)!r}])"
    if m.requires_grad and not m.is_leaf:
        return f"non_leaf({expr})"
    return expr + (".requires_grad_()" if m.requires_grad else "")


def program_inputs(case: GraphCase) -> list[GraphInput]:
    """The inputs a repro makes: a dynamo graph's symbolic sizes are read off its tensors instead."""
    if case.boundary == "dynamo":
        return [i for i in case.inputs if i.derived_from is None]
    return list(case.inputs)


def _inputs_function(case: GraphCase) -> str:
    made = program_inputs(case)
    names = [i.name for i in made]
    sizes = [(k, i) for k, i in enumerate(made) if i.derived_from and i.derived_from[0] in names]
    lines = ["def make_inputs(data):", "    inputs = [" if sizes else "    return ["]
    for i in made:
        comment = f"  # {i.name}: {i.meta.describe()}" if i.meta else f"  # {i.name}" + (" (a symbolic int)" if i.symbolic_int else "")
        if i.meta and i.symbolic_dims:
            comment += f", dynamic dims {list(i.symbolic_dims)}"
        lines.append(f"        {_input_expression(i)},{comment}")
    lines.append("    ]")
    for k, i in sizes:
        tensor, dim = i.derived_from  # type: ignore[misc]
        lines.append(f"    inputs[{k}] = inputs[{names.index(tensor)}].size({dim})  # {i.name}: the size of {tensor}, dim {dim}")
    if sizes:
        lines.append("    return inputs")
    return "\n".join(lines)


def _program_class(case: GraphCase) -> str:
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


def _run_functions(case: GraphCase, stage: str) -> str:
    if case.boundary == "dynamo":
        return _run_dynamo(case, stage)
    return _run_aot(case, stage)


def _run_dynamo(case: GraphCase, stage: str) -> str:
    made = program_inputs(case)
    dynamic = any(i.symbolic_int for i in case.inputs)  # an int no tensor's size gives: only dynamic=True makes it symbolic
    marks = [f"    torch._dynamo.mark_dynamic(inputs[{k}], {d})\n" for k, i in enumerate(made) for d in i.symbolic_dims]
    if dynamic:  # ... and then every other dim must be pinned
        marks += [
            f"    torch._dynamo.mark_static(inputs[{k}], {d})\n"
            for k, i in enumerate(made)
            if i.meta is not None
            for d in range(len(i.meta.shape))
            if d not in i.symbolic_dims
        ]
    options = ", dynamic=True" if dynamic else ""
    wrap = "Program(mod)" if any(i.derived_from for i in case.inputs) else "mod"
    backward = (
        "    loss = [o.sum() for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]\n"
        "    leaves = [i for i in inputs if isinstance(i, torch.Tensor) and i.requires_grad]\n"
        "    if loss and leaves:\n"
        "        outputs += torch.autograd.grad(sum(loss), leaves, allow_unused=True)\n"
        if case.backward
        else ""
    )
    return (
        "def compile_graph(mod, inputs):\n"
        f'    """The failing stage: torch.compile with backend {stage!r}."""\n'
        + "".join(marks)
        + f"    return torch.compile({wrap}, backend={backend_expression(case, stage)}{options})\n\n\n"
        "def forward_backward(fn, inputs):\n"
        '    """Run the graph' + (", then its backward when an output needs grad." if case.backward else ".") + '"""\n'
        "    outputs = fn(*inputs)\n"
        "    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]\n"
        + backward
        + "    return outputs\n\n\n"
        "def run(mod, inputs):\n"
        "    return forward_backward(compile_graph(mod, inputs), inputs)\n\n\n"
        "def run_eager(mod, inputs):\n"
        f"    return forward_backward({wrap}, inputs)"
    )


def backend_expression(case: GraphCase, stage: str) -> str:
    """The expression a repro passes as ``backend=`` for ``stage``."""
    if stage == case.backend and case.backend_is_defined:
        from .extract import BACKEND_NAME

        return BACKEND_NAME
    if stage != case.backend or ":" not in stage:
        return repr(stage)
    module, _, attr = stage.partition(":")
    return f"__import__({module!r}, fromlist=[{attr!r}]).{attr}"


def _run_aot(case: GraphCase, stage: str) -> str:
    kwargs = "".join(f", {k}={v!r}" for k, v in sorted(case.compile_kwargs.items()))
    trace = "    gm = make_fx(mod, tracing_mode='real')(*inputs)\n"
    symbolic = is_symbolic(case)
    if symbolic:  # the compiler sees fake inputs with the program's symbolic sizes, as it did then
        trace = "    mode, inputs = symbolic_inputs(inputs)\n    with mode:\n        gm = make_fx(mod, tracing_mode='real')(*inputs)\n"
    if stage in EAGER_STAGES:
        doc = f"{stage} runs aot graphs as they are"
        body = "    return mod\n"
    elif stage == "inductor":
        doc = f"the {case.kind} graph through Inductor's inner compiler"
        body = trace + f"    from torch._inductor.compile_fx import compile_fx_inner\n    return compile_fx_inner(gm, inputs{kwargs})\n"
    elif case.compiler:
        module, _, attr = case.compiler.rpartition(":")
        doc = f"the {case.kind} graph through {stage}'s compiler"
        load = f"    from {module} import {attr}\n" if module else ""  # (else: defined above, from the user's script)
        body = trace + f"{load}    return {attr}(gm, inputs)\n"
    else:
        doc = f"the {case.kind} graph through {stage}'s compiler"
        key = AOT_COMPILER_KEYS[case.kind]
        backend = backend_expression(case, stage)
        backend = f"torch._dynamo.lookup_backend({backend})" if backend.startswith(("'", '"')) else backend
        fallback = "" if key == "fw_compiler" else f'.get({key!r}) or kwargs["fw_compiler"]'
        lookup = f"kwargs{fallback}" if fallback else f"kwargs[{key!r}]"
        body = trace + (
            f"    kwargs = {backend}.kwargs\n"
            f"    compiler = {lookup}  # AOTAutograd's default when the backend gives none\n"
            if fallback
            else f"    compiler = {backend}.kwargs[{key!r}]\n"
        ) + "    return compiler(gm, inputs)\n"
    return (
        "def compile_graph(mod, inputs):\n"
        f'    """The failing stage: {doc}."""\n'
        + body
        + "\n\n"
        "def run(mod, inputs):\n"
        "    with torch.no_grad():  # AOTAutograd runs its graphs without autograd\n"
        "        compiled = compile_graph(mod, inputs)\n"
        "        outputs = compiled(list(inputs)) if getattr(compiled, '_boxed_call', False) else compiled(*inputs)\n"
        "    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]\n\n\n"
        "def run_eager(mod, inputs):\n"
        "    with torch.no_grad():\n"
        "        outputs = mod(*inputs)\n"
        "    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]"
    )


#: Namespaces of the functional collectives a compiled graph calls.
COLLECTIVES = ("_c10d_functional", "c10d_functional")


def needs_process_group(case: GraphCase) -> bool:
    """Does the repro need the job's process group: a collective in the graph, or a DTensor input?"""
    from .seams.ops import is_overload

    collective = any(is_overload(n.target) and n.target.namespace in COLLECTIVES for n in _all_call_nodes(case.gm))
    return collective or any(i.dtensor is not None for i in case.inputs)


def _process_group_functions(case: GraphCase) -> str:
    from .seams.dtensor import FAKE_GROUP_SETUP

    job = case.distributed or {}
    meshes = {tuple(i.dtensor["mesh_shape"]) for i in case.inputs if i.dtensor is not None}
    world = job.get("world_size") or max((math.prod(m) for m in meshes), default=1)
    lines = [
        f"RANK = {job.get('rank', 0)!r}  # this rank of the job",
        f"WORLD_SIZE = {world!r}",
        "",
        "",
        FAKE_GROUP_SETUP,
    ]
    if meshes:
        lines += [
            "",
            "",
            "def make_mesh(shape):",
            '    """A device mesh of this shape over the fake process group (made once per shape)."""',
            "    from torch.distributed.device_mesh import init_device_mesh",
            "",
            "    if shape not in MESHES:",
            '        MESHES[shape] = init_device_mesh("cpu", shape)',
            "    return MESHES[shape]",
            "",
            "",
            "MESHES = {}",
            "from torch.distributed.tensor import DTensor, Partial, Replicate, Shard  # noqa: E402,F401",
        ]
    return "\n".join(lines)


def is_symbolic(case: GraphCase) -> bool:
    """Does the case keep symbolic sizes (dynamic shapes)?"""
    return any(i.symbolic_dims or i.derived_from or i.symbolic_int for i in case.inputs)


def _symbolic_inputs_function(case: GraphCase) -> str:
    """``symbolic_inputs``: an aot graph's fake inputs with exactly the dims that were symbolic."""
    dims = {k: list(i.symbolic_dims) for k, i in enumerate(case.inputs) if i.symbolic_dims}
    names = [i.name for i in case.inputs]
    sizes = {k: (names.index(i.derived_from[0]), i.derived_from[1]) for k, i in enumerate(case.inputs) if i.derived_from}
    free = [k for k, i in enumerate(case.inputs) if i.symbolic_int]
    return (
        f"DYNAMIC_DIMS = {dims!r}  # input -> its symbolic dims\n"
        f"SIZES_OF = {sizes!r}  # symbolic-int input -> (tensor input, dim) whose size it is\n"
        f"FREE_SYMBOLS = {free!r}  # symbolic-int inputs no tensor's size gives\n\n\n"
        "def symbolic_inputs(inputs):\n"
        '    """Fake inputs with exactly the symbolic sizes the compiler saw in the program."""\n'
        "    from torch._subclasses.fake_tensor import FakeTensorMode\n"
        "    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext\n\n"
        "    mode = FakeTensorMode(shape_env=ShapeEnv())\n"
        "    fakes = []\n"
        "    for k, value in enumerate(inputs):\n"
        "        if isinstance(value, torch.Tensor):\n"
        "            sizes = [DimDynamic.DYNAMIC if d in DYNAMIC_DIMS.get(k, ()) else DimDynamic.STATIC for d in range(value.dim())]\n"
        "            fakes.append(mode.from_tensor(value, symbolic_context=StatelessSymbolicContext(dynamic_sizes=sizes)))\n"
        "        elif k in FREE_SYMBOLS:\n"
        "            fakes.append(mode.shape_env.create_unspecified_symint_and_symbol(value, None, DimDynamic.DYNAMIC))\n"
        "        else:\n"
        "            fakes.append(value)\n"
        "    for k, (tensor, dim) in SIZES_OF.items():\n"
        "        fakes[k] = fakes[tensor].shape[dim]\n"
        "    return mode, fakes"
    )


def _main(accuracy: bool, fp64_class: str = "Repro", distributed: bool = False) -> str:
    setup = "    setup_process_group()\n" if distributed else ""
    if not accuracy:
        return (
            'if __name__ == "__main__":\n'
            "    apply_config()\n" + setup +
            "    data = load_data()\n"
            "    run(Repro(data), make_inputs(data))\n"
            '    print("did not fail")'
        )
    return (
        "def to_float64(values):\n"
        "    return [v.detach().to(torch.float64).requires_grad_(v.requires_grad)\n"
        "            if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]\n\n\n"
        'if __name__ == "__main__":\n'
        "    apply_config()\n" + setup +
        "    data = load_data()\n"
        "    expected = run_eager(Repro(data), make_inputs(data))\n"
        f"    fp64 = run_eager({fp64_class}(data).to(torch.float64), to_float64(make_inputs(data)))\n"
        "    actual = run(Repro(data), make_inputs(data))\n"
        "    problem = accuracy_divergence(expected, actual, fp64, strict=STRICT)\n"
        "    if problem:\n"
        '        sys.exit(f"AccuracyError: {ACCURACY_MESSAGE} ({accuracy_category(problem)}): {problem}")\n'
        '    print("no divergence")'
    )
