"""Seam: ``torch._dynamo.repro.after_dynamo.wrap_backend_debug``, the seat of every dynamo backend.

``torch._dynamo.eval_frame.get_compiler_fn`` passes each backend that
``torch.compile`` / ``torch._dynamo.optimize`` resolves through
``after_dynamo.wrap_backend_debug(fn, name)``, looked up at call time. torch's own
minifier sits there; pt2kit takes the same seat (:func:`dynamo_backends`), so it
sees every dynamo graph with its real example inputs without patching deeper.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.repro.after_dynamo.wrap_backend_debug",
    features=("minify run/bisect capture", "TORCHDYNAMO_REPRO_AFTER hook", "minifier.save_repro"),
)

BackendWrapper = Callable[[Callable[..., Any], "str | None"], Callable[..., Any]]

#: Attribute marking a backend pt2kit compiles with for its own purposes; hooks let it through.
INTERNAL = "_pt2kit_internal"

#: Attributes dynamo reads off a backend object; a wrapper must carry them over. ``compiler_fn``: the backend
#: ``torch.compile`` wraps (``_TorchCompileWrapper``), which dynamo compares with ``eager`` under a functorch
#: transform: an eager ``torch.cond`` under ``vmap`` compiles itself with ``backend="eager"``, allowed only then.
BACKEND_ATTRIBUTES = ("backend_ctx_ctor", "get_compiler_config", "compiler_name", "reset", "compiler_fn")


def probe() -> None:
    import torch._dynamo.eval_frame as eval_frame
    import torch._dynamo.repro.after_dynamo as after_dynamo

    parameters = list(inspect.signature(after_dynamo.wrap_backend_debug).parameters)
    if parameters[:2] != ["unconfigured_compiler_fn", "compiler_name"]:
        raise AttributeError(
            f"wrap_backend_debug takes {parameters}, expected (unconfigured_compiler_fn, compiler_name)"
        )
    if "wrap_backend_debug" not in inspect.getsource(eval_frame.get_compiler_fn):
        raise AttributeError("eval_frame.get_compiler_fn no longer calls wrap_backend_debug")


def is_internal(fn: Callable[..., Any]) -> bool:
    return bool(getattr(fn, INTERNAL, False) or getattr(getattr(fn, "compiler_fn", None), INTERNAL, False))


def torch_minifier_off() -> contextlib.AbstractContextManager[None]:
    """torch's own minifier off within the block: the one switch pt2kit turns it off with.

    torch's debug wrappers read ``torch._dynamo.config.repro_after`` at each compile
    (after dynamo, and after aot for Inductor's inner compiles).
    """
    import torch._dynamo.config as dynamo_config

    return dynamo_config.patch(repro_after=None)


@functools.cache
def _quiet_class(torch_class: type) -> type:
    """torch's backend debug wrapper with its minifier off (``repro_after`` is read per call)."""

    class QuietWrapBackendDebug(torch_class):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            with torch_minifier_off():
                return super().__call__(*args, **kwargs)

    return QuietWrapBackendDebug


@contextlib.contextmanager
def dynamo_backends(wrap: BackendWrapper, *, quiet_torch: bool = True) -> Iterator[None]:
    """Within the block, each backend torch.compile resolves becomes ``wrap(backend, name)``.

    ``backend`` is the resolved compiler function (a registered name already looked up)
    and ``name`` the string the user gave, if any. The result must be a dynamo backend;
    attributes dynamo reads off backends (:data:`BACKEND_ATTRIBUTES`) are copied onto it
    if it lacks them. Backends marked :data:`INTERNAL` pass through unwrapped. With
    ``quiet_torch``, torch's own minifier stays off for these compiles even when the
    program turns it on (``torch._dynamo.config.repro_after`` set in code).
    """
    import torch._dynamo.repro.after_dynamo as after_dynamo

    original = after_dynamo.wrap_backend_debug

    def wrap_backend_debug(fn: Callable[..., Any], name: str | None) -> Callable[..., Any]:
        if is_internal(fn):  # (torch.compile wraps callables in _TorchCompileWrapper)
            return original(fn, name)
        wrapped = wrap(fn, name)
        # Dynamo knows a backend by its innermost object (``innermost_backend``): a frame
        # compiled for one ``torch.compile(backend="eager")`` is reused by the next one,
        # where a new wrapper object would make it compile again, and hide a bug of
        # that reuse (a guard it lacks). The wrapper is the backend it wraps, to dynamo.
        if wrapped is not fn and not hasattr(wrapped, "_torchdynamo_orig_backend"):
            with contextlib.suppress(AttributeError, TypeError):
                setattr(wrapped, "_torchdynamo_orig_backend", fn)
        for attr in BACKEND_ATTRIBUTES:
            if hasattr(fn, attr) and not hasattr(wrapped, attr):
                try:
                    setattr(wrapped, attr, getattr(fn, attr))
                except AttributeError:
                    pass
        debug = original(wrapped, name)
        torch_class: type = type(debug)
        if quiet_torch and torch_class is after_dynamo.WrapBackendDebug:
            debug.__class__ = _quiet_class(torch_class)  # torch's minifier stays out, however it was asked for
        return debug

    setattr(after_dynamo, "wrap_backend_debug", wrap_backend_debug)
    try:
        yield
    finally:
        setattr(after_dynamo, "wrap_backend_debug", original)


def debug_wrapper_class() -> type:
    """torch's ``WrapBackendDebug``: the object ``wrap_backend_debug`` puts around every backend."""
    import torch._dynamo.repro.after_dynamo as after_dynamo

    return after_dynamo.WrapBackendDebug


def replace_debug_wrapper_class(cls: type) -> None:
    """From now on ``wrap_backend_debug`` makes ``cls`` (a subclass of torch's) around every backend."""
    import torch._dynamo.repro.after_dynamo as after_dynamo

    if not issubclass(cls, after_dynamo.WrapBackendDebug):
        raise TypeError(f"{cls.__name__} must subclass torch's WrapBackendDebug")
    setattr(after_dynamo, "WrapBackendDebug", cls)  # looked up when wrap_backend_debug is called
