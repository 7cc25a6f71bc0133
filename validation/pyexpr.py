"""The guard code dynamo installs, read as Python and turned into Z3.

Dynamo installs shape guards as Python source text: one lambda guard at the end of the
guard tree whose parts read ``(L['x'].size()[0] % 2) == 0`` or ``2 <= L['x'].size()[0]``,
and ``check_tensor(L['x'], ..., size=[None, 4], stride=[None, 1])`` leaf guards that pin the
static sizes. pt2kit reads that text back from the installed guard tree and parses it with
:mod:`ast` -- deliberately *not* from the sympy expressions it was printed from, so a bug
between torch's sympy reasoning and the code it installs (a dropped guard, a wrong printer,
a bad simplification) shows up as a difference.

:func:`translate` handles the Python subset shape guards are printed in: integer
constants, ``+ - * // % **``, comparisons (chained too), ``and``/``or``/``not``,
``x if c else y``, ``max``/``min``/``abs`` and ``math.floor``/``ceil``/``trunc`` of
integers. Anything else -- a float, ``/``, ``torch.sym_float``, an unknown call -- raises
:class:`~validation.z3ops.Untranslatable`. Everything that is an *input* (a subscript,
attribute or ``size()``/``stride()``/``storage_offset()`` call chain rooted at a name) is a
*leaf*, named by its source text, and resolved by the caller's ``leaf`` function.

:func:`static_sizes` reads the sizes and strides ``check_tensor`` pins.
"""

from __future__ import annotations

import ast
from collections.abc import Callable


import z3

from .z3ops import Ops, Untranslatable

LeafResolver = Callable[[str], z3.ArithRef]

_INPUT_METHODS = {"size", "stride", "storage_offset"}
_INT_FUNCTIONS = {"math.floor", "math.ceil", "math.trunc", "floor", "ceil", "trunc", "int"}


def strip_comment(code: str) -> str:
    """The guard code without dynamo's trailing ``# user line`` comment (ast ignores it; this is for display)."""
    try:
        ast.parse(code, mode="eval")
    except SyntaxError:
        return code.strip()
    for index in range(len(code)):
        if code[index] == "#":
            head = code[:index].rstrip()
            try:
                ast.parse(head, mode="eval")
            except SyntaxError:
                continue
            return head
    return code.strip()


def parse(code: str) -> ast.expr:
    try:
        return ast.parse(code.strip(), mode="eval").body
    except SyntaxError as error:
        raise Untranslatable(f"not a Python expression: {error.msg}") from None


def is_leaf(node: ast.AST) -> bool:
    """An input quantity: ``L['x']``, ``L['x'].size()[0]``, ``L['self'].w.stride()[1]``..."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Subscript):
        return is_leaf(node.value) or _is_input_call(node.value)
    if isinstance(node, ast.Attribute):
        return is_leaf(node.value) and node.attr not in ("size", "stride")
    return _is_input_call(node)


def _is_input_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _INPUT_METHODS
        and is_leaf(node.func.value)
        and (node.func.attr != "storage_offset" or not node.args)
    )


def leaves(code: str) -> list[str]:
    """The source names of the inputs a guard reads, in order of appearance."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if is_leaf(node):
            name = ast.unparse(node)
            if name not in found:
                found.append(name)
            return
        children = node.args if isinstance(node, ast.Call) else ast.iter_child_nodes(node)
        for child in children:
            visit(child)

    visit(parse(code))
    return found


def translate(code: str, leaf: LeafResolver, ops: Ops | None = None) -> z3.BoolRef:
    """The Z3 formula of one guard's Python code; definedness side conditions are folded in."""
    ops = ops or Ops()
    formula = _Translator(leaf, ops).boolean(parse(code))
    return ops.guarded(formula)


