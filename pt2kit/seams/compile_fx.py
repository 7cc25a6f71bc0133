"""Seam: ``torch._inductor.compile_fx.wrap_compiler_debug``, the seat of Inductor's inner compile.

``compile_fx_inner`` wraps ``_compile_fx_inner`` with ``wrap_compiler_debug`` (torch's
after-aot minifier), looked up in ``compile_fx``'s namespace at call time. Whatever sits
there sees each forward/backward/inference graph exactly as Inductor compiles it, with
the inner-compile keyword arguments (``is_backward``, ``is_inference``...), including the
backward graphs Inductor compiles lazily, long after dynamo's compile returned.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._inductor.compile_fx.wrap_compiler_debug; the tracing context's fw_metadata.bw_donated_idxs that "
        "torch._inductor.utils.get_donated_idxs reads; torch._inductor.compile_fx.compile_fx as the inductor "
        "backend looks it up"
    ),
    features=(
        "bisection's aot graphs of Inductor",
        "TORCHDYNAMO_REPRO_AFTER=aot with Inductor",
        "backward repros with the inputs AOTAutograd donates",
        "telling a program that compares its graphs' random draws with eager's",
    ),
)

MODULE = "torch._inductor.compile_fx"
InnerCompileWrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


def probe() -> None:
    import torch._inductor.compile_fx as compile_fx
    import torch._inductor.graph as graph
    import torch._inductor.utils as utils

    if not callable(getattr(compile_fx, "wrap_compiler_debug", None)):
        raise AttributeError("compile_fx.wrap_compiler_debug is gone")
    if "wrap_compiler_debug(" not in inspect.getsource(compile_fx.compile_fx_inner):
        raise AttributeError("compile_fx_inner no longer calls wrap_compiler_debug")
    if "get_donated_idxs()" not in inspect.getsource(graph.GraphLowering.__init__):
        raise AttributeError("Inductor's GraphLowering no longer reads the donated inputs with get_donated_idxs")
    from torch._dynamo.backends.inductor import inductor

    if "from torch._inductor.compile_fx import compile_fx" not in inspect.getsource(inductor):
        raise AttributeError("the inductor backend no longer looks compile_fx up at each compile")
    namespace: dict[str, Any] = {}
    exec(DONATING, namespace)  # noqa: S102 - the repro's own lines, checked
    with namespace["donating"]([1]):
        if utils.get_donated_idxs() != [1] or donated_inputs(_two_inputs()) != ("y",):
            raise AttributeError("the tracing context's fw_metadata.bw_donated_idxs no longer says which inputs are donated")


def _two_inputs() -> Any:
    import torch.fx as fx

    graph = fx.Graph()
    graph.output((graph.placeholder("x"), graph.placeholder("y")))
    return fx.GraphModule({}, graph)


def _install(wrap: InnerCompileWrapper) -> Callable[[], None]:
    import torch._inductor.compile_fx as compile_fx

    original = compile_fx.wrap_compiler_debug

    def wrap_compiler_debug(inner: Callable[..., Any], compiler_name: str) -> Callable[..., Any]:
        return wrap(original(inner, compiler_name=compiler_name))

    setattr(compile_fx, "wrap_compiler_debug", wrap_compiler_debug)

    def restore() -> None:
        setattr(compile_fx, "wrap_compiler_debug", original)

    return restore


@contextlib.contextmanager
def inductor_inner_compile(wrap: InnerCompileWrapper) -> Iterator[None]:
    """Within the block, Inductor's inner compile of each aot graph goes through ``wrap``.

    ``wrap(inner)`` gets ``_compile_fx_inner`` (already wrapped by torch's own debug
    wrapper) and returns a function with the same signature:
    ``(gm, example_inputs, compile_region_name=None, **kwargs) -> OutputCode``.
    """
    restore = _install(wrap)
    try:
        yield
    finally:
        restore()


def wrap_inner_compile_debug(wrap: InnerCompileWrapper) -> None:
    """For the life of the process, Inductor's inner compiles go through ``wrap``.

    Inductor is not imported for this: if it is not loaded yet, the wrapper goes in
    when it is (a process whose backend is not Inductor never loads it).
    """
    if MODULE in sys.modules:
        _install(wrap)
        return
    from ..import_hooks import after_import

    after_import(MODULE, lambda module: _install(wrap))


def keep_torch_aot_minifier_off(when: Callable[[], bool] = lambda: True) -> None:
    """For the life of the process, torch's after-aot minifier stays off in Inductor's inner compiles
    (whenever ``when()`` says so), lazy backward compiles included."""
    from .after_dynamo import torch_minifier_off

    def quieted(inner: Callable[..., Any]) -> Callable[..., Any]:
        def compile_quietly(*args: Any, **kwargs: Any) -> Any:
            if not when():
                return inner(*args, **kwargs)
            with torch_minifier_off():
                return inner(*args, **kwargs)

        return compile_quietly

    wrap_inner_compile_debug(quieted)


def is_inductor_function(fn: Any) -> bool:
    """Is ``fn`` part of Inductor (its compile_fx, its inner compile)?"""
    return str(getattr(fn, "__module__", "")).startswith("torch._inductor")


#: The inner-compile keyword arguments that say which graph Inductor compiles; a repro
#: passes them again (``compile_fx_inner(gm, inputs, is_backward=True)``).
GRAPH_FLAGS = ("is_backward", "is_inference")


#: Repro text: ``donating(indices, mode)``, the tracing context through which AOTAutograd tells Inductor
#: which inputs of a backward graph it may reuse the memory of (``fw_metadata.bw_donated_idxs``). The
#: program's compile had one; a backward compiled without it writes into none of its inputs.
DONATING = (
    "def donating(indices, mode=None):\n"
    '    """The tracing context AOTAutograd compiles a backward graph in, as far as Inductor reads it: the inputs\n'
    "    it donates (saved activations nothing reads after this graph), whose memory Inductor may reuse.\n"
    '    ``mode``: the fake mode of the inputs the graph is traced on, when they are fake."""\n'
    "    import types\n"
    "    import torch._functorch.config\n"
    "    from torch._guards import TracingContext, tracing\n"
    "    from torch._subclasses.fake_tensor import FakeTensorMode\n\n"
    "    context = TracingContext(mode or FakeTensorMode(allow_non_fake_inputs=True))\n"
    "    donating = torch._functorch.config.donated_buffer  # (AOTAutograd donates none without it)\n"
    "    context.fw_metadata = types.SimpleNamespace(bw_donated_idxs=list(indices) if donating else [])\n"
    "    return tracing(context)\n"
)


