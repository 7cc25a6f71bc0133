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
(:func:`minifier.repro.files.exec_repro`), with ``data`` handed over in memory
instead of loaded from disk: every question the minifier asks is answered by the
code the user will finally run. Writing it to disk and reading it back is
:mod:`minifier.repro.files`; the helpers a repro carries live in
:mod:`minifier.unit.runtime`.

The parts have modules of their own: the graph as code (:mod:`minifier.repro.graph`),
the inputs and their data (:mod:`minifier.repro.inputs`), and the stage call
(:mod:`minifier.repro.run`). This module puts the file together (:func:`render`):
the header, the imports, the carried definitions, the config, the fake process
group a distributed graph needs, the ``PT2KIT`` literal and the ``__main__`` block.
"""

from __future__ import annotations

import inspect
import math
import os
import re
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from pt2kit.errors import plural
from ..unit.case import Boundary, CONFIG_CARRIED, CONFIG_IMPORT, CONFIG_MISSING, CompileContext, GraphCase, TensorMeta
from ..unit.graphio import GraphFormatError, dump_graph, subgraphs
from ..unit.graphio import all_call_nodes
from .graph import HOP_CALL, IN_PLACE_BUILTINS, module_class, weighed_outputs
from .inputs import (
    data_function,
    data_of,
    inline_data,
    inputs_function,
    is_symbolic,
    traces_on_fakes,
    program_class,
    program_inputs,
    symbolic_inputs_function,
)
from .run import AOT_COMPILER_KEYS, EAGER_STAGES, backend_expression, kept_donated, run_functions
from ..unit.runtime import call_hop, call_opaque, clone_input, copies, drop_unread_items, graph_module, guarded_view, non_leaf, rand_tensor
from ..unit.devices import devices_of
from ..unit.aliasing import aliasing_divergence, output_aliasing
from ..unit.accuracy import ACCURACY_MESSAGE, EAGER_DRAWS, accuracy_category, accuracy_divergence, accuracy_message, run_float64, tensor_versions, written_inputs
from ..unit.float64 import as_float64, draws_as_eager_under_fallback, float64_graph, fp64_blocker, fp64_cast, fp64_dtype
from pt2kit.signature import Signature

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy

__all__ = [  # the parts' public names are the writer's too
    "AOT_COMPILER_KEYS",
    "COLLECTIVES",
    "EAGER_STAGES",
    "FORMAT_VERSION",
    "HOP_CALL",
    "MODULE_COMMENT",
    "backend_expression",
    "data_of",
    "is_symbolic",
    "needs_process_group",
    "program_inputs",
    "render",
]


FORMAT_VERSION = 1
#: Said beside each user-module import; :func:`write_repro` copies small modules beside the repro.
MODULE_COMMENT = " (beside this file, or on PYTHONPATH)"


def render(
    case: GraphCase,
    *,
    stage: str,
    failure: Signature | None = None,
    accuracy: Accuracy = False,
    data_file: str | None = None,
    note: str = "",
    strict: bool = False,
    tries: int = 1,
) -> str:
    """The full text of ``repro.py`` for ``case`` run through ``stage``.

    ``accuracy``: also check the result against an fp64 reference (``"strict"``: bit for bit).
    ``tries``: a flaky failure's repro runs the stage up to this many times, until it fails.
    """
    strict = strict or accuracy == "strict"
    draws_as_eager = accuracy not in (False, EAGER_DRAWS) and draws_as_eager_under_fallback(case.gm, stage)
    config = _config_function(case, fallback_random=draws_as_eager)
    parts = [
        _header(case, stage, failure, "strict" if accuracy and strict else accuracy, note),
        _imports(case, stage, accuracy, data_file),
        _definitions(case),
        config,
        module_class(case),
        program_class(case),
        symbolic_inputs_function(case)
        if case.boundary == Boundary.AOT and traces_on_fakes(case) and stage not in EAGER_STAGES
        else "",
        data_function(data_file, case),
        inputs_function(case),
        run_functions(case, stage),
    ]
    if needs_process_group(case):
        parts.insert(parts.index(config) + 1, _process_group_functions(case))
    if subgraphs(case.gm) or case.handed:
        parts.append(inspect.getsource(graph_module).strip())
        parts.append(inspect.getsource(call_hop).strip())
        parts.append(inspect.getsource(call_opaque).strip())
        if case.boundary == Boundary.AOT and stage not in EAGER_STAGES:  # (see repro_run._run_aot)
            parts.append(inspect.getsource(drop_unread_items).strip())
    if any(i.is_random for i in case.inputs):
        parts.append(inspect.getsource(rand_tensor).strip())
    traced = case.boundary == Boundary.AOT and stage not in EAGER_STAGES and not traces_on_fakes(case)  # (see repro_run._run_aot)
    if traced or any(i.is_tensor and not i.is_random for i in case.inputs):
        parts.append(inspect.getsource(clone_input).strip())
    if traced:
        parts.append(inspect.getsource(copies).strip())
    if any(i.meta is not None and i.meta.requires_grad and not i.meta.is_leaf for i in case.inputs):
        parts.append(inspect.getsource(non_leaf).strip())
    if any(i.meta is not None and i.meta.view for i in case.inputs):
        parts.append(inspect.getsource(guarded_view).strip())
    if accuracy:
        fp64 = float64_graph(case.gm)
        if fp64.code != case.gm.code:  # dtypes written in the graph: the reference promotes them too
            reference = module_class(case, fp64, "ReproFloat64")
            parts.insert(parts.index(module_class(case)) + 1, reference)
            parts += [inspect.getsource(f).strip() for f in (fp64_dtype, fp64_cast, as_float64) if f"{f.__name__}(" in reference]
        parts.append(f"ACCURACY_MESSAGE = {ACCURACY_MESSAGE!r}")
        parts.append(f"STRICT = {strict!r}  # True: outputs must equal eager's bit for bit")
        parts.append(f"ALIASING = {judges_aliasing(case)!r}  # True: outputs must alias one another as eager's do")
        parts.append(inspect.getsource(accuracy_divergence).strip())
        parts += [inspect.getsource(f).strip() for f in (accuracy_category, accuracy_message)]
        parts += [inspect.getsource(f).strip() for f in (output_aliasing, aliasing_divergence)]
        parts += [inspect.getsource(f).strip() for f in (tensor_versions, written_inputs, run_float64)]
        parts.append(
            _accuracy_runs(case, "ReproFloat64" if fp64.code != case.gm.code else "Repro", fp64_blocker(case.gm))
        )
    metadata = _metadata(case, stage, failure, accuracy if accuracy == EAGER_DRAWS else bool(accuracy), data_file)
    metadata["strict"] = strict
    if tries > 1:
        metadata["tries"] = tries
    parts.append(
        "# What pt2kit needs to read this file back (`minify repro repro.py`).\nPT2KIT = " + _literal(metadata)
    )
    parts.append(_main(accuracy, distributed=needs_process_group(case), tries=tries, cuda="cuda" in devices_of(case)))
    future, _ = split_future(case.definitions)
    return future + "\n\n\n".join(p.strip("\n") for p in parts if p) + "\n"


def _header(case: GraphCase, stage: str, failure: Signature | None, accuracy: Accuracy, note: str) -> str:
    what = f"the {case.kind} graph (after aot)" if case.boundary == Boundary.AOT else "the dynamo graph"
    # (a graph saved as the program ran, before any verdict, is not said to fail)
    said = [f"# {what} fails under {stage}:", f"#   {failure}"] if failure else [f"# {what} as captured, for {stage} (not known to fail)"]
    lines = [
        f"# pt2kit repro, torch {torch.__version__}",
        *said,
        f"# {plural(case.node_count, 'op node')}: {', '.join(sorted(set(case.op_names()))) or 'none'}",
        "# Run `python repro.py`: it exits non-zero when the failure reproduces" + _judged_by(accuracy),
    ]
    if note:
        lines += [f"# {line}" for line in note.splitlines()]
    return "\n".join(lines)


def _judged_by(accuracy: Accuracy) -> str:
    draws = "; its random draws are eager's own, as the program compares them" if accuracy == EAGER_DRAWS else ""
    strict = " (the compiled result differs from eager's, bit for bit)."
    return strict if accuracy == "strict" else f" (the compiled result diverges from an fp64 reference{draws})." if accuracy else "."


def _imports(case: GraphCase, stage: str, accuracy: Accuracy, data_file: str | None) -> str:
    from pt2kit.seams.ops import imports_and_definitions

    lines = ["import torch"]
    if case.boundary == Boundary.AOT and stage not in EAGER_STAGES:
        lines.append("from torch.fx.experimental.proxy_tensor import make_fx")
    if data_file or accuracy:
        lines.insert(0, "import sys" if not data_file else "import pathlib\nimport sys")
    # the graph's code and its bodies' (a cond branch's ``device(type='cpu')`` needs its import too)
    codes = [gm.graph.python_code(root_module="self") for gm in _with_bodies(case.gm)]
    block, defined = imports_and_definitions({name: value for code in codes for name, value in code.globals.items()})
    # FX lists every name its codegen might need; keep the ones the graph uses.
    used = {word for code in codes for word in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", code.src)}
    lines += [line for line in block.splitlines() if line and line != "import torch" and _bound_name(line) in used]
    if "operator" not in used and (case.handed or subgraphs(case.gm)) and any(
        n.target in IN_PLACE_BUILTINS for n in all_call_nodes(case.gm)
    ):  # (written through call_opaque: see repro.graph.opaque_calls)
        lines.append("import operator")
    from pt2kit.seams.ops import INDUCTOR_PRIMS, higher_order_module, needs_inductor_prims

    calls = all_call_nodes(case.gm)
    if any(needs_inductor_prims(n.target) for n in calls):
        lines.append(f"import {INDUCTOR_PRIMS}  # noqa: F401  registers Inductor's own prims, which this graph calls")
    for module in sorted({m for n in calls if (m := higher_order_module(n.target))}):
        lines.append(f"import {module}  # noqa: F401  registers the higher-order op this graph calls")
    for name, _ in case.modules:
        lines.append(f"import {name}  # noqa: F401  defines a custom backend or op this graph needs{MODULE_COMMENT}")
    lines += [
        f"\n\n# a function the graph calls that no import reaches, from its source\n{source}"
        for name, source in defined.items()
        if name in used
    ]
    return "\n".join(lines)


def _with_bodies(gm: fx.GraphModule) -> list[fx.GraphModule]:
    """``gm`` and the bodies of its higher-order ops, nested ones included."""
    return [gm, *(body for sub in subgraphs(gm).values() for body in _with_bodies(sub))]


def _definitions(case: GraphCase) -> str:
    _, definitions = split_future(case.definitions)
    if not definitions.strip():
        return ""
    return (
        "# The user's own definitions this failure needs (a backend, custom op or tensor\n"
        "# subclass with no importable name), carried over from their program.\n" + definitions.strip("\n")
    )


def split_future(definitions: str) -> tuple[str, str]:
    """Carried definitions as ``(their __future__ imports, the rest)``.

    Python takes a ``from __future__`` import only at the top of a file: the repro
    starts with it, and the definitions' block, written further down, holds the rest.
    """
    future = [line for line in definitions.splitlines() if line.startswith("from __future__ import ")]
    if not future:
        return "", definitions
    rest = "".join(line + "\n" for line in definitions.splitlines() if line not in future)
    return "".join(line + "\n" for line in future), rest


def _bound_name(import_line: str) -> str:
    """The name an import line (or FX's ``NoneType = type(None)``) binds."""
    words = import_line.replace("=", " ").split()
    return words[-1] if words[0] in ("import", "from") else words[0]


def _literal(metadata: dict[str, Any]) -> str:
    """``metadata`` as a Python literal, a line per key and per input.

    (``pprint`` took 50 ms on a real model's graph, and every query renders its candidate.)
    """
    lines = ["{"]
    for key, value in metadata.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines += [f"    {key!r}: [", *(f"        {v!r}," for v in value), "    ],"]
        else:
            lines.append(f"    {key!r}: {value!r},")
    return "\n".join([*lines, "}"])


def _metadata(
    case: GraphCase, stage: str, failure: Signature | None, accuracy: Accuracy, data_file: str | None
) -> dict[str, Any]:
    return {
        "version": FORMAT_VERSION,
        "torch": torch.__version__,
        "stage": stage,
        "backend": case.backend,
        "boundary": case.boundary,
        "kind": case.kind,
        "failure": failure.to_json() if failure else None,
        "accuracy": accuracy,
        "data_file": data_file, **({"data_inline": True} if data_file is None and inline_data(case) is not None else {}),
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
                **({"view_of": list(i.view_of)} if i.view_of else {}),
                **({"shares_only": True} if i.shares_only else {}),
                **({"static": i.static} if i.static else {}),
            }
            for i in case.inputs
        ],
        "constants": {name: vars(TensorMeta.of(t)) for name, t in case.constants.items()},
        "config": case.config,
        "modules": [name for name, _ in case.modules],
        "compile_kwargs": case.compile_kwargs,
        **({"donated": donated} if (donated := kept_donated(case)) else {}),
        "compiler": case.compiler, "backward": case.backward,
        **({"grad_enabled": False} if not case.grad_enabled else {}),
        **({"handed": True} if case.handed else {}), **({"fullgraph": True} if case.fullgraph else {}),
        **{key: list(value) for key in ("unreached", "written_between") if (value := getattr(case, key))},
        **({"backward_context": case.backward_context.to_json()} if case.backward_context is not None else {}),
        **({"backward_calls": [[list(c.outputs), c.retain_graph] for c in case.backward_calls]} if case.backward_calls else {}),
        **({"output_grads": list(grads.values())} if (grads := weighed_outputs(case)) else {}),
        **({"context": context} if (context := case.context.to_json()) else {}),
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


