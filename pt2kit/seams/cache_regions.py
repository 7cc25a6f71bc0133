"""Seam: ``torch.compile(..., isolate_recompiles=True)`` regions of dynamo's cache, and invalidating their entries.

A ``torch.compile`` call with ``isolate_recompiles=True`` gets a region of its own in each
code object's cache: its entries are kept apart from the default region (id ``-1``), and
recompile limits count per region. The compiled wrapper (or an ``OptimizedModule``'s
``dynamo_ctx``) keeps the region's id in ``_isolate_recompiles_id``;
``eval_frame._get_cache_entries_for_region`` lists one region's entries. An entry is
invalidated the way dynamo does it when a guarded object dies: its ``ExtraState`` replaces
its guards with a ``DeletedGuardManagerWrapper``, which frees the compiled code and never
matches again.

``explain.explain`` analyses a function in a region of its own and invalidates its entries
afterwards (:mod:`explain.isolation`); ``validation.check_guards`` compiles in one too. Regions came
with torch 2.13 (``Seam.since``): on 2.11 and 2.12 both functions say so in one line.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch.compile(isolate_recompiles=True)._isolate_recompiles_id, torch._dynamo.eval_frame._get_cache_entries_for_region, "
        "ExtraState.invalidate, torch._dynamo.guards.DeletedGuardManagerWrapper"
    ),
    features=("explain (isolated analysis)", "validation.check_guards"),
    since=(2, 13),
)


def probe() -> None:
    import inspect

    import torch
    import torch._C._dynamo.eval_frame as c_eval_frame

    if "isolate_recompiles" not in inspect.signature(torch.compile).parameters:  # (torch 2.11 and 2.12)
        raise AttributeError("torch.compile takes no isolate_recompiles (added in torch 2.13)")
    from torch._dynamo.eval_frame import _get_cache_entries_for_region  # noqa: F401
    from torch._dynamo.guards import DeletedGuardManagerWrapper  # noqa: F401

    # (nothing compiles until called; torch's overloads of compile leave isolate_recompiles out)
    compiled = torch.compile(lambda x: x, backend="eager", isolate_recompiles=True)  # type: ignore[call-overload]
    if not isinstance(region_of(compiled), int) or region_of(compiled) < 0:
        raise AttributeError("an isolated torch.compile no longer keeps its region in _isolate_recompiles_id")
    if not callable(getattr(c_eval_frame._ExtraState, "invalidate", None)):
        raise AttributeError("ExtraState.invalidate is gone")


def region_of(compiled: Callable[..., Any]) -> int:
    """The cache region of what ``torch.compile(..., isolate_recompiles=True)`` returned."""
    context: Any = getattr(compiled, "dynamo_ctx", compiled)  # an OptimizedModule keeps it on its context
    return context._isolate_recompiles_id


def entries(code: types.CodeType, region: int) -> list[Any]:
    """The cache entries of ``code`` in one region (most recently used first)."""
    from torch._dynamo.eval_frame import _get_cache_entries_for_region

    return list(_get_cache_entries_for_region(code, region))


def invalidate(entry: Any, reason: str) -> bool:
    """Invalidate one cache entry as dynamo does when a guarded object dies; False if it cannot be."""
    from torch._dynamo.guards import DeletedGuardManagerWrapper

    extra_state = getattr(entry.guard_manager, "extra_state", None)
    if extra_state is None:
        return False
    extra_state.invalidate(entry, DeletedGuardManagerWrapper(reason))
    return True
