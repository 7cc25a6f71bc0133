"""Seam: ``torch._dynamo.output_graph.OutputGraph.call_user_compiler``, every captured graph on its way to the backend.

When dynamo has traced a graph (the whole frame, or the part before a graph break) it
calls ``OutputGraph.call_user_compiler(gm, example_inputs)``, which hands the FX graph to
the backend and returns the compiled callable. Every dynamo graph passes here, whichever
backend was asked for, before any backend pass changes it.

:func:`graphs` puts a wrapper there while at least one observer watches (and takes it out
with the last one, unless something wrapped it since): each observer hears the graph
before the backend sees it (``graph_captured``) and, once the backend returned or raised,
how long it took and what it raised, if anything (``backend_done``): a graph whose backend
raised is not part of the compile (dynamo restarts the analysis, falls back to eager at a
graph break, or fails the frame). An observer that fails is logged, never raised into
the compile. :func:`compile_id` reads the compile id dynamo stamps on each graph
(``gm.meta["dynamo_compile_id"]``, set in ``OutputGraph.compile_and_call_fx_graph``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.output_graph.OutputGraph.call_user_compiler, gm.meta['dynamo_compile_id']",
    features=("explain", "RecompileProfiler"),
)

log = logging.getLogger(__name__)


def probe() -> None:
    import inspect

    from torch._dynamo.output_graph import OutputGraph

    method = OutputGraph.__dict__.get("call_user_compiler")
    if method is None:
        raise AttributeError("OutputGraph.call_user_compiler is gone")
    parameters = list(inspect.signature(method).parameters)
    if parameters != ["self", "gm", "example_inputs"]:
        raise AttributeError(f"OutputGraph.call_user_compiler takes {parameters}, expected (self, gm, example_inputs)")
    if 'gm.meta["dynamo_compile_id"]' not in inspect.getsource(OutputGraph.compile_and_call_fx_graph):
        raise AttributeError("dynamo no longer stamps its graphs with meta['dynamo_compile_id']")


class GraphObserver(Protocol):
    def graph_captured(self, gm: Any) -> None:
        """dynamo captured ``gm`` and is about to hand it to the backend."""

    def backend_done(self, gm: Any, seconds: float, error: BaseException | None) -> None:
        """The backend returned (``error`` None) or raised ``error``, after ``seconds``."""


_lock = threading.Lock()
_observers: tuple[GraphObserver, ...] = ()
_installed: dict[str, Any] = {}


def _tell(method: str, *args: Any) -> None:
    for observer in _observers:
        try:
            getattr(observer, method)(*args)
        except Exception:
            log.exception("pt2kit: a graph observer failed")


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        if not _observers:
            return original(self, gm, example_inputs)
        _tell("graph_captured", gm)
        start = time.perf_counter()
        try:
            compiled = original(self, gm, example_inputs)
        except BaseException as error:
            _tell("backend_done", gm, time.perf_counter() - start, error)
            raise
        _tell("backend_done", gm, time.perf_counter() - start, None)
        return compiled

    return call_user_compiler


@contextlib.contextmanager
def graphs(observer: GraphObserver) -> Iterator[None]:
    """Within the block, ``observer`` hears every graph dynamo hands to a backend, on any thread."""
    add_observer(observer)
    try:
        yield
    finally:
        remove_observer(observer)


def add_observer(observer: GraphObserver) -> None:
    global _observers
    from torch._dynamo.output_graph import OutputGraph

    with _lock:
        if not _installed:
            original = OutputGraph.__dict__["call_user_compiler"]
            wrapper = _wrap(original)
            setattr(OutputGraph, "call_user_compiler", wrapper)
            _installed.update(original=original, wrapper=wrapper)
        _observers = (*_observers, observer)


def remove_observer(observer: GraphObserver) -> None:
    global _observers
    from torch._dynamo.output_graph import OutputGraph

    with _lock:
        _observers = tuple(o for o in _observers if o is not observer)
        # If someone wrapped our wrapper since, leave the chain alone: idle, ours passes calls through.
        if not _observers and _installed and OutputGraph.__dict__.get("call_user_compiler") is _installed["wrapper"]:
            setattr(OutputGraph, "call_user_compiler", _installed["original"])
            _installed.clear()


def compile_id(gm: Any) -> str:
    """The compile id (``0/1``) of the compile that captured ``gm``, or ``?``."""
    return str(gm.meta.get("dynamo_compile_id", "?"))


def installed() -> bool:
    """Whether the wrapper is in torch right now."""
    return bool(_installed)
