"""What a trace assumed about its input sizes, gathered while it ran.

A compiled graph is only correct for inputs on which every size question asked while
tracing it has the same answer. Those answers are the trace's *assumptions*; the guards
dynamo installs must imply all of them, or the graph will be reused where it is wrong.
They come from four places:

- **decisions** (:class:`Recorder`, fed by :mod:`pt2kit.seams.shape_env`): every answer of
  ``evaluate_expr`` (usually with a guard), of ``_maybe_evaluate_static`` (never with a
  guard: ``statically_known_true``, Inductor's ``sizevars``...) and every
  ``torch._check``-style runtime assert. Left out on purpose: answers computed *from*
  the example sizes (``compute_hint``), size-oblivious answers that added no guard (they
  are designed to hold for sizes >= 2 only), ``guard_or_true``/``guard_or_false``
  fallbacks (the program promised to be right either way), and answers given under
  ``ShapeEnv.suppress_guards()`` (torch declared them irrelevant to the graph, e.g. the
  fake-tensor cache re-checking storage bounds);
- **bindings**: each input's sizes, strides and storage offset *are* the expressions the
  trace gave them -- a constant after 0/1 specialization, another input's symbol after
  duck sizing;
- **ranges**: each backed symbol stays within the range the trace knew (``>= 2`` after
  0/1 specialization);
- **facts** that hold without guards and so become hypotheses, not obligations: ranges of
  data-dependent sizes and the deferred runtime asserts the graph checks itself.

:func:`gather` turns one ShapeEnv and its decisions into :class:`Assumption` objects, each
tagged with the finding kind it would produce if the guards do not imply it.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from pt2kit.seams import convert_frame as frame_seam
from pt2kit.seams import shape_env as shape_env_seam


@dataclasses.dataclass(frozen=True)
class Assumption:
    """One thing the trace relied on, as a sympy boolean over the trace's symbols."""

    kind: str  # the finding kind when it is not implied: "unsound-guard" or "static-decision"
    origin: str  # evaluate_expr, static, runtime_assert, specialization, duck-sizing, input, range
    expr: Any  # sympy boolean
    hypotheses: tuple[Any, ...] = ()  # extra facts the question was asked under
    ranges: tuple[tuple[Any, Any, Any], ...] = ()
    binding: tuple[str, Any] | None = None  # for bindings: (source name, expression it equals)
    where: str | None = None  # the user's line that led to it, when known

    @property
    def text(self) -> str:
        if self.binding is not None:
            return f"Eq({self.binding[0]}, {self.binding[1]})"
        return str(self.expr)


class Recorder:
    """A decision listener that keeps, per ShapeEnv, the decisions of the frame compile in progress.

    Decisions taken outside a dynamo frame compile on this thread (a user's own fake
    tracing, a lazily compiled backward) are ignored. Duplicates (torch asks the same
    question many times) are kept once.
    """

    def __init__(self, *, any_trace: bool = False, locate: bool = True) -> None:
        self._lock = threading.Lock()
        self._decisions: dict[int, tuple[Any, dict[tuple[Any, ...], shape_env_seam.Decision]]] = {}
        self._any_trace = any_trace
        self._locate = locate
        self.where: dict[tuple[Any, ...], str | None] = {}

    def decided(self, decision: shape_env_seam.Decision) -> None:
        if not self._any_trace and frame_seam.current() is None:
            return
        key = (decision.expr, decision.value, decision.hypotheses, decision.ranges)
        with self._lock:
            entry = self._decisions.get(id(decision.shape_env))
            if entry is None or entry[0] is not decision.shape_env:
                entry = self._decisions[id(decision.shape_env)] = (decision.shape_env, {})
            known = entry[1].get(key)
            if known is None:
                entry[1][key] = decision
                if self._locate and key not in self.where:
                    self.where[key] = shape_env_seam.user_location(decision.shape_env)
            elif decision.guarded and not known.guarded:
                entry[1][key] = decision  # the guarded evaluation of a question first answered statically

    def take(self, shape_env: Any) -> list[shape_env_seam.Decision]:
        """The decisions of ``shape_env``, forgetting them."""
        with self._lock:
            entry = self._decisions.pop(id(shape_env), None)
        if entry is None or entry[0] is not shape_env:
            return []
        return list(entry[1].values())

    def forget(self) -> None:
        with self._lock:
            self._decisions.clear()
            self.where.clear()

    def location(self, decision: shape_env_seam.Decision) -> str | None:
        return self.where.get((decision.expr, decision.value, decision.hypotheses, decision.ranges))


