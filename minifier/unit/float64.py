"""The float64 reference: a graph computing in float64, and where none can stand for the program.

:func:`float64_graph` promotes a graph's parameters, buffers and the dtypes written in it
(:func:`fp64_dtype`, :func:`fp64_cast` and :func:`as_float64` are what it calls, and every
accuracy ``repro.py`` carries their source: torch only, no annotations). :func:`fp64_blocker`
says why a graph's float64 run would not mean what the program means (it tests for
overflows, or draws random numbers): eager alone is the reference then. :func:`rng_state`
and :func:`set_rng_state` let a reference draw what the program drew, then put its stream back.
"""

from __future__ import annotations

from typing import Any

#: Ops that draw random numbers (by name part): a float64 run of them draws other numbers.
RANDOM_OPS = tuple("rand randn randint randperm bernoulli dropout native_dropout multinomial normal uniform exponential poisson rrelu".split())


def draws_random(name: str) -> bool:
    """Is ``name`` (``rand``, ``torch.randn_like``, ``aten.native_dropout.default``, ``Tensor.exponential_``) a random op?"""
    parts = [p.strip("_").removesuffix("_like") for p in name.split(".")]
    return any(p in RANDOM_OPS or p.startswith(("inductor_rand", "philox_rand")) for p in parts)


def draws_otherwise_than_eager(gm: Any, backend: str) -> bool:
    """Does ``gm``, or a body of its higher-order ops (a checkpointed dropout), draw random numbers that
    ``backend`` draws otherwise than eager?

    Inductor's RNG differs from eager's by design: such a graph's values cannot be compared.
    aot_eager runs eager's own kernels, and draws eager's numbers from eager's stream, so its
    can (pytorch#143431: aot_eager dropping an unused draw); aot_eager_decomp_partition does
    not (its decompositions draw otherwise: dropout's ``bernoulli`` becomes ``rand_like < p``).
    """
    from .check import Stage

    return backend not in (Stage.EAGER, Stage.AOT_EAGER) and has_random_ops(gm)


def draws_as_eager_under_fallback(gm: Any, stage: str) -> bool:
    """Does ``gm`` draw random numbers at ``stage`` only otherwise than eager, so that an accuracy check of it
    compiles with Inductor's ``fallback_random``, under which it draws eager's numbers?

    ``aot_eager_decomp_partition`` and Inductor take Inductor's decompositions, which, unless
    ``fallback_random``, draw otherwise (dropout becomes ``rand_like < p``, ``rand`` Inductor's own
    generator); with it their values compare with eager's (torch's own accuracy minifier sets it too).
    A bug of Inductor's own random numbers then passes: no value shows it.

    Not an aot graph of Inductor's that holds its generator already (``prims.inductor_random``, put there
    by its decompositions as the program compiled): Inductor refuses to lower those under
    ``fallback_random``, and no flag makes them draw eager's numbers.
    """
    from .check import Stage

    return stage in (Stage.AOT_EAGER_DECOMP_PARTITION, Stage.INDUCTOR) and has_random_ops(gm) and not draws_inductors(gm)


def draws_inductors(gm: Any) -> bool:
    """Does ``gm`` (or a body of it) call Inductor's own generator, ``prims.inductor_random`` and its seeds?"""
    from pt2kit.names import op_name
    from .graphio import all_call_nodes

    return any(op_name(node, gm).startswith("prims.inductor_") and draws_random(op_name(node, gm)) for node in all_call_nodes(gm))


def has_random_ops(gm: Any) -> bool:
    """Does ``gm``, or a body of its higher-order ops (a checkpointed dropout), draw random numbers?

    Gradients of such a graph differ from eager's under every compiling backend: a checkpoint's
    recompute draws again, where eager's puts the RNG state back first.
    """
    from pt2kit.names import op_name
    from .graphio import all_call_nodes

    return any(draws_random(op_name(node, gm)) for node in all_call_nodes(gm))


