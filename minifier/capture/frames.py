"""Where in the user's program a graph or a failure comes from, and frames dynamo failed to trace.

Reports point at the user's code, never at torch's or pt2kit's: :func:`current_frame`
is the user function dynamo is compiling, :func:`frame_of_exception` the user line a
dynamo error points at, :func:`where_it_failed` whether dynamo's tracing, a backend's
compile or the compiled code raised. A frame dynamo could not trace has no graph: it
is run on its real arguments and recorded as one, in two ways, so that the failure
still has something to minify: :func:`lift_frame_calls` keeps the torch calls the
frame made, as dynamo would have seen them (``torch.as_tensor`` of a list of 0-d
tensors, which dynamo fails on, is one node), and :func:`lift_frame` the aten ops
``make_fx`` traces (what a fake kernel or a decomposition broke is there).
"""

from __future__ import annotations

import inspect
import traceback
import types
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import operator
from types import GetSetDescriptorType

import torch
import torch.fx as fx
from torch.overrides import TorchFunctionMode

from ..unit.case import GraphCase
from .casemaker import make_case
from .context import BackendInfo
from pt2kit.script import STACK_LINE, is_internal_file
from pt2kit.seams import convert_frame, dynamo_exc, pytree
from pt2kit.signature import COMPILE_PHASE_ATTR, exception_chain


def current_frame(gm: fx.GraphModule | None = None) -> dict[str, Any] | None:
    """The user function dynamo is compiling right now, if any.

    When dynamo's root frame is torch's own (``torch.compile(nn.Sequential(...))``
    starts in a wrapper), the first user frame of the graph's stack traces stands in
    for it, else the user's line that called the compiled function. ``"fullgraph": True``
    where its breaks are errors (:func:`~pt2kit.seams.convert_frame.compiling_whole`).
    """
    frame = _user_frame(gm)
    return {**frame, "fullgraph": True} if frame is not None and convert_frame.compiling_whole() else frame


def _user_frame(gm: fx.GraphModule | None) -> dict[str, Any] | None:
    code = convert_frame.code_being_compiled()
    if code is None:
        return None
    if not is_internal_file(code.co_filename):
        return {"name": code.co_name, "filename": code.co_filename, "lineno": code.co_firstlineno}
    for node in gm.graph.nodes if gm is not None else ():
        for match in STACK_LINE.finditer(node.meta.get("stack_trace") or ""):
            if not is_internal_file(match["filename"]):
                return {"name": match["name"], "filename": match["filename"], "lineno": int(match["lineno"])}
    for caller in reversed(traceback.extract_stack()):
        if not is_internal_file(caller.filename):
            return {"name": caller.name, "filename": caller.filename, "lineno": caller.lineno, "line": caller.line}
    return {"name": code.co_name, "filename": code.co_filename, "lineno": code.co_firstlineno}


def frame_of_exception(exc: BaseException) -> dict[str, Any] | None:
    """The user frame a dynamo error points at (its ``real_stack``), if it has one.

    The innermost frame of the user's own code: a frame of torch's (the ``inner`` of
    ``nested_compile_region``, which dynamo traced on the way) names nothing the user wrote.
    """
    stack = dynamo_exc.user_stack(exc)
    if stack:
        last = ([f for f in stack if not is_internal_file(f.filename)] or stack)[-1]
        return {"name": last.name, "filename": last.filename, "lineno": last.lineno, "line": last.line}
    return None


# --------------------------------------------------------------------------- #
# Frames dynamo failed to trace
# --------------------------------------------------------------------------- #


@dataclass
class FailingFrame:
    """A user frame dynamo was compiling when it raised: code, globals, arguments."""

    code: types.CodeType
    globals: dict[str, Any]
    locals: dict[str, Any]
    closure: tuple[Any, ...] | None
    fullgraph: bool = False  # compiled with fullgraph=True: a break was an error (its lifted graph's repro compiles so too)

    def function(self) -> types.FunctionType:
        return types.FunctionType(self.code, self.globals, self.code.co_name, None, self.closure)

    def arguments(self) -> tuple[list[Any], dict[str, Any]]:
        """The call's positional and keyword-only arguments, read from the frame's locals."""
        code = self.code
        names = code.co_varnames
        positional = [self.locals[n] for n in names[: code.co_argcount]]
        keyword = {n: self.locals[n] for n in names[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]}
        index = code.co_argcount + code.co_kwonlyargcount
        if code.co_flags & inspect.CO_VARARGS:
            positional += list(self.locals[names[index]])
            index += 1
        if code.co_flags & inspect.CO_VARKEYWORDS:
            keyword.update(self.locals[names[index]])
        return positional, keyword


def failing_frame(exc: BaseException) -> FailingFrame | None:
    """The frame whose tracing raised ``exc``, from dynamo's ``_compile`` on the traceback."""
    local = convert_frame.failing_compile_locals(exc)
    if local is None:
        return None
    return FailingFrame(local["code"], local["globals"], dict(local["locals"]), local["closure"], local["one_graph"])


