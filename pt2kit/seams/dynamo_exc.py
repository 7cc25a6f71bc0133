"""Seam: the exceptions dynamo and Inductor raise, and what they carry.

A failure's signature peels torch's wrappers off: ``BackendCompilerFailed`` and
``InductorError`` keep the real error in ``inner_exception``; dynamo's own errors
(``TorchDynamoException`` and its subclasses) are raised while handling it, and carry
the user's stack in ``real_stack``. Level-4 accuracy failures raise torch's own
``AccuracyError``, as torch's minifier does.

From 2.15, an error that running a node on fake tensors raised while dynamo traced
reaches the user wrapped in a plain ``RuntimeError("Dynamo failed to run FX node with
fake tensors: ...")`` (under ``ObservedRuntimeError``); :func:`inner_exception` takes the
real error out of it, as 2.13's chain had it directly.

When tracing a frame ends in ``Unsupported`` or ``UserError``, dynamo gives up on that
frame (it runs eagerly, unless graph breaks are errors for it); a recompile past the
recompile limit ends in ``Unsupported`` or, under ``fail_on_recompile_limit_hit``,
``FailOnRecompileLimitHit`` (:func:`is_graph_break_error`, :func:`is_recompile_limit_error`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._dynamo.exc (TorchDynamoException, BackendCompilerFailed, inner_exception, real_stack, Unsupported, UserError, "
        "FailOnRecompileLimitHit, RecompileError), torch._dynamo.debug_utils.AccuracyError, the fail_on_recompile "
        "stance's error, torch.fx.experimental.symbolic_shapes.ConstraintViolationError"
    ),
    features=(
        "failure signatures",
        "where a failure happened",
        "explain",
        "RecompileProfiler",
        "a recompile the program refuses, told apart",
        "a dynamic size the program's code makes static, told apart",
    ),
)


#: How 2.15 words the plain ``RuntimeError`` it wraps a fake-tensor run's error in.
FAKE_RUN_WRAPPER = "Dynamo failed to run FX node with fake tensors:"


def probe() -> None:
    import torch
    from torch._dynamo import exc

    if not issubclass(exc.BackendCompilerFailed, exc.TorchDynamoException):
        raise TypeError("BackendCompilerFailed is no longer a TorchDynamoException")
    cause = RuntimeError("pt2kit probe")
    if inner_exception(exc.BackendCompilerFailed(probe, cause, None)) is not cause:
        raise AttributeError("BackendCompilerFailed no longer keeps the error it wraps in inner_exception")
    # what dynamo raises when a node fails on fake tensors: the real error must come out of it
    try:
        torch.compile(lambda a, b: a + b, backend="eager", fullgraph=True)(torch.ones(3), torch.ones(4))
    except Exception as e:  # noqa: BLE001 - the failure is what is probed
        if not raised_while_tracing(e):
            raise AttributeError(f"dynamo's tracing is no longer in {TRACER_FILE}") from None
        real = innermost(e)
        if not str(real).startswith("Attempting to broadcast"):
            raise AttributeError(
                f"a failure on fake tensors no longer leads to its error, but to {type(real).__name__}: {str(real)[:100]}"
            ) from None
    else:
        raise AttributeError("adding tensors of sizes 3 and 4 compiled")
    finally:
        torch.compiler.reset()
    for name in ("Unsupported", "UserError", "FailOnRecompileLimitHit", "RecompileError"):
        if not issubclass(getattr(exc, name), Exception):
            raise TypeError(f"torch._dynamo.exc.{name} is not an exception")
    accuracy_error()
    from torch._dynamo import convert_frame

    if not convert_frame.__file__.replace("\\", "/").endswith(FRAME_COMPILE_FILE):
        raise AttributeError(f"dynamo no longer compiles frames in {FRAME_COMPILE_FILE}")
    from torch.fx.experimental import symbolic_shapes

    if symbolic_shapes.ConstraintViolationError.__name__ != SHAPE_MARK_REFUSED:
        raise AttributeError(f"a violated mark_dynamic no longer raises {SHAPE_MARK_REFUSED}")
    import inspect

    from torch._dynamo import eval_frame

    if STANCE_RECOMPILE not in inspect.getsource(eval_frame):
        raise AttributeError("the fail_on_recompile stance no longer words its error as pt2kit reads it")


#: dynamo's bytecode interpreter: an error raised with it on the stack was raised while dynamo traced.
TRACER_FILE = "torch/_dynamo/symbolic_convert.py"


#: Where dynamo compiles a frame: its tracing, then its guards and bookkeeping, all before the frame's graph first runs.
FRAME_COMPILE_FILE = "torch/_dynamo/convert_frame.py"


def _traceback_runs_through(exc: BaseException, file: str) -> bool:
    """Does ``exc``'s traceback pass through a frame of ``file`` (a path under site-packages, ``/``-separated)?"""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith(file):
            return True
        tb = tb.tb_next
    return False


