"""Seam: ``torch._dynamo.backends.common.aot_module_simplified``, where every AOTAutograd backend starts.

``aot_eager``, Inductor and a user's ``aot_autograd(fw_compiler=..., bw_compiler=...)``
all call ``aot_module_simplified`` from ``torch._dynamo.backends.common`` (looked up at
call time), with their forward, backward and inference compilers as keyword
arguments. Wrapping it wraps those compilers (:func:`aot_compilers`). A registered
``aot_autograd`` backend is an ``AotAutograd`` object whose ``kwargs`` hold them
(:func:`compiler_kwargs`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._dynamo.backends.common.aot_module_simplified, AotAutograd.kwargs; torch._guards.tracing and "
        "TracingContext with a FakeTensorMode of a ShapeEnv (a handed graph's repro); the autograd node of "
        "AOTAutograd's CompiledFunction"
    ),
    features=(
        "aot graphs of any AOTAutograd backend",
        "compile errors of lazy backward compiles",
        "repros of graphs handed to their backend",
        "replay records of a frame whose backward fails",
    ),
)

#: Repro text: what a graph handed to its backend (no dynamo) compiles in, as dynamo's compile does: a tracing
#: context whose fake mode keeps a ShapeEnv, which AOTAutograd's own fake mode for real inputs lacks and the
#: fake run of a control-flow higher-order op needs (``while_loop`` makes unbacked sizes). Indented for a function.
TRACING_CONTEXT_IMPORTS = (
    "    from torch._guards import TracingContext, tracing\n"
    "    from torch._subclasses.fake_tensor import FakeTensorMode\n"
    "    from torch.fx.experimental.symbolic_shapes import ShapeEnv\n"
)
TRACING_CONTEXT = "tracing(TracingContext(FakeTensorMode(shape_env=ShapeEnv())))"

CompilerWrapper = Callable[[str, Callable[..., Any]], Callable[..., Any]]

#: AOTAutograd's compiler keyword arguments, and the kind of graph each compiles.
AOT_COMPILER_KINDS = {"fw_compiler": "forward", "bw_compiler": "backward", "inference_compiler": "inference"}


#: The autograd node of AOTAutograd's compiled function (``CompiledFunction``, an ``autograd.Function``,
#: whose node takes its name): where a compiled graph's backward runs, compiled at its first call.
COMPILED_BACKWARD = "CompiledFunctionBackward"


def compiled_backward_nodes(outputs: list[Any], inputs: list[Any]) -> list[Any]:
    """The autograd nodes of the AOTAutograd compiled function that made ``outputs`` of a call on ``inputs``.

    A compiled output's ``grad_fn`` is one, or is the view AOTAutograd regenerated outside it
    (one node further up). An output that aliases an input leads to that input's own node,
    never counted: it belongs to whatever made the input.
    """
    theirs = {id(t.grad_fn) for t in inputs if t.grad_fn is not None}
    level = [t.grad_fn for t in outputs if t.grad_fn is not None]
    found: dict[int, Any] = {}
    for _ in range(2):
        level = [node for node in level if id(node) not in theirs]
        found.update((id(node), node) for node in level if node.name() == COMPILED_BACKWARD)
        level = [n for node in level if node.name() != COMPILED_BACKWARD for n, _ in node.next_functions if n is not None]
    return list(found.values())


def probe() -> None:
    import torch._dynamo.backends.common as common

    parameters = inspect.signature(common.aot_module_simplified).parameters
    for key in AOT_COMPILER_KINDS:
        if key not in parameters and not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            raise AttributeError(f"aot_module_simplified no longer takes {key}")
    if "aot_module_simplified(" not in inspect.getsource(common.AotAutograd.__call__):
        raise AttributeError("AotAutograd no longer calls aot_module_simplified")
    backend = common.aot_autograd(fw_compiler=lambda gm, example_inputs: gm)
    if compiler_kwargs(backend) is None:
        raise AttributeError("aot_autograd backends no longer keep their compilers in .kwargs")
    if "_is_wrapped_bw_compiler" not in inspect.getsource(common.AotAutograd.__call__):
        raise AttributeError("AotAutograd no longer marks the backward compiler it wraps")
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler  # noqa: F401 (keeps_a_cache's)
    from torch._functorch._aot_autograd import runtime_wrappers

    if f"class {COMPILED_BACKWARD.removesuffix('Backward')}(torch.autograd.Function)" not in inspect.getsource(runtime_wrappers):
        raise AttributeError(f"AOTAutograd's compiled function is no longer {COMPILED_BACKWARD.removesuffix('Backward')}")
    namespace: dict[str, Any] = {}
    exec(TRACING_CONTEXT_IMPORTS.replace("    ", ""), namespace)  # noqa: S102 - the repro's own lines, checked
    with eval(TRACING_CONTEXT, namespace):  # noqa: S307
        if namespace["TracingContext"].try_get() is None:
            raise AttributeError("torch._guards.tracing no longer makes its TracingContext the current one")


def keeps_a_cache(compiler: Any) -> bool:
    """Does AOTAutograd look its graphs up in its cache when compiling with ``compiler``?

    It does only for a ``SerializableAOTDispatchCompiler`` (Inductor's): any wrapper put
    in its place turns the cache off, and a program whose failure needs a cache hit passes.
    """
    try:
        from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
    except ImportError:  # (a torch without it caches with no compiler of its own: the probe says so)
        return False
    return isinstance(compiler, SerializableAOTDispatchCompiler)


def user_compiler(compiler: Any) -> Any:
    """The compiler a user gave ``aot_autograd``, seen through the wrapper it puts around a backward compiler
    once it has compiled with it (``_wrapped_bw_compiler``, a closure over the user's)."""
    if getattr(compiler, "_is_wrapped_bw_compiler", False):
        cells = [c.cell_contents for c in getattr(compiler, "__closure__", None) or () if callable(c.cell_contents)]
        if len(cells) == 1:
            return cells[0]
    return compiler


def compiler_kwargs(backend: Any) -> dict[str, Any] | None:
    """The compilers of an ``aot_autograd`` backend object (None: not one)."""
    kwargs = getattr(backend, "kwargs", None)
    return kwargs if isinstance(kwargs, dict) and "fw_compiler" in kwargs else None


@contextlib.contextmanager
def aot_compilers(wrap: CompilerWrapper) -> Iterator[None]:
    """Within the block, the fw/bw/inference compilers of every AOTAutograd backend go through ``wrap``.

    ``wrap(kind, compiler)`` gets ``kind`` in ``forward | backward | inference`` and the
    backend's compiler ``(gm, example_inputs) -> callable``. A backend that gives no
    inference (or backward) compiler uses its forward compiler, as AOTAutograd does.
    """
    import torch._dynamo.backends.common as common

    original = common.aot_module_simplified

    @functools.wraps(original)
    def aot_module_simplified(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        if kwargs.get("inference_compiler") is None and kwargs.get("fw_compiler") is not None:
            kwargs["inference_compiler"] = kwargs["fw_compiler"]
        if kwargs.get("bw_compiler") is None and kwargs.get("fw_compiler") is not None:
            kwargs["bw_compiler"] = kwargs["fw_compiler"]
        for key, kind in AOT_COMPILER_KINDS.items():
            if kwargs.get(key) is not None:
                kwargs[key] = wrap(kind, kwargs[key])
        return original(gm, example_inputs, **kwargs)

    setattr(common, "aot_module_simplified", aot_module_simplified)
    try:
        yield
    finally:
        setattr(common, "aot_module_simplified", original)
