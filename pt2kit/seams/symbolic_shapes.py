"""Seam: symbolic sizes (``torch.SymInt``) as dynamo and AOTAutograd trace them.

Which sizes of a graph's inputs are symbolic, and which symbolic-int inputs are the
size of which tensor, come from the sympy expression behind each ``SymInt``
(``size.node.expr``). A backend must read a symbolic value's concrete hint without
``int()``, which would add a guard and specialize the user's graph
(``optimization_hint`` adds none).
"""

from __future__ import annotations

from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch.SymInt.node.expr, torch.fx.experimental.symbolic_shapes.optimization_hint (hint_int before 2.13),"
        " torch.fx.experimental.symbolic_shapes.is_nested_int"
    ),
    features=("dynamic shapes in repros",),
)


def probe() -> None:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    mode = FakeTensorMode(shape_env=ShapeEnv())
    fake = mode.from_tensor(
        torch.zeros(5, 3),
        symbolic_context=StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC]),
    )
    size = fake.shape[0]
    if not is_symbolic(size) or is_symbolic(fake.shape[1]) or hint(size) != 5:
        raise AttributeError("SymInt expressions or hints changed")
    if expression(size) != expression(fake.shape[0]):
        raise AttributeError("the same size no longer has the same expression")
    jagged = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(1, 3)], layout=torch.jagged)
    if not is_nested_int(jagged.shape[1]) or is_nested_int(size) or is_nested_int(3):
        raise AttributeError("a jagged tensor's ragged size is no longer told apart")


def is_symbolic(value: Any) -> bool:
    """A ``SymInt`` that is not a known constant."""
    import torch

    return isinstance(value, torch.SymInt) and not value.node.expr.is_number


def is_nested_int(value: Any) -> bool:
    """A jagged tensor's ragged size (``j1``): a ``SymInt`` with no integer value at all, not even a hint."""
    import torch
    from torch.fx.experimental.symbolic_shapes import is_nested_int as torch_is_nested_int

    return isinstance(value, torch.SymInt) and bool(torch_is_nested_int(value))


def expression(value: Any) -> Any:
    """The sympy expression of a ``SymInt``: equal expressions are the same size."""
    return value.node.expr


def hint(value: Any) -> int:
    """A symbolic int's concrete value, without adding a guard."""
    try:
        from torch.fx.experimental.symbolic_shapes import optimization_hint
    except ImportError:  # (torch 2.11 and 2.12 call it hint_int)
        from torch.fx.experimental.symbolic_shapes import (  # type: ignore[attr-defined, no-redef]
            hint_int as optimization_hint,
        )

    return optimization_hint(value)


def is_fake(value: Any) -> bool:
    """A fake tensor (what a compiler gets at compile time: metadata, no data)."""
    from torch._subclasses.fake_tensor import is_fake as torch_is_fake

    return bool(torch_is_fake(value))


def concrete(sizes: Any) -> tuple[int, ...]:
    """A shape or stride with every symbolic entry replaced by its hint (no guard added)."""
    import torch

    return tuple(hint(s) if isinstance(s, torch.SymInt) else int(s) for s in sizes)
