"""Seam: ``torch._dynamo.symbolic_convert.InstructionTranslatorBase.log_graph_break``, where dynamo logs a graph break.

Every graph break dynamo takes -- it ends the graph there and resumes after it, or it
gives up on the whole frame -- is logged through ``log_graph_break(code_options, reason,
exc)`` while the tracer still stands at the break: ``exc`` is the ``Unsupported`` (or
``UserError``) with its ``gb_type``, torch's message and the user's ``real_stack``, and
the live Python stack above dynamo is the user's. torch sets ``exc.logged`` once it has
logged an exception, and a restarted analysis can log the same break again.

:func:`graph_breaks` puts a wrapper there while at least one observer watches (and takes it
out with the last one, unless something wrapped it since); observers hear each break that
torch has not logged yet, before torch logs it. An observer that fails is logged, never
raised into the trace. Reading the message is :mod:`pt2kit.seams.graph_break_messages`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.symbolic_convert.InstructionTranslatorBase.log_graph_break (and Unsupported.logged)",
    features=("explain", "RecompileProfiler"),
)

log = logging.getLogger(__name__)


def probe() -> None:
    import inspect

    from torch._dynamo.symbolic_convert import InstructionTranslatorBase

    method = InstructionTranslatorBase.__dict__.get("log_graph_break")
    if method is None:
        raise AttributeError("InstructionTranslatorBase.log_graph_break is gone")
    parameters = list(inspect.signature(method).parameters)
    if parameters != ["self", "code_options", "reason", "exc"]:
        raise AttributeError(f"log_graph_break takes {parameters}, expected (self, code_options, reason, exc)")
    if "exc.logged" not in inspect.getsource(method):
        raise AttributeError("log_graph_break no longer marks logged exceptions (exc.logged)")


class BreakObserver(Protocol):
    def graph_break(self, reason: str, exc: BaseException) -> None:
        """dynamo is about to log a graph break for the first time (``reason`` is torch's text)."""


_lock = threading.Lock()
_observers: tuple[BreakObserver, ...] = ()
_installed: dict[str, Any] = {}


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def log_graph_break(self: Any, code_options: Any, reason: str, exc: BaseException) -> Any:
        if _observers and not getattr(exc, "logged", False):
            for observer in _observers:
                try:
                    observer.graph_break(reason, exc)
                except Exception:
                    log.exception("pt2kit: a graph-break observer failed")
        return original(self, code_options, reason, exc)

    return log_graph_break


@contextlib.contextmanager
def graph_breaks(observer: BreakObserver) -> Iterator[None]:
    """Within the block, ``observer`` hears every graph break dynamo logs, on any thread."""
    add_observer(observer)
    try:
        yield
    finally:
        remove_observer(observer)


def add_observer(observer: BreakObserver) -> None:
    global _observers
    from torch._dynamo.symbolic_convert import InstructionTranslatorBase

    with _lock:
        if not _installed:
            original = InstructionTranslatorBase.__dict__["log_graph_break"]
            wrapper = _wrap(original)
            setattr(InstructionTranslatorBase, "log_graph_break", wrapper)
            _installed.update(original=original, wrapper=wrapper)
        _observers = (*_observers, observer)


def remove_observer(observer: BreakObserver) -> None:
    global _observers
    from torch._dynamo.symbolic_convert import InstructionTranslatorBase

    with _lock:
        _observers = tuple(o for o in _observers if o is not observer)
        if (
            not _observers
            and _installed
            and InstructionTranslatorBase.__dict__.get("log_graph_break") is _installed["wrapper"]
        ):
            setattr(InstructionTranslatorBase, "log_graph_break", _installed["original"])
            _installed.clear()


def installed() -> bool:
    """Whether the wrapper is in torch right now."""
    return bool(_installed)
