"""Counterexamples: the smallest sizes that break an assumption and pass every installed guard.

:mod:`validation.soundness` asks Z3 whether the guards it could read imply an assumption;
when they do not, Z3's model is a candidate counterexample. Two things make a candidate
a counterexample a user can trust:

- it is *minimal* (least total size, then each size in order) and says only what does
  not follow from the sizes (:func:`essential`: contiguous strides and zero storage
  offsets are left out);
- it passes the guards dynamo *installed*, also those pt2kit could not read (a float
  guard, a guard form Z3 has no word for). :func:`installed_guards` builds inputs of the
  candidate's sizes from the frame's own (:func:`validation.confirm.rebuild_inputs`) and
  runs the guard manager on them, as dynamo does on a call; :func:`search` sets aside each
  candidate the installed guards reject and asks for the next smallest.

A finding whose every candidate the installed guards reject is not a counterexample at
all: some guard pt2kit could not read implies the assumption there (the compile is then
incomplete, never unsound). Inputs that cannot be rebuilt (``L['self'].w``, a nonzero
storage offset) leave Z3's candidate as it is, unchecked (``accepted`` is None).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import z3

from pt2kit.seams import guard_code

from .z3ops import smallest

#: Candidates tried per assumption before giving up on one the installed guards accept.
ATTEMPTS = 8

#: Whether the installed guards accept inputs of a counterexample's sizes (None: they cannot be built).
Accepts = Callable[[dict[str, int]], "bool | None"]


@dataclasses.dataclass(frozen=True)
class Search:
    """What :func:`search` found: the counterexample, whether the installed guards accept it, and how many were tried."""

    counterexample: dict[str, int]
    accepted: bool | None  # None: the installed guards were not run (no frame, or inputs it cannot rebuild)
    tried: int


def installed_guards(guard_manager: Any, f_locals: dict[str, Any]) -> Accepts:
    """The installed guards as a question on counterexamples, asked on inputs rebuilt from ``f_locals``."""

    def accepts(counterexample: dict[str, int]) -> bool | None:
        from .confirm import rebuild_inputs

        try:
            inputs = rebuild_inputs(f_locals, counterexample)
        except ValueError:
            return None
        try:
            return bool(guard_code.passes(guard_manager, inputs))
        except Exception:  # noqa: BLE001 - a guard that raises rejects
            return False

    return accepts


def search(
    constraints: list[z3.BoolRef],
    sizes: list[z3.ArithRef],
    others: list[z3.ArithRef],
    *,
    timeout_ms: int,
    accepts: Accepts | None,
) -> Search:
    """The smallest model of ``constraints`` (over ``sizes``; ``others`` reported) that ``accepts`` does not reject."""
    terms = [*sizes, *others]
    blocked: list[z3.BoolRef] = []
    counterexample: dict[str, int] = {}
    accepted: bool | None = None
    for tried in range(1, ATTEMPTS + 1):
        model = smallest(constraints + blocked, sizes, timeout_ms=timeout_ms, report=others)
        if model is None:
            return Search(counterexample, accepted, tried - 1)
        counterexample = essential(model)
        accepted = accepts(counterexample) if accepts is not None else None
        if accepted is not False:
            return Search(counterexample, accepted, tried)
        point = [term == model[str(term)] for term in terms if model.get(str(term)) is not None]
        if not point:
            break
        blocked.append(z3.Not(z3.And(*point)))
    return Search(counterexample, accepted, ATTEMPTS)


def essential(model: dict[str, int | None]) -> dict[str, int]:
    """The counterexample without what follows from the sizes: contiguous strides, zero offsets."""
    values = {name: value for name, value in model.items() if value is not None}
    sizes: dict[str, dict[int, int]] = {}
    for name, value in values.items():
        base, _, rest = name.rpartition(".size()[")
        if base and rest.endswith("]") and rest[:-1].isdigit():
            sizes.setdefault(base, {})[int(rest[:-1])] = value
    out = {}
    for name, value in sorted(values.items()):
        base, _, rest = name.rpartition(".stride()[")
        if base and rest.endswith("]") and rest[:-1].isdigit() and base in sizes:
            dims = sizes[base]
            index = int(rest[:-1])
            if all(d in dims for d in range(index + 1, max(dims) + 1)):
                contiguous = 1
                for d in range(index + 1, max(dims) + 1):
                    contiguous *= max(dims[d], 1)
                if value == contiguous:
                    continue
        if name.endswith(".storage_offset()") and value == 0:
            continue
        out[name] = value
    return out


__all__ = ["ATTEMPTS", "Accepts", "Search", "essential", "installed_guards", "search"]