INDUCTOR_CONFIG = "torch._inductor.config"


def _config_function(case: GraphCase, fallback_random: bool = False) -> str:
    """``apply_config()``; with ``fallback_random``, an accuracy check's: the compiled graph draws eager's random numbers."""
    lines = ["def apply_config():", '    """The non-default compiler config this failure needs, and the state the program ran in."""']
    config = case.config
    if fallback_random and "fallback_random" not in config.get(INDUCTOR_CONFIG, {}):
        config = {**config, INDUCTOR_CONFIG: {**config.get(INDUCTOR_CONFIG, {}), "fallback_random": True}}
        lines.append("    # the compiled graph draws eager's random numbers, so that its values compare with eager's")
    for module, values in sorted(config.items()):
        if values:
            lines.append(f"    import {module}")
        for key, value in sorted(values.items()):
            lines.extend(_config_lines(module, key, value))
    lines += _context_lines(case.context)
    if len(lines) == 2:
        lines.append("    pass  # torch's defaults reproduce it")
    return "\n".join(lines)


def _context_lines(context: CompileContext) -> list[str]:
    """The global state of :class:`CompileContext` (its autocast is entered around the call: see repro/run.py)."""
    default = CompileContext()  # (threads: 0 is the environment's count, never set)
    return [
        f"    {line.format(value)}  # as the program set it"
        for field, line in CompileContext.SETTERS.items()
        if (value := getattr(context, field)) != getattr(default, field)
    ]


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