def drawn_outputs(gm: Any) -> set[int] | None:
    """The positions of ``gm``'s outputs that its random draws reach, through its data flow; None when that cannot
    be told (an op that writes a drawn value in place: ``Tensor.bernoulli_``, ``z.copy_(mask)``).

    A graph with dropout may still hold a bug in an output no draw reaches, which a check that
    cannot compare its draws must still see.
    """
    import torch.fx as fx

    from pt2kit.names import op_name
    from .graphio import subgraphs

    drawing_bodies = {path for path, body in subgraphs(gm).items() if has_random_ops(body)}
    drawn: set[fx.Node] = set()
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        name = op_name(node, gm)
        reads_drawn = any(a in drawn or (a.op == "get_attr" and str(a.target) in drawing_bodies) for a in node.all_input_nodes)
        if draws_random(name) or reads_drawn or str(node.target) in drawing_bodies:
            if any(p.endswith("_") and not p.startswith("_") for p in name.split(".")[1:]) or "setitem" in name:
                return None  # (a value written in place: its other readers read what the draws reached)
            drawn.add(node)
    return {i for i, value in enumerate(graph_outputs(gm)) if value in drawn}


def graph_outputs(gm: Any) -> list[Any]:
    """What ``gm`` returns, one value per output as its runs list them (a tuple's items, None kept)."""
    returned = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    return list(returned) if isinstance(returned, (tuple, list)) else [returned]


#: Methods that cast to a low-precision float, and the dtype each casts to.
_FLOAT_CASTS = {"half": "float16", "float": "float32", "bfloat16": "bfloat16"}


def float64_graph(gm: Any) -> Any:
    """A copy of ``gm`` computing in float64: parameters, buffers *and* the dtypes written in the graph.

    torch's ``same(fp64_ref=...)`` rule needs a reference computed in real fp64; casting
    only the inputs leaves ``torch.tensor(655, dtype=torch.half)`` or ``x.to(torch.half)``
    in low precision, and the reference then disagrees with a compiler that keeps
    more precision (pytorch's ``test_rmse_improves_over_atol``). Like torch's
    ``cast_dtype_args_to_fp64``, every floating dtype argument becomes float64; unlike
    it, positional dtypes and ``.half()``-style methods are promoted too.

    One conversion keeps its dtype: integer or bool data made floating
    (``mask.cumsum(1, dtype=torch.bfloat16)``, ``positions.half()``). Rounding exact data
    is what the program asks for, not an error a compiler may improve on: a compiler
    that drops the cast computes exact positions, and a reference promoted to float64
    would side with it (pytorch#189518). Which data is integer is known only at run
    time, so such a node asks :func:`fp64_dtype`, and its value continues in float64
    (:func:`as_float64`): arithmetic after the conversion is still the compiler's to
    round better.
    """
    import copy

    import torch
    import torch.fx as fx

    gm = copy.deepcopy(gm).to(torch.float64)

    def low(value: Any) -> bool:
        return isinstance(value, torch.dtype) and value.is_floating_point and value != torch.float64

    def promote(value: Any, dtype_for: Any) -> Any:
        if low(value):
            return dtype_for(value)
        if isinstance(value, (list, tuple)):
            return type(value)(promote(v, dtype_for) for v in value)
        return value

    def operands(node: fx.Node) -> list[fx.Node]:
        seen: list[fx.Node] = []
        fx.node.map_arg((node.args, node.kwargs), seen.append)  # (its copy of the arguments is not kept)
        return seen

    def visit(module: Any) -> None:
        graph = module.graph
        for node in list(graph.nodes):
            if node.op not in ("call_function", "call_method"):
                continue
            if node.op == "call_method" and node.target in _FLOAT_CASTS and len(node.args) == 1 and not node.kwargs:
                cast = getattr(torch, _FLOAT_CASTS[node.target])
                node.op, node.target, node.args = "call_function", fp64_cast, (node.args[0], cast)
                continue
            data = operands(node)
            if not data:  # a factory: nothing it converts, so its dtype is the working precision
                node.args = promote(node.args, lambda _: torch.float64)
                node.kwargs = {k: promote(v, lambda _: torch.float64) for k, v in node.kwargs.items()}
                continue
            asked: list[fx.Node] = []

            def dtype_for(dtype: Any) -> Any:
                with graph.inserting_before(node):
                    asked.append(graph.create_node("call_function", fp64_dtype, (dtype, *data), name=f"{node.name}_dtype"))
                return asked[-1]

            node.args = promote(node.args, dtype_for)
            node.kwargs = {k: promote(v, dtype_for) for k, v in node.kwargs.items()}
            if asked:
                with graph.inserting_after(node):
                    value = graph.create_node("call_function", as_float64, (node,), name=f"{node.name}_fp64")
                node.replace_all_uses_with(value, delete_user_cb=lambda user: user is not value)
        module.recompile()
        for child in module.children():
            if isinstance(child, torch.fx.GraphModule):
                visit(child)

    visit(gm)
    return gm


