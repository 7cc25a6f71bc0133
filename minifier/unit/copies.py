"""Copies of tensors as the program had them: strides, overlaps, shared memory and the storage around a view.

A graph can depend on more than its inputs' elements: an ``expand``ed input's zero
strides (a write into it writes every element), inputs that are views of one tensor
(``f(buf, buf[1:])``), a slice whose graph reads past its elements into the tensor it
was cut from (``as_strided`` with an offset). Every query and repro copies inputs
with these kept; a plain ``clone()`` keeps none of them.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, cast

import torch

from pt2kit.seams import dtensor, special_tensors
from .graphio import attribute_at

#: The largest storage (bytes) a view's window is kept with; beyond it the elements alone are copied.
WINDOW_LIMIT = 64 << 20


def clone_tensor(
    t: torch.Tensor,
    requires_grad: bool | None = None,
    device: str | torch.device | None = None,
    window: bool = False,
) -> torch.Tensor:
    """A leaf copy of ``t`` with the same shape and strides, owning only the memory they reach.

    Copying the reachable memory rather than the elements keeps overlapping layouts
    (``expand``'s zero strides) that a plain elementwise copy cannot write into. A
    special tensor (a ZeroTensor, a conjugate view...) stays what it is. With
    ``window`` (``t`` is a view into a larger storage: ``TensorMeta.storage``), the
    copy is a view at the same offset into a copy of that whole storage.
    """
    if dtensor.is_dtensor(t):  # (it copies its own shard, mesh and placements; as_strided it refuses: hunt m)
        with torch.no_grad():
            return t.detach().clone().requires_grad_(t.requires_grad if requires_grad is None else requires_grad)
    if window and (around := storage_window(t)) is not None:
        offset, size = around
        with torch.no_grad():
            memory = torch.empty(size, dtype=t.dtype, device=t.device if device is None else device)
            memory.copy_(t.detach().as_strided((size,), (1,), 0))
        return (
            memory.as_strided(t.shape, t.stride(), offset)
            .detach()
            .requires_grad_(t.requires_grad if requires_grad is None else requires_grad)
        )
    requires_grad = t.requires_grad if requires_grad is None else requires_grad
    special = special_tensors.kind_of(t)
    if special is not None:
        copied = clone_tensor(special_tensors.plain(t), False, device)
        return special_tensors.rebuild(copied, special).requires_grad_(requires_grad)
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0
    with torch.no_grad():
        memory = torch.empty(span, dtype=t.dtype, device=t.device if device is None else device)
        if span:
            memory.copy_(t.detach().as_strided((span,), (1,)))
        copy = memory.as_strided(t.shape, t.stride())
        if span == t.numel():  # dense: a tensor of its own, as the program's was, not a view
            copy = copy.clone()
    return copy.detach().requires_grad_(requires_grad)


def view_into(
    base: torch.Tensor,
    shape: Sequence[int],
    stride: Sequence[int],
    requires_grad: bool,
    offset: int,
    as_view: bool = True,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """A view of ``base``'s memory with this layout, ``offset`` elements past ``base``'s own start.

    ``as_view=False``: a tensor of its own on that memory, no view of ``base`` (a leaf, as
    ``nn.Parameter(y)`` or ``y.detach()`` is): autograd and AOTAutograd treat views otherwise.
    ``dtype``: the memory read as another dtype of the same size (``x.view(torch.int32)`` of
    a float32 ``x``, a tensor of its own).
    """
    if dtype is not None and dtype != base.dtype:
        base = base.view(dtype)
    if not as_view:
        alias = torch.empty((0,), dtype=base.dtype, device=base.device)
        with torch.no_grad():
            alias.set_(base.untyped_storage(), base.storage_offset() + offset, tuple(shape), tuple(stride))
        return alias.requires_grad_(requires_grad)
    view = base.as_strided(shape, stride, base.storage_offset() + offset)
    return view.requires_grad_() if requires_grad and not view.requires_grad else view


def alias_groups(values: list[Any]) -> list[tuple[int, list[tuple[int, int, bool]]]]:
    """Tensors among ``values`` that share memory: (the one whose memory holds the others',
    [(another, its offset from it, whether it is a view)]).

    A graph's inputs can be views of one tensor (``f(buf, buf[1:])``), and a compiler's
    bug can live in that aliasing. A group is kept only when one member's memory (the
    elements its strides reach) holds every other member's; other overlaps stay apart.
    A member that is no view shares the memory as a tensor of its own (``nn.Parameter(y)``,
    ``y.detach()``); where several hold it all, a base holds it (one no view, made by an op
    where one was), so views stay views of it and the others are leaves on its memory again.
    """
    groups: dict[tuple[str, int, int], list[int]] = {}
    for k, v in enumerate(values):
        if not isinstance(v, torch.Tensor) or v.layout != torch.strided or special_tensors.kind_of(v) or v.numel() == 0:
            continue
        try:  # (memory read as dtypes of another size is left apart: offsets count elements)
            key = (str(v.device), v.untyped_storage().data_ptr(), v.element_size())
        except (RuntimeError, NotImplementedError):  # fake and meta tensors own no memory
            continue
        if key[1]:
            groups.setdefault(key, []).append(k)

    def span(t: torch.Tensor) -> tuple[int, int]:
        start = cast(int, t.storage_offset())  # (a SymInt only for fake tensors, left out above)
        return start, start + 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))

    found = []
    for members in groups.values():
        if len(members) < 2:
            continue
        spans = {k: span(values[k]) for k in members}
        covering = [k for k in members if all(spans[k][0] <= a and b <= spans[k][1] for a, b in spans.values())]
        if covering:
            cover = min(covering, key=lambda k: (values[k]._is_view(), values[k].is_leaf))  # (stable: the first of equals)
            found.append(
                (cover, [(k, spans[k][0] - spans[cover][0], values[k]._is_view()) for k in members if k != cover])
            )
    return found


def clone_values(values: list[Any]) -> list[Any]:
    """Copies of ``values`` (tensors cloned, the rest as they are) in which tensors that shared memory share it again."""
    copies = [clone_tensor(v.detach(), v.requires_grad) if isinstance(v, torch.Tensor) else v for v in values]
    for cover, views in alias_groups(values):
        for k, offset, as_view in views:
            v = values[k]
            copies[k] = view_into(copies[cover], v.shape, v.stride(), v.requires_grad, offset, as_view, v.dtype)
    return copies


def compact_tensor(t: torch.Tensor, window: bool = False) -> torch.Tensor:
    """A detached copy of ``t`` holding only the memory its strides reach, for saving (a special tensor's plain one).

    With ``window``, a view into a larger storage is saved with that storage
    (``torch.save`` keeps a view's offset and whole storage).
    """
    return clone_tensor(special_tensors.plain(t.detach()), requires_grad=False, window=window)


def storage_window(t: torch.Tensor) -> tuple[int, int] | None:
    """(storage offset, storage size) when ``t`` is a view into more memory than its strides reach, else None.

    None too for a storage over :data:`WINDOW_LIMIT` bytes, a tensor with no
    elements, and one whose storage cannot be read (a fake or functional tensor).
    """
    if not t.numel() or t.is_sparse or t.layout != torch.strided:
        return None
    try:
        size = t.untyped_storage().nbytes() // t.element_size()
    except (RuntimeError, NotImplementedError):
        return None
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    offset = int(t.storage_offset())
    if (offset == 0 and size <= span) or size * t.element_size() > WINDOW_LIMIT:
        return None
    return offset, size


def with_own_attributes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``'s graph over copies of the tensors it reads as attributes (``get_attr``): ``gm`` itself where it reads none.

    Dynamo's graph of a compiled ``optimizer.step`` reads each parameter as an attribute
    and writes it in place (``add_``). An eager run of ``gm`` itself in the program's own
    process (the hook's level-4 reference) would step the program's parameters once
    more; a run of this twin writes only its copies (which share memory where the
    attributes did). Submodules (a higher-order op's bodies) are shared, not copied.
    """
    targets = [str(n.target) for n in gm.graph.nodes if n.op in ("get_attr", "call_module")]
    values = {target: attribute_at(gm, target) for target in dict.fromkeys(targets)}
    tensors = [target for target, value in values.items() if isinstance(value, torch.Tensor)]
    if not tensors:
        return gm
    copies = clone_values([values[t] for t in tensors])
    for target, twin in zip(tensors, copies):
        original = values[target]
        values[target] = torch.nn.Parameter(twin, original.requires_grad) if isinstance(original, torch.nn.Parameter) else twin
    # (a copy of the graph: a GraphModule made over ``gm``'s own would become its owner)
    return torch.fx.GraphModule(values, copy.deepcopy(gm.graph), gm.__class__.__name__)
