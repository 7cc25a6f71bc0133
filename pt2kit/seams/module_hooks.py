"""Seam: ``torch.nn``'s global module hooks, suspended while pt2kit runs a graph of its own in the user's process.

A program may register hooks for every module call (``register_module_forward_pre_hook``).
Dynamo traces their effect into the graphs it compiles; pt2kit's own runs of those graphs
(the hook's level-4 judgement and ``--accuracy`` capture, both in the user's process) call
a ``GraphModule``, which is a module too, so the program's hooks would fire on it once more
(pytorch#149502: a pre-hook rewrote its arguments and the eager reference raised
TypeError). :func:`suspended` empties torch's global hook tables for such a run and puts
them back after it. The tables are process-wide: another thread of the program that calls a
module in that window (a few eager runs of one graph) sees no global hook either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import Seam

SEAM = Seam(
    wraps="torch.nn.modules.module's global hook tables (_global_forward_pre_hooks, _global_forward_hooks, "
    "_global_forward_hooks_with_kwargs, _global_forward_hooks_always_called, _global_backward_pre_hooks, "
    "_global_backward_hooks)",
    features=("the hook's and --accuracy capture's judgement of a graph, untouched by the program's global module hooks",),
)

#: The tables ``Module._call_impl`` reads as module globals at every call.
TABLES = (
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_forward_hooks_with_kwargs",
    "_global_forward_hooks_always_called",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
)


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """No global module hook fires inside the block (each table is emptied, then given back as it was)."""
    from torch.nn.modules import module

    saved = {name: getattr(module, name) for name in TABLES if hasattr(module, name)}
    try:
        for name, table in saved.items():
            setattr(module, name, type(table)())
        yield
    finally:
        for name, table in saved.items():
            setattr(module, name, table)


def probe() -> None:
    import torch
    from torch.nn.modules import module

    missing = [name for name in TABLES if not hasattr(module, name)]
    if missing:
        raise AttributeError(f"torch.nn.modules.module no longer has {', '.join(missing)}")
    seen: list[str] = []
    handle = module.register_module_forward_pre_hook(lambda m, args: seen.append("hook"))
    try:
        with suspended():
            torch.nn.Identity()(torch.ones(1))
        if seen:
            raise AttributeError("emptying the global hook tables no longer stops a global forward pre-hook")
        torch.nn.Identity()(torch.ones(1))
        if seen != ["hook"]:
            raise AttributeError("the global hook tables are not given back as they were")
    finally:
        handle.remove()
