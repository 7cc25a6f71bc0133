"""The valid input-size space of a function: equivalence classes of sizes, found with Z3.

The "State of symbolic shapes" post (2023) sketched the idea: trace with symbolic sizes,
take the trace's guards as one cell, ask Z3 for a point outside every cell seen so far,
repeat. Done naively it is wrong in known ways, and :func:`sizes` fixes each:

- **0/1 specialization and duck sizing** make sizes 0 and 1 constants and equal sizes one
  symbol; a cell made of the guards alone forgets that and covers sizes the trace never
  spoke for. Here a cell is everything the trace depended on (:mod:`validation.tracing`):
  decisions, bindings (``x.shape[0] == 1``, ``y.shape[0] == x.shape[1]``) and ranges. With
  ``specialize=False`` the traces use neither policy, which gives the fewest classes (a
  size may then be 0, and whether an input is empty is a question the trace asks);
- **an error raised outside any guard** (``x.shape[0] // y.shape[0]`` at ``y.shape[0] == 0``
  fails inside sympy, computing ``x // 0``) is not the program's verdict on a cell: such a
  trace is not trusted, and its point becomes a class of its own whose outcome comes from
  running the program for real;
- **fake tensors are not eager**: a meta kernel can miss one of eager's checks (``max()``
  of an empty tensor) or word an error its own way. Each traced point and each class's
  minimal point is also run for real: an exception type that differs is eager's, an
  outcome that differs makes that point a class of its own (decided by the run);
- **a second point** of every cell is traced too; if its outcome or its cell differs, the
  first cell missed a decision, and it is split (the second trace's cell is cut out of it
  and both are checked again) instead of being reported as one wrong class;
- **specialization** (``range(n)``, ``int(n)``) pins a size to the value it was traced at,
  one class per value; the sources it happens on are reported (``specializes_on``), and a
  box too large for ``max_classes`` ends *incomplete* rather than pretending;
- **value-dependent ops** (``nonzero``, ``.item()``) decide on data, not sizes: a class whose
  trace did so says ``value_dependent`` and its outcome comes from one real run.

Each class has its outcome (``ok`` or the exception type), a readable condition, and a
*minimal representative* (Z3 ``Optimize``: least total size, then each dimension in order).
``merge`` joins classes with the same outcome; ``brute_force`` runs every point of a small
box for real and counts disagreements -- a report with any is *incomplete*, whatever the
search concluded; ``recompiles`` counts the cache entries the range needs under
``torch.compile(dynamic=True)`` against the recompile limit.

This module is the search: the loop above (``_Enumeration``) and the entry points
:func:`sizes`, :func:`representatives` and :func:`recompile_forecast`. The answer's shape
(:class:`SizeClass`, :class:`SizeReport`, merging, which class owns a point) lives in
:mod:`validation.size_classes`; the checks of an answer against real runs and dynamo's
cache in :mod:`validation.size_checks`. Their public names are importable from here too.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import z3

from pt2kit import seams
from pt2kit.errors import UsageError

from . import readable, size_checks, size_classes
from .size_checks import BRUTE_FORCE_LIMIT, forecast_recompiles, recompile_count
from .size_classes import SizeClass, SizeReport, parse_box
from .tracing import Dims, Shapes, Trace, eager_outcome, trace
from .z3ops import smallest

DEFAULT_MAX_CLASSES = 64
#: A traced point, or a class's minimal point, is also run eagerly when its inputs hold at most this many elements.
EAGER_CHECK_ELEMENTS = 1 << 20
_SEAMS = ("shape_env", "fake_tensor", "sympy_z3", "convert_frame")


def sizes(
    fn: Callable[..., Any],
    ranks: Sequence[int],
    box: Any = (0, 8),
    *,
    specialize: bool = True,
    merge: bool = False,
    brute_force: bool = False,
    max_classes: int = DEFAULT_MAX_CLASSES,
    recompiles: bool = False,
    dtype: Any = None,
    names: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SizeReport:
    """Split the sizes of ``fn``'s inputs (one tensor per rank) inside ``box`` into classes.

    See the module docstring. ``box`` bounds every dimension (inclusive). ``progress`` is
    called with (classes, traces) as the enumeration goes.
    """
    seams.require("size enumeration", *_SEAMS)
    from pt2kit.seams.convert_frame import original_callable

    fn = original_callable(fn)  # a torch.compile'd function is enumerated as the function it wraps
    ranks = tuple(int(rank) for rank in ranks)
    if any(rank < 0 for rank in ranks):
        raise UsageError("ranks must be non-negative")
    lo, hi = parse_box(box)
    dims = Dims(tuple(names or _parameter_names(fn, len(ranks))), ranks)
    start = time.perf_counter()
    enumeration = _Enumeration(
        fn, dims, (lo, hi), specialize=specialize, dtype=dtype, max_classes=max_classes, progress=progress
    )
    enumeration.run()
    classes = enumeration.classes
    classes.sort(key=lambda c: (sum(map(sum, c.representative)), c.representative))
    report = SizeReport(
        target=getattr(fn, "__qualname__", type(fn).__qualname__),
        ranks=ranks,
        box=(lo, hi),
        specialize=specialize,
        status="complete" if enumeration.complete else "incomplete",
        classes=classes,
        specializes_on=sorted(enumeration.specialized),
        traces=enumeration.traces,
        seconds=0.0,
        names=dims.names,
        reason=enumeration.reason,
    )
    if recompiles:
        report.recompiles = recompile_count(report)
    if merge:
        report.classes = size_classes.merge(report.classes)  # qualified: the parameter `merge` shadows the name
        report.merged = True
    if brute_force:
        report.brute_force = checked = size_checks.brute_force(fn, report, dims, (lo, hi), dtype=dtype)
        found = []
        if checked["disagreements"]:
            found.append(f"{checked['disagreements']} points whose class predicts another outcome than a real run")
        if checked["uncovered"]:
            found.append(f"{checked['uncovered']} points in no class")
        if found:  # the answer's own test failed: whatever the search concluded, it is not complete
            report.status = "incomplete"
            report.reason = "; ".join(
                part for part in (report.reason, "brute force found " + " and ".join(found)) if part
            )
    report.seconds = time.perf_counter() - start
    return report


# The name docs/validation.md also gives this entry point.
enumerate_sizes = sizes


def representatives(
    fn: Callable[..., Any], ranks: Sequence[int], box: Any = (0, 8), *, outcome: str | None = "ok", **options: Any
) -> list[Shapes]:
    """The minimal sizes of each class of ``fn`` (those with ``outcome``; every class for None).

    One representative per code path: sample inputs for tests and for opcheck, or where a
    shape-shrinking minifier can start.
    """
    return sizes(fn, ranks, box, **options).representatives(outcome)


def recompile_forecast(fn: Callable[..., Any], ranks: Sequence[int], box: Any, **options: Any) -> dict[str, Any]:
    """Which sizes of ``box`` will still make ``fn`` recompile, given the cache entries it has now.

    Enumerates ``fn``'s size classes (:func:`sizes`), reads the shape guards of every cache
    entry dynamo installed on ``fn``'s code (:mod:`pt2kit.seams.guard_code`), and asks Z3,
    for each class that compiles, whether some of its sizes pass no entry's guards. Those
    sizes will cost a compile (a recompile, or a refusal at the recompile limit) when the
    program reaches them; each comes with its smallest example. Guards pt2kit cannot read
    as integer conditions count as rejecting, so the forecast can only err towards more
    recompiles. ``fn``'s parameters must be named as in the compiled frame (they are: the
    same function).
    """
    return forecast_recompiles(sizes(fn, ranks, box, **options), fn)


class _Enumeration:
    """One enumeration under way: the classes found so far, the cells they cover, the trace budget.

    ``run`` loops until Z3 finds no point of the box outside every cell (``complete``),
    or ``max_classes``, the trace budget or an undecidable query stops it (``reason``).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        dims: Dims,
        box: tuple[int, int],
        *,
        specialize: bool,
        dtype: Any,
        max_classes: int,
        progress: Any,
    ) -> None:
        self.fn, self.dims, self.specialize, self.dtype = fn, dims, specialize, dtype
        self.max_classes = max_classes
        self.progress = progress
        lo, hi = box
        self.box = z3.And(*[z3.And(v >= lo, v <= hi) for v in dims.vars()]) if dims.all else z3.BoolVal(True)
        self.classes: list[SizeClass] = []
        self.covered: list[z3.BoolRef] = []  # the cells of the classes so far
        self.specialized: set[str] = set()
        self.traces = 0
        self.complete = False
        self.reason = ""
        self.budget = 4 * max_classes + 8

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._run()
        except _Undecided as why:
            self._stop(str(why))

    def _run(self) -> None:
        queue: list[Trace] = []
        while True:
            if len(self.classes) >= self.max_classes:
                self._stop(f"stopped at --max-classes {self.max_classes}")
                return
            if self.traces >= self.budget:
                self._stop(f"stopped after {self.traces} traces")
                return
            candidate = None
            while queue and candidate is None:
                waiting = queue.pop(0)
                if self._uncovered(self.dims.point(waiting.point)):
                    candidate = waiting
            if candidate is None:
                point = self._next_point()
                if point is None:
                    self.complete = True
                    return
                candidate = self._trace(point)
            self._settle(candidate, queue)
            if self.progress:
                self.progress(len(self.classes), self.traces)

    def _settle(self, first: Trace, queue: list[Trace]) -> None:
        """Accept ``first``'s cell as a class, after a second point agreed -- or split it."""
        if not first.trusted:
            self._accept_point(first)
            return
        region = z3.And(first.cell, self.box, self._outside())
        if not self._satisfiable(z3.And(region, self.dims.point(first.point))):
            self._accept_point(first)  # the cell does not even hold its own point
            return
        second_point = self._second_point(region, first.point)
        if second_point is None:
            self._accept(first, region, queue, traces=1)
            return
        second = self._trace(second_point)
        if self._agree(first, second, region):
            self._accept(first, region, queue, traces=2)
            return
        # The cell missed something that tells these two points apart: cut the second
        # trace's cell out of the first one, and check both again.
        if second.trusted and not self._satisfiable(z3.And(second.cell, self.dims.point(first.point))):
            first.cell = z3.And(first.cell, z3.Not(second.cell))
        else:
            first.cell = z3.And(first.cell, z3.Not(self.dims.point(second.point)))
        queue.insert(0, first)
        queue.append(second)

    def _agree(self, first: Trace, second: Trace, region: z3.BoolRef) -> bool:
        if not second.trusted or first.outcome != second.outcome or first.value_dependent != second.value_dependent:
            return False
        other = z3.And(second.cell, self.box, self._outside())
        return not self._satisfiable(z3.And(region, z3.Not(second.cell))) and not self._satisfiable(
            z3.And(other, z3.Not(first.cell))
        )

    # -- classes -------------------------------------------------------------------------

    def _accept(self, first: Trace, region: z3.BoolRef, queue: list[Trace], *, traces: int) -> None:
        """Accept ``first``'s cell as a class -- unless a real run at its minimal point disagrees.

        The minimal point is where edge cases live (empty dimensions) and the one a user
        sees: when running it gives another outcome than the class claims, that point is
        a class of its own (decided by the run) and ``first`` goes back to the queue without it.
        """
        representative = _representative(region, self.dims, self.box)
        outcome, message = first.outcome, first.message
        if first.value_dependent:
            outcome, message = eager_outcome(self.fn, first.point, dtype=self.dtype)
        elif representative != first.point and _elements(representative) <= EAGER_CHECK_ELEMENTS:
            real, real_message = eager_outcome(self.fn, representative, dtype=self.dtype)
            if real != outcome:
                self._accept_run(representative, real, real_message, value_dependent=False)
                first.cell = z3.And(first.cell, z3.Not(self.dims.point(representative)))
                queue.insert(0, first)
                return
        parts = list(first.parts)
        if self.covered and self._satisfiable(z3.And(first.cell, self.box, z3.Or(*self.covered))):
            parts.append("not in an earlier class")
        self.classes.append(
            SizeClass(
                outcome=outcome,
                condition=readable.conjunction(parts),
                representative=representative,
                value_dependent=first.value_dependent,
                region=region,
                cell=first.cell,
                order=len(self.classes),
                message=message,
                traces=traces,
            )
        )
        self.covered.append(first.cell)
        self.specialized.update(first.specialized)

    def _accept_point(self, first: Trace) -> None:
        """An untrusted trace speaks for its own point only, and a real run gives the outcome."""
        outcome, message = eager_outcome(self.fn, first.point, dtype=self.dtype)
        self._accept_run(
            first.point,
            outcome,
            message if outcome != "ok" else "; ".join(first.reasons),
            value_dependent=first.value_dependent,
        )

    def _accept_run(self, point: Shapes, outcome: str, message: str, *, value_dependent: bool) -> None:
        """One point as a class of its own, its outcome that of a real run."""
        region = self.dims.point(point)
        self.classes.append(
            SizeClass(
                outcome=outcome,
                condition=self.dims.describe_point(point),
                representative=point,
                value_dependent=value_dependent,
                region=region,
                cell=region,
                order=len(self.classes),
                decided_by="run",
                message=message,
            )
        )
        self.covered.append(region)

    # -- Z3 --------------------------------------------------------------------------------

    def _outside(self) -> z3.BoolRef:
        return z3.Not(z3.Or(*self.covered)) if self.covered else z3.BoolVal(True)

    def _uncovered(self, formula: z3.BoolRef) -> bool:
        return self._satisfiable(z3.And(formula, self.box, self._outside()))

    def _satisfiable(self, formula: z3.BoolRef) -> bool:
        solver = z3.Solver()
        solver.set("timeout", 10_000)
        solver.add(formula)
        result = solver.check()
        if result == z3.unknown:
            raise _Undecided(f"z3 could not decide a cell ({solver.reason_unknown()})")
        return result == z3.sat

    def _model_point(self, formula: z3.BoolRef) -> Shapes | None:
        solver = z3.Solver()
        solver.set("timeout", 10_000)
        solver.add(formula)
        if solver.check() != z3.sat:
            return None
        model = solver.model()
        values = {}
        for (i, j), var in zip(self.dims.all, self.dims.vars()):
            value = model.eval(var, model_completion=True)
            values[self.dims.source(i, j)] = value.as_long()
        return self.dims.shapes_of(values)

    def _next_point(self) -> Shapes | None:
        return self._model_point(z3.And(self.box, self._outside()))

    def _second_point(self, region: z3.BoolRef, point: Shapes) -> Shapes | None:
        """Another point of the cell, differing from ``point`` in every dimension where it can."""
        differ = [var != point[i][j] for (i, j), var in zip(self.dims.all, self.dims.vars())]
        if not differ:
            return None
        return self._model_point(z3.And(region, *differ)) or self._model_point(
            z3.And(region, z3.Not(self.dims.point(point)))
        )

    def _trace(self, point: Shapes) -> Trace:
        self.traces += 1
        traced = trace(self.fn, point, self.dims, specialize=self.specialize, dtype=self.dtype)
        if traced.trusted and not traced.value_dependent and _elements(point) <= EAGER_CHECK_ELEMENTS:
            real, message = eager_outcome(self.fn, point, dtype=self.dtype)
            if real != traced.outcome and "ok" not in (real, traced.outcome):
                # Both raise, on the same path: a meta kernel words the error its own way
                # (ValueError where eager raises RuntimeError). The outcome is eager's.
                traced.outcome, traced.message = real, message
            elif real != traced.outcome:
                # A meta kernel misses a check eager makes (max() of an empty tensor), or makes
                # one eager does not: the trace does not speak for the program even at its own point.
                traced.trusted = False
                traced.reasons.append(f"fake tensors and eager disagree here (the trace gives {traced.outcome})")
        return traced

    def _stop(self, reason: str) -> None:
        self.complete = False
        self.reason = reason + (f"; specializes on {', '.join(sorted(self.specialized))}" if self.specialized else "")


class _Undecided(Exception):
    pass


def _elements(point: Shapes) -> int:
    return sum(math.prod(shape) for shape in point)


def _representative(region: z3.BoolRef, dims: Dims, box: z3.BoolRef) -> Shapes:
    variables = dims.vars()
    if not variables:
        return tuple(() for _ in dims.ranks)
    values = smallest([region, box], variables, timeout_ms=10_000)
    if values is None or any(v is None for v in values.values()):
        raise _Undecided("z3 found no representative for a class")
    return dims.shapes_of({k: v for k, v in values.items() if v is not None})


def _parameter_names(fn: Callable[..., Any], count: int) -> list[str]:
    try:
        parameters = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        parameters = []
    names = parameters[:count]
    names += [f"arg{i}" for i in range(len(names), count)]
    return names


__all__ = [
    "sizes",
    "enumerate_sizes",
    "representatives",
    "recompile_forecast",
    "SizeReport",
    "SizeClass",
    "parse_box",
    "DEFAULT_MAX_CLASSES",
    "BRUTE_FORCE_LIMIT",
]