class _Translator:
    def __init__(self, leaf: LeafResolver, ops: Ops) -> None:
        self.leaf = leaf
        self.ops = ops

    def boolean(self, node: ast.AST) -> z3.BoolRef:
        if isinstance(node, ast.BoolOp):
            parts = [self.boolean(value) for value in node.values]
            return z3.And(*parts) if isinstance(node.op, ast.And) else z3.Or(*parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return z3.Not(self.boolean(node.operand))
        if isinstance(node, ast.Compare):
            terms = [self.integer(node.left), *(self.integer(c) for c in node.comparators)]
            parts = [_compare(op, terms[i], terms[i + 1]) for i, op in enumerate(node.ops)]
            return parts[0] if len(parts) == 1 else z3.And(*parts)
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return z3.BoolVal(node.value)
        if isinstance(node, ast.IfExp):
            return z3.If(self.boolean(node.test), self.boolean(node.body), self.boolean(node.orelse))
        # A bare integer used as a condition: Python's truthiness.
        return self.integer(node) != 0

    def integer(self, node: ast.AST) -> z3.ArithRef:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return z3.IntVal(int(node.value))
            if isinstance(node.value, int):
                return z3.IntVal(node.value)
            raise Untranslatable(f"{type(node.value).__name__} constant {node.value!r}")
        if is_leaf(node):
            return self.leaf(ast.unparse(node))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return -self.integer(node.operand)
            if isinstance(node.op, ast.UAdd):
                return self.integer(node.operand)
            if isinstance(node.op, ast.Not):
                return z3.If(self.boolean(node.operand), z3.IntVal(0), z3.IntVal(1))
        if isinstance(node, ast.BinOp):
            a, b = self.integer(node.left), self.integer(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.FloorDiv):
                return self.ops.floordiv(a, b)
            if isinstance(node.op, ast.Mod):
                return self.ops.mod(a, b)
            if isinstance(node.op, ast.Pow):
                return self.ops.pow(a, b)
            raise Untranslatable(f"operator {type(node.op).__name__} (true division gives a float)")
        if isinstance(node, ast.IfExp):
            return z3.If(self.boolean(node.test), self.integer(node.body), self.integer(node.orelse))
        if isinstance(node, ast.Compare | ast.BoolOp):
            return z3.If(self.boolean(node), z3.IntVal(1), z3.IntVal(0))
        if isinstance(node, ast.Call) and not node.keywords:
            name = ast.unparse(node.func)
            args = [self.integer(arg) for arg in node.args]
            if name in ("max", "min") and args:
                result = args[0]
                for other in args[1:]:
                    result = (
                        z3.If(other > result, other, result) if name == "max" else z3.If(other < result, other, result)
                    )
                return result
            if name == "abs" and len(args) == 1:
                return z3.If(args[0] < 0, -args[0], args[0])
            if name in _INT_FUNCTIONS and len(args) == 1:
                return args[0]  # of an integer: the identity (floats were refused above)
            raise Untranslatable(f"call of {name}()")
        raise Untranslatable(f"Python construct {type(node).__name__}: {ast.unparse(node)}")


def _compare(op: ast.cmpop, a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    if isinstance(op, ast.Eq):
        return a == b
    if isinstance(op, ast.NotEq):
        return a != b
    if isinstance(op, ast.Lt):
        return a < b
    if isinstance(op, ast.LtE):
        return a <= b
    if isinstance(op, ast.Gt):
        return a > b
    if isinstance(op, ast.GtE):
        return a >= b
    raise Untranslatable(f"comparison {type(op).__name__}")


def static_sizes(code: str) -> list[tuple[str, int]] | None:
    """For ``check_tensor(SRC, ..., size=[None, 4], stride=[None, 1])``: ``[("SRC.size()[1]", 4), ...]``.

    Returns None when ``code`` is not a ``check_tensor`` guard. Also pins ``ndim``
    implicitly: the list has one entry per dimension.
    """
    try:
        node = parse(code)
    except Untranslatable:
        return None
    if not (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check_tensor" and node.args
    ):
        return None
    base = ast.unparse(node.args[0])
    pinned: list[tuple[str, int]] = []
    for keyword in node.keywords:
        if keyword.arg not in ("size", "stride") or not isinstance(keyword.value, ast.List | ast.Tuple):
            continue
        for index, element in enumerate(keyword.value.elts):
            if (
                isinstance(element, ast.Constant)
                and isinstance(element.value, int)
                and not isinstance(element.value, bool)
            ):
                pinned.append((f"{base}.{keyword.arg}()[{index}]", element.value))
    return pinned


def identity_source(code: str) -> str | None:
    """For ``___check_obj_id(SRC, 1234), type=<...>`` (dynamo's ID_MATCH): ``SRC``, an object pinned by identity."""
    code = code.strip()
    if not code.startswith("___check_obj_id("):
        return None
    depth = 0
    for index, char in enumerate(code):  # the call itself, without dynamo's ", type=<...>" note
        depth += char == "("
        depth -= char == ")"
        if depth == 0 and char == ")":
            code = code[: index + 1]
            break
    try:
        node = parse(code)
    except Untranslatable:
        return None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "___check_obj_id"
        and node.args
    ):
        return ast.unparse(node.args[0])
    return None