#: Namespaces of the functional collectives a compiled graph calls.
COLLECTIVES = ("_c10d_functional", "c10d_functional")


def needs_process_group(case: GraphCase) -> bool:
    """Does the repro need the job's process group: a collective in the graph (an overload, or the packet a
    dynamo graph may call: ``torch.ops._c10d_functional.all_gather_into_tensor``), or a DTensor input?"""
    from pt2kit.seams.ops import is_overload, is_packet, schema_name

    nodes = all_call_nodes(case.gm)
    ops = [n.target for n in nodes if is_overload(n.target) or is_packet(n.target)]
    collective = any(schema_name(op).split("::")[0] in COLLECTIVES for op in ops)
    return collective or any(i.dtensor is not None for i in case.inputs)


def _process_group_functions(case: GraphCase) -> str:
    from pt2kit.seams.dtensor import FAKE_GROUP_SETUP

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


def judges_aliasing(case: GraphCase) -> bool:
    """Is ``case``'s accuracy also how its outputs alias one another (:func:`~minifier.unit.aliasing.aliasing_divergence`)?

    A dynamo graph's outputs reach the program as they are, so yes, when nothing runs
    a backward through it. An aot graph's outputs go through AOTAutograd's wrappers,
    which make their aliases again; and gradients alias as autograd's engine passes them
    on (eagerly, one tensor for both operands of an add), not as the graph does.
    """
    return case.boundary == Boundary.DYNAMO and not any(
        i.meta is not None and i.meta.requires_grad for i in case.inputs
    )


