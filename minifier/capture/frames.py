"""Where in the user's program a graph or a failure comes from, and frames dynamo failed to trace.

Reports point at the user's code, never at torch's or pt2kit's: :func:`current_frame`
is the user function dynamo is compiling, :func:`frame_of_exception` the user line a
dynamo error points at, :func:`where_it_failed` whether dynamo's tracing, a backend's
compile or the compiled code raised. A frame dynamo could not trace has no graph;
:func:`lift_frame` traces it with ``make_fx`` on its real arguments, so that the
failure still has something to minify.
"""

from __future__ import annotations

import inspect
import re
import traceback
import types
from dataclasses import dataclass
from typing import Any

import torch.fx as fx

from ..unit.case import GraphCase
from .casemaker import make_case
from .context import BackendInfo
from .script import is_internal_file
from ..seams import convert_frame, dynamo_exc, pytree
from ..unit.signature import COMPILE_PHASE_ATTR, exception_chain


_STACK_LINE = re.compile(r'File "(?P<filename>[^"]+)", line (?P<lineno>\d+), in (?P<name>\S+)')


def current_frame(gm: fx.GraphModule | None = None) -> dict[str, Any] | None:
    """The user function dynamo is compiling right now, if any.

    When dynamo's root frame is torch's own (``torch.compile(nn.Sequential(...))``
    starts in a wrapper), the first user frame of the graph's stack traces stands in
    for it, else the user's line that called the compiled function.
    """
    code = convert_frame.code_being_compiled()
    if code is None:
        return None
    if not is_internal_file(code.co_filename):
        return {"name": code.co_name, "filename": code.co_filename, "lineno": code.co_firstlineno}
    for node in gm.graph.nodes if gm is not None else ():
        for match in _STACK_LINE.finditer(node.meta.get("stack_trace") or ""):
            if not is_internal_file(match["filename"]):
                return {"name": match["name"], "filename": match["filename"], "lineno": int(match["lineno"])}
    for caller in reversed(traceback.extract_stack()):
        if not is_internal_file(caller.filename):
            return {"name": caller.name, "filename": caller.filename, "lineno": caller.lineno, "line": caller.line}
    return {"name": code.co_name, "filename": code.co_filename, "lineno": code.co_firstlineno}


def frame_of_exception(exc: BaseException) -> dict[str, Any] | None:
    """The user frame a dynamo error points at (its ``real_stack``), if it has one."""
    stack = dynamo_exc.user_stack(exc)
    if stack:
        last = stack[-1]
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
    return FailingFrame(local["code"], local["globals"], dict(local["locals"]), local["closure"])


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
    return case.replace(backward=False)


# --------------------------------------------------------------------------- #


def where_it_failed(exc: BaseException) -> str:
    """``backend`` (a compiler raised), ``tracing`` (dynamo itself raised) or ``runtime``."""
    chain = list(exception_chain(exc))
    if any(dynamo_exc.is_backend_failure(e) or getattr(e, COMPILE_PHASE_ATTR, False) for e in chain):
        return "backend"
    if isinstance(exc, dynamo_exc.dynamo_exception_type()):
        return "tracing"
    return "runtime"
