"""Shape conditions as a user writes them: ``x.shape[0] % 4 == 0 and x.shape[0] >= 2``.

ShapeEnv prints ``Eq(Mod(s62, 4), 0)``: sympy's spelling, over symbols whose numbers change
from run to run. :func:`condition` prints the same expression the way Python would read
it, with each symbol replaced by a name the caller chooses (its source, ``L['x'].size()[0]``,
or shorter, ``x.shape[0]``). torch's own sympy functions are recognised by class name, so
this module needs no private torch import.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import sympy
from sympy.printing.str import StrPrinter

_OPS = {
    "Equality": "==",
    "Unequality": "!=",
    "StrictLessThan": "<",
    "LessThan": "<=",
    "StrictGreaterThan": ">",
    "GreaterThan": ">=",
}
_SOURCE = re.compile(r"L\['([^']+)'\]\.size\(\)\[(\d+)\]")


def short(source: str) -> str:
    """``L['x'].size()[0]`` -> ``x.shape[0]``; other sources are kept as they are."""
    return _SOURCE.sub(lambda m: f"{m[1]}.shape[{m[2]}]", source)


class _Printer(StrPrinter):
    def __init__(self, names: Callable[[Any], str | None]) -> None:
        super().__init__({"order": "none"})
        self._names = names

    def _print_Symbol(self, expr: Any) -> str:
        return self._names(expr) or expr.name

    def _print_Relational(self, expr: Any) -> str:
        op = _OPS.get(type(expr).__name__, expr.rel_op)
        return f"{self._print(expr.lhs)} {op} {self._print(expr.rhs)}"

    def _print_And(self, expr: Any) -> str:
        return " and ".join(self._wrap(arg) for arg in expr.args)

    def _print_Or(self, expr: Any) -> str:
        return " or ".join(self._wrap(arg) for arg in expr.args)

    def _print_Not(self, expr: Any) -> str:
        return f"not ({self._print(expr.args[0])})"

    def _print_Function(self, expr: Any) -> str:
        name = type(expr).__name__
        args = [self._atom(arg) for arg in expr.args]
        if name in ("Mod", "PythonMod") and len(args) == 2:
            return f"{args[0]} % {args[1]}"
        if name in ("FloorDiv", "CleanDiv") and len(args) == 2:
            return f"{args[0]} // {args[1]}"
        if name == "ModularIndexing" and len(args) == 3:
            return f"({args[0]} // {args[1]}) % {args[2]}"
        if name in ("Max", "Min"):
            return f"{name.lower()}({', '.join(self._print(a) for a in expr.args)})"
        if name == "PowByNatural":
            return f"{args[0]}**{args[1]}"
        return super()._print_Function(expr)

    _print_Mod = _print_Function
    _print_Max = _print_Function
    _print_Min = _print_Function

    def _atom(self, expr: Any) -> str:
        text = self._print(expr)
        return text if expr.is_Atom or isinstance(expr, sympy.Function) else f"({text})"

    def _wrap(self, expr: Any) -> str:
        text = self._print(expr)
        return f"({text})" if isinstance(expr, sympy.Or | sympy.And) else text


def expression(expr: Any, names: Callable[[Any], str | None] = lambda s: None) -> str:
    """A sympy expression or condition in Python spelling, symbols named by ``names``."""
    if isinstance(expr, bool | int):
        return str(expr)
    return _Printer(names).doprint(expr)


def conjunction(parts: Iterable[str]) -> str:
    parts = [part for part in dict.fromkeys(parts) if part]
    if not parts:
        return "always"
    return " and ".join(f"({part})" if " or " in part else part for part in parts)
