"""One Z3 vocabulary for a trace: inputs by source name, and both kinds of text translated into it.

A trace talks about its inputs in two languages. ShapeEnv's sympy expressions use symbols
(``s0``, ``u0``); the guard code dynamo installs uses *sources*, the Python path to each
input quantity (``L['x'].size()[0]``). :class:`Vocabulary` makes them meet: every source is
one Z3 integer named by its source text, and each backed symbol *is* its first source
(the one dynamo's guards use; duck sizing and replacements relate the others by
equalities, which are assumptions in their own right). Data-dependent (unbacked) symbols
without an input behind them and symbols no input backs (Inductor's loop indices) are free
Z3 integers -- an input size made unbacked (``mark_unbacked``) is its source like any other;
float symbols are untranslatable.

- :meth:`Vocabulary.formula` translates a sympy boolean (through torch's ``SympyToZ3``,
  with exact integer semantics -- :mod:`pt2kit.seams.sympy_z3`);
- :meth:`Vocabulary.code` translates a guard's Python code (:mod:`validation.pyexpr`);
- :meth:`Vocabulary.domain` gives what is true of every input: sizes, strides and storage
  offsets are never negative.

Both translations fold in the side conditions of their divisions (``b != 0``), so a formula
holds exactly where Python would evaluate it to True without raising.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import z3

from pt2kit.seams import shape_env as shape_env_seam
from pt2kit.seams import sympy_z3

from . import pyexpr
from .z3ops import Ops, Untranslatable

_TENSOR_PROPERTY = re.compile(r"\.(size\(\)\[\d+\]|stride\(\)\[\d+\]|storage_offset\(\))$")


#: Every integer of magnitude up to 2**53 is a double, exactly.
_EXACT_FLOAT_INTEGERS = 2**53


def exact_float_comparisons(expr: Any) -> Any:
    """``ToFloat(n) >= 0.0`` (``n`` an integer expression) as ``n >= 0``, where that is exact.

    Converting an integer to float rounds monotonically, and a constant ``c`` that is an
    integer with ``|c| < 2**53`` is its own double, as are ``c - 1`` and ``c + 1``; so
    ``float(n) >= c`` holds exactly when ``n >= c``, and likewise for ``>``, ``<``, ``<=``,
    ``==``, ``!=``. Such comparisons come from size arithmetic done in floats (an attention
    scale ``d ** 0.5``). Any other float stays untranslatable.
    """
    import sympy

    if not getattr(expr, "args", None):
        return expr
    if getattr(expr, "is_Relational", False):
        lhs, rhs = expr.lhs, expr.rhs
        for a, b, flipped in ((lhs, rhs, False), (rhs, lhs, True)):
            if type(a).__name__ == "ToFloat" and getattr(b, "is_number", False) and not b.free_symbols:
                try:
                    value = float(b)
                except (TypeError, ValueError):
                    continue
                if value.is_integer() and abs(value) < _EXACT_FLOAT_INTEGERS:
                    inner, constant = a.args[0], sympy.Integer(int(value))
                    return type(expr)(constant, inner) if flipped else type(expr)(inner, constant)
        return expr
    rebuilt = [exact_float_comparisons(arg) for arg in expr.args]
    return expr.func(*rebuilt) if any(new is not old for new, old in zip(rebuilt, expr.args)) else expr


def is_tensor_property(name: str) -> bool:
    """``L['x'].size()[0]``, ``L['x'].stride()[1]``, ``L['x'].storage_offset()``: never negative integers."""
    return bool(_TENSOR_PROPERTY.search(name))


class Vocabulary:
    """Z3 terms for the inputs of one trace (one ShapeEnv)."""

    def __init__(self, shape_env: Any = None, *, names: dict[str, str] | None = None) -> None:
        self.sources: dict[str, z3.ArithRef] = {}
        self.symbols: dict[Any, z3.ArithRef] = {}
        self._source_of: dict[Any, str] = {}
        self._kind_of_source: dict[str, str] = {}
        self._names = names or {}
        if shape_env is not None:
            self.learn(shape_env)

    def learn(self, shape_env: Any) -> None:
        """Take the symbol -> source table of ``shape_env``."""
        for symbol, sources in shape_env_seam.symbol_sources(shape_env).items():
            if sources:
                self._source_of[symbol] = sources[0]
                for source in sources:
                    self._kind_of_source.setdefault(source, shape_env_seam.symbol_kind(symbol))

    def source(self, name: str) -> z3.ArithRef:
        """The Z3 integer of one input quantity (refuses float inputs)."""
        term = self.sources.get(name)
        if term is None:
            kind = self._kind_of_source.get(name)
            if kind == "float":
                raise Untranslatable(f"{name} is a float input")
            if kind is None and not is_tensor_property(name):
                raise Untranslatable(f"{name} is not a known integer input")
            term = self.sources[name] = z3.Int(self._names.get(name, name))
        return term

    def source_of(self, symbol: Any) -> str | None:
        return self._source_of.get(symbol)

    def symbol(self, symbol: Any) -> z3.ArithRef:
        term = self.symbols.get(symbol)
        if term is not None:
            return term
        kind = shape_env_seam.symbol_kind(symbol)
        if kind == "float":
            raise Untranslatable(f"{symbol} is a float")
        source = self._source_of.get(symbol)
        if source is not None and kind in ("int", "unbacked"):
            # An input's quantity, backed or not (``mark_unbacked`` makes an input size an
            # unbacked symbol): the guards speak of it by that source.
            term = self.source(source)
        else:
            term = z3.Int(str(symbol))  # data-dependent, or no input behind it: free
        self.symbols[symbol] = term
        return term

    def formula(self, expr: Any, ops: Ops | None = None) -> z3.BoolRef:
        """Z3 of a sympy boolean, true exactly where Python evaluates it to True."""
        ops = ops or Ops()
        expr = exact_float_comparisons(expr)
        env = {symbol: self.symbol(symbol) for symbol in expr.free_symbols}
        result = sympy_z3.translate(expr, env, ops)
        if not isinstance(result, z3.BoolRef):
            raise Untranslatable(f"{expr} is not a condition")
        return ops.guarded(result)

    def term(self, expr: Any, ops: Ops) -> z3.ArithRef:
        """Z3 of a sympy integer expression (side conditions go to ``ops.side``)."""
        if isinstance(expr, int):
            return z3.IntVal(expr)
        env = {symbol: self.symbol(symbol) for symbol in expr.free_symbols}
        result = sympy_z3.translate(expr, env, ops)
        if isinstance(result, z3.BoolRef) or (isinstance(result, z3.ArithRef) and result.is_real()):
            raise Untranslatable(f"{expr} is not an integer")
        return result

    def code(self, code: str) -> z3.BoolRef:
        """Z3 of one guard's Python code."""
        return pyexpr.translate(code, self.source)

    def domain(self, names: Iterable[str] | None = None) -> list[z3.BoolRef]:
        """Sizes, strides and storage offsets are never negative."""
        names = list(self.sources) if names is None else names
        return [self.sources[name] >= 0 for name in names if name in self.sources and is_tensor_property(name)]

    def is_float_source(self, name: str) -> bool:
        return self._kind_of_source.get(name) == "float"

    def known_source(self, name: str) -> bool:
        """Whether ``name`` is an integer input this vocabulary can translate."""
        return is_tensor_property(name) or self._kind_of_source.get(name) in ("int", "unbacked")
