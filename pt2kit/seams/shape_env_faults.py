"""Seam: planted shape-reasoning bugs, each planted the way torch itself (or a real bug) plants it.

pt2kit's guard validation has to catch three kinds of unsound compile; its tests and its
benchmark plant each kind into a real dynamo compile, touching torch exactly where the
real thing happens:

- :func:`flipped_equality_guards`: torch's own testing knob
  ``torch.fx.experimental._config.inject_EVALUATE_EXPR_flip_equality_TESTING_ONLY``, which
  makes ``evaluate_expr`` install the negation of each ``==``/``!=`` guard it decides;
- :func:`dropped_guards`: ``ShapeEnv.produce_guards_verbose`` loses the guards whose code
  matches a predicate (the parity guard ``% 2 == 0``, say) -- a guard the trace relied on
  that is never installed;
- :func:`wrong_mod_bounds`: ``bound_sympy``'s value range for ``x % m`` claims ``[0, 0]``,
  as pytorch#169602's wrong ``PythonMod`` bound did, so ``x % m == 0`` is decided
  *statically*, without any guard, and the graph is reused at sizes where it is wrong.

Every context manager restores what it changed on exit. Nothing outside tests and
benchmarks should use this module.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch.fx.experimental._config.inject_EVALUATE_EXPR_flip_equality_TESTING_ONLY, "
        "ShapeEnv.produce_guards_verbose, torch.utils._sympy.value_ranges.SymPyValueRangeAnalysis.mod, "
        "symbolic_shapes._maybe_evaluate_static_worker (its cache)"
    ),
    features=("planted unsound compiles (validation's own tests and benchmarks)",),
    internal=True,
)


def probe() -> None:
    import torch.fx.experimental._config as fx_config
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.utils._sympy.value_ranges import SymPyValueRangeAnalysis

    if not hasattr(fx_config, "inject_EVALUATE_EXPR_flip_equality_TESTING_ONLY"):
        raise AttributeError("the inject_EVALUATE_EXPR_flip_equality_TESTING_ONLY knob is gone")
    if "produce_guards_verbose" not in ShapeEnv.__dict__:
        raise AttributeError("ShapeEnv.produce_guards_verbose is gone")
    if not hasattr(SymPyValueRangeAnalysis, "mod"):
        raise AttributeError("SymPyValueRangeAnalysis.mod is gone")
    from torch.fx.experimental import symbolic_shapes

    if not hasattr(symbolic_shapes._maybe_evaluate_static_worker, "cache_clear"):
        raise AttributeError("_maybe_evaluate_static_worker is no longer an lru_cache")


@contextlib.contextmanager
def flipped_equality_guards() -> Iterator[None]:
    """torch's knob: every ``Eq``/``Ne`` guard decided from a boolean hint is installed negated."""
    import torch.fx.experimental._config as fx_config

    previous = fx_config.inject_EVALUATE_EXPR_flip_equality_TESTING_ONLY
    fx_config.inject_EVALUATE_EXPR_flip_equality_TESTING_ONLY = True
    try:
        yield
    finally:
        fx_config.inject_EVALUATE_EXPR_flip_equality_TESTING_ONLY = previous


@contextlib.contextmanager
def dropped_guards(drop: Callable[[str], bool]) -> Iterator[None]:
    """Shape guards whose Python code (without dynamo's comment) satisfies ``drop`` are never installed."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    original = ShapeEnv.__dict__["produce_guards_verbose"]

    @functools.wraps(original)
    def produce_guards_verbose(self: Any, *args: Any, **kwargs: Any) -> Any:
        helpers = original(self, *args, **kwargs)
        langs = list(kwargs.get("langs") or ("python", "verbose_python"))
        code_parts = helpers[langs.index("python")].exprs if "python" in langs else helpers[0].exprs
        keep = [not drop(code) for code in code_parts]
        for helper in helpers:
            if len(helper.exprs) == len(keep):
                helper.exprs[:] = [code for code, kept in zip(helper.exprs, keep) if kept]
        return helpers

    setattr(ShapeEnv, "produce_guards_verbose", produce_guards_verbose)
    try:
        yield
    finally:
        setattr(ShapeEnv, "produce_guards_verbose", original)


@contextlib.contextmanager
def wrong_mod_bounds(modulus: int = 2) -> Iterator[None]:
    """``bound_sympy`` says ``x % modulus`` is always 0 (for non-negative ``x``)."""
    from torch.utils._sympy.value_ranges import SymPyValueRangeAnalysis, ValueRanges

    original = SymPyValueRangeAnalysis.__dict__["mod"]

    def mod(cls: Any, x: Any, y: Any) -> Any:
        y = ValueRanges.wrap(y)
        if y.is_singleton() and y.lower == modulus:
            return ValueRanges(0, 0)
        return original.__func__(cls, x, y)

    # Static answers are memoized process-wide (_maybe_evaluate_static_worker's lru_cache):
    # clear them on the way in, so the planted bound is consulted, and on the way out, so
    # no wrong answer outlives the block.
    from torch.fx.experimental import symbolic_shapes

    symbolic_shapes._maybe_evaluate_static_worker.cache_clear()
    setattr(SymPyValueRangeAnalysis, "mod", classmethod(mod))
    try:
        yield
    finally:
        setattr(SymPyValueRangeAnalysis, "mod", original)
        symbolic_shapes._maybe_evaluate_static_worker.cache_clear()
