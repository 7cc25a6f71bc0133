"""The stage call in a ``repro.py``: ``compile_graph``, ``run(mod, inputs)`` and ``run_eager``.

``run`` is the one call that fails, written for the graph's boundary:

- a **dynamo** graph goes through ``torch.compile(mod, backend=...)`` as the
  program's did: the dims that were dynamic are marked with ``maybe_mark_dynamic`` (and
  when an int no tensor's size gives was symbolic, ``dynamic=True`` with every
  other dim marked static); when the program ran backward, so does ``run``, from
  the sum of the outputs that require grad; the inputs dynamo marked static (a
  module's buffers and parameters) are marked again with ``mark_static_address``;
  a graph dynamo cannot trace again (a higher-order op it made itself, such as
  ``autograd_function_apply``) is *handed*: traced by FX and given to the backend
  directly, as dynamo gave it;
- an **aot** graph (forward, backward or inference, after AOTAutograd) goes
  straight to the compiler its backend handed it: Inductor's ``compile_fx_inner``,
  the user's compiler by import, or the one in the backend's ``kwargs``
  (:data:`AOT_COMPILER_KEYS`); the eager stages (:data:`EAGER_STAGES`) run it as it
  is. A graph compiled with symbolic sizes, or holding an op that makes a size out
  of the data (``x.item()``), is traced on fake inputs in a shape environment, with
  those sizes symbolic and the rest static (``symbolic_inputs``,
  :mod:`minifier.repro.inputs`).

``run_eager`` is the same graph, not compiled: the accuracy check's reference.
:func:`backend_expression` names the backend: a registered name, a
``module:function`` import, or the definition the repro carries from the script.
"""

from __future__ import annotations

from ..unit.case import BACKEND_NAME, Boundary, CompileContext, GraphCase, INDUCTOR_INNER_COMPILE
from .graph import weighed_outputs
from .inputs import program_inputs, traces_on_fakes
from ..unit.check import Stage
from ..unit.graphio import subgraphs
from pt2kit.seams import compile_fx


#: The stages that run no compiler of their own: an aot graph goes through them as it is.
EAGER_STAGES = (Stage.EAGER, Stage.AOT_EAGER, Stage.AOT_EAGER_DECOMP_PARTITION)


#: Where a backend's ``kwargs`` hold its compiler for each kind of aot graph.
AOT_COMPILER_KEYS = {"forward": "fw_compiler", "backward": "bw_compiler", "inference": "inference_compiler"}


def run_functions(case: GraphCase, stage: str) -> str:
    if case.boundary == Boundary.DYNAMO:
        return _run_dynamo(case, stage)
    return _run_aot(case, stage)


def _run_dynamo(case: GraphCase, stage: str) -> str:
    made = program_inputs(case)
    # an int no tensor's size gives: only dynamic=True makes it symbolic
    dynamic = any(i.symbolic_int for i in case.inputs)
    # (maybe_mark_dynamic: a dim the program compiled symbolic may be specialized again here, as dynamic=True
    # lets it be; mark_dynamic would make that a ConstraintViolationError the program never raised)
    marks = [f"    torch._dynamo.maybe_mark_dynamic(inputs[{k}], {d})\n" for k, i in enumerate(made) for d in i.symbolic_dims]
    if dynamic:  # ... and then every other dim must be pinned
        marks += [
            f"    torch._dynamo.mark_static(inputs[{k}], {d})\n"
            for k, i in enumerate(made)
            if i.meta is not None
            for d in range(len(i.meta.shape))
            if d not in i.symbolic_dims
        ]
    # the program's buffers and parameters: AOTAutograd's partitioner treats them as live the whole step
    marks += [
        f"    torch._dynamo.mark_static_address(inputs[{k}], guard={i.static == 'guarded'})\n"
        for k, i in enumerate(made)
        if i.static
    ]
    options = (", dynamic=True" if dynamic else "") + (", fullgraph=True" if case.fullgraph else "")
    wrap = "Program(mod)" if any(i.derived_from for i in case.inputs) else "mod"
    no_grad, pad = ("", "    ") if case.grad_enabled else ("    with torch.no_grad():{comment}\n", "        ")
    backward = _backward(case)
    weighed = bool(weighed_outputs(case))  # (Repro holds them as output_grads: run and run_eager hand them over)
    call, pad_call = _autocast_blocks(case)  # the program called the graph under these (the graph holds no cast)
    compile_body = (
        "".join(marks) + f"    return torch.compile({wrap}, backend={backend_expression(case, stage)}{options})\n"
    )
    doc = f"torch.compile with backend {stage!r}"
    if case.handed:  # (static sizes only: see minifier.bisect.untraceable)
        doc = f"backend {stage!r} gets the graph as dynamo handed it (dynamo cannot trace it again)"
        compile_body = (  # under the autocast the graph is called in, where dynamo would compile it
            f"    gm = graph_module(mod)\n{call}"
            f"{pad_call}return torch._dynamo.lookup_backend({backend_expression(case, stage)})(gm, list(inputs))\n"
        )
        if _needs_a_shape_env(case):
            from pt2kit.seams.aot_autograd import TRACING_CONTEXT, TRACING_CONTEXT_IMPORTS

            compile_body = (
                "    gm = graph_module(mod)\n"
                "    # as dynamo compiles: in a tracing context whose fake mode keeps a ShapeEnv (a while_loop needs one)\n"
                f"{TRACING_CONTEXT_IMPORTS}\n"
                f"    with {TRACING_CONTEXT}:\n{_indented(call)}"
                f"{pad_call}    return torch._dynamo.lookup_backend({backend_expression(case, stage)})(gm, list(inputs))\n"
            )
    return (
        "def compile_graph(mod, inputs):\n"
        f'    """The failing stage: {doc}."""\n'
        + compile_body
        + "\n\n"
        f"def forward_backward(fn, inputs, backward=True{', weights=()' if weighed else ''}):\n"
        '    """Run the graph' + (", then its backward when an output needs grad." if case.backward else ".") + '"""\n'
        + call
        + f"{pad_call}outputs = fn(*inputs)\n"
        "    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]\n"
        + backward
        + "    return outputs\n\n\n"
        "def run(mod, inputs):\n"
        + no_grad.format(comment="  # as the program compiled it: AOTAutograd makes an inference graph")
        + f"{pad}return forward_backward(compile_graph(mod, inputs), inputs{', weights=mod.output_grads' if weighed else ''})\n\n\n"
        "def run_eager(mod, inputs, backward=True):\n" + no_grad.format(comment="")
        + f"{pad}return forward_backward({wrap}, inputs, backward{', mod.output_grads' if weighed else ''})"
    )


