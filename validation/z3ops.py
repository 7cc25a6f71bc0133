"""Python integer arithmetic in Z3, exactly, and the one way pt2kit asks Z3 a question.

Shape guards are Python expressions over Python ints: ``x.size(0) % 2 == 0``,
``(s0 // 4) * 4 == s0``. Z3's integer ``/`` and ``%`` are *Euclidean* (the remainder is
never negative), Python's are *floored* (the remainder has the divisor's sign). They agree
when the divisor is positive -- the common case, which is therefore translated to Z3's own
operators, which its solvers handle best -- and differ for negative divisors::

    Python:  7 // -2 == -4,  7 % -2 == -1
    Z3:      7 /  -2 == -3,  7 %  -2 ==  1

:class:`Ops` gives the Python meaning for any divisor, and records a *side condition*
``b != 0`` for each division: Python raises on ``x % 0``, so a guard containing it fails
(dynamo treats a guard that raises as not passing) and an assumption containing it does
not hold. Powers are translated only for natural exponents that are constants. Floats
have no exact model in Z3's reals (``0.1 + 0.2 != 0.3`` in Python), so anything on floats
raises :class:`Untranslatable`; callers turn that into an *incomplete* result.

:func:`prove` is the one query: is ``goal`` implied by ``hypotheses``? It uses Z3's default
solver (not ``SolverFor("QF_NRA")``, which torch's translation validation uses and which
takes seconds where the default takes milliseconds), one obligation per check, each with
its own timeout, and returns a verdict with a counterexample model when there is one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import z3


class Untranslatable(Exception):
    """Something Z3 cannot express exactly (a float, an unknown function): the result is incomplete."""


class Ops:
    """Exact Python integer operations on Z3 terms; collects definedness side conditions in ``side``."""

    def __init__(self) -> None:
        self.side: list[z3.BoolRef] = []

    @staticmethod
    def untranslatable(reason: str) -> Untranslatable:
        return Untranslatable(reason)

    @staticmethod
    def lift(value: Any) -> z3.ArithRef:
        if isinstance(value, bool):
            return z3.IntVal(int(value))
        if isinstance(value, int):
            return z3.IntVal(value)
        if isinstance(value, z3.ArithRef):
            if value.is_real():
                raise Untranslatable(f"real-valued term {value}")
            return value
        if isinstance(value, z3.BoolRef):
            return z3.If(value, z3.IntVal(1), z3.IntVal(0))
        raise Untranslatable(f"cannot lift {type(value).__name__} into Z3 integers")

    def floordiv(self, a: Any, b: Any) -> z3.ArithRef:
        a, b = self.lift(a), self.lift(b)
        constant = _constant(b)
        if constant is not None:
            if constant == 0:
                self.side.append(z3.BoolVal(False))
                return z3.IntVal(0)
            if constant > 0:
                return a / b
            return (-a) / (-b)
        self.side.append(b != 0)
        # Floor of a/b: Euclidean division is the floor when the divisor is positive.
        return z3.If(b > 0, a / b, (-a) / (-b))

    def mod(self, a: Any, b: Any) -> z3.ArithRef:
        a, b = self.lift(a), self.lift(b)
        constant = _constant(b)
        if constant is not None and constant > 0:
            return a % b
        return a - b * self.floordiv(a, b)

    def pow(self, a: Any, b: Any) -> z3.ArithRef:
        a, b = self.lift(a), self.lift(b)
        exponent = _constant(b)
        if exponent is None or exponent < 0:
            raise Untranslatable(f"power with a non-constant or negative exponent ({b})")
        if exponent > 64:
            raise Untranslatable(f"power with exponent {exponent}")
        result: z3.ArithRef = z3.IntVal(1)
        for _ in range(exponent):
            result = result * a
        return result

    def guarded(self, formula: z3.BoolRef) -> z3.BoolRef:
        """``formula`` where defined: the side conditions collected so far, and it."""
        if not self.side:
            return formula
        return z3.And(*self.side, formula)


def _constant(term: z3.ArithRef) -> int | None:
    simplified = z3.simplify(term) if not z3.is_int_value(term) else term
    return simplified.as_long() if z3.is_int_value(simplified) else None


@dataclasses.dataclass
class Verdict:
    """Whether an obligation holds: ``proved``, ``refuted`` (with ``model``) or ``unknown`` (with ``reason``)."""

    status: str
    model: dict[str, int] = dataclasses.field(default_factory=dict)
    reason: str = ""
    seconds: float = 0.0


def prove(
    hypotheses: Sequence[z3.BoolRef],
    goal: z3.BoolRef,
    *,
    timeout_ms: int,
    minimize: Iterable[z3.ArithRef] = (),
    solver: z3.Solver | None = None,
) -> Verdict:
    """Does ``And(hypotheses)`` imply ``goal``? A refutation's model is minimized over ``minimize``.

    ``solver`` may hold the hypotheses already (one solver per compile, one ``push``/``pop``
    per obligation); otherwise a fresh default solver is made for this one question.
    """
    import time

    start = time.perf_counter()
    own = solver is None
    if solver is None:
        solver = z3.Solver()
        solver.set("timeout", int(timeout_ms))
        solver.add(*hypotheses)
    else:
        solver.push()
    try:
        solver.add(z3.Not(goal))
        result = solver.check()
        if result == z3.unsat:
            return Verdict("proved", seconds=time.perf_counter() - start)
        if result == z3.unknown:
            return Verdict("unknown", reason=f"z3: {solver.reason_unknown()}", seconds=time.perf_counter() - start)
        model = solver.model()
    finally:
        if not own:
            solver.pop()
    terms = list(minimize)
    values = smallest(list(hypotheses) + [z3.Not(goal)], terms, timeout_ms=timeout_ms) if terms else None
    if values is None:
        values = {str(term): _value(model, term) for term in terms}
    return Verdict("refuted", {k: v for k, v in values.items() if v is not None}, seconds=time.perf_counter() - start)


def smallest(
    constraints: Sequence[z3.BoolRef],
    terms: Sequence[z3.ArithRef],
    *,
    timeout_ms: int,
    report: Sequence[z3.ArithRef] = (),
) -> dict[str, int | None] | None:
    """A model of ``constraints`` with the least sum of ``terms`` (then each term, in order), or None.

    The values of ``terms`` and of ``report`` are returned by name. ``terms`` should be
    bounded below (sizes), or the minimum does not exist.
    """
    optimizer = z3.Optimize()
    optimizer.set("timeout", int(timeout_ms))
    optimizer.add(*constraints)
    if terms:
        optimizer.minimize(z3.Sum(*terms) if len(terms) > 1 else terms[0])
        for term in terms:
            optimizer.minimize(term)
    if optimizer.check() != z3.sat:
        return None
    model = optimizer.model()
    return {str(term): _value(model, term) for term in [*terms, *report]}


def _value(model: z3.ModelRef, term: z3.ArithRef) -> int | None:
    value = model.eval(term, model_completion=False)
    return value.as_long() if z3.is_int_value(value) else None


def holds_at(formula: z3.BoolRef, values: dict[z3.ArithRef, int]) -> bool | None:
    """Evaluate ``formula`` with the given terms fixed; None when it does not reduce to a constant."""
    substituted = z3.substitute(formula, *[(term, z3.IntVal(value)) for term, value in values.items()])
    result = z3.simplify(substituted)
    if z3.is_true(result):
        return True
    if z3.is_false(result):
        return False
    return None


def compile_predicate(formula: z3.BoolRef, variables: Sequence[z3.ArithRef]) -> Any:
    """``formula`` as a Python function of the values of ``variables`` (fast point tests).

    Each distinct subterm becomes one local assignment (Z3 terms are DAGs; printing them as
    trees can be exponential). Z3's ``/`` and ``%`` on integers are Euclidean, and
    division by zero is unspecified; the generated code matches the first and returns 0
    for the second (every division pt2kit emits is guarded by ``b != 0``). Returns None for
    constructs it does not know; the caller then uses :func:`holds_at`.
    """
    index = {variable.get_id(): position for position, variable in enumerate(variables)}
    names: dict[int, str] = {}
    lines: list[str] = []
    binary = {
        z3.Z3_OP_ADD: " + ",
        z3.Z3_OP_SUB: " - ",
        z3.Z3_OP_MUL: " * ",
        z3.Z3_OP_LE: " <= ",
        z3.Z3_OP_LT: " < ",
        z3.Z3_OP_GE: " >= ",
        z3.Z3_OP_GT: " > ",
        z3.Z3_OP_EQ: " == ",
        z3.Z3_OP_AND: " and ",
        z3.Z3_OP_OR: " or ",
    }

    def expression(e: z3.ExprRef) -> str:
        if z3.is_int_value(e):
            return str(e.as_long())
        if z3.is_true(e):
            return "True"
        if z3.is_false(e):
            return "False"
        if z3.is_const(e) and e.get_id() in index:
            return f"v[{index[e.get_id()]}]"
        if not z3.is_app(e):
            raise Untranslatable(str(e))
        kind = e.decl().kind()
        args = [names[e.arg(i).get_id()] for i in range(e.num_args())]
        if kind in binary:
            return "(" + binary[kind].join(args) + ")"
        if kind == z3.Z3_OP_DISTINCT:
            return f"({args[0]} != {args[1]})" if len(args) == 2 else f"(len({{{', '.join(args)}}}) == {len(args)})"
        if kind == z3.Z3_OP_NOT:
            return f"(not {args[0]})"
        if kind == z3.Z3_OP_UMINUS:
            return f"(-{args[0]})"
        if kind == z3.Z3_OP_ITE:
            return f"({args[1]} if {args[0]} else {args[2]})"
        if kind == z3.Z3_OP_IDIV:
            return f"_ediv({args[0]}, {args[1]})"
        if kind == z3.Z3_OP_MOD:
            return f"_emod({args[0]}, {args[1]})"
        if kind == z3.Z3_OP_IMPLIES:
            return f"((not {args[0]}) or {args[1]})"
        raise Untranslatable(f"z3 operation {e.decl().name()}")

    # post-order over the DAG, each node once
    stack: list[tuple[z3.ExprRef, bool]] = [(formula, False)]
    try:
        while stack:
            e, expanded = stack.pop()
            if e.get_id() in names:
                continue
            children = e.children() if z3.is_app(e) and not (z3.is_const(e) and e.get_id() in index) else []
            if not expanded and any(c.get_id() not in names for c in children):
                stack.append((e, True))
                stack.extend((c, False) for c in children if c.get_id() not in names)
                continue
            name = f"t{len(names)}"
            lines.append(f"    {name} = {expression(e)}")
            names[e.get_id()] = name
    except Untranslatable:
        return None
    source = "def predicate(v):\n" + "\n".join(lines) + f"\n    return bool({names[formula.get_id()]})\n"
    namespace: dict[str, Any] = {"_ediv": _ediv, "_emod": _emod}
    exec(source, namespace)  # noqa: S102 - code generated from a Z3 term
    return namespace["predicate"]


def _ediv(a: int, b: int) -> int:
    """Z3's integer division: Euclidean (the remainder is never negative). Division by 0 is
    unspecified in Z3; every division pt2kit emits is guarded by ``b != 0``, so any value does."""
    if b == 0:
        return 0
    q = a // b
    return q + 1 if b < 0 and a - q * b != 0 else q


def _emod(a: int, b: int) -> int:
    return a - b * _ediv(a, b)
