"""Seam: ``torch._dynamo.compiled_autograd``'s ``end_capture``, which returns the wrapper its backward graph runs in.

With ``torch._dynamo.config.compiled_autograd = True``, a ``backward()`` called inside
``torch.compile`` is traced by compiled autograd into an FX graph of its own (its code
is ``<eval_with_key>``, its function ``forward``), which runs, and is handed to dynamo,
from the ``runtime_wrapper`` that ``AutogradCompilerInstance.end_capture`` returns. A
failure while dynamo traces that graph is in a frame the program never wrote: the user
reads "frame forward" and looks for a ``forward`` of their own. Dynamo cuts its own
frames out of the traceback, that wrapper's among them, so the failure is told by a
mark instead: :func:`mark_failures` wraps each runtime wrapper for the life of the
process, and an error that leaves one carries the mark
(:func:`raised_in_compiled_autograd`).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

from . import Seam, dynamo_exc

SEAM = Seam(
    wraps="torch._dynamo.compiled_autograd.AutogradCompilerInstance.end_capture (the runtime_wrapper it returns)",
    features=(
        "minify run: naming compiled autograd's backward graph when dynamo fails to trace it",
        "minify run and the env-var hook: following no backward's gradients that compiled autograd traces",
    ),
)

MODULE = "torch._dynamo.compiled_autograd"
#: The attribute an error that left compiled autograd's runtime wrapper carries.
MARK = "_pt2kit_compiled_autograd"


def probe() -> None:
    import torch._dynamo.config
    from torch._dynamo import compiled_autograd

    if not isinstance(getattr(torch._dynamo.config, "compiled_autograd", None), bool):
        raise AttributeError("torch._dynamo.config.compiled_autograd is no longer a switch")

    source = inspect.getsource(compiled_autograd.AutogradCompilerInstance.end_capture)
    if "def runtime_wrapper(" not in source or "return runtime_wrapper" not in source:
        raise AttributeError("compiled autograd's end_capture no longer returns the runtime_wrapper its graph runs in")


def mark_failures() -> None:
    """For the life of the process, an error raised out of compiled autograd's backward graph carries :data:`MARK`.

    Compiled autograd is not imported for this: if it is not loaded yet, the wrapper goes in when it is.
    """
    if MODULE in sys.modules:
        _install(sys.modules[MODULE])
        return
    from ..import_hooks import after_import

    after_import(MODULE, _install)


def _install(module: Any) -> None:
    instance: Any = getattr(module, "AutogradCompilerInstance", None)
    original = getattr(instance, "end_capture", None)
    if original is None or getattr(original, MARK, False):
        return

    @functools.wraps(original)
    def end_capture(self: Any, *args: Any, **kwargs: Any) -> Any:
        returned = original(self, *args, **kwargs)
        try:
            runtime_wrapper, *rest = returned
        except (TypeError, ValueError):
            return returned  # (another shape: left as torch made it)
        return (_marking(runtime_wrapper), *rest) if callable(runtime_wrapper) else returned

    setattr(end_capture, MARK, True)
    instance.end_capture = end_capture


def _marking(runtime_wrapper: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(runtime_wrapper)
    def marked(*args: Any, **kwargs: Any) -> Any:
        try:
            return runtime_wrapper(*args, **kwargs)
        except BaseException as e:
            try:
                setattr(e, MARK, True)
            except Exception:  # noqa: BLE001 - an error that takes no attribute is raised as it was
                pass
            raise

    return marked


def raised_in_compiled_autograd(error: BaseException | None) -> bool:
    """Did ``error`` (or an error it was raised from) leave compiled autograd's backward graph?"""
    return error is not None and any(getattr(e, MARK, False) for e in dynamo_exc.chain(error))


def enabled_by_config() -> bool:
    """Does ``torch._dynamo.config.compiled_autograd`` send a backward called in a compiled frame through compiled
    autograd (which traces the backward's hooks into a graph of its own)?"""
    import torch._dynamo.config

    return bool(getattr(torch._dynamo.config, "compiled_autograd", False))
