"""validation's Z3 building blocks against Python itself: exact // and %, guard code, compiled predicates.

Every translation is checked the same way: evaluate the Z3 formula at concrete integers
(Z3's own simplifier) and compare with what Python computes for the same expression,
including negative operands and zero divisors (a guard that raises does not pass).
"""

from __future__ import annotations

import itertools
import re

import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from validation import pyexpr
from validation.z3ops import Ops, Untranslatable, compile_predicate, holds_at, prove, smallest

A, B, C = z3.Ints("a b c")
pytestmark = pytest.mark.matrix  # in-process decisions on real torch: make matrix runs them on every supported release


SMALL = st.integers(min_value=-40, max_value=40)


def _python(code: str, a: int, b: int, c: int = 0) -> bool:
    try:
        return bool(eval(code, {"__builtins__": {"max": max, "min": min, "abs": abs}}, {"a": a, "b": b, "c": c}))
    except ZeroDivisionError:
        return False  # a guard that raises rejects


def _sources(code: str) -> str:
    return re.sub(r"\b([abc])\b", r"L['\1']", code)


def _z3(formula: z3.BoolRef, a: int, b: int, c: int = 0) -> bool:
    result = holds_at(formula, {A: a, B: b, C: c})
    assert result is not None, f"{formula} did not reduce at {a}, {b}, {c}"
    return result


@settings(max_examples=300, deadline=None)
@given(SMALL, SMALL)
def test_floordiv_and_mod_have_python_semantics_for_every_sign(a: int, b: int) -> None:
    for code in ("a // b == 3", "a % b == 1", "a % b == -1", "(a // b) * b + a % b == a", "a % 3 == 2", "a // -3 == -2", "a % -4 == -1"):
        ops = Ops()
        formula = pyexpr.translate(_sources(code), {"L['a']": A, "L['b']": B}.__getitem__, ops)
        assert _z3(formula, a, b) == _python(code, a, b), (code, a, b)


@settings(max_examples=200, deadline=None)
@given(SMALL, SMALL, SMALL)
def test_guard_code_translation_matches_python(a: int, b: int, c: int) -> None:
    leaves = {"L['a']": A, "L['b']": B, "L['c']": C}.__getitem__
    for code in (
        "2 <= a <= 10",
        "a == b and not (c != 3)",
        "max(a, b, c) - min(a, c) > abs(b)",
        "(a if c > 0 else b) % 5 == 0 or a * b < c",
        "a ** 2 + 3 * b - (c // 2) >= 7",
    ):
        translated = pyexpr.translate(_sources(code), leaves)
        assert _z3(translated, a, b, c) == _python(code, a, b, c), (code, a, b, c)


def test_guard_code_reads_dynamo_text() -> None:
    code = "(L['x'].size()[0] % 2) == 0  # if x.shape[0] % 2 == 0:  # user.py:4 in f"
    assert pyexpr.leaves(code) == ["L['x'].size()[0]"]
    assert pyexpr.strip_comment(code) == "(L['x'].size()[0] % 2) == 0"
    pinned = pyexpr.static_sizes(
        "check_tensor(L['x'], Tensor, DispatchKeySet(CPU, BackendSelect), torch.float32, device=None, "
        "requires_grad=False, size=[None, 4], stride=[4, 1])  # x = f(x)"
    )
    assert pinned == [("L['x'].size()[1]", 4), ("L['x'].stride()[0]", 4), ("L['x'].stride()[1]", 1)]
    assert pyexpr.static_sizes("___check_type_id(L['x'], 1234)") is None


@pytest.mark.parametrize("code", ["L['f'] > 0.5", "L['a'] / 2 == 1", "torch.sym_float(L['a']) == 1", "math.sqrt(L['a']) == 2"])
def test_floats_and_unknown_calls_are_untranslatable(code: str) -> None:
    with pytest.raises(Untranslatable):
        pyexpr.translate(code, {"L['a']": A, "L['f']": A}.__getitem__)


def test_prove_refutes_with_a_minimal_counterexample() -> None:
    ops = Ops()
    hypotheses = [A >= 2, B >= 2, ops.mod(A, 4) == 0]
    assert prove(hypotheses, ops.mod(A, 2) == 0, timeout_ms=1000).status == "proved"
    verdict = prove(hypotheses, ops.mod(A, 8) == 0, timeout_ms=1000, minimize=[A, B])
    assert verdict.status == "refuted"
    assert verdict.model == {"a": 4, "b": 2}
    assert smallest([A >= 3, B > A], [A, B], timeout_ms=1000) == {"a": 3, "b": 4}


def test_compiled_predicate_agrees_with_z3_on_shared_subterms() -> None:
    ops = Ops()
    base = ops.guarded(ops.mod(A, B) == 1)
    formula = z3.Not(z3.Or(base, z3.And(A > 3, base), z3.If(B > 0, A / 2 > C, base)))
    predicate = compile_predicate(formula, [A, B, C])
    assert predicate is not None
    for a, b, c in itertools.product(range(-4, 5), repeat=3):
        assert predicate([a, b, c]) == holds_at(formula, {A: a, B: b, C: c}), (a, b, c)


def test_float_of_an_integer_compared_with_an_integral_constant_is_exact():
    import sympy
    from torch.utils._sympy.functions import FloorDiv, ToFloat

    from validation.translate import exact_float_comparisons

    s = sympy.Symbol("s0", integer=True)
    assert exact_float_comparisons(sympy.Ge(ToFloat(FloorDiv(s, 4)), 0.0)) == sympy.Ge(FloorDiv(s, 4), 0)
    assert exact_float_comparisons(sympy.Lt(sympy.Float(3.0), ToFloat(s))) == sympy.Lt(3, s)
    for inexact in (sympy.Ge(ToFloat(s), 0.5), sympy.Ge(ToFloat(s) * 2.0, 1.0), sympy.Gt(ToFloat(s), float(2**53))):
        assert exact_float_comparisons(inexact) == inexact  # still a float: untranslatable
    # the rule itself, around zero and at the edge of exact doubles (2**53 itself is excluded:
    # float(2**53 + 1) > 2.0**53 is False although 2**53 + 1 > 2**53)
    import operator

    for n in [*range(-5, 6), 2**53 - 2, 2**53 - 1, 2**53, 2**53 + 1, 2**53 + 2]:
        for c in (-1, 0, 3, 2**53 - 1):
            for op in (operator.ge, operator.gt, operator.le, operator.lt, operator.eq, operator.ne):
                assert op(float(n), float(c)) == op(n, c), (n, c, op)
    assert (float(2**53 + 1) > float(2**53)) != (2**53 + 1 > 2**53)