def _backward(case: GraphCase) -> str:
    """``forward_backward``'s backward of a dynamo graph, doing what the program did between its forward and its
    backward (:mod:`minifier.capture.between`): the outputs it reached, the tensors it wrote, the state it switched,
    and the backward calls it made."""
    if not case.backward:
        return ""
    unreached = case.unreached_positions()
    calls = case.backward_positions()
    loss = (
        f"    # {'output' if len(unreached) == 1 else 'outputs'} {', '.join(map(str, unreached))}: the program's backward"
        f" never reached {'it' if len(unreached) == 1 else 'them'} (AOTAutograd gives zero gradients)\n"
        if unreached
        else ""
    )
    term = "o.sum()"
    if weighed_outputs(case):  # (an output the reduction reshaped, or made, is summed)
        loss += "    # the program's backward gave outputs these gradients (its loss weighs their elements)\n"
        term = "(o * weights[k].to(o)).sum() if k in weights and weights[k].shape == o.shape else o.sum()"
    if calls:  # (each call's loss is made where it is called)
        loss += "    loss = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]\n"
    elif unreached or term != "o.sum()":
        skip = f"k not in {tuple(unreached)!r} and " if unreached else ""
        loss += f"    loss = [{term} for k, o in enumerate(outputs) if {skip}isinstance(o, torch.Tensor) and o.requires_grad]\n"
    else:
        loss += "    loss = [o.sum() for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]\n"
    written = [f"inputs[{k}]" for k, i in enumerate(case.inputs) if i.name in case.written_between]
    written += [f"outputs[{k}]" for k, name in enumerate(case.output_names() or []) if name in case.written_between]
    if written:  # (before the loss: the program wrote after its forward returned)
        loss = (
            "    # the program wrote into these in place between the forward and the backward: a write of the\n"
            "    # same values moves their version counters, which autograd checks\n"
            "    with torch.no_grad():\n" + "".join(f"        {value}.mul_(1)\n" for value in written) + loss
        )
    grad = "outputs += torch.autograd.grad(sum(loss), leaves" + (", retain_graph=retain" if calls else "") + ", allow_unused=True)"
    forward, switched = case.context, case.backward_context or case.context
    for device, dtype in switched.autocast if case.backward_context is not None else ():
        grad = f"with torch.autocast({device!r}, dtype=torch.{dtype}):  # as the program's backward ran\n            " + (
            grad.replace("\n", "\n    ")
        )
    fields = [f for f in CompileContext.BACKWARD_FIELDS if getattr(switched, f) != getattr(forward, f)]
    if fields:  # (the program switched them between the forward and the backward)
        setting = CompileContext.SETTERS
        grad = (
            "".join(f"{setting[f].format(getattr(switched, f))}  # as the program's backward ran\n        " for f in fields)
            + "try:\n            " + grad.replace("\n", "\n    ") + "\n        finally:\n"
            + "\n".join(f"            {setting[f].format(getattr(forward, f))}" for f in fields)
        )
    if calls:
        grad = (
            f"# the program's backward was {len(calls)} calls, each through these outputs (AOTAutograd's backward is\n"
            "        # one autograd node: a call that does not retain the graph frees it for the next)\n"
            f"        for positions, retain in {[(tuple(ks), retain) for ks, retain in calls]!r}:\n"
            f"            loss = [{term} for k, o in enumerate(outputs) if k in positions and isinstance(o, torch.Tensor) and o.requires_grad]\n"
            "            if loss:\n                " + grad.replace("\n", "\n        ")
        )
    return (
        loss + "    leaves = [i for i in inputs if isinstance(i, torch.Tensor) and i.requires_grad]\n"
        f"    if backward and loss and leaves:\n        {grad}\n"
    )


