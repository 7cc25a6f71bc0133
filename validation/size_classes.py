"""What a size enumeration answers: classes of sizes, the report, and which class owns a point.

:func:`validation.enumeration.sizes` splits a box of input sizes into *classes*: sizes
that take the same path through the program. This module is the answer's shape, with
no Z3 search and no tracing in it:

- a :class:`SizeClass` is one class: its outcome (``ok`` or the exception type), a
  readable condition, its minimal representative, whether the outcome depends on values
  and whether a symbolic trace or one real run decided it. It keeps two Z3 formulas:
  ``region``, the class within the box with every earlier class cut out, and ``cell``,
  the trace's own condition;
- classes *overlap as cells* and are disjoint as regions: the first class found whose
  cell holds a point owns it. :class:`Membership` answers "which class owns these
  sizes" with that rule, fast (each cell compiled to a Python predicate), for
  :meth:`SizeReport.class_of` and for brute-force checking;
- :func:`merge` joins classes with the same outcome, keeping the members so ownership
  stays exact;
- a :class:`SizeReport` is the whole answer: status (``complete`` or ``incomplete``
  with a reason), the classes, the sources the program specializes on, and what the
  optional checks (:mod:`validation.size_checks`) found; JSON via :meth:`~SizeReport.to_dict`;
- :func:`parse_box` reads the box the user gives (``(lo, hi)``, ``"LO:HI"`` or ``hi``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import z3

from pt2kit.errors import UsageError

from .tracing import Dims, Shapes
from .z3ops import compile_predicate, holds_at


@dataclasses.dataclass
class SizeClass:
    """Sizes that take the same path through the program, and what happens there."""

    outcome: str  # "ok" or the exception type
    condition: str
    representative: Shapes
    value_dependent: bool
    region: Any = dataclasses.field(repr=False)  # Z3: the class within the box, earlier classes cut out
    # Z3: the trace's own cell (first class holding a point owns it)
    cell: Any = dataclasses.field(repr=False, default=None)
    order: int = 0  # when the enumeration found it
    decided_by: str = "trace"  # "trace": a symbolic trace covers the class; "run": one real run at one point
    message: str = ""
    traces: int = 1
    members: list[SizeClass] = dataclasses.field(default_factory=list, repr=False)  # for merged classes

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "outcome": self.outcome,
            "condition": self.condition,
            "representative": [list(shape) for shape in self.representative],
            "value_dependent": self.value_dependent,
            "decided_by": self.decided_by,
        }
        if self.message:
            data["message"] = self.message
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SizeClass:
        """The class :meth:`to_dict` wrote, without what the JSON leaves out.

        ``region`` and ``cell`` (Z3) are None, ``members`` is empty, ``order`` and ``traces``
        are their defaults: its ``to_dict()`` is ``data``, but it cannot own points.
        """
        return cls(
            outcome=data["outcome"],
            condition=data["condition"],
            representative=tuple(tuple(shape) for shape in data["representative"]),
            value_dependent=data["value_dependent"],
            region=None,
            decided_by=data.get("decided_by", "trace"),
            message=data.get("message", ""),
        )


@dataclasses.dataclass
class SizeReport:
    """The classes of one function's input sizes inside one box, and how sure the answer is."""

    target: str
    ranks: tuple[int, ...]
    box: tuple[int, int]
    specialize: bool
    status: str  # complete | incomplete
    classes: list[SizeClass]
    specializes_on: list[str]
    traces: int
    seconds: float
    names: tuple[str, ...] = ()
    reason: str = ""
    merged: bool = False
    brute_force: dict[str, Any] | None = None
    recompiles: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "status": self.status,
            "target": self.target,
            "ranks": list(self.ranks),
            "box": list(self.box),
            "specialize": self.specialize,
            "merged": self.merged,
            "classes": [cls.to_dict() for cls in self.classes],
            "brute_force": self.brute_force,
            "specializes_on": self.specializes_on,
            "traces": self.traces,
            "seconds": round(self.seconds, 3),
        }
        if self.reason:
            data["reason"] = self.reason
        if self.recompiles is not None:
            data["recompiles"] = self.recompiles
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SizeReport:
        """The report :meth:`to_dict` wrote: its ``to_dict()`` is ``data``, ``seconds`` as written (rounded).

        ``names`` is not in the JSON (it reads back empty), and the classes have no Z3 cells
        (:meth:`SizeClass.from_dict`), so :meth:`class_of` needs the report :func:`~validation.sizes` returned.
        """
        return cls(
            target=data["target"],
            ranks=tuple(data["ranks"]),
            box=(data["box"][0], data["box"][1]),
            specialize=data["specialize"],
            status=data["status"],
            classes=[SizeClass.from_dict(item) for item in data["classes"]],
            specializes_on=list(data["specializes_on"]),
            traces=data["traces"],
            seconds=data["seconds"],
            reason=data.get("reason", ""),
            merged=data.get("merged", False),
            brute_force=data.get("brute_force"),
            recompiles=data.get("recompiles"),
        )

    @classmethod
    def from_json(cls, text: str) -> SizeReport:
        """:meth:`from_dict` of the JSON text :meth:`to_json` wrote."""
        return cls.from_dict(json.loads(text))

    def representatives(self, outcome: str | None = "ok") -> list[Shapes]:
        """The minimal sizes of each class (with this outcome; all classes for None)."""
        return [cls.representative for cls in self.classes if outcome is None or cls.outcome == outcome]

    def class_of(self, shapes: Sequence[Sequence[int]]) -> SizeClass | None:
        """The class holding these sizes, if the enumeration reached them."""
        if any(member.cell is None for cls in self.classes for member in cls.members or [cls]):
            raise ValueError("this report has no Z3 cells (it was read from JSON): class_of needs sizes()'s report")
        values = [shapes[i][j] for i, rank in enumerate(self.ranks) for j in range(rank)]
        return Membership(self).owner(values)

    def __rich__(self) -> Any:
        from .report import sizes_renderable

        return sizes_renderable(self)

    def __str__(self) -> str:
        from .report import sizes_renderable, to_text

        return to_text(sizes_renderable(self))