def fp64_dtype(dtype, *operands):
    """The dtype a float64 reference computes a conversion in: ``dtype`` for integer or bool data, else float64.

    (See :func:`float64_graph`.) Copied into accuracy repros: torch only, no annotations.
    """
    import torch

    tensors = [v for v in operands if isinstance(v, torch.Tensor)]
    if tensors and not any(t.is_floating_point() or t.is_complex() for t in tensors):
        return dtype
    return torch.float64


def fp64_cast(value, dtype):
    """``value.half()`` (``dtype``) as a float64 reference makes it: rounded only if it is integer or bool data.

    (See :func:`float64_graph`.) Copied into accuracy repros: torch only, no annotations.
    """
    import torch

    if not (value.is_floating_point() or value.is_complex()):
        value = value.to(dtype)
    return value.to(torch.float64)


def as_float64(value):
    """A conversion's floating result as float64, so that what follows it computes in float64 (copied into repros)."""
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(torch.float64)
    if isinstance(value, (list, tuple)):
        return type(value)(as_float64(v) for v in value)
    return value


def to_float64(values: list[Any]) -> list[Any]:
    """Floating tensors as float64 (``requires_grad`` kept); everything else as it is."""
    import torch

    return [
        v.detach().to(torch.float64).requires_grad_(v.requires_grad)
        if isinstance(v, torch.Tensor) and v.is_floating_point()
        else v
        for v in values
    ]


#: Ops that test values for inf or NaN: a graph that holds one decides on overflows
#: of its working precision, which a float64 run does not have (an fp16 ``x * x`` that
#: becomes inf, then ``where(isinf(e), 0, e)``).
NONFINITE_TESTS = ("isinf", "isnan", "isfinite", "isposinf", "isneginf", "nan_to_num")


def fp64_blocker(gm: Any) -> str | None:
    """Why a float64 run of ``gm`` would not be a reference for what the program means (None: it is).

    A graph that tests its values for inf or NaN (:data:`NONFINITE_TESTS`, or a
    comparison with an infinite constant) means the overflows of its working precision:
    promoted to float64, the overflow it guards against never happens, and the
    reference would take the compiled code's side. A graph that draws random numbers
    draws other ones in float64 (``rand`` fills a double from 53 random bits, a float
    from 24), so its float64 run computes something else. Eager alone, from the same
    seed, is the reference then.
    """
    import math

    from pt2kit.names import op_name
    from .graphio import all_call_nodes

    for node in all_call_nodes(gm):
        name = op_name(node, gm)
        if draws_random(name):
            return f"the graph draws random numbers ({name}), which float64 draws differently"
        if any(part in NONFINITE_TESTS for part in name.split(".")):
            return f"the graph tests its values for inf or NaN ({name}), which float64 does not overflow to"
        if any(isinstance(a, float) and not math.isfinite(a) for a in node.args):
            return f"the graph compares with an infinite constant ({name}), which float64 does not overflow to"
    return None


def rng_state() -> tuple[Any, Any]:
    """The process's random state (CPU, and CUDA's where it is in use): what a reference run draws from, then puts back."""
    import torch

    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def set_rng_state(state: tuple[Any, Any]) -> None:
    import torch

    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
