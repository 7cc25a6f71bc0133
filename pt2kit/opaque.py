"""pt2kit's code that runs inside the user's program is opaque to dynamo.

A tool's wrapper of a compiled graph, its aot compiler and its autograd hooks run
wherever torch calls them, and torch calls some of them from under dynamo's frame
callback: a compiled backward run by ``torch.autograd.grad`` in the resumed part of a
compiled frame (pytorch#183603's double backward), or compiled lazily there. Dynamo
then traced pt2kit's own helpers (a tensor copy) into graphs of the user's frame,
and a run minified them. :func:`opaque` is ``torch.compiler.disable``: what it wraps,
and everything it calls, runs as plain Python, as torch's own files do (dynamo
skips those by file).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def opaque(fn: F) -> F:
    """``fn``, never traced by dynamo, nor is anything it calls (attributes set on it later stay on the result)."""
    import torch

    return torch.compiler.disable(fn)


#: What AOTAutograd and dynamo read off a compiled callable (boxed calling, ``zero_grad``, the backend behind it).
CALL_ATTRIBUTES = ("_boxed_call", "zero_grad", "_torchdynamo_orig_backend")
#: On an :func:`opaque_wrapper`: the callable it wraps (``__wrapped__`` is the wrapper's own function).
WRAPS = "_pt2kit_wraps"


def innermost(compiled: Any) -> Any:
    """What a chain of :func:`opaque_wrapper` calls wrapped first (Inductor's compiled graph, its kernels' module)."""
    seen = 0
    while hasattr(compiled, WRAPS) and seen < 100:
        compiled, seen = getattr(compiled, WRAPS), seen + 1
    return compiled


def opaque_wrapper(wrapper: F, compiled: Any) -> F:
    """pt2kit's ``wrapper`` of ``compiled``, :func:`opaque`, with what torch reads off ``compiled`` carried onto it."""
    wrapped = opaque(wrapper)
    setattr(wrapped, WRAPS, compiled)
    for attr in CALL_ATTRIBUTES:
        if hasattr(compiled, attr):
            try:
                setattr(wrapped, attr, getattr(compiled, attr))
            except AttributeError:
                pass
    return wrapped
