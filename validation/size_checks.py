"""Holding a size enumeration's answer against what really happens: real runs, and dynamo's cache.

The classes of :mod:`validation.enumeration` come from symbolic traces; this module
measures them against the two things a user meets instead:

- **the program, run for real** -- :func:`brute_force` runs every point of a small box
  eagerly and counts the points whose class claims another outcome
  (``--check-brute-force``): the enumeration's own test, on any program;
- **torch.compile's cache** -- :func:`recompile_count` says how many cache entries the
  range needs (one per class that compiles) against dynamo's recompile limit
  (``--recompiles``); :func:`forecast_recompiles` reads the shape guards of the entries
  dynamo *already installed* on a function's code (:mod:`pt2kit.seams.guard_code`)
  and asks Z3, for every class that compiles, whether some of its sizes pass none of
  them: those sizes will still cost a compile. Guards pt2kit cannot read as integer
  conditions count as rejecting, so the forecast errs only towards more recompiles.

Nothing here searches for classes; every function takes a finished
:class:`~validation.size_classes.SizeReport`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import z3

from pt2kit.errors import UsageError

from . import pyexpr
from .size_classes import Membership, SizeReport, shapes_of_values
from .tracing import Dims, contiguous_layout, eager_outcome
from .translate import Vocabulary
from .z3ops import Untranslatable, smallest

#: ``--check-brute-force`` refuses boxes with more points than this.
BRUTE_FORCE_LIMIT = 50_000


def brute_force(
    fn: Callable[..., Any], report: SizeReport, dims: Dims, box: tuple[int, int], *, dtype: Any
) -> dict[str, Any]:
    """Run ``fn`` at every point of ``box`` and count where the report's classes disagree.

    ``disagreements`` are points whose owning class claims another outcome than the real
    run gives (up to five ``examples`` say where); ``uncovered`` points belong to no class
    (an incomplete enumeration); points of value-dependent classes are counted apart,
    since their outcome is the data's, not the sizes'.
    """
    lo, hi = box
    count = (hi - lo + 1) ** len(dims.all)
    if count > BRUTE_FORCE_LIMIT:
        raise UsageError(f"--check-brute-force would run {count} points; use a box with at most {BRUTE_FORCE_LIMIT}")
    membership = Membership(report)
    disagreements = uncovered = value_dependent = 0
    examples: list[str] = []
    for values in itertools.product(range(lo, hi + 1), repeat=len(dims.all)):
        shapes = shapes_of_values(dims, values)
        owner = membership.owner(values)
        outcome, _ = eager_outcome(fn, shapes, dtype=dtype)
        if owner is None:
            uncovered += 1
            continue
        if owner.value_dependent:
            value_dependent += 1
            continue
        if owner.outcome != outcome:
            disagreements += 1
            if len(examples) < 5:
                where = " ".join(str(list(s)) for s in shapes)
                examples.append(f"{where}: the class says {owner.outcome}, running it gives {outcome}")
    return {
        "points": count,
        "disagreements": disagreements,
        "uncovered": uncovered,
        "value_dependent": value_dependent,
        "examples": examples,
    }


def recompile_count(report: SizeReport) -> dict[str, Any]:
    """The cache entries the report's range needs under ``torch.compile(dynamic=True)``, against the limit.

    One entry per class that compiles (``ok``); dynamo refuses to compile past
    ``torch._dynamo.config.recompile_limit`` and falls back to eager.
    """
    import torch

    entries = [index for index, cls in enumerate(report.classes) if cls.outcome == "ok"]
    limit = int(torch._dynamo.config.recompile_limit)
    return {
        "entries": len(entries),
        "limit": limit,
        "fits": len(entries) <= limit,
        "classes": entries,
        "assumes": (
            "torch.compile(fn, dynamic=True): one cache entry per class that compiles"
            if report.specialize
            else "dynamic shapes without 0/1 specialization or duck sizing (not dynamo's default)"
        ),
        "complete": report.status == "complete",
    }


def forecast_recompiles(report: SizeReport, fn: Callable[..., Any]) -> dict[str, Any]:
    """Which classes of ``report`` (of ``fn``) hold sizes that no cache entry of ``fn`` accepts yet.

    Each such class comes with its smallest uncached example. ``fn``'s parameters must be
    named as in the compiled frame (they are when ``report`` enumerated ``fn`` itself).
    """
    from pt2kit.seams import convert_frame, guard_code

    dims = Dims(report.names, report.ranks)
    target = convert_frame.original_callable(fn)
    code = getattr(getattr(target, "forward", target), "__code__", None)
    entries = guard_code.cache_entries(code) if code is not None else []
    accepted: list[z3.BoolRef] = []
    for entry in entries:
        vocab = Vocabulary()
        parts: list[z3.BoolRef] = []
        readable_entry = True
        for part in guard_code.code_parts(entry.guard_manager):
            pinned = pyexpr.static_sizes(part.code)
            if pinned is not None:
                parts += [vocab.source(name) == value for name, value in pinned if ".size()" in name]
                continue
            try:
                leaves = pyexpr.leaves(part.code)
                if not part.epilogue and not (leaves and all(vocab.known_source(leaf) for leaf in leaves)):
                    continue
                parts.append(vocab.code(part.code))
            except Untranslatable:
                if part.epilogue:
                    readable_entry = False
        if readable_entry:
            # strides and offsets of the contiguous inputs a class stands for
            formula = z3.And(*parts) if parts else z3.BoolVal(True)
            layout = contiguous_layout(vocab, dims)
            accepted.append(z3.substitute(formula, *layout) if layout else formula)
    lo, hi = report.box
    in_box = z3.And(*[z3.And(v >= lo, v <= hi) for v in dims.vars()]) if dims.all else z3.BoolVal(True)
    forecast = []
    for cls in report.classes:
        if cls.outcome != "ok":
            continue
        leftover = z3.And(cls.region, in_box, z3.Not(z3.Or(*accepted))) if accepted else z3.And(cls.region, in_box)
        values = smallest([leftover], dims.vars(), timeout_ms=10_000) if dims.all else None
        if values is not None or (not dims.all and not accepted):
            example = dims.shapes_of({k: v for k, v in values.items() if v is not None}) if values else ()
            forecast.append({"condition": cls.condition, "example": [list(shape) for shape in example]})
    return {
        "status": report.status,
        "entries": len(entries),
        "classes": sum(1 for cls in report.classes if cls.outcome == "ok"),
        "will_recompile": forecast,
    }


__all__ = ["BRUTE_FORCE_LIMIT", "brute_force", "forecast_recompiles", "recompile_count"]
