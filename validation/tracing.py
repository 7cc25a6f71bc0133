"""One symbolic trace of a function at one point of the size space, and the cell of sizes it speaks for.

:func:`trace` runs ``fn`` once on fake tensors of the given sizes, every dimension a
symbol (:mod:`pt2kit.seams.fake_tensor`), and records every shape decision it takes
(:mod:`pt2kit.seams.shape_env`). Everything the run depended on is then one Z3 formula
over the input dimensions, the trace's *cell*:

- the decisions it took -- guards, static decisions, asserted facts -- with the values
  they had at this point;
- the *bindings* of the inputs: a dimension specialized to 0 or 1 is that constant, a
  dimension duck-sized to another equals it, storage offsets are 0 and strides are the
  contiguous ones (the inputs are made with ``torch.empty``);
- the ranges the trace knew for its symbols (``>= 2`` after 0/1 specialization);
- the definedness of what it computed without deciding on it: every divisor of a ``//``
  or ``%`` in the sizes of what ``fn`` returned is nonzero (``x.shape[0] // y.shape[0]``
  raises at ``y.shape[0] == 0`` although no guard asked).

Without 0/1 specialization a size symbol may be 0 (the seam makes it a sympy integer
``>= 0``, not a *positive* one, which would let sympy fold ``numel() == 0`` to False
with no decision on record), and the inputs are made with their guards suppressed
(making a fake tensor asks whether each dimension is empty for its own storage; the
program's questions are the ones that count).

Every point of the cell takes the same decisions, so -- as far as sizes go -- the same path
and the same outcome. Three things break that promise, and the trace says so:

- a decision on a *data-dependent* size (``nonzero``, ``.item()``): the path depends on
  values; the cell stops at that decision and the trace is ``value_dependent``;
- an exception raised by the symbolic machinery itself (sympy computing ``x % 0`` of an
  example value) or an op fake tensors cannot run: not the program's outcome, so the
  trace is not ``trusted`` -- the caller falls back to running the point for real;
- a decision Z3 cannot express (floats): the cell would be too large, so it is not
  trusted either.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import z3

from pt2kit.seams import fake_tensor
from pt2kit.seams import shape_env as shape_env_seam

from . import readable
from .assumptions import Recorder, gather
from .translate import Vocabulary
from .z3ops import Ops, Untranslatable

Shapes = tuple[tuple[int, ...], ...]


@dataclasses.dataclass(frozen=True)
class Dims:
    """The Z3 variables of a size space: one per dimension of each input, named by source."""

    names: tuple[str, ...]
    ranks: tuple[int, ...]

    def source(self, i: int, j: int) -> str:
        return f"L['{self.names[i]}'].size()[{j}]"

    def label(self, i: int, j: int) -> str:
        return f"{self.names[i]}.shape[{j}]"

    @property
    def all(self) -> list[tuple[int, int]]:
        return [(i, j) for i, rank in enumerate(self.ranks) for j in range(rank)]

    def var(self, i: int, j: int) -> z3.ArithRef:
        return z3.Int(self.source(i, j))

    def vars(self) -> list[z3.ArithRef]:
        return [self.var(i, j) for i, j in self.all]

    def point(self, shapes: Shapes) -> z3.BoolRef:
        """The cell of exactly these sizes."""
        return z3.And(*[self.var(i, j) == shapes[i][j] for i, j in self.all]) if self.all else z3.BoolVal(True)

    def shapes_of(self, values: dict[str, int]) -> Shapes:
        return tuple(tuple(values[self.source(i, j)] for j in range(rank)) for i, rank in enumerate(self.ranks))

    def describe_point(self, shapes: Shapes) -> str:
        return readable.conjunction(f"{self.label(i, j)} == {shapes[i][j]}" for i, j in self.all)


@dataclasses.dataclass
class Trace:
    """What one symbolic run at ``point`` found."""

    point: Shapes
    outcome: str  # "ok", the exception type, or "value-dependent"
    message: str
    kind: str  # ok | program | data-dependent | unsupported | symbolic
    trusted: bool
    cell: z3.BoolRef
    parts: list[str]  # the cell in readable pieces
    value_dependent: bool
    specialized: list[str]  # sources the trace pinned to a constant by a decision (range(n), int(n))
    reasons: list[str]  # why it is not trusted


def trace(fn: Callable[..., Any], shapes: Shapes, dims: Dims, *, specialize: bool, dtype: Any = None) -> Trace:
    recorder = Recorder(any_trace=True, locate=False)
    outcome, message, kind = "ok", "", "ok"
    # Made while observing, so whatever making the inputs decides is on record; without
    # 0/1 specialization the seam makes them with guards suppressed (a suppressed answer
    # is no assumption: gather leaves it out).
    with shape_env_seam.observing(recorder), fake_tensor.quiet():
        inputs = fake_tensor.symbolic_inputs(shapes, dims.names, specialize=specialize, dtype=dtype)
        result: Any = None
        with inputs.mode:
            try:
                result = fn(*inputs.tensors)
            except Exception as error:  # noqa: BLE001 - the outcome
                kind = fake_tensor.classify(error)
                if kind == "program" and fake_tensor.raised_in_symbolic_reasoning(error):
                    kind = "symbolic"
                outcome = "value-dependent" if kind == "data-dependent" else type(error).__name__
                message = str(error).splitlines()[0][:300] if str(error) else ""
    shape_env = inputs.shape_env
    decisions = recorder.take(shape_env)
    vocab = Vocabulary(shape_env)
    names = _labeller(vocab, dims)
    constraints: list[z3.BoolRef] = []
    pieces: list[tuple[str, z3.BoolRef]] = []  # the cell in readable pieces
    reasons: list[str] = []
    value_dependent = kind == "data-dependent"

    # bindings: what each input dimension is, in the trace's symbols. Strides and storage
    # offsets are left to contiguous_layout below.
    for i, tensor in enumerate(inputs.tensors):
        for j in range(dims.ranks[i]):
            expr = shape_env_seam.node_expr(tensor.size(j))
            if _is_own_symbol(expr, vocab, dims.source(i, j)):
                continue
            try:
                ops = Ops()
                constraints.append(ops.guarded(dims.var(i, j) == vocab.term(expr, ops)))
                pieces.append((f"{dims.label(i, j)} == {readable.expression(expr, names)}", constraints[-1]))
            except Untranslatable as why:
                reasons.append(str(why))

    # what the program computed and returned without deciding on it: ``x.shape[0] % y.shape[0]``
    # raises at y.shape[0] == 0 although no guard asked, so every divisor in the outputs'
    # sizes stays nonzero across the cell
    for divisor in _divisors(_output_exprs(result)):
        condition = sympy.Ne(divisor, 0)
        try:
            formula = vocab.formula(condition)
        except Untranslatable:
            continue  # a float divisor: a float output has no cell of its own to keep exact
        constraints.append(formula)
        pieces.append((readable.expression(condition, names), formula))

    # decisions and ranges
    assumptions, _facts = gather(shape_env, decisions)
    static: list[tuple[str, z3.BoolRef]] = []
    for assumption in assumptions:
        expr = assumption.expr
        if any(shape_env_seam.symbol_kind(s) == "unbacked" for s in expr.free_symbols):
            value_dependent = True
            continue
        try:
            formula = vocab.formula(expr)
        except Untranslatable as why:
            reasons.append(f"{readable.expression(expr, names)}: {why}")
            continue
        constraints.append(formula)
        (static if assumption.kind == "static-decision" else pieces).append((readable.expression(expr, names), formula))
    # a runtime assert on a data-dependent size: the graph checks values at run time
    for fact in shape_env_seam.runtime_asserts(shape_env):
        if any(shape_env_seam.symbol_kind(s) == "unbacked" for s in fact.free_symbols):
            value_dependent = True
    specialized = sorted(
        {source for symbol in shape_env_seam.specialized(shape_env) if (source := vocab.source_of(symbol)) is not None}
    )
    trusted = kind in ("ok", "program", "data-dependent") and not reasons
    if kind == "unsupported":
        reasons.append(f"fake tensors cannot run it: {message}")
    if kind == "symbolic":
        reasons.append(f"the symbolic trace itself failed ({outcome}: {message})")
    # Every stride and storage-offset term the formulas mention -- a symbol the input still
    # has, or one a decision has since replaced by a constant (``Eq(offset, 0)``) -- is what a
    # contiguous input at offset 0 has, so the cell speaks of input dimensions only.
    substitutions = contiguous_layout(vocab, dims)
    cell = z3.And(*constraints) if constraints else z3.BoolVal(True)
    if substitutions:
        cell = z3.substitute(cell, *substitutions)
    strangers = sorted(str(v) for v in _free_constants(cell) if v.get_id() not in {d.get_id() for d in dims.vars()})
    if strangers:
        reasons.append(f"the cell depends on {', '.join(strangers)}, which is not an input size")
        trusted = False
    parts = _essential_parts([*pieces, *static], substitutions, dims)
    return Trace(
        tuple(tuple(s) for s in shapes),
        outcome,
        message,
        kind,
        trusted,
        cell,
        parts,
        value_dependent,
        specialized,
        reasons,
    )


def _essential_parts(
    pieces: Sequence[tuple[str, z3.BoolRef]], substitutions: Sequence[tuple[z3.ArithRef, z3.ArithRef]], dims: Dims
) -> list[str]:
    """The readable pieces of a cell, leaving out each one the earlier ones (and sizes >= 0) imply."""
    solver = z3.Solver()
    solver.set("timeout", 500)
    solver.add(*[v >= 0 for v in dims.vars()])
    kept: list[str] = []
    for text, formula in pieces:
        if substitutions:
            formula = z3.substitute(formula, *substitutions)
        solver.push()
        solver.add(z3.Not(formula))
        implied = solver.check() == z3.unsat
        solver.pop()
        if not implied and text not in kept:
            kept.append(text)
            solver.add(formula)
    return kept


def contiguous_layout(vocab: Vocabulary, dims: Dims) -> list[tuple[z3.ArithRef, z3.ArithRef]]:
    """For each stride and storage-offset term of ``vocab``: its value for contiguous inputs at offset 0.

    ``torch.empty`` strides: each dimension's stride is the product of the later sizes,
    a size 0 counting as 1. Substitute them (``z3.substitute``) to make a formula over the
    input sizes alone.
    """
    substitutions: list[tuple[z3.ArithRef, z3.ArithRef]] = []
    for i, rank in enumerate(dims.ranks):
        name = f"L['{dims.names[i]}']"
        for j in range(rank):
            term = vocab.sources.get(f"{name}.stride()[{j}]")
            if term is not None:
                substitutions.append((term, contiguous_stride(dims, i, j)))
        offset = vocab.sources.get(f"{name}.storage_offset()")
        if offset is not None:
            substitutions.append((offset, z3.IntVal(0)))
    return substitutions


def contiguous_stride(dims: Dims, i: int, j: int) -> z3.ArithRef:
    """The stride ``torch.empty`` gives dimension ``j`` of input ``i``: the later sizes' product, 0 counting as 1."""
    stride: z3.ArithRef = z3.IntVal(1)
    for k in range(j + 1, dims.ranks[i]):
        var = dims.var(i, k)
        stride = stride * z3.If(var > 1, var, 1)
    return stride


