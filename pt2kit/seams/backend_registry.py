"""Seam: dynamo's backend registry and ``torch.compile``'s backend wrappers.

To name a backend in a repro, pt2kit looks it up in the registry by identity
(``torch._dynamo.backends.registry._COMPILER_FNS``), and sees through the objects
``torch.compile`` wraps a backend in: ``_TorchCompileInductorWrapper`` (Inductor, with
its ``mode=``/``options=`` config and ``dynamic``) and ``_TorchCompileWrapper`` (any other
backend, as ``compiler_fn``). ``lookup_backend``, ``register_backend`` and
``list_backends`` are torch's documented API.

An already compiled callable keeps its backend in its dynamo context: a module's
``OptimizedModule.dynamo_ctx``, a function's in the closure of the wrapper
``torch.compile`` returned; ``torch._dynamo.eval_frame.innermost_backend`` unwraps the
callback dynamo built around it (:func:`compiled_backend`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._dynamo.backends.registry._COMPILER_FNS, torch._TorchCompileWrapper, torch._TorchCompileInductorWrapper, "
        "OptimizedModule.dynamo_ctx, torch._dynamo.eval_frame.innermost_backend"
    ),
    features=("naming the user's backend in a repro", "the API on an already compiled function or module"),
)


def probe() -> None:
    import inspect

    import torch
    from torch._dynamo.backends.registry import _COMPILER_FNS

    if not isinstance(_COMPILER_FNS, dict):
        raise TypeError("_COMPILER_FNS is no longer a dict")
    if "self.config" not in inspect.getsource(
        torch._TorchCompileInductorWrapper
    ) or "self.dynamic" not in inspect.getsource(torch._TorchCompileInductorWrapper):
        raise AttributeError("torch._TorchCompileInductorWrapper no longer keeps config and dynamic")
    if "self.compiler_fn" not in inspect.getsource(torch._TorchCompileWrapper):
        raise AttributeError("torch._TorchCompileWrapper no longer keeps compiler_fn")

    def backend(gm: Any, example_inputs: Any) -> Any:
        return gm.forward

    for compiled in (torch.compile(torch.nn.Identity(), backend=backend), torch.compile(lambda x: x, backend=backend)):
        if unwrap(compiled_backend(compiled)) is not backend:
            raise AttributeError(f"the backend of a compiled {type(compiled).__name__} can no longer be found")


def registered() -> dict[str, Callable[..., Any]]:
    """Registered backends by name (what ``torch.compile(backend="name")`` resolves)."""
    from torch._dynamo.backends.registry import _COMPILER_FNS

    return dict(_COMPILER_FNS)


def lookup(name: str) -> Callable[..., Any]:
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend(name)


def names() -> list[str]:
    import torch

    return list(torch.compiler.list_backends(exclude_tags=()))


def inductor_wrapper(fn: Any) -> tuple[dict[str, Any], bool | None] | None:
    """``(config, dynamic)`` when ``fn`` is ``torch.compile``'s Inductor wrapper, else None."""
    if type(fn).__name__ == "_TorchCompileInductorWrapper":
        return dict(fn.config), fn.dynamic
    return None


def unwrap(fn: Any) -> Any:
    """The user's backend inside ``torch.compile``'s wrapper for non-Inductor backends."""
    return fn.compiler_fn if type(fn).__name__ == "_TorchCompileWrapper" else fn


def compiled_backend(fn: Any) -> Any:
    """The backend ``fn`` was compiled with, as ``torch.compile`` resolved it (None: ``fn`` is not compiled).

    Inductor comes back as its ``_TorchCompileInductorWrapper`` (:func:`inductor_wrapper`),
    any other backend as its ``_TorchCompileWrapper`` (:func:`unwrap`) or as registered.
    """
    from torch._dynamo.eval_frame import innermost_backend

    callback = getattr(_context_of(fn), "callback", None)
    return innermost_backend(callback) if callable(callback) else None


def with_fullgraph(fn: Any, backend: Any) -> Any:
    """``fn``, compiled with ``fullgraph=True``, compiled again on ``backend`` with its options; None for any other ``fn``.

    ``torch.compiler.set_stance(force_backend=...)`` compiles such a function without
    its ``fullgraph``, so a frame would break where the program's compile failed.
    """
    import torch

    context = _context_of(fn)
    if not getattr(context, "fullgraph", False):
        return None
    original = getattr(fn, "_torchdynamo_orig_callable", None)
    if original is None:
        return None
    return torch.compile(original, backend=backend, fullgraph=True, dynamic=getattr(context, "_dynamic", None))


def _context_of(fn: Any) -> Any:
    """The dynamo context ``torch.compile`` made for ``fn`` (a compiled module's, or a compiled function's closure's)."""
    from torch._dynamo.eval_frame import _TorchDynamoContext

    context = getattr(fn, "dynamo_ctx", None)
    if not isinstance(context, _TorchDynamoContext):
        cells = getattr(fn, "__closure__", None) or ()
        context = next((c.cell_contents for c in cells if isinstance(cell_contents(c), _TorchDynamoContext)), None)
    return context


def cell_contents(cell: Any) -> Any:
    """What a closure cell holds (None for an empty cell)."""
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None