#: Control-flow higher-order ops whose fake run makes unbacked sizes: they need a fake mode with a ShapeEnv,
#: which dynamo's tracing context has and AOTAutograd's own (for a graph handed to it) does not.
UNBACKED_HOPS = ("while_loop", "scan", "map_impl", "cond", "invoke_subgraph")


def _needs_a_shape_env(case: GraphCase) -> bool:
    return any(
        n.op == "call_function" and getattr(n.target, "__name__", None) in UNBACKED_HOPS for n in case.gm.graph.nodes
    )


def _indented(block: str) -> str:
    return "".join(f"    {line}\n" for line in block.splitlines())


def _autocast_blocks(case: GraphCase) -> tuple[str, str]:
    """``with torch.autocast(...)`` lines for the program's autocast at the call, and the indent inside them."""
    blocks, pad = "", "    "
    for device, dtype in case.context.autocast:
        blocks += f"{pad}with torch.autocast({device!r}, dtype=torch.{dtype}):  # as the program called it\n"
        pad += "    "
    return blocks, pad


def backend_expression(case: GraphCase, stage: str) -> str:
    """The expression a repro passes as ``backend=`` for ``stage``."""
    if stage == case.backend and case.backend_is_defined:
        return BACKEND_NAME
    if stage != case.backend or ":" not in stage:
        return repr(stage)
    module, _, attr = stage.partition(":")
    return f"__import__({module!r}, fromlist=[{attr!r}]).{attr}"


def kept_donated(case: GraphCase) -> list[str]:
    """The donated inputs (:attr:`GraphCase.donated`) the graph still takes: a reduction drops inputs, not the list."""
    present = {n.name for n in case.gm.graph.find_nodes(op="placeholder")}
    return [name for name in case.donated if name in present]


def donated_indices(case: GraphCase) -> list[int]:
    """The positions of the inputs of an aot backward graph that AOTAutograd donated to Inductor (``case.donated``)."""
    return [k for k, node in enumerate(case.gm.graph.find_nodes(op="placeholder")) if node.name in case.donated]


def _run_aot(case: GraphCase, stage: str) -> str:
    kwargs = "".join(f", {k}={v!r}" for k, v in sorted(case.compile_kwargs.items()))
    helpers = ""
    # The compiler gets ordinary copies to trace and compile with, as it got fake ones in the program:
    # tracing runs the graph, which may write into its inputs, and a special input (a ZeroTensor)
    # reaches only the compiled code.
    trace = "    examples = copies(inputs)\n    gm = make_fx(mod, tracing_mode='real')(*examples)\n"
    if traces_on_fakes(case):  # the compiler sees fake inputs with the program's symbolic sizes, as it did then
        trace = "    mode, examples = symbolic_inputs(inputs)\n    with mode:\n        gm = make_fx(mod, tracing_mode='real')(*examples)\n"
    if subgraphs(case.gm):
        trace += "    drop_unread_items(gm)\n"
    if stage in EAGER_STAGES:
        doc = f"{stage} runs aot graphs as they are"
        body = "    return mod\n"
    elif stage == Stage.INDUCTOR or case.compiler == INDUCTOR_INNER_COMPILE:
        doc = f"the {case.kind} graph through Inductor's inner compiler"
        body = trace + "    from torch._inductor.compile_fx import compile_fx_inner\n"
        if donated := donated_indices(case):
            helpers = compile_fx.DONATING + "\n\n"
            mode = "mode" if traces_on_fakes(case) else "None"
            body += f"    with donating({donated!r}, {mode}):  # the inputs AOTAutograd donated to Inductor in the program\n    "
        body += f"    return compile_fx_inner(gm, examples{kwargs})\n"
    elif case.compiler:
        module, _, attr = case.compiler.rpartition(":")
        doc = f"the {case.kind} graph through {stage}'s compiler"
        load = f"    from {module} import {attr}\n" if module else ""  # (else: defined above, from the user's script)
        body = trace + f"{load}    return {attr}(gm, examples)\n"
    else:
        doc = f"the {case.kind} graph through {stage}'s compiler"
        key = AOT_COMPILER_KEYS[case.kind]
        backend = backend_expression(case, stage)
        backend = f"torch._dynamo.lookup_backend({backend})" if backend.startswith(("'", '"')) else backend
        fallback = "" if key == "fw_compiler" else f'.get({key!r}) or kwargs["fw_compiler"]'
        lookup = f"kwargs{fallback}" if fallback else f"kwargs[{key!r}]"
        body = (
            trace
            + (
                f"    kwargs = {backend}.kwargs\n"
                f"    compiler = {lookup}  # AOTAutograd's default when the backend gives none\n"
                if fallback
                else f"    compiler = {backend}.kwargs[{key!r}]\n"
            )
            + "    return compiler(gm, examples)\n"
        )
    return (
        helpers + "def compile_graph(mod, inputs):\n"
        f'    """The failing stage: {doc}."""\n' + body + "\n\n"
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