def gather(
    shape_env: Any, decisions: list[shape_env_seam.Decision], where: Any = lambda decision: None
) -> tuple[list[Assumption], list[Any]]:
    """The trace's assumptions, and the facts (sympy booleans) that hold without guards.

    ``where(decision)`` gives the user's line of a decision, if known.
    """
    import sympy

    assumptions: list[Assumption] = []
    seen: set[Any] = set()

    def add(assumption: Assumption) -> None:
        key = (assumption.expr, assumption.hypotheses, assumption.ranges, assumption.binding)
        if key not in seen:
            seen.add(key)
            assumptions.append(assumption)

    # bindings: each input quantity is what the trace made it
    sources = shape_env_seam.symbol_sources(shape_env)
    for name, fake in shape_env_seam.tracked_inputs(shape_env):
        for quantity, value in _quantities(name, fake):
            expr = shape_env_seam.node_expr(value)
            if isinstance(expr, sympy.Symbol) and sources.get(expr, [None])[0] == quantity:
                continue  # the symbol's own source: nothing assumed
            if isinstance(expr, bool) or not isinstance(expr, int | sympy.Expr):
                continue
            if isinstance(expr, int) or expr.is_number:
                if quantity.endswith(".storage_offset()"):
                    continue  # dynamo never guards a specialized storage offset: graphs do not depend on it
                origin = "specialization"
            elif isinstance(expr, sympy.Symbol) and quantity in sources.get(expr, []):
                origin = "duck-sizing"
            else:
                origin = "input"
            add(Assumption("unsound-guard", origin, None, binding=(quantity, expr)))

    # ranges of backed symbols
    for symbol, (lower, upper) in shape_env_seam.value_ranges(shape_env).items():
        if shape_env_seam.symbol_kind(symbol) != "int" or symbol not in sources:
            continue
        parts = []
        if lower is not None:
            parts.append(sympy.Le(lower, symbol, evaluate=False))
        if upper is not None:
            parts.append(sympy.Le(symbol, upper, evaluate=False))
        for part in parts:
            add(Assumption("unsound-guard", "range", part))

    # decisions
    for decision in decisions:
        if decision.fallback or decision.suppressed or (decision.size_oblivious and not decision.guarded):
            continue
        expr, value = decision.expr, decision.value
        if not getattr(expr, "free_symbols", None):
            continue
        formula = _as_condition(expr, value)
        if formula is None or formula is sympy.true:
            continue
        kind = "unsound-guard" if decision.guarded else "static-decision"
        if decision.deferred:
            continue  # became a runtime assert: the graph checks it itself (a fact, below)
        add(Assumption(kind, decision.via, formula, decision.hypotheses, decision.ranges, where=where(decision)))

    facts: list[Any] = list(shape_env_seam.runtime_asserts(shape_env))
    for symbol, (lower, upper) in shape_env_seam.value_ranges(shape_env).items():
        if shape_env_seam.symbol_kind(symbol) == "unbacked":
            if lower is not None:
                facts.append(sympy.Le(lower, symbol))
            if upper is not None:
                facts.append(sympy.Le(symbol, upper))
    return assumptions, facts


def _as_condition(expr: Any, value: Any) -> Any:
    import sympy

    if value is sympy.true or value is True:
        return expr if expr.is_Boolean or expr.is_Relational else sympy.Ne(expr, 0)
    if value is sympy.false or value is False:
        return sympy.Not(expr) if expr.is_Boolean or expr.is_Relational else sympy.Eq(expr, 0)
    if getattr(value, "is_number", False) or isinstance(value, int | float):
        return sympy.Eq(expr, value, evaluate=False)
    return None


def _quantities(name: str, fake: Any) -> list[tuple[str, Any]]:
    """The integer quantities of one traced input, by source name."""
    import torch

    if isinstance(fake, torch.Tensor):
        out: list[tuple[str, Any]] = []
        out += [(f"{name}.size()[{i}]", size) for i, size in enumerate(fake.size())]
        try:
            out += [(f"{name}.stride()[{i}]", stride) for i, stride in enumerate(fake.stride())]
            out.append((f"{name}.storage_offset()", fake.storage_offset()))
        except RuntimeError:  # sparse and other layouts have no strides
            pass
        return out
    if isinstance(fake, torch.SymInt | int) and not isinstance(fake, bool):
        return [(name, fake)]
    if isinstance(fake, torch.SymFloat):
        return [(name, fake)]  # a float the trace kept symbolic: its guards have no exact Z3 model
    return []
