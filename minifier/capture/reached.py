"""Which outputs of a dynamo graph the program's backward reached: AOTAutograd gives the others zero gradients.

A program's loss may read only some of a graph's outputs: a model with two heads
trains one of them this step. Eager's backward never visits the other head. AOTAutograd
compiles the graph's backward as one function of the gradients of all its outputs, and
gives an output that no gradient reached a tensor of zeros (pytorch#131794). A hook
inside the graph on that head then runs, where eager's never does, and what it returns
flows on into the trunk. A repro whose loss sums every output cannot show that.

:class:`ReachedOutputs` follows one compiled call of each dynamo graph: the first whose
outputs need grad. A tensor hook on each of those outputs notes the gradient that
reaches it. When the graph's aot backward first runs, every gradient the program's
backward gives those outputs has come: autograd runs a node's pre-hooks, and the
outputs' own nodes, before the node itself. The outputs no gradient reached are then
kept on the case (:attr:`GraphCase.unreached <minifier.unit.case.GraphCase.unreached>`,
by their nodes' names, which survive reduction), and it is saved again. Its repro's
loss leaves them out, as the program's did.

**First, do no harm**: a hook returns None, so the gradient is the program's own. It
does nothing while dynamo traces it: compiled autograd traces a backward's hooks into a
graph of its own, and this hook must not put pt2kit's state into that graph. It is removed
once the graph's backward has run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from pt2kit.opaque import opaque, opaque_wrapper
from ..unit.case import GraphCase

if TYPE_CHECKING:
    from .recorder import AotGraph


@dataclass
class _Followed:
    """One dynamo graph's followed call: the positions of its outputs that need grad, and those a gradient reached."""

    names: list[str]  # the graph's output nodes, by position
    needing: list[int] = field(default_factory=list)
    reached: set[int] = field(default_factory=set)
    handles: list[Any] = field(default_factory=list)
    settled: bool = False


class ReachedOutputs:
    """The outputs each followed dynamo graph's backward reached (see the module). ``save``: writes a case again."""

    def __init__(self, save: Callable[[GraphCase], None]) -> None:
        self.save = save
        self._followed: dict[int, _Followed] = {}
        self._lock = threading.Lock()

    def following(self, case: GraphCase, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """``compiled``, the dynamo graph ``case``'s compiled callable, with its first call whose outputs need grad followed."""
        names = case.output_names()
        if names is None:
            return compiled
        waiting = [True]

        def pt2kit_following(*args: Any, **kwargs: Any) -> Any:
            outputs = compiled(*args, **kwargs)
            if waiting[0] and torch.is_grad_enabled():
                waiting[0] = not self._follow(case.index, names, outputs)
            return outputs

        return opaque_wrapper(pt2kit_following, compiled)

    def _follow(self, index: int, names: list[str], outputs: Any) -> bool:
        """Hook each output of one call that needs grad (True: some did, and this call is the one followed)."""
        values = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        if len(values) != len(names):
            return True  # (not the graph's outputs as its nodes say: nothing can be named)
        followed = _Followed(names)
        for k, value in enumerate(values):
            if isinstance(value, torch.Tensor) and value.requires_grad and value.grad_fn is not None:
                try:
                    followed.handles.append(value.register_hook(self._hook(followed, k)))
                except RuntimeError:  # (a tensor that takes no hook: it is not followed, so never unreached)
                    continue
                followed.needing.append(k)
        if not followed.needing:
            return False
        with self._lock:
            self._followed[index] = followed
        return True

    @staticmethod
    def _hook(followed: _Followed, position: int) -> Callable[[torch.Tensor | None], None]:
        @opaque
        def pt2kit_reached(grad: torch.Tensor | None) -> None:
            # (a node's hooks all run when it does: one for an output no gradient reached gets None)
            if grad is not None and not torch.compiler.is_compiling():
                followed.reached.add(position)

        return pt2kit_reached

    def settling(self, graph: AotGraph | None, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """``compiled``, an aot graph's compiled callable, settling its dynamo graph's outputs at its first run when it
        is a backward (:meth:`settle`; its kind is read then: Inductor's inner compile may name it after this)."""
        if graph is None:
            return compiled
        waiting = [True]

        def pt2kit_settling(*args: Any, **kwargs: Any) -> Any:
            if waiting[0]:
                waiting[0] = False
                if graph.kind == "backward":
                    self.settle(graph.owner)
            return compiled(*args, **kwargs)

        return opaque_wrapper(pt2kit_settling, compiled)

    def settle(self, case: GraphCase) -> None:
        """The outputs of ``case`` no gradient reached join it, and it is saved again: at its aot backward's first run.

        Nothing changes where no gradient reached any output (a backward this graph's
        hooks never saw, as under compiled autograd) or where every one was reached.
        """
        with self._lock:
            followed = self._followed.get(case.index)
            if followed is None or followed.settled:
                return
            followed.settled = True
        for handle in followed.handles:
            handle.remove()
        unreached = [k for k in followed.needing if k not in followed.reached]
        if not followed.reached or not unreached:
            return
        case.unreached = tuple(followed.names[k] for k in unreached)  # (the case object later calls save again too)
        try:
            self.save(case)
        except Exception:  # noqa: BLE001 - pt2kit's own limit never becomes the program's error: the saved case stands
            case.unreached = ()

