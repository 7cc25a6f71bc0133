"""A compiled frame's first backward, watched: a failure there is the frame's to replay.

AOTAutograd compiles a graph's backward lazily, during the program's ``loss.backward()``:
outside the frame, where neither the frame seat nor the compiled-run wrapper of
:mod:`replay.recorder` sees it. So the first call of each compiled graph whose outputs
need a gradient keeps its entry snapshot here, and hooks the compiled function's
autograd node those outputs lead to (:func:`pt2kit.seams.aot_autograd.compiled_backward_nodes`):

- the pre-hook marks the frame's backward under way, the post-hook marks it done (both
  public autograd hooks that return None: the program's gradients are untouched);
- when the program then raises (:meth:`replay.recorder.Recorder.script_failed`), the frame
  whose backward began and never ended is the one it broke in, recorded with the stage
  :data:`BACKWARD`; :func:`replay.rebuild.prepare_call` replays it as the frame's call,
  then a backward through its outputs, each with a gradient of ones.

Only a frame's first backward is watched, where its backward compiles; a later
backward that fails at run time leaves no record. The hooks live as long as the
autograd graph they sit on, and hold the snapshot (references, no copies) that long.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import torch

from pt2kit.opaque import opaque
from pt2kit.seams import aot_autograd

if TYPE_CHECKING:
    from .snapshot import Snapshot

#: The failing stage of a frame whose backward broke (the manifest's ``failure.stage``).
BACKWARD = "backward"


class BackwardWatch:
    """The frames whose first backward is hooked, and those under way right now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._under_way: dict[int, Snapshot] = {}

    def watch(self, inputs: Any, outputs: Any, snapshot: Snapshot) -> None:
        """Hook the backward of a compiled graph's first call (on ``inputs``, made ``outputs``), if it has one.

        ``snapshot``: the frame's, taken at its entry.
        """
        tensors = [t for t in _leaves(outputs) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        if not tensors:
            return
        inputs = [t for t in _leaves(inputs) if isinstance(t, torch.Tensor)]
        key = id(snapshot)

        @opaque
        def began(grad_outputs: Any) -> None:
            with self._lock:
                self._under_way[key] = snapshot

        @opaque
        def ended(grad_inputs: Any, grad_outputs: Any) -> None:
            with self._lock:
                self._under_way.pop(key, None)

        for node in aot_autograd.compiled_backward_nodes(tensors, inputs):
            node.register_prehook(began)
            node.register_hook(ended)

    def broken(self) -> Snapshot | None:
        """The frame whose backward began last and never ended; None when every one ended."""
        with self._lock:
            return next(reversed(self._under_way.values()), None)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    return [value]