def lift_frame(failing: FailingFrame, frame: dict[str, Any] | None) -> GraphCase:
    """Trace a frame dynamo could not trace into an aten graph, with its real arguments.

    ``make_fx`` runs the function in Python on real tensors, so what broke dynamo's
    tracing (a fake kernel, a shape check) is replayed when dynamo traces the lifted
    graph at the ``eager`` stage; if it is not, the graph does not count as a repro.
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    args, kwargs = failing.arguments()
    fn = failing.function()
    flat, spec = pytree.tree_flatten((args, kwargs))

    def flat_call(*values: Any) -> Any:
        call_args, call_kwargs = pytree.tree_unflatten(list(values), spec)
        return fn(*call_args, **call_kwargs)

    gm = make_fx(flat_call, tracing_mode="real")(*flat)
    case = make_case(gm, flat, backend=BackendInfo("eager", []), index=0, frame=frame, in_backend=False)
    return case.replace(backward=False, fullgraph=failing.fullgraph)


# --------------------------------------------------------------------------- #


def liftings() -> tuple[tuple[str, str, Callable[[FailingFrame, dict[str, Any] | None], GraphCase]], ...]:
    """The ways a frame dynamo failed on is lifted to a graph, in the order they are tried: (name, how, lift).

    Its torch calls as dynamo sees them, then the aten ops ``make_fx`` traces; each that
    can be lifted is a repro of its own (``minify run``'s capture and ``minifier.save_repro``).
    """
    return (("frame", "its torch calls", lift_frame_calls), ("frame-aten", "make_fx", lift_frame))


def where_it_failed(exc: BaseException) -> str:
    """``backend`` (a compiler raised), ``tracing`` (dynamo itself raised) or ``runtime``."""
    chain = list(exception_chain(exc))
    if any(dynamo_exc.is_backend_failure(e) or getattr(e, COMPILE_PHASE_ATTR, False) for e in chain):
        return "backend"
    if isinstance(exc, dynamo_exc.dynamo_exception_type()) or dynamo_exc.raised_while_tracing(exc):
        return "tracing"
    return "runtime"


def lift_frame_calls(failing: FailingFrame, frame: dict[str, Any] | None) -> GraphCase:
    """Run a frame dynamo could not trace, recording its torch calls as a graph (see the module docstring).

    Each call through ``__torch_function__`` (a function, a tensor method, indexing)
    becomes a node, fed by the frame's arguments, the nodes before it, and literals for
    everything else (a Python value a tensor gave, ``x.shape[0]``, is kept as its value).
    A tensor from elsewhere (a module's parameter) is a constant of the graph.
    """
    args, kwargs = failing.arguments()
    flat, spec = pytree.tree_flatten((args, kwargs))
    graph = fx.Graph()
    root = torch.nn.Module()
    recorder = _CallRecorder(graph, root)
    placeholders = []
    for k, value in enumerate(flat):
        node = graph.placeholder(f"arg{k}")
        placeholders.append(node)
        recorder.name(value, node)
    with recorder:
        out = failing.function()(*pytree.tree_unflatten(list(flat), spec)[0], **kwargs)
    graph.output(pytree.tree_map(recorder.node_of, out))
    gm = fx.GraphModule(root, graph)
    case = make_case(gm, flat, backend=BackendInfo("eager", []), index=0, frame=frame, in_backend=False)
    return case.replace(backward=False, fullgraph=failing.fullgraph)


class _CallRecorder(TorchFunctionMode):
    """Records each torch call the frame makes as an FX node (``lift_frame_calls``)."""

    def __init__(self, graph: fx.Graph, root: torch.nn.Module) -> None:
        super().__init__()
        self.graph, self.root = graph, root
        self.nodes: dict[int, fx.Node] = {}
        self.alive: list[Any] = []  # (the values named, kept so that their ids stay theirs)

    def name(self, value: Any, node: fx.Node) -> None:
        if isinstance(value, torch.Tensor):
            self.nodes[id(value)] = node
            self.alive.append(value)

    def node_of(self, value: Any) -> Any:
        """The node that stands for ``value`` in a call's arguments: its own, a constant, or the value itself."""
        if not isinstance(value, torch.Tensor):
            return value
        if id(value) not in self.nodes:  # a tensor the frame did not compute from its arguments
            name = f"_tensor_constant{sum(1 for _ in self.root.buffers())}"
            self.root.register_buffer(name, value.detach())
            self.name(value, self.graph.get_attr(name))
        return self.nodes[id(value)]

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        # (FX's own walk: it looks inside slices too, x[:, h0:h1] with tensor bounds)
        node_args, node_kwargs = fx.node.map_aggregate((tuple(args), dict(kwargs)), self.node_of)
        method = getattr(func, "__name__", "")
        if func is torch.Tensor.__getitem__:
            node = self.graph.call_function(operator.getitem, node_args, node_kwargs)
        elif method == "__get__" and isinstance(getattr(func, "__self__", None), GetSetDescriptorType):
            # a property (``x.T``, ``x.grad``): FX writes ``getattr(x, 'T')``
            node = self.graph.call_function(getattr, (*node_args, func.__self__.__name__))
        elif method and getattr(torch.Tensor, method, None) is func:
            # (an operator's dunder too: ``x.__lshift__(2)`` is how FX writes it, and it imports nothing)
            node = self.graph.call_method(method, node_args, node_kwargs)
        else:
            node = self.graph.call_function(func, node_args, node_kwargs)
        if isinstance(result, torch.Tensor):
            self.name(result, node)
        elif isinstance(result, (tuple, list)):
            for i, item in enumerate(result):
                self.name(item, self.graph.call_function(operator.getitem, (node, i)))
        return result
