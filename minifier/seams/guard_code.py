"""Seam: the guards dynamo builds and installs (``torch._dynamo.guards.CheckFunctionManager``, the C++ guard tree, cache entries).

Every compile ends in ``CheckFunctionManager.__init__``: it turns the compile's guards into a
tree of C++ guard managers (``RootGuardManager``) whose leaves carry the Python code they
check (``verbose_code_parts()``), the shape guards being one lambda guard at the end of the
root (``get_epilogue_lambda_guards()``) or, with ``enable_cpp_symbolic_shape_guards``, a
compiled C++ guard that keeps the same Python text. The manager then checks the frame it
was built from and raises ("Guard failed on the same frame it was created") if that fails;
otherwise convert_frame installs it, with the transformed code, as a cache entry.

- :func:`building` reports each built manager with the compile's ShapeEnv -- also when the
  same-frame check refuses it, so a guard that rejects its own inputs can be explained;
- :func:`code_parts` walks a manager and returns every leaf guard's code;
- :func:`passes` evaluates a manager on frame locals (what dynamo does on each call);
- :func:`cache_entries` lists the entries installed on a code object.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._dynamo.guards.CheckFunctionManager.__init__, torch._C._dynamo.guards.RootGuardManager "
        "(get_leaf_guards, get_child_managers, get_epilogue_lambda_guards, verbose_code_parts, check), "
        "torch._dynamo.eval_frame._debug_get_cache_entry_list"
    ),
    features=("validation guards", "validation guards --confirm", "recompile forecast"),
)

log = logging.getLogger(__name__)


def probe() -> None:
    import inspect

    from torch._C._dynamo.guards import RootGuardManager
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list  # noqa: F401
    from torch._dynamo.guards import CheckFunctionManager

    parameters = list(inspect.signature(CheckFunctionManager.__init__).parameters)
    if parameters[1:3] != ["f_code", "output_graph"]:
        raise AttributeError(f"CheckFunctionManager.__init__ takes {parameters}, expected (self, f_code, output_graph, ...)")
    for method in ("get_leaf_guards", "get_child_managers", "get_epilogue_lambda_guards", "check"):
        if not hasattr(RootGuardManager, method):
            raise AttributeError(f"RootGuardManager.{method} is gone")


@dataclasses.dataclass(frozen=True)
class GuardPart:
    """One leaf guard's code: ``kind`` is torch's guard class name (``TENSOR_MATCH``, ``LAMBDA_GUARD``...)."""

    kind: str
    code: str
    epilogue: bool  # run after all others: where dynamo puts the shape-env guards
    source: str | None  # the guard manager's source (``L['x']``), None at the root


class BuildListener(Protocol):
    def guards_built(self, f_code: types.CodeType, guard_manager: Any, shape_env: Any, error: BaseException | None) -> None: ...


_lock = threading.Lock()
_listeners: tuple[BuildListener, ...] = ()
_original: Any = None


@contextlib.contextmanager
def building(listener: BuildListener) -> Iterator[None]:
    """Within the block, ``listener.guards_built`` receives every guard manager dynamo builds."""
    global _listeners, _original
    from torch._dynamo.guards import CheckFunctionManager

    with _lock:
        if not _listeners:
            _original = CheckFunctionManager.__dict__["__init__"]
            CheckFunctionManager.__init__ = _wrap(_original)
        _listeners = (*_listeners, listener)
    try:
        yield
    finally:
        with _lock:
            index = next(i for i, current in enumerate(_listeners) if current is listener)
            _listeners = _listeners[:index] + _listeners[index + 1 :]
            if not _listeners:
                if getattr(CheckFunctionManager.__dict__["__init__"], "__wrapped__", None) is _original:
                    CheckFunctionManager.__init__ = _original
                _original = None


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __init__(self: Any, f_code: types.CodeType, output_graph: Any, *args: Any, **kwargs: Any) -> None:
        error: BaseException | None = None
        try:
            original(self, f_code, output_graph, *args, **kwargs)
        except BaseException as exc:
            error = exc
            raise
        finally:
            manager = getattr(self, "guard_manager", None)
            shape_env = getattr(output_graph, "shape_env", None)
            if manager is not None:
                for listener in _listeners:
                    try:
                        listener.guards_built(f_code, manager, shape_env, error)
                    except Exception:
                        log.exception("pt2kit: a guard-build listener failed")

    return __init__


def code_parts(guard_manager: Any) -> list[GuardPart]:
    """Every leaf guard of the tree under ``guard_manager`` (a GuardManagerWrapper or root)."""
    root = getattr(guard_manager, "root", guard_manager)
    parts: list[GuardPart] = []

    def visit(manager: Any, source: str | None) -> None:
        for leaf in manager.get_leaf_guards():
            for code in leaf.verbose_code_parts():
                parts.append(GuardPart(type(leaf).__name__, code, False, source))
        for child in manager.get_child_managers():
            try:
                child_source = child.get_source()
            except Exception:
                child_source = None
            visit(child, child_source)

    visit(root, None)
    for leaf in root.get_epilogue_lambda_guards():
        for code in leaf.verbose_code_parts():
            parts.append(GuardPart(type(leaf).__name__, code, True, None))
    return parts


def passes(guard_manager: Any, f_locals: dict[str, object]) -> bool:
    """Whether the installed guards accept these frame locals (the check dynamo runs on each call)."""
    return bool(guard_manager.check(f_locals))


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    compile_id: str
    guard_manager: Any
    code: types.CodeType


def cache_entries(code: types.CodeType) -> list[CacheEntry]:
    """The entries installed on ``code`` (most recently used first)."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    return [CacheEntry(str(entry.compile_id), entry.guard_manager, entry.code) for entry in _debug_get_cache_entry_list(code)]