_DIVISIONS = ("Mod", "PythonMod", "FloorDiv", "CleanDiv", "IntTrueDiv", "FloatTrueDiv")


def _output_exprs(result: Any) -> list[Any]:
    """The sympy expressions of the sizes, strides and offsets (and symbolic ints) ``fn`` returned."""
    import torch

    from pt2kit.seams import pytree

    exprs: list[Any] = []
    for leaf in pytree.tree_leaves(result):
        values: list[Any] = []
        if isinstance(leaf, torch.Tensor):
            values += list(leaf.shape)
            try:
                values += [*leaf.stride(), leaf.storage_offset()]
            except RuntimeError:  # sparse and other layouts have no strides
                pass
        elif isinstance(leaf, torch.SymInt | torch.SymBool):
            values.append(leaf)
        exprs += [expr for value in values if getattr(expr := shape_env_seam.node_expr(value), "free_symbols", None)]
    return exprs


def _divisors(exprs: Sequence[Any]) -> list[Any]:
    """Every symbolic divisor of a ``//`` or ``%`` in ``exprs``, once."""
    found: list[Any] = []
    for expr in exprs:
        for node in sympy.preorder_traversal(expr):
            if type(node).__name__ in _DIVISIONS and len(node.args) == 2:
                divisor = node.args[1]
                if divisor.free_symbols and divisor not in found:
                    found.append(divisor)
    return found


