"""Seam: the tables of torch's compilers a program can change without touching a graph.

A library that serves models registers its own lowering; a script planting a bug
replaces a decomposition. Such a change lives in a table, not in any graph, and the
graph fails only where the table holds it:

- Inductor's lowerings: ``torch._inductor.lowering.lowerings`` (op -> lowering);
- Inductor's decompositions: ``torch._inductor.decomposition.decompositions``;
- torch's decomposition table: ``torch._decomp.decomposition_table``.

(Inductor's C++ code generators are classes, ``CppOverrides`` and ``CppVecOverrides``:
their patched methods are found with the rest of a script's patches of torch's modules,
:func:`minifier.patches.script_patches`.) :func:`user_entries` lists the entries whose
code is not torch's, with the function behind each (decorators unwrapped); only tables
whose module is already imported are read, so nothing is imported for it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch._inductor.lowering.lowerings, torch._inductor.decomposition.decompositions, torch._decomp.decomposition_table",
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
