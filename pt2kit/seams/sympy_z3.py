"""Seam: ``torch.fx.experimental.validator.SympyToZ3`` and ``torch.utils._sympy.interp.sympy_interp``.

torch turns its sympy shape expressions into Z3 with ``SympyToZ3``: ``sympy_interp`` walks
the expression and calls one handler per operation (``add``, ``floordiv``,
``python_mod``, ``modular_indexing``...), dispatching on torch's own sympy function
classes (``FloorDiv``, ``PythonMod``, ``CleanDiv``...). pt2kit reuses that walk and the
handlers that fit (arithmetic, comparisons, boolean connectives, min/max), and replaces
the ones whose semantics are not exact for Python integers:

- torch computes ``//`` and ``%`` through real division (``ToInt(ToReal(a) / ToReal(b))``),
  which drags integer queries into nonlinear real arithmetic; pt2kit's ``ops`` give exact
  integer ``//`` and ``%`` with Python's signs (see ``validation.z3ops``);
- anything on floats (``ToFloat``, ``IntTrueDiv``, ``FloatPow``, float constants) raises
  the ops' ``Untranslatable``: a Python float is not a real number, and a guard Z3 cannot
  express exactly must make a result *incomplete*, never sound.

:func:`translate` is the entry point; ``ops`` is any object with the methods
``floordiv``, ``mod``, ``pow``, ``untranslatable(reason)`` and a list ``side`` that
collects definedness conditions (``b != 0`` for each division).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch.fx.experimental.validator.SympyToZ3, torch.utils._sympy.interp.sympy_interp",
    features=("validation guards", "validation sizes"),
)


def probe() -> None:
    from torch.fx.experimental.validator import SympyToZ3  # noqa: F401  (defined only when z3 imports)
    from torch.utils._sympy.interp import handlers, sympy_interp  # noqa: F401

    names = set(handlers().values())
    for needed in ("floordiv", "python_mod", "mod", "modular_indexing", "eq", "and_", "minimum"):
        if needed not in names:
            raise AttributeError(f"sympy_interp has no '{needed}' handler any more")


class _Symbols:
    """What SympyToZ3 expects of its validator: the symbol table and a place for side conditions."""

    def __init__(self, symbols: dict[Any, Any], side: list[Any]) -> None:
        self.symbols = symbols
        self._side = side

    def z3var(self, symbol: Any) -> Any:
        return self.symbols[symbol]

    def add_assertion(self, expr: Any) -> None:
        self._side.append(expr)


@functools.cache
def _exact() -> type:
    """A SympyToZ3 whose integer division, modulo and powers are exact, and which refuses floats.

    The instance carries the caller's ``ops`` (``self.ops``): each translation collects its
    own side conditions.
    """
    import z3
    from torch.fx.experimental.validator import SympyToZ3

    def refuse(what: str) -> Callable[..., Any]:
        def handler(self: Any, *args: Any) -> Any:
            raise self.ops.untranslatable(f"{what} (floats have no exact Z3 model)")

        return handler

    class ExactSympyToZ3(SympyToZ3):
        def __init__(self, symbols: _Symbols, ops: Any) -> None:
            super().__init__(symbols)  # type: ignore[arg-type]
            self.ops = ops

        def constant(self, value: Any, dtype: Any) -> Any:
            import torch

            if dtype is torch.int64:
                return z3.IntVal(int(value))
            if dtype is torch.bool:
                return z3.BoolVal(bool(value))
            raise self.ops.untranslatable(f"float constant {value}")

        def floordiv(self, a: Any, b: Any) -> Any:
            return self.ops.floordiv(a, b)

        def div(self, a: Any, b: Any) -> Any:
            return self.ops.floordiv(a, b)

        def mod(self, a: Any, b: Any) -> Any:
            return self.ops.mod(a, b)

        def python_mod(self, a: Any, b: Any) -> Any:
            return self.ops.mod(a, b)

        def modular_indexing(self, a: Any, b: Any, c: Any) -> Any:
            return self.ops.mod(self.ops.floordiv(a, b), c)

        def pow(self, a: Any, b: Any) -> Any:
            return self.ops.pow(a, b)

        def pow_by_natural(self, a: Any, b: Any) -> Any:
            return self.ops.pow(a, b)

        def identity(self, a: Any) -> Any:
            return a

        def where(self, c: Any, a: Any, b: Any) -> Any:
            return z3.If(c, a, b)

        def abs(self, a: Any) -> Any:
            return z3.If(a < 0, -a, a)

        def minimum(self, a: Any, b: Any) -> Any:
            return z3.If(a < b, a, b)

        def maximum(self, a: Any, b: Any) -> Any:
            return z3.If(a > b, a, b)

        def sym_sum(self, args: Any) -> Any:
            return z3.Sum(*args) if len(args) > 1 else args[0]

        to_dtype = refuse("ToFloat")
        truediv = refuse("true division")
        int_truediv = refuse("IntTrueDiv")
        trunc_to_int = refuse("TruncToInt")
        round_to_int = refuse("RoundToInt")
        ceil_to_int = refuse("CeilToInt")
        floor_to_int = refuse("FloorToInt")
        sqrt = refuse("sqrt")

        def __getattr__(self, name: str) -> Any:
            if name == "ops":
                raise AttributeError(name)
            try:
                return super().__getattr__(name)
            except AttributeError:
                raise self.ops.untranslatable(f"no Z3 translation for sympy operation '{name}'") from None

    return ExactSympyToZ3


def translate(expr: Any, symbols: dict[Any, Any], ops: Any) -> Any:
    """Z3 of the sympy ``expr``; every free symbol must be in ``symbols`` (sympy symbol -> Z3 term)."""
    from torch.utils._sympy.interp import sympy_interp

    translator = _exact()(_Symbols(symbols, ops.side), ops)
    try:
        return sympy_interp(translator, symbols, expr)
    except KeyError as missing:
        raise ops.untranslatable(f"unknown symbol or operation {missing}") from None
    except (NotImplementedError, ValueError, TypeError) as error:
        raise ops.untranslatable(f"{type(error).__name__}: {error}".splitlines()[0]) from None
