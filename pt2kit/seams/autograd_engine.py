"""Seam: the autograd engine's current graph task, asked from inside a backward (a tensor hook).

Each ``backward()`` or ``torch.autograd.grad`` call runs one graph task. A hook that
runs during it can ask which task (``torch._C._current_graph_task_id``) and whether
that call keeps the graph for another (``retain_graph``,
``torch._C._autograd._get_current_graph_task_keep_graph``; AOTAutograd asks the same of
a backward that donated its buffers). :mod:`minifier.capture.between` tells a program's
several backward calls through one compiled graph apart with them.
"""

from __future__ import annotations

from . import Seam

SEAM = Seam(
    wraps="torch._C._current_graph_task_id, torch._C._autograd._get_current_graph_task_keep_graph",
    features=("minify run and the env-var hook: a program's several backward calls through one compiled graph",),
)


def probe() -> None:
    import torch

    if not callable(getattr(torch._C, "_current_graph_task_id", None)):
        raise AttributeError("torch._C._current_graph_task_id is gone")
    if not callable(getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", None)):
        raise AttributeError("torch._C._autograd._get_current_graph_task_keep_graph is gone")
    if torch._C._current_graph_task_id() != -1:
        raise AttributeError("torch._C._current_graph_task_id no longer answers -1 outside a backward")


def current_backward() -> tuple[int, bool] | None:
    """Inside a backward call: its graph task's id, and whether it retains the graph; None outside one (or where
    this torch cannot say)."""
    import torch

    try:
        task = int(torch._C._current_graph_task_id())
        if task < 0:
            return None
        return task, bool(torch._C._autograd._get_current_graph_task_keep_graph())
    except Exception:  # noqa: BLE001 - a debugging hook never changes what the program does
        return None
