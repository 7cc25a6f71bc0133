"""Seam: ``torch.utils._pytree``, torch's flattening of nested containers.

torch 2.13 has no public pytree module; dynamo, AOTAutograd and ``torch.library``
all use this one, so pt2kit flattens arguments and outputs the way they do (a
``torch.return_types`` named tuple, a dataclass registered as a node). The minifier
(frames, profiles, repro inputs) and opcheck go through here.
"""

from __future__ import annotations

from typing import Any, Callable

from . import Seam

SEAM = Seam(
    wraps="torch.utils._pytree (tree_flatten, tree_unflatten, tree_leaves, tree_map, tree_map_only)",
    features=("capture", "minify", "opcheck"),
)


def probe() -> None:
    values = ({"a": 1}, [2, (3,)])
    flat, spec = tree_flatten(values)
    if flat != [1, 2, 3] or tree_unflatten(flat, spec) != values or tree_leaves(values) != flat:
        raise AttributeError("torch.utils._pytree no longer flattens dicts, lists and tuples in order")
    if tree_map_only(int, lambda v: v + 1, values) != ({"a": 2}, [3, (4,)]):
        raise AttributeError("torch.utils._pytree.tree_map_only changed")


def module() -> Any:
    """The module itself, for code that needs more of it (opcheck's argument walks)."""
    import torch.utils._pytree as pytree

    return pytree


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    return module().tree_flatten(tree)


def tree_unflatten(leaves: list[Any], spec: Any) -> Any:
    return module().tree_unflatten(leaves, spec)


def tree_leaves(tree: Any) -> list[Any]:
    return module().tree_leaves(tree)


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    return module().tree_map(fn, tree)


def tree_map_only(kind: Any, fn: Callable[[Any], Any], tree: Any) -> Any:
    return module().tree_map_only(kind, fn, tree)
