"""Seam: ``torch._subclasses.fake_tensor.FakeTensorMode`` with a fresh ``ShapeEnv``: a symbolic trace of plain Python.

To learn what a function does at *every* size of a cell, pt2kit runs it once on fake
tensors whose sizes are symbols (``s0``, ``s1``...) backed by example values, exactly as
dynamo's fake-tensor propagation does: the program's Python runs for real, every tensor
operation runs its meta kernel, and every size question becomes a ShapeEnv decision
(:mod:`pt2kit.seams.shape_env`). :func:`symbolic_inputs` builds those inputs, with or
without dynamo's two size policies:

- 0/1 specialization: sizes 0 and 1 become constants, every other size a symbol >= 2;
- duck sizing: two sizes with the same example value share one symbol.

Without 0/1 specialization a size may be 0, so the symbols are made as integers ``>= 0``
rather than as sympy's *positive* ones (:func:`_admit_zero`), and the inputs are made
with their guards suppressed (``ShapeEnv.suppress_guards``).

Each input is named by a ``LocalSource`` so its sizes read ``L['x'].size()[0]``, as in
dynamo's guards. :func:`classify` says whether an exception is a tracing artefact (a
data-dependent size, an op without a fake kernel) rather than the program's own error, and
:func:`raised_in_symbolic_reasoning` whether it escaped from the ShapeEnv/sympy machinery
itself (``x % 0`` of an example value) instead of from the program.

opcheck/ runs a custom op's fake kernel on fake copies of real arguments with their sizes
kept static (:func:`static_mode`, :func:`static_fake`; the mode's ShapeEnv lets a fake
kernel allocate data-dependent sizes), and tells "no fake kernel" apart from a fake kernel
that raised (:func:`is_unsupported_operator`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any

from . import Seam
from .dynamo_exc import underneath

SEAM = Seam(
    wraps=(
        "torch._subclasses.fake_tensor.FakeTensorMode.from_tensor(symbolic_context=StatelessSymbolicContext), "
        "FakeTensorMode.from_tensor(static_shapes=True), UnsupportedOperatorException, "
        "torch.fx.experimental.symbolic_shapes.ShapeEnv(specialize_zero_one, duck_shape), "
        "ShapeEnv.create_symbol(positive=) / _update_var_to_range / suppress_guards, torch._dynamo.source.LocalSource"
    ),
    features=("validation sizes", "opcheck_sizes fixture", "opcheck"),
)


def probe() -> None:
    import inspect

    from torch._dynamo.source import LocalSource  # noqa: F401
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode  # noqa: F401
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext  # noqa: F401

    parameters = inspect.signature(ShapeEnv.__init__).parameters
    for name in ("specialize_zero_one", "duck_shape"):
        if name not in parameters and "kwargs" not in parameters:
            raise AttributeError(f"ShapeEnv() no longer takes {name}")
    for name in ("val", "positive"):
        if name not in inspect.signature(ShapeEnv.create_symbol).parameters:
            raise AttributeError(f"ShapeEnv.create_symbol no longer takes {name}")
    if not hasattr(ShapeEnv, "_update_var_to_range"):
        raise AttributeError("ShapeEnv._update_var_to_range is gone")
    for name in ("symbolic_context", "static_shapes"):
        if name not in inspect.signature(FakeTensorMode.from_tensor).parameters:
            raise AttributeError(f"FakeTensorMode.from_tensor no longer takes {name}")
    from torch._subclasses.fake_tensor import UnsupportedOperatorException  # noqa: F401


@dataclasses.dataclass
class SymbolicInputs:
    """Fake tensors with symbolic sizes, their mode, and the ShapeEnv recording every decision."""

    shape_env: Any
    mode: Any
    tensors: list[Any]


def symbolic_inputs(
    shapes: Sequence[Sequence[int]], names: Sequence[str], *, specialize: bool, dtype: Any = None
) -> SymbolicInputs:
    """Fake tensors of ``shapes`` (contiguous, offset 0) named ``L['<name>']``, every dimension dynamic."""
    import torch
    from torch._dynamo.source import LocalSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    shape_env = ShapeEnv(specialize_zero_one=specialize, duck_shape=specialize)
    if not specialize:
        _admit_zero(shape_env)
    mode = FakeTensorMode(shape_env=shape_env)
    tensors = []
    for shape, name in zip(shapes, names):
        # A real (uninitialized) CPU tensor, so ops mixing it with tensors the program makes agree
        # on the device; a huge one only as meta.
        numel = 1
        for size in shape:
            numel *= size
        real = torch.empty(tuple(shape), dtype=dtype or torch.float32, device="cpu" if numel <= 1 << 22 else "meta")
        context: StatelessSymbolicContext[..., Any] = StatelessSymbolicContext(
            dynamic_sizes=[DimDynamic.DYNAMIC] * len(shape)
        )
        # Without 0/1 specialization, making the fake tensor asks whether each dimension is
        # empty (its storage's size) and would pin an empty one to 0: that is the fake
        # tensor's bookkeeping, not the program's question, so it installs no guard.
        making = shape_env.suppress_guards() if not specialize else contextlib.nullcontext()
        with making:
            tensors.append(mode.from_tensor(real, source=LocalSource(name), symbolic_context=context))
    return SymbolicInputs(shape_env, mode, tensors)


def _admit_zero(shape_env: Any) -> None:
    """Make ``shape_env`` create its input symbols as sympy integers >= 0, not sympy *positive* ones.

    ``ShapeEnv.create_symbol`` makes every size, stride and storage-offset symbol with
    ``positive=True``: right under 0/1 specialization, where such a symbol stands for 2 and
    up, wrong without it. sympy then folds ``Eq(s0*s1, 0)`` (``numel() == 0``) or
    ``s0 >= 1`` at construction, before any ShapeEnv method sees a question, so a size-0
    point takes the non-empty path with no guard or decision on record and every empty
    input shares a cell with the non-empty ones. Made without that assumption and with
    the range ``[0, oo)`` instead, the symbol leaves such questions to ShapeEnv, which
    answers them from the hint and records a guard.
    """
    import inspect

    import sympy
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges

    create_symbol = shape_env.create_symbol
    signature = inspect.signature(create_symbol)

    def nonnegative(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        positive = bound.arguments["positive"]
        if positive:
            bound.arguments["positive"] = None
        symbol = create_symbol(*bound.args, **bound.kwargs)
        if positive and isinstance(symbol, sympy.Symbol) and isinstance(bound.arguments["val"], int):
            shape_env._update_var_to_range(symbol, ValueRanges(0, int_oo))
        return symbol

    shape_env.create_symbol = nonnegative


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence fake-tensor's ERROR log of failing meta kernels: a failing trace is an outcome here, not news."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)


def classify(exc: BaseException) -> str:
    """``data-dependent`` (needs values, not sizes), ``unsupported`` (fake tensors cannot run it) or ``program``."""
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        MetadataMismatchError,
        UnsupportedFakeTensorException,
        UnsupportedOperatorException,
    )
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:  # dynamo and torch wrap the original
        seen.add(id(current))
        if isinstance(
            current, GuardOnDataDependentSymNode | DataDependentOutputException | DynamicOutputShapeException
        ):
            return "data-dependent"
        if isinstance(current, UnsupportedOperatorException | UnsupportedFakeTensorException | MetadataMismatchError):
            return "unsupported"
        current = underneath(current)
    return "program"


def _symbolic_dirs() -> tuple[str, ...]:
    import sympy
    import torch

    torch_dir = os.path.dirname(torch.__file__)
    return (
        os.path.join(torch_dir, "fx", "experimental", "symbolic_shapes.py"),
        os.path.join(torch_dir, "fx", "experimental", "sym_node.py"),
        os.path.join(torch_dir, "utils", "_sympy") + os.sep,
        os.path.dirname(sympy.__file__) + os.sep,
    )


def raised_in_symbolic_reasoning(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc`` is ShapeEnv/sympy code: the trace itself broke, not the program."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and last.startswith(_symbolic_dirs())


def static_mode() -> Any:
    """A fresh ``FakeTensorMode`` (with a ShapeEnv, for data-dependent output sizes) for :func:`static_fake`."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(shape_env=ShapeEnv())


def static_fake(mode: Any, tensor: Any) -> Any:
    """A fake copy of ``tensor`` in ``mode``, every size and stride as the real one's (no symbols)."""
    return mode.from_tensor(tensor, static_shapes=True)


def is_unsupported_operator(exc: BaseException) -> bool:
    """The op has no fake (meta) kernel: fake tensors cannot run it at all."""
    from torch._subclasses.fake_tensor import UnsupportedOperatorException

    return isinstance(exc, UnsupportedOperatorException)
