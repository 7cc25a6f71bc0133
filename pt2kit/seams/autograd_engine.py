"""Seam: the autograd engine's current graph task, asked from inside a backward (a tensor hook).

Each ``backward()`` or ``torch.autograd.grad`` call runs one graph task. A hook that
runs during it can ask which task (``torch._C._current_graph_task_id``) and whether
that call keeps the graph for another (``retain_graph``,
``torch._C._autograd._get_current_graph_task_keep_graph``; AOTAutograd asks the same of
a backward that donated its buffers). :mod:`minifier.capture.between` tells a program's
several backward calls through one compiled graph apart with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from . import Seam

T = TypeVar("T")

SEAM = Seam(
    wraps="torch._C._current_graph_task_id, torch._C._autograd._get_current_graph_task_keep_graph, and the "
    "refusal AOTAutograd raises for a retained backward compiled with donated buffers",
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
    import inspect

    from torch._functorch._aot_autograd import runtime_wrappers

    if DONATED_REFUSAL not in inspect.getsource(runtime_wrappers):
        raise AttributeError("AOTAutograd no longer refuses a retained backward with its donated-buffers message")


#: What AOTAutograd's refusal says when a backward compiled ahead with donated buffers is asked to retain the graph.
DONATED_REFUSAL = "This backward function was compiled with non-empty donated "


def refuses_retained_backward(error: BaseException) -> bool:
    """Is ``error`` AOTAutograd refusing to retain the graph of a backward it compiled ahead, with donated buffers?
    (Compiled lazily, at a first backward that retains the graph, it donates none instead.)"""
    return isinstance(error, RuntimeError) and DONATED_REFUSAL in str(error)


def retained_unless_refused(backward: Callable[[bool], T]) -> T:
    """``backward(True)``, retaining the graph; ``backward(False)`` where AOTAutograd refuses that
    (:func:`refuses_retained_backward`: a backward compiled ahead donates its buffers whoever runs it)."""
    try:
        return backward(True)
    except RuntimeError as e:
        if not refuses_retained_backward(e):
            raise
    return backward(False)


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
