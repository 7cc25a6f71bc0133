"""Seam: the tables of torch's compilers a program can change without touching a graph.

A library that serves models registers its own lowering; a script planting a bug
replaces a decomposition. Such a change lives in a table, not in any graph, and the
graph fails only where the table holds it:

- Inductor's lowerings: ``torch._inductor.lowering.lowerings`` (op -> lowering);
- Inductor's decompositions: ``torch._inductor.decomposition.decompositions``;
- torch's decomposition table: ``torch._decomp.decomposition_table``.

Inductor copies its decomposition table once, at its first compile
(``fast_random_decomps``, cached): a process that compiled before a change was made
keeps using the old copy. pt2kit's query children fork from a process that compiled
while warming up, so after a repro's carried definitions change a table,
:func:`refresh` drops that copy, as the user's program never had it.

(Inductor's C++ code generators are classes, ``CppOverrides`` and ``CppVecOverrides``:
their patched methods are found with the rest of a script's patches of torch's modules,
:func:`minifier.capture.patches.script_patches`.) :func:`user_entries` lists the entries whose
code is not torch's, with the function behind each (decorators unwrapped); only tables
whose module is already imported are read, so nothing is imported for it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._inductor.lowering.lowerings, torch._inductor.decomposition.decompositions (fast_random_decomps, cached), "
        "torch._decomp.decomposition_table"
    ),
    features=("carrying a program's changes to lowerings and decompositions into repros",),
)

#: (module, attribute) of each table: a dict from an op to the function that handles it.
TABLES = (
    ("torch._inductor.lowering", "lowerings"),
    ("torch._inductor.decomposition", "decompositions"),
    ("torch._decomp", "decomposition_table"),
)


def probe() -> None:
    import importlib

    import torch

    for module, attribute in TABLES:
        table = getattr(importlib.import_module(module), attribute)
        if not isinstance(table, dict) or not any(isinstance(op, torch._ops.OpOverload) for op in table):
            raise AttributeError(f"{module}.{attribute} is no longer a table of ops")
    relu = importlib.import_module("torch._inductor.lowering").lowerings[torch.ops.aten.relu.default]
    if not str(getattr(unwrap(relu), "__module__", "")).startswith("torch"):
        raise AttributeError("Inductor's own relu lowering no longer unwraps to a function of torch's")
    decomposition = importlib.import_module("torch._inductor.decomposition")
    copy = getattr(decomposition, DERIVED_COPY, None)
    if copy is not None and not hasattr(copy, "cache_clear"):
        raise AttributeError(f"torch._inductor.decomposition.{DERIVED_COPY} is no longer a cached function")


#: Inductor's cached copy of its decomposition table (when the installed torch has one).
DERIVED_COPY = "fast_random_decomps"


def refresh() -> None:
    """Forget Inductor's copy of its decomposition table, so a changed table is read again."""
    module = sys.modules.get("torch._inductor.decomposition")
    copy = getattr(module, DERIVED_COPY, None) if module is not None else None
    if copy is not None and hasattr(copy, "cache_clear"):
        copy.cache_clear()


def unwrap(fn: Any) -> Any:
    """The function behind decorators and partials (``register_lowering`` wraps what it registers)."""
    seen: set[int] = set()
    while id(fn) not in seen:
        seen.add(id(fn))
        inner = getattr(fn, "__wrapped__", None) or getattr(fn, "func", None)
        if inner is None or not callable(inner):
            break
        fn = inner
    return fn


def user_entries() -> Iterator[tuple[str, Any]]:
    """``("torch._inductor.lowering.lowerings[aten.relu.default]", function)`` for each entry whose code is not torch's."""
    for module_name, attribute in TABLES:
        module = sys.modules.get(module_name)
        table = getattr(module, attribute, None) if module is not None else None
        if not isinstance(table, dict):
            continue
        for op, handler in list(table.items()):
            fn = unwrap(handler)
            where = str(getattr(fn, "__module__", "") or "")
            if where and not where.startswith(("torch", "functorch")):
                yield f"{module_name}.{attribute}[{op}]", fn
