"""Seam: the attributes ``torch._dynamo.mark_dynamic`` and friends set on a tensor.

``mark_dynamic``, ``maybe_mark_dynamic`` and ``mark_unbacked`` do not keep a table:
they write private attributes onto the tensor (``_dynamo_dynamic_indices``,
``_dynamo_weak_dynamic_indices``, ``_dynamo_unbacked_indices``...), which dynamo
reads when it wraps the tensor. Replay records a tensor's ``__dict__`` whole, so these
come back with it without naming them; this seam names them only for
``replay run --static``, which strips them (:func:`strip_dynamic_marks`) so that the
replayed call compiles static. The function imports nothing, so ``replay script``
copies it into the scripts it writes.
"""

from __future__ import annotations

from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.decorators.mark_dynamic / maybe_mark_dynamic / mark_unbacked (tensor attributes)",
    features=("replay run --static",),
)

#: Attributes that make a dimension symbolic (``_dynamo_static_indices`` and
#: ``_dynamo_marked_static`` keep it static and are left alone).
DYNAMIC_MARKS = (
    "_dynamo_dynamic_indices",
    "_dynamo_dynamic_range",
    "_dynamo_weak_dynamic_indices",
    "_dynamo_unbacked_indices",
    "_dynamo_strict_unbacked_indices",
    "_dynamo_unbacked_bounds",
    "_dynamo_hint_overrides",
    "_dynamo_shape_ids",
    "_specialize_on",
    "_has_dynamo_dim_marking",
)


def probe() -> None:
    import torch

    t = torch.empty(2, 3)
    torch._dynamo.mark_dynamic(t, 0)
    torch._dynamo.maybe_mark_dynamic(t, 1)
    marks = set(vars(t))
    # (torch 2.13 added _has_dynamo_dim_marking beside them: among DYNAMIC_MARKS, not required)
    expected = {"_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices"}
    if not expected <= marks or not marks <= set(DYNAMIC_MARKS):
        raise AttributeError(f"mark_dynamic sets {sorted(marks)}, expected {sorted(expected)} among {DYNAMIC_MARKS}")


def strip_dynamic_marks(tensor: Any) -> None:
    """Remove every mark that would make a dimension of ``tensor`` symbolic (static marks stay)."""
    # DYNAMIC_MARKS spelled out again: replay/script.py copies this function's source
    # alone into standalone replay scripts, where the module's constants do not exist
    for name in (
        "_dynamo_dynamic_indices",
        "_dynamo_dynamic_range",
        "_dynamo_weak_dynamic_indices",
        "_dynamo_unbacked_indices",
        "_dynamo_strict_unbacked_indices",
        "_dynamo_unbacked_bounds",
        "_dynamo_hint_overrides",
        "_dynamo_shape_ids",
        "_specialize_on",
    ):
        tensor.__dict__.pop(name, None)
    if "_dynamo_static_indices" not in tensor.__dict__ and "_dynamo_marked_static" not in tensor.__dict__:
        tensor.__dict__.pop("_has_dynamo_dim_marking", None)