def _free_constants(formula: z3.ExprRef) -> list[z3.ExprRef]:
    """The uninterpreted constants (variables) of a Z3 formula."""
    found: dict[int, z3.ExprRef] = {}
    seen: set[int] = set()
    stack = [formula]
    while stack:
        e = stack.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            found[e.get_id()] = e
        elif z3.is_app(e):
            stack.extend(e.children())
    return list(found.values())


def _is_own_symbol(expr: Any, vocab: Vocabulary, source: str) -> bool:
    return getattr(expr, "is_Symbol", False) and vocab.source_of(expr) == source


def _labeller(vocab: Vocabulary, dims: Dims) -> Callable[[Any], str | None]:
    def label(symbol: Any) -> str | None:
        source = vocab.source_of(symbol)
        return readable.short(source) if source is not None else None

    return label


def eager_outcome(fn: Callable[..., Any], shapes: Shapes, *, seed: int = 0, dtype: Any = None) -> tuple[str, str]:
    """Run ``fn`` for real on random tensors of ``shapes``: ("ok", "") or (exception type, message)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for shape in shapes:
        if dtype is None or dtype.is_floating_point:
            tensors.append(torch.randn(shape, generator=generator, dtype=dtype or torch.float32))
        else:
            tensors.append(torch.randint(-3, 4, shape, generator=generator).to(dtype))
    try:
        fn(*tensors)
    except Exception as error:  # noqa: BLE001 - the outcome
        return type(error).__name__, str(error).splitlines()[0][:300] if str(error) else ""
    return "ok", ""