RUN_SEED = 0
"""The RNG seed every run of a graph starts from, in pt2kit's queries and in the repro's
``__main__``: a graph with random ops compares compiled against eager only from one seed."""


def _accuracy_runs(case: GraphCase, fp64_class: str, blocker: str | None) -> str:
    """``accuracy_runs(data)``: the compiled run and its two references, as an accuracy repro and pt2kit's queries make them.

    ``blocker``: why no float64 reference is made (:func:`~minifier.unit.float64.fp64_blocker`).
    """
    names = [i.name for i in program_inputs(case)]
    seed = f"    torch.manual_seed({RUN_SEED})\n"
    return (
        f"INPUT_NAMES = {names!r}\n"
        f"NO_FP64_REFERENCE = {blocker!r}  # when set, why eager alone is the reference\n\n\n"
        "def to_float64(values):\n"
        "    return [v.detach().to(torch.float64).requires_grad_(v.requires_grad)\n"
        "            if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]\n\n\n"
        "def accuracy_runs(data):\n"
        '    """The compiled run, eager, and eager in float64 (the reference), each on fresh inputs.\n\n'
        "    Each gives its outputs, then the inputs eager writes into (``written``), as they are\n"
        "    after the run: a graph whose effect is a write into an input is judged on that input.\n"
        "    Where eager raises, ``expected`` is its error, one line.\n"
        "    fp64 is None when there is no float64 reference (``note`` says why): eager is then\n"
        "    the reference.\n"
        '    """\n'
        "    compiled_inputs = make_inputs(data)\n" + seed + "    actual = run(Repro(data), compiled_inputs)\n"
        "    inputs = make_inputs(data)\n"
        "    before = tensor_versions(inputs)\n" + seed + "    try:\n"
        "        expected = run_eager(Repro(data), inputs)\n"
        "    except Exception as e:  # eager refuses what the compiled run returned: judged as a wrong answer\n"
        "        return f'{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else \"\"}', actual, None, [], None\n"
        "    written = written_inputs(before, tensor_versions(inputs))\n"
        "    expected = expected + [inputs[i] for i in written]\n"
        "    actual = actual + [compiled_inputs[i] for i in written]\n"
        "    if NO_FP64_REFERENCE:\n"
        "        return expected, actual, None, written, NO_FP64_REFERENCE\n"
        "    try:\n"
        "        inputs = to_float64(make_inputs(data))\n"
        f"        torch.manual_seed({RUN_SEED})\n"
        f"        fp64 = run_float64(run_eager, {fp64_class}(data).to(torch.float64), inputs) + [inputs[i] for i in written]\n"
        "    except Exception as e:  # the reference's own limit, not the graph's failure\n"
        "        why = f'{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}'\n"
        "        return expected, actual, None, written, f'the float64 reference cannot run ({why}); eager is the reference'\n"
        "    return expected, actual, fp64, written, None\n\n\n"
        "def value_labels(count, written):\n"
        '    """How a divergence names each compared value: an output, or an input the graph writes into."""\n'
        "    outputs = [f'output {i}' for i in range(count - len(written))]\n"
        "    return outputs + [f'input {INPUT_NAMES[i]} (written in place)' for i in written]"
    )


