"""Seam: the dispatcher's thread-local state and Python mode stacks, as an observer of operator calls needs them.

opcheck/ looks at custom-op calls as a test makes them (:mod:`pt2kit.seams.op_calls`) and
must neither disturb them nor be fooled by them:

- whether autograd sees the call: grad mode on, and the autograd key not excluded on this
  thread (``torch._C._dispatch_tls_is_dispatch_key_excluded(AutogradFunctionality)``: below
  the autograd key, inside another op's backward...);
- whether a tensor is a plain eager one rather than a functorch (vmap, grad) or functional
  wrapper (``torch._C._functorch.is_functorch_wrapped_tensor``, ``torch._is_functional_tensor``);
- copying arguments outside every active dispatch mode and torch-function override
  (``torch.utils._python_dispatch._disable_current_modes``, ``torch._C.DisableTorchFunction``),
  so a tracer or a user's mode never sees the copy;
- functorch's layer stack (``torch._C._functorch.get_dynamic_layer_stack_depth``,
  ``pop_dynamic_layer_stack_and_undo_to_depth``): a dynamo graph of a ``torch.func``
  transform enters its levels itself, and one that raises midway leaves them entered,
  for every later op of the program to run under (dynamo undoes them the same way).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._C._dispatch_tls_is_dispatch_key_excluded / DispatchKey.AutogradFunctionality, torch._C.DisableTorchFunction, "
        "torch.utils._python_dispatch._disable_current_modes, torch._C._functorch.is_functorch_wrapped_tensor, "
        "torch._is_functional_tensor, torch._C._functorch.get_dynamic_layer_stack_depth / "
        "pop_dynamic_layer_stack_and_undo_to_depth"
    ),
    features=("opcheck", "minify (level-4 hook)"),
)


def probe() -> None:
    import torch

    if not grad_active() or not isinstance(grad_active(), bool):
        raise AttributeError("the autograd dispatch key's thread-local state reads differently")
    tensor = torch.ones(1)
    if is_transform_wrapped(tensor):
        raise AttributeError("a plain tensor reads as functorch- or functional-wrapped")
    with outside_modes():
        tensor.clone()
    with functorch_levels_kept():
        torch._C._functorch._grad_increment_nesting()  # (left entered: the block must undo it)
    if torch._C._functorch.get_dynamic_layer_stack_depth() != 0:
        raise AttributeError("functorch's layer stack was not undone to its depth")


def grad_active() -> bool:
    """Would autograd see an operator called here? Not under no_grad, nor below the autograd key."""
    import torch

    return torch.is_grad_enabled() and not torch._C._dispatch_tls_is_dispatch_key_excluded(
        torch._C.DispatchKey.AutogradFunctionality
    )


def is_transform_wrapped(tensor: Any) -> bool:
    """A functorch (vmap, grad) or functional wrapper around a tensor: not a plain eager tensor."""
    import torch

    return bool(torch._C._functorch.is_functorch_wrapped_tensor(tensor) or torch._is_functional_tensor(tensor))


@contextlib.contextmanager
def outside_modes() -> Iterator[None]:
    """Within the block no dispatch mode and no torch-function override is active on this thread."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch._C.DisableTorchFunction():
        yield


@contextlib.contextmanager
def functorch_levels_kept() -> Iterator[None]:
    """After the block, functorch's layer stack is as deep as before it, whatever the block left entered."""
    import torch

    depth = torch._C._functorch.get_dynamic_layer_stack_depth()
    try:
        yield
    finally:
        if torch._C._functorch.get_dynamic_layer_stack_depth() != depth:
            torch._C._functorch.pop_dynamic_layer_stack_and_undo_to_depth(depth)