def raised_compiling_a_frame(exc: BaseException) -> bool:
    """Was ``exc`` raised while dynamo compiled a frame (its traceback runs through :data:`FRAME_COMPILE_FILE`)?

    Tracing, building the frame's guards (a shape guard it cannot write), and the rest of
    dynamo's work on a frame: never a compiled graph's run.
    """
    return _traceback_runs_through(exc, FRAME_COMPILE_FILE)


def raised_while_tracing(exc: BaseException) -> bool:
    """Was ``exc`` raised inside dynamo's tracing, whatever its type?

    Dynamo's own errors are ``TorchDynamoException``s; an internal error of its
    tracing (an ``IndexError`` stamping out an ``invoke_subgraph``) reaches the user as
    itself, with "from user code:" added. Its traceback still runs through the
    bytecode interpreter (:data:`TRACER_FILE`), which a compiled graph's run never does.
    (A backend's failure does too: callers ask :func:`is_backend_failure` first.)
    """
    return _traceback_runs_through(exc, TRACER_FILE)


def dynamo_exception_type() -> type[BaseException]:
    from torch._dynamo.exc import TorchDynamoException

    return TorchDynamoException


def is_backend_failure(exc: BaseException) -> bool:
    from torch._dynamo.exc import BackendCompilerFailed

    return isinstance(exc, BackendCompilerFailed)


def inner_exception(exc: BaseException) -> BaseException | None:
    """The error ``exc`` wraps: torch's ``inner_exception``, or the cause of 2.15's fake-run wrapper (None: none)."""
    inner = getattr(exc, "inner_exception", None)
    if isinstance(inner, BaseException):
        return inner
    below = underneath(exc)
    if type(exc) is RuntimeError and str(exc).startswith(FAKE_RUN_WRAPPER) and below is not None:
        return below
    return None


def underneath(exc: BaseException) -> BaseException | None:
    """The error ``exc`` was raised from (``__cause__``), or while handling inside torch's call (``__context__``).

    Python sets ``__context__`` to whatever was being handled when ``exc`` was raised,
    however far up: a program that compiles inside ``except KeyError:`` hands its
    dynamo error that ``KeyError``, which has nothing to do with the failure. A context
    counts when torch handled it: in torch's own code, or in code torch called (a
    custom op's kernel), below the frame ``exc`` was caught in. (torch re-raises some
    errors with their traceback cut, so the frames in between are read from the
    handler's callers, not from ``exc``'s traceback.) A context with no traceback is
    taken as it is.
    """
    if exc.__cause__ is not None:
        return exc.__cause__
    context = exc.__context__
    if context is None or context.__traceback__ is None:
        return context
    handler = context.__traceback__.tb_frame
    if _in_torch(handler):
        return context
    caught = exc.__traceback__.tb_frame if exc.__traceback__ is not None else None
    called_by_torch = False
    frame = handler.f_back
    while frame is not None and frame is not caught:
        called_by_torch = called_by_torch or _in_torch(frame)
        frame = frame.f_back
    return context if frame is caught and called_by_torch else None


def _in_torch(frame: Any) -> bool:
    import torch

    return frame.f_code.co_filename.startswith(os.path.dirname(torch.__file__) + os.sep)


