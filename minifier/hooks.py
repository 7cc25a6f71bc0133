"""The three places where pt2kit plugs into torch.compile, as context managers.

torch 2.13 already routes every compile through debug hooks that its own minifier
uses; pt2kit takes those same seats instead of patching deeper internals:

- :func:`dynamo_backends`: ``torch._dynamo.eval_frame.get_compiler_fn`` passes every
  backend that ``torch.compile``/``torch._dynamo.optimize`` resolves through
  ``torch._dynamo.repro.after_dynamo.wrap_backend_debug``. Whatever we put there sees
  each dynamo graph with its real example inputs.
- :func:`inductor_inner_compile`: ``torch._inductor.compile_fx.compile_fx_inner`` wraps
  ``_compile_fx_inner`` with ``wrap_compiler_debug``, looked up at call time. Whatever
  we put there sees each forward/backward/inference graph exactly as Inductor
  compiles it, with the inner-compile keyword arguments (``is_backward``...).
- :func:`aot_compilers`: every AOTAutograd-based backend (``aot_eager``, Inductor, a
  user's ``aot_autograd(fw_compiler=..., bw_compiler=...)``) calls
  ``aot_module_simplified`` from ``torch._dynamo.backends.common``; wrapping it lets us
  wrap the forward, backward and inference compilers of any of them.

A hook only sees compiles whose backend is resolved while it is armed: arm it before
the user's code calls ``torch.compile``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

from .seams.after_dynamo import INTERNAL, BackendWrapper, dynamo_backends

InnerCompileWrapper = Callable[[Callable[..., Any]], Callable[..., Any]]
CompilerWrapper = Callable[[str, Callable[..., Any]], Callable[..., Any]]

AOT_COMPILER_KINDS = {"fw_compiler": "forward", "bw_compiler": "backward", "inference_compiler": "inference"}


@contextlib.contextmanager
def inductor_inner_compile(wrap: InnerCompileWrapper) -> Iterator[None]:
    """Within the block, Inductor's inner compile of each aot graph goes through ``wrap``.

    ``wrap(inner)`` gets ``_compile_fx_inner`` (already wrapped by torch's own debug
    wrapper) and returns a function with the same signature:
    ``(gm, example_inputs, compile_region_name=None, **kwargs) -> OutputCode``.
    """
    import torch._inductor.compile_fx as compile_fx

    original = compile_fx.wrap_compiler_debug

    def wrap_compiler_debug(inner: Callable[..., Any], compiler_name: str) -> Callable[..., Any]:
        return wrap(original(inner, compiler_name=compiler_name))

    compile_fx.wrap_compiler_debug = wrap_compiler_debug
    try:
        yield
    finally:
        compile_fx.wrap_compiler_debug = original


@contextlib.contextmanager
def aot_compilers(wrap: CompilerWrapper) -> Iterator[None]:
    """Within the block, the fw/bw/inference compilers of every AOTAutograd backend go through ``wrap``.

    ``wrap(kind, compiler)`` gets ``kind`` in ``forward | backward | inference`` and the
    backend's compiler ``(gm, example_inputs) -> callable``. A backend that gives no
    inference compiler uses its forward compiler for inference, as AOTAutograd does.
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

    common.aot_module_simplified = aot_module_simplified
    try:
        yield
    finally:
        common.aot_module_simplified = original


def internal(backend: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a backend as pt2kit's own, so no hook wraps it (e.g. a calibration compile)."""
    setattr(backend, INTERNAL, True)
    return backend


__all__ = ["dynamo_backends", "inductor_inner_compile", "aot_compilers", "internal", "AOT_COMPILER_KINDS", "INTERNAL"]
