"""What the program does to a dynamo graph between its forward and its backward, which a repro must do too.

A repro runs a graph's forward, then at once a backward of every output. A program
may do otherwise in between, and these of its ways change what the compiled backward does:

- **its loss reads only some outputs** (a model with two heads trains one of them this
  step). Eager's backward never visits the other head. AOTAutograd compiles the graph's
  backward as one function of the gradients of all its outputs, and gives an output no
  gradient reached a tensor of zeros (pytorch#131794): a hook inside the graph on that
  head runs where eager's never does, and what it returns flows on into the trunk;
- **it writes into an input or an output in place** (a loss scale decided after seeing
  the loss; scores normalized before the backward of another output). AOTAutograd saved
  that tensor for the backward (the graph is one autograd node, so even a backward of
  another output checks it), and autograd's version check raises where eager's never does;
- **it switches global state before the backward** (``torch.set_default_dtype(torch.float64)``
  for bookkeeping): AOTAutograd's partitioner recomputes a forward op in the backward, which
  then makes a float64 tensor where eager's saved one is float32. Or it calls the backward
  inside an autocast block: eager casts each node's gradient back, the compiled backward is one node.

:class:`BetweenForwardAndBackward` follows the compiled calls of each dynamo graph whose
outputs need grad, one at a time: the next is followed once the last one's backward showed
nothing the repro must do (a program may write between them only from its second step on),
up to :data:`MAX_FOLLOWED` calls. A tensor hook on each of those outputs notes the gradient
that reaches it, and each input's and output's version counter is read as the call returns. When the
graph's aot backward runs, every gradient the program's backward gives those
outputs has come (autograd runs a node's pre-hooks, and the outputs' own nodes, before the
node itself), and the program's writes are done. The outputs no gradient reached
(:attr:`GraphCase.unreached <minifier.unit.case.GraphCase.unreached>`, by their nodes'
names, which survive reduction) and the inputs and outputs written in between
(:attr:`~minifier.unit.case.GraphCase.written_between`, by name), and the global state the
backward starts under where it differs from the forward's
(:attr:`~minifier.unit.case.GraphCase.backward_context`) are kept on the case, and it is saved
again. Its repro's loss leaves the first out, it writes into the second between the two (a
write that keeps the value: the version counter is what autograd checks), and it runs its
backward under the third.

A program may make several backward calls through the one followed call (a loss per output,
pytorch#118739: eager's view nodes keep nothing and run again, the compiled graph is one node the
first call frees). Each hook notes the backward call its gradient came in (the engine's graph
task, and whether it retains the graph: :mod:`pt2kit.seams.autograd_engine`); where the program
fails after more than one, the case is settled again with them
(:attr:`~minifier.unit.case.GraphCase.backward_calls`), and the repro makes the same calls.
The writes and the state stay those the first backward saw. And a program's loss may weigh an
output's elements differently (a weighted sum, a cross-entropy): a gradient of ones hides a
backward that sends each element's gradient to the wrong place (AOTAutograd's of an overlapping
view). The first gradient of each output that is not the same everywhere is kept
(:attr:`~minifier.unit.case.GraphCase.output_grads`, up to :data:`MAX_GRAD_NUMEL` elements), and
the repro's loss weighs that output by it. Under compiled autograd nothing is
followed (where its config switch turns it on) or no gradient noted (where a context turns it on
for one backward).

**First, do no harm**: a hook returns None, so the gradient is the program's own. It
does nothing while dynamo traces it: compiled autograd traces a backward's hooks into a
graph of its own, and this hook must not put pt2kit's state into that graph. It stays on its
output (another backward call may come), which holds nothing but weak references.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from pt2kit.opaque import opaque, opaque_wrapper
from pt2kit.seams import autograd_engine, compiled_autograd, special_tensors
from .calls import call_values
from ..unit.accuracy import tensor_versions
from ..unit.case import BackwardCall, CompileContext, GraphCase

if TYPE_CHECKING:
    from .recorder import AotGraph

#: The backward calls through one followed call that are told apart (a loop of them is a program of its own).
MAX_CALLS = 8
#: The calls of one graph followed, one after another, while each shows nothing (a bound on the cost per step).
MAX_FOLLOWED = 16
#: The largest gradient of an output kept for the repro, and of all outputs together (elements: 16 and 64 MB of float32).
MAX_GRAD_NUMEL, MAX_GRADS_NUMEL = 1 << 22, 1 << 24


@dataclass
class _Followed:
    """One dynamo graph's followed call: its outputs that need grad and those a gradient reached; its inputs' versions."""

    case: GraphCase
    names: list[str]  # the graph's output nodes, by position
    inputs: list[Any]  # the call's tensor inputs, weakly (a backward that never runs holds nothing)
    versions: list[int | None]  # their version counters as the call returned
    outputs: list[Any]  # the same of its outputs
    output_versions: list[int | None]
    needing: list[int] = field(default_factory=list)
    # each backward call that reached an output, by its graph task, in order: whether it retained the graph, and
    # the outputs it reached
    calls: dict[int, tuple[bool, set[int]]] = field(default_factory=dict)
    settled: int = 0  # the calls settled (0: none yet)
    telling: bool = False  # settled, it showed something the repro must do
    written: tuple[str, ...] = ()  # what the first settle found, which a later one keeps
    grads: dict[int, torch.Tensor] = field(default_factory=dict)  # the first call's gradients that weigh (_weighing)
    switched: CompileContext | None = None


class BetweenForwardAndBackward:
    """What the program did between each followed dynamo graph's forward and backward (see the module).

    ``save``: writes a case again."""

    def __init__(self, save: Callable[[GraphCase], None]) -> None:
        self.save = save
        self._followed: dict[int, _Followed] = {}
        self._lock = threading.Lock()
        self._grads_left = MAX_GRADS_NUMEL  # (elements: the gradients kept, of all graphs, stay within it)

    def following(self, case: GraphCase, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """``compiled``, the dynamo graph ``case``'s compiled callable, with its calls whose outputs need grad followed,
        one at a time, until one shows what a repro must do (at most :data:`MAX_FOLLOWED`)."""
        names = case.output_names()
        if names is None or compiled_autograd.enabled_by_config():  # (its graph would trace each hook: nothing added)
            return compiled
        left = [MAX_FOLLOWED]

        def pt2kit_following(*args: Any, **kwargs: Any) -> Any:
            if not left[0] or not self._wants(case):
                return compiled(*args, **kwargs)
            inputs = call_values(args)  # (now: a boxed call empties its list)
            outputs = compiled(*args, **kwargs)
            if torch.is_grad_enabled() and self._follow(case, names, inputs, outputs):
                left[0] -= 1
            return outputs

        return opaque_wrapper(pt2kit_following, compiled)

    def _wants(self, case: GraphCase) -> bool:
        """Is the next call of ``case``'s graph to be followed? Yes, until one is; then once that one settled and
        showed nothing the repro must do (a program that writes between them only from its second step on)."""
        with self._lock:
            followed = self._followed.get(case.index)
        return followed is None or bool(followed.settled) and not followed.telling

    def _follow(self, case: GraphCase, names: list[str], inputs: list[Any], outputs: Any) -> bool:
        """Hook each output of one call that needs grad (True: some did, and this call is the one followed)."""
        values = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        if len(values) != len(names):
            with self._lock:  # (not the graph's outputs as its nodes say: nothing can be named, now or later)
                self._followed[case.index] = _Followed(case, names, [], [], [], [], settled=1, telling=True)
            return True
        followed = _Followed(case, names, _weakly(inputs), tensor_versions(inputs), _weakly(values), tensor_versions(values))
        for k, value in enumerate(values):
            if isinstance(value, torch.Tensor) and value.requires_grad and value.grad_fn is not None:
                try:
                    value.register_hook(self._hook(followed, k))
                except RuntimeError:  # (a tensor that takes no hook: it is not followed, so never unreached)
                    continue
                followed.needing.append(k)
        if not followed.needing:
            return False
        with self._lock:
            self._followed[case.index] = followed
        return True

    def _hook(self, followed: _Followed, position: int) -> Callable[[torch.Tensor | None], None]:
        @opaque
        def pt2kit_reached(grad: torch.Tensor | None) -> None:
            # (a node's hooks all run when it does: one for an output no gradient reached gets None)
            if grad is not None and not torch.compiler.is_compiling():
                task, retain = autograd_engine.current_backward() or (-2, False)  # (-2: one call, as far as it can tell)
                if task in followed.calls or len(followed.calls) < MAX_CALLS:
                    followed.calls.setdefault(task, (retain, set()))[1].add(position)
                if len(followed.calls) == 1 and not followed.case.output_grads and (weighs := self._weighing(grad)) is not None:
                    followed.grads[position] = weighs

        return pt2kit_reached

    def _weighing(self, grad: torch.Tensor) -> torch.Tensor | None:
        """:func:`weighing`, within what is left of :data:`MAX_GRADS_NUMEL`."""
        kept = weighing(grad, min(MAX_GRAD_NUMEL, self._grads_left))
        if kept is not None:
            with self._lock:
                self._grads_left -= kept.numel()
        return kept

    def settling(self, graph: AotGraph | None, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """``compiled``, an aot graph's compiled callable, settling its dynamo graph's followed call at each run when it
        is a backward (:meth:`settle`; its kind is read then: Inductor's inner compile may name it after this)."""
        if graph is None:
            return compiled

        def pt2kit_settling(*args: Any, **kwargs: Any) -> Any:
            if graph.kind == "backward":
                self.settle(graph.owner)
            return compiled(*args, **kwargs)

        return opaque_wrapper(pt2kit_settling, compiled)

    def settle_begun(self) -> None:
        """The program failed: each graph whose backward began (a gradient reached an output) and never ran, or
        that a backward call reached again since it settled, is settled now. Its backward failed before the graph
        ran (autograd's version check of what it saved, or of a graph the first call freed; or its compile); a
        graph whose backward never began is left as it is."""
        with self._lock:
            begun = [index for index, followed in self._followed.items() if len(followed.calls) > followed.settled]
        for index in begun:
            self.settle(self._followed[index].case)

    def settle(self, case: GraphCase) -> None:
        """At ``case``'s aot backward's run after the followed call: the outputs no gradient reached, and the inputs
        written since the forward, join it, and it is saved again. Settled again at the program's failure (:meth:`settle_begun`),
        the backward calls since then join it too (the writes and state stay the first settle's).

        No output is named where no gradient reached any (a backward this graph's hooks
        never saw, as under compiled autograd); nothing changes where every one was
        reached and no input written.
        """
        with self._lock:
            followed = self._followed.get(case.index)
            if followed is None or len(followed.calls) <= followed.settled and followed.settled:
                return
            first, followed.settled = not followed.settled, max(len(followed.calls), 1)
            calls = [(retain, sorted(positions)) for retain, positions in followed.calls.values()]
        reached = {k for _, positions in calls for k in positions}
        unreached = [k for k in followed.needing if k not in reached] if reached else []
        if first:
            inputs = _written(followed.inputs, followed.versions)
            written = [case.inputs[k].name for k in inputs if k < len(case.inputs)]
            written += [followed.names[k] for k in _written(followed.outputs, followed.output_versions)]
            followed.written, followed.switched = tuple(written), CompileContext.current().for_backward(case.context)
        several = tuple(BackwardCall(tuple(followed.names[k] for k in ks), retain) for retain, ks in calls) if len(calls) > 1 else ()
        grads = {followed.names[k]: g for k, g in followed.grads.items()} if not case.output_grads else case.output_grads
        followed.grads = {}
        followed.telling = bool(unreached or followed.written or followed.switched is not None or several)
        if not followed.telling and (not grads or grads is case.output_grads):  # (gradients that weigh: saved, followed on)
            return
        before = case.unreached, case.written_between, case.backward_context, case.backward_calls, case.output_grads
        # (the case object itself: a later call's inputs are saved on it again)
        case.unreached = tuple(followed.names[k] for k in unreached)
        case.written_between, case.backward_context, case.backward_calls = followed.written, followed.switched, several
        case.output_grads = grads
        try:
            self.save(case)
        except Exception:  # noqa: BLE001 - pt2kit's own limit never becomes the program's error: the saved case stands
            case.unreached, case.written_between, case.backward_context, case.backward_calls, case.output_grads = before


def weighing(grad: torch.Tensor, limit: int = MAX_GRAD_NUMEL) -> torch.Tensor | None:
    """A copy of a gradient that reached an output, where it weighs the output's elements differently (the
    program's loss is not a plain sum or mean) and has at most ``limit`` elements; None where it is the same everywhere."""
    if type(grad) is not torch.Tensor or grad.layout != torch.strided or not grad.dtype.is_floating_point:
        return None
    if not 1 < grad.numel() <= limit or special_tensors.kind_of(grad) is not None:
        return None
    with torch.no_grad():
        return None if bool((grad == grad.reshape(-1)[0]).all()) else grad.detach().clone(memory_format=torch.contiguous_format)


def _weakly(values: list[Any]) -> list[Any]:
    return [weakref.ref(v) if isinstance(v, torch.Tensor) else None for v in values]


def _written(refs: list[Any], versions: list[int | None]) -> list[int]:
    """The positions of the tensors (held by ``refs``) whose version counters moved since ``versions``."""
    now = tensor_versions([ref() if ref is not None else None for ref in refs])
    return [k for k, (then, v) in enumerate(zip(versions, now)) if None not in (then, v) and v != then]