def parse_box(box: Any) -> tuple[int, int]:
    """``(lo, hi)``, ``"LO:HI"`` or ``hi``: an inclusive range of sizes with an upper bound."""
    if isinstance(box, str):
        lo_text, sep, hi_text = box.partition(":")
        if not sep:
            lo_text, hi_text = "0", lo_text
        if not hi_text.strip():
            raise UsageError(f"the box {box!r} has no upper bound: give LO:HI, e.g. 0:12")
        try:
            box = (int(lo_text or 0), int(hi_text))
        except ValueError:
            raise UsageError(f"the box {box!r} is not LO:HI with integers") from None
    elif isinstance(box, int):
        box = (0, box)
    try:
        lo, hi = box
    except (TypeError, ValueError):
        raise UsageError(f"the box {box!r} is not (lo, hi)") from None
    if hi is None:
        raise UsageError("the box has no upper bound")
    lo, hi = int(lo if lo is not None else 0), int(hi)
    if lo < 0 or hi < lo:
        raise UsageError(f"the box {lo}:{hi} is empty or negative")
    return lo, hi


def merge(classes: list[SizeClass]) -> list[SizeClass]:
    """Join the classes with the same outcome (and value dependence) into one class each.

    A merged class is the union of its members' regions; its condition lists theirs and
    its representative is the least of theirs. The members stay (``members``), in the
    order found, so that :class:`Membership` still knows which cell owns a point.
    """
    groups: dict[tuple[str, bool], list[SizeClass]] = {}
    for cls in classes:
        groups.setdefault((cls.outcome, cls.value_dependent), []).append(cls)
    merged = []
    for (outcome, value_dependent), members in groups.items():
        if len(members) == 1:
            merged.append(members[0])
            continue
        region = z3.Or(*[m.region for m in members])
        merged.append(
            SizeClass(
                outcome=outcome,
                condition=" or ".join(f"({m.condition})" for m in members),
                representative=min((m.representative for m in members), key=lambda r: (sum(map(sum, r)), r)),
                value_dependent=value_dependent,
                region=region,
                order=min(m.order for m in members),
                decided_by="trace" if all(m.decided_by == "trace" for m in members) else "trace+run",
                traces=sum(m.traces for m in members),
                members=members,
            )
        )
    merged.sort(key=lambda c: (sum(map(sum, c.representative)), c.representative))
    return merged


class Membership:
    """Which class owns a point: the first class, in the order found, whose cell holds it."""

    def __init__(self, report: SizeReport) -> None:
        dims = Dims(report.names, report.ranks)
        self.variables = dims.vars()
        self.lo, self.hi = report.box
        base: list[tuple[SizeClass, SizeClass]] = []
        for cls in report.classes:
            for member in cls.members or [cls]:
                base.append((member, cls))
        base.sort(key=lambda pair: pair[0].order)
        self.tests = [(compile_predicate(member.cell, self.variables), member.cell, owner) for member, owner in base]

    def owner(self, values: Sequence[int]) -> SizeClass | None:
        """The class (merged, if the report is) owning the point ``values``; None outside the box or every cell."""
        if any(v < self.lo or v > self.hi for v in values):
            return None
        for predicate, cell, owner in self.tests:
            inside = predicate(values) if predicate is not None else holds_at(cell, dict(zip(self.variables, values)))
            if inside:
                return owner
        return None


def shapes_of_values(dims: Dims, values: Sequence[int]) -> Shapes:
    """The shapes of ``values`` listed dimension by dimension, input by input (the order of ``dims.all``)."""
    it = iter(values)
    return tuple(tuple(next(it) for _ in range(rank)) for rank in dims.ranks)


__all__ = ["SizeClass", "SizeReport", "Membership", "merge", "parse_box", "shapes_of_values"]
