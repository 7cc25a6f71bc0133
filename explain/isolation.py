"""Analysing a function without wiping, reusing or polluting the user's compiled state.

``torch._dynamo.explain`` calls ``torch._dynamo.reset()`` before and after its run: every
compiled function in the process loses its cache (and ``reset`` also clears
``callback_handler``, so any profiler callbacks go too). :class:`IsolatedAnalysis` needs no
reset, because it never shares dynamo state with the user in the first place:

- **cache entries**: the analysis compiles through ``torch.compile(fn, backend=...,
  isolate_recompiles=True)``. Dynamo then keeps the analysis's entries in their own region
  of each code object's cache (also for the resume functions and callees it compiles), and
  counts recompile limits per region. An isolated region may *read* the default region's
  entries, but only those compiled for the same backend; the analysis uses a backend of its
  own (:func:`analysis_backend`), so it never reuses a user's graph (it would see nothing)
  and the user's calls never see its graphs. When the analysis is over its entries are
  invalidated (as when a guarded object dies), which frees their compiled code
  (:mod:`pt2kit.seams.cache_regions`);
- **automatic dynamic shapes**: dynamo remembers the sizes each function has seen (the
  PGO "code state", keyed by file, line and name, not by cache entry) and compiles a
  function dynamically once a size changed. The analysis runs on a fresh code state, so
  the user's history neither turns the analysed graph dynamic nor learns the analysis's
  sizes; the user's state is put back afterwards (:mod:`pt2kit.seams.automatic_dynamic`);
- **statistics**: ``torch._dynamo.utils.counters`` and ``guard_failures`` are restored, so
  counts a user reads (``counters["stats"]["unique_graphs"]``) reflect their own compiles
  (:mod:`pt2kit.seams.dynamo_utils`).

The state swapped here is process-wide; a compile on another thread *during* an analysis
would use the fresh code state and its counts would be rolled back with ours.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import torch

from pt2kit import seams
from pt2kit.seams import automatic_dynamic, cache_regions, dynamo_utils

#: The seams an isolated analysis needs, besides those of listening (:data:`explain.hooks.SEAMS`).
SEAMS = ("automatic_dynamic", "cache_regions", "dynamo_utils")


@dataclasses.dataclass(frozen=True)
class Isolation:
    """How a report was obtained without touching the user's compiled state."""

    strategy: str
    """``isolated``: explain compiled a copy of the work in a private cache region.
    ``observed``: explain watched the program's own compiles and compiled nothing itself."""
    reset_called: bool
    details: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"strategy": self.strategy, "reset_called": self.reset_called, "details": list(self.details)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Isolation:
        """The isolation :meth:`to_dict` wrote (all of it: it reads back as an equal one)."""
        return cls(strategy=data["strategy"], reset_called=data["reset_called"], details=tuple(data["details"]))


OBSERVED = Isolation(
    strategy="observed",
    reset_called=False,
    details=(
        "explain watched the script's own compiles as they happened; it compiled nothing itself and "
        "called no torch._dynamo.reset()",
    ),
)


def analysis_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """The backend of every analysis: runs the captured graph as is.

    One function object shared by all analyses and used by nobody else, so dynamo's
    backend check keeps analysis entries and user entries apart.
    """
    return gm.forward


class IsolatedAnalysis:
    """A context in which :meth:`compile` gives a function whose compiles share nothing with the user's."""

    def __init__(self) -> None:
        self.region: int | None = None
        self.invalidated = 0
        self.code_objects = 0

    def __enter__(self) -> IsolatedAnalysis:
        seams.require("explain.explain", *SEAMS)
        with contextlib.ExitStack() as stack:
            stack.enter_context(dynamo_utils.statistics_restored())
            stack.enter_context(automatic_dynamic.fresh_code_state())
            self._restore = stack.pop_all()
        return self

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        torch_compile = cast(Callable[..., Any], torch.compile)  # its overloads leave isolate_recompiles out
        compiled = torch_compile(fn, backend=analysis_backend, isolate_recompiles=True)
        self.region = cache_regions.region_of(compiled)
        return compiled

    def release(self, codes: Iterable[types.CodeType]) -> None:
        """Invalidate the analysis's cache entries on ``codes`` (the code objects it compiled)."""
        if self.region is None:
            return
        for code in set(codes):
            entries = cache_regions.entries(code, self.region)
            self.code_objects += bool(entries)
            for entry in entries:
                if cache_regions.invalidate(entry, "pt2kit explain analysis finished"):
                    self.invalidated += 1

    def __exit__(self, *exc_info: object) -> None:
        self._restore.close()  # the automatic-dynamic state, then counters and guard_failures

    def describe(self) -> Isolation:
        return Isolation(
            strategy="isolated",
            reset_called=False,
            details=(
                f"compiled in a private cache region (torch.compile(isolate_recompiles=True), region {self.region}) "
                "with explain's own backend: your cache entries were not used, changed or reset",
                f"explain's {self.invalidated} cache entries on {self.code_objects} code objects were invalidated "
                "afterwards",
                "dynamo's automatic-dynamic memory (PGO code state) was fresh during the analysis and "
                "restored after it",
                "torch._dynamo.utils.counters and guard_failures were restored",
            ),
        )


__all__ = ["IsolatedAnalysis", "Isolation", "OBSERVED", "analysis_backend"]
