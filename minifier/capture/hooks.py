"""The three places where pt2kit plugs into torch.compile, as context managers (from :mod:`pt2kit.seams`).

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

from collections.abc import Callable
from typing import Any

from pt2kit.seams.after_dynamo import INTERNAL, BackendWrapper, dynamo_backends
from pt2kit.seams.aot_autograd import AOT_COMPILER_KINDS, CompilerWrapper, aot_compilers
from pt2kit.seams.compile_fx import InnerCompileWrapper, inductor_inner_compile


def internal(backend: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a backend as pt2kit's own, so no hook wraps it (e.g. a calibration compile)."""
    setattr(backend, INTERNAL, True)
    return backend


__all__ = [
    "dynamo_backends",
    "inductor_inner_compile",
    "aot_compilers",
    "internal",
    "AOT_COMPILER_KINDS",
    "INTERNAL",
    "BackendWrapper",
    "CompilerWrapper",
    "InnerCompileWrapper",
]
