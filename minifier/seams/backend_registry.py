"""Seam: dynamo's backend registry and ``torch.compile``'s backend wrappers.

To name a backend in a repro, pt2kit looks it up in the registry by identity
(``torch._dynamo.backends.registry._COMPILER_FNS``), and sees through the objects
``torch.compile`` wraps a backend in: ``_TorchCompileInductorWrapper`` (Inductor, with
its ``mode=``/``options=`` config and ``dynamic``) and ``_TorchCompileWrapper`` (any other
backend, as ``compiler_fn``). ``lookup_backend``, ``register_backend`` and
``list_backends`` are torch's documented API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.backends.registry._COMPILER_FNS, torch._TorchCompileWrapper, torch._TorchCompileInductorWrapper",
    features=("naming the user's backend in a repro",),
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
