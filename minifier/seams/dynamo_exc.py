"""Seam: the exceptions dynamo and Inductor raise, and what they carry.

A failure's signature peels torch's wrappers off: ``BackendCompilerFailed`` and
``InductorError`` keep the real error in ``inner_exception``; dynamo's own errors
(``TorchDynamoException`` and its subclasses) are raised while handling it, and carry
the user's stack in ``real_stack``. Level-4 accuracy failures raise torch's own
``AccuracyError``, as torch's minifier does.

When tracing a frame ends in ``Unsupported`` or ``UserError``, dynamo gives up on that
frame (it runs eagerly, unless graph breaks are errors for it); a recompile past the
recompile limit ends in ``Unsupported`` or, under ``fail_on_recompile_limit_hit``,
``FailOnRecompileLimitHit`` (:func:`is_graph_break_error`, :func:`is_recompile_limit_error`).
"""

from __future__ import annotations

from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._dynamo.exc (TorchDynamoException, BackendCompilerFailed, inner_exception, real_stack, Unsupported, UserError, "
        "FailOnRecompileLimitHit), torch._dynamo.debug_utils.AccuracyError"
    ),
    features=("failure signatures", "where a failure happened", "explain", "RecompileProfiler"),
)


def probe() -> None:
    import inspect

    from torch._dynamo import exc

    if not issubclass(exc.BackendCompilerFailed, exc.TorchDynamoException):
        raise TypeError("BackendCompilerFailed is no longer a TorchDynamoException")
    if "inner_exception" not in inspect.getsource(exc.BackendCompilerFailed.__init__):
        raise AttributeError("BackendCompilerFailed no longer keeps inner_exception")
    for name in ("Unsupported", "UserError", "FailOnRecompileLimitHit"):
        if not issubclass(getattr(exc, name), Exception):
            raise TypeError(f"torch._dynamo.exc.{name} is not an exception")
    accuracy_error()


def dynamo_exception() -> type[BaseException]:
    from torch._dynamo.exc import TorchDynamoException

    return TorchDynamoException


def is_backend_failure(exc: BaseException) -> bool:
    from torch._dynamo.exc import BackendCompilerFailed

    return isinstance(exc, BackendCompilerFailed)


def inner_exception(exc: BaseException) -> BaseException | None:
    inner = getattr(exc, "inner_exception", None)
    return inner if isinstance(inner, BaseException) else None


def user_stack(exc: BaseException) -> list[Any] | None:
    """The user's frames a dynamo error points at (``real_stack``), innermost last."""
    return getattr(exc, "real_stack", None)


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