def innermost(exc: BaseException) -> BaseException:
    """Peel torch's wrapper exceptions off ``exc`` to find the error that happened.

    ``BackendCompilerFailed`` and ``InductorError`` carry ``inner_exception``, and 2.15's
    fake-run wrapper its cause (:func:`inner_exception`); dynamo's own errors
    (``TorchRuntimeError``, ``Unsupported`` from a failing fake-tensor call,
    ``InternalTorchDynamoError``) are raised while handling the real error, so it is
    their ``__cause__`` or ``__context__``. An error with nothing underneath is the
    real error.
    """
    dynamo_exception = dynamo_exception_type()
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = inner_exception(exc)
        if inner is not None:
            exc = inner
            continue
        below = underneath(exc)
        if isinstance(exc, dynamo_exception) and below is not None:
            exc = below
            continue
        break
    return exc


def user_stack(exc: BaseException) -> list[Any] | None:
    """The user's frames a dynamo error points at (``real_stack``), innermost last.

    Read along the exception's chain: torch 2.12 raises its ``InternalTorchDynamoError`` while
    handling the error that carries the stack (its ``__context__``).
    """
    return next((stack for e in chain(exc) if (stack := getattr(e, "real_stack", None)) is not None), None)


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps (:func:`inner_exception`) or was raised from or while handling, outermost first."""
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        yield node
        node = inner_exception(node) or underneath(node)


def accuracy_error() -> type[Exception]:
    from torch._dynamo.debug_utils import AccuracyError

    return AccuracyError


def is_graph_break_error(exc: BaseException) -> bool:
    """``Unsupported`` or ``UserError``: dynamo could not trace the frame and gives up on it."""
    from torch._dynamo.exc import Unsupported, UserError

    return isinstance(exc, Unsupported | UserError)


def is_recompile_limit_error(exc: BaseException) -> bool:
    """What a compile refused at the recompile limit raises (``Unsupported`` or ``FailOnRecompileLimitHit``)."""
    from torch._dynamo.exc import FailOnRecompileLimitHit, Unsupported

    return isinstance(exc, Unsupported | FailOnRecompileLimitHit)


#: What dynamo raises when it will not trace a graph of its own making again: a higher-order op in the
#: form it wrote it (``while_loop(..., mutated_arg_indices=...)``, ``flex_attention`` with its buffers).
RETRACE_REFUSALS = ("Unsupported", "UncapturedHigherOrderOpError", "InternalTorchDynamoError")


def refuses_to_retrace(exception: str) -> bool:
    """Is a failure (its exception's name) dynamo refusing, or failing, to trace a graph it made itself?"""
    return exception in RETRACE_REFUSALS


#: What dynamo raises where the program asked it to fail on a recompile (``error_on_recompile``,
#: ``fail_on_recompile_limit_hit``); the ``fail_on_recompile`` stance raises a ``RuntimeError`` worded so.
RECOMPILE_REFUSALS = ("RecompileError", "FailOnRecompileLimitHit")
STANCE_RECOMPILE = "Detected recompile when torch.compile stance is 'fail_on_recompile'"


def refuses_a_recompile(exception: str, message: str) -> bool:
    """Is a failure (its exception's name and message) dynamo failing on a recompile, as the program asked it to?

    The frame compiled fine once: recompiling is the matter, no graph fails.
    """
    return exception in RECOMPILE_REFUSALS or message.startswith(STANCE_RECOMPILE)


#: What dynamo raises where a size the program marked dynamic (``mark_dynamic``) is one its code makes static.
SHAPE_MARK_REFUSED = "ConstraintViolationError"


def refuses_a_shape_mark(exception: str) -> bool:
    """Is a failure (its exception's name) dynamo refusing a ``mark_dynamic`` the program's own code contradicts?

    Dynamo raises it while it builds the frame's guards, as ``mark_dynamic`` asks it to: no graph
    fails, and the program's marks, not a compiler, are what to change.
    """
    return exception == SHAPE_MARK_REFUSED