#: Code run before a user's program: Inductor draws eager's random numbers, from eager's stream.
FALLBACK_RANDOM = "import torch._inductor.config\ntorch._inductor.config.fallback_random = True\n"

#: Code run before a user's program: Inductor draws eager's random numbers (``fallback_random``), each compiled
#: graph from elsewhere in eager's stream (before each call, one number is drawn and dropped). A program that
#: runs to the end with ``fallback_random`` alone but not so compares what its graphs draw with eager's own
#: draws; one that runs to the end so too asks only that they be random numbers of the right kind.
DRAWING_ELSEWHERE = (
    "import torch\n"
    "import torch._inductor.compile_fx as _compile_fx_module\n"
    + FALLBACK_RANDOM
    + "_compile_fx = _compile_fx_module.compile_fx\n\n\n"
    "def compile_fx_drawing_elsewhere(*args, **kwargs):\n"
    "    compiled = _compile_fx(*args, **kwargs)\n\n"
    "    def drawing_elsewhere(*inputs):\n"
    "        torch.rand(1)\n"
    "        if torch.cuda.is_available() and torch.cuda.is_initialized():\n"
    "            torch.rand(1, device='cuda')\n"
    "        return compiled(*inputs)\n\n"
    "    drawing_elsewhere._boxed_call = getattr(compiled, '_boxed_call', False)\n"
    "    return drawing_elsewhere\n\n\n"
    "_compile_fx_module.compile_fx = compile_fx_drawing_elsewhere  # (the inductor backend looks it up at each compile)\n"
)


def donated_inputs(gm: Any) -> tuple[str, ...]:
    """The inputs, by placeholder name, of the backward graph Inductor is compiling (``gm``) that AOTAutograd
    donates to it: Inductor may write its own results into their memory (an in-place reuse), which a repro
    must allow again for a bug of that reuse to show (:data:`DONATING`)."""
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    indices = getattr(getattr(context, "fw_metadata", None), "bw_donated_idxs", None) or []
    names = [node.name for node in gm.graph.find_nodes(op="placeholder")]
    return tuple(names[i] for i in indices if 0 <= i < len(names))


def graph_kind(kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The aot graph's kind (forward, backward, inference) Inductor's inner compile got, from its
    keyword arguments, and the flags among them a repro's inner compile takes again."""
    kind = "backward" if kwargs.get("is_backward") else "inference" if kwargs.get("is_inference") else "forward"
    return kind, {k: kwargs[k] for k in GRAPH_FLAGS if kwargs.get(k)}