def _main(accuracy: Accuracy, distributed: bool = False, tries: int = 1, cuda: bool = False) -> str:
    if not accuracy:
        body = ["inputs = make_inputs(data)", f"torch.manual_seed({RUN_SEED})", "run(Repro(data), inputs)"]
        if cuda:  # kernels run asynchronously: a device error of theirs shows here, not at exit
            body.append("torch.cuda.synchronize()")
        passed = "did not fail"
    else:
        body = [
            "expected, actual, fp64, written, note = accuracy_runs(data)",
            "if note:",
            "    print(f'note: {note}', file=sys.stderr)",
            "problem = accuracy_divergence(expected, actual, fp64, strict=STRICT, labels=value_labels(len(expected), written), aliasing=ALIASING)",
            "if problem:",
            '    sys.exit(f"AccuracyError: {accuracy_message(accuracy_category(problem))}: {problem}")',
        ]
        passed = "no divergence"
    if tries > 1:  # a flaky failure: the stage runs again, compiled afresh, until it fails
        body = [
            f"for attempt in range({tries}):  # the failure showed in only some runs when pt2kit measured it",
            "    torch._dynamo.reset()",
        ] + ["    " + line for line in body]
        passed = f"did not fail in {tries} tries"
    setup = ["setup_process_group()"] if distributed else []
    lines = ["apply_config()", *setup, "data = load_data()", *body, f"print({passed!r})"]
    return 'if __name__ == "__main__":\n' + "\n".join("    " + line for line in lines)
