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
- :func:`cache_entries` lists the entries installed on a code object;
- :func:`tree` gives the tree itself as :class:`GuardNode` objects (with the key and value
  managers of dict nodes), :func:`epilogue` the root's epilogue guards, and
  :func:`check_restricted` checks a clone of the tree restricted to chosen sources -- the
  mechanism torch builds its "diff guard manager" with, which explain/ uses to find *every*
  guard a call fails where torch's ``check_verbose`` stops at the first;
- :func:`eval_scope` gives the names guard code refers to (``L``, ``G``, closure cells), so
  a guard's code can be evaluated as torch does; a manager dynamo invalidated (its guarded
  object died, or its entry was released) is :func:`is_deleted`.

The text of the guard code is read by :mod:`pt2kit.seams.guard_text`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._dynamo.guards.CheckFunctionManager.__init__, torch._C._dynamo.guards.RootGuardManager "
        "(get_leaf_guards, get_child_managers, get_key_value_managers, get_epilogue_lambda_guards, get_source, "
        "get_type_of_guarded_value, clone_manager, check_verbose, verbose_code_parts, check), "
        "torch._dynamo.guards.GuardManagerWrapper (root, global_scope, closure_vars) / DeletedGuardManagerWrapper, "
        "torch._dynamo.eval_frame._debug_get_cache_entry_list"
    ),
    features=("validation guards", "validation guards --confirm", "recompile forecast", "explain", "RecompileProfiler"),
)

log = logging.getLogger(__name__)


def probe() -> None:
    import inspect

    from torch._C._dynamo.guards import RootGuardManager
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list  # noqa: F401
    from torch._C._dynamo.guards import DictGuardManager, GuardManager
    from torch._dynamo.guards import CheckFunctionManager, DeletedGuardManagerWrapper, GuardManagerWrapper

    parameters = list(inspect.signature(CheckFunctionManager.__init__).parameters)
    if parameters[1:3] != ["f_code", "output_graph"]:
        raise AttributeError(
            f"CheckFunctionManager.__init__ takes {parameters}, expected (self, f_code, output_graph, ...)"
        )
    for method in (
        "get_leaf_guards",
        "get_child_managers",
        "get_epilogue_lambda_guards",
        "check",
        "check_verbose",
        "clone_manager",
        "get_source",
    ):
        if not hasattr(RootGuardManager, method):
            raise AttributeError(f"RootGuardManager.{method} is gone")
    if not hasattr(GuardManager, "get_type_of_guarded_value"):
        raise AttributeError("GuardManager.get_type_of_guarded_value is gone")
    if not hasattr(DictGuardManager, "get_key_value_managers"):
        raise AttributeError("DictGuardManager.get_key_value_managers is gone")
    wrapper = GuardManagerWrapper()
    for attribute in ("root", "global_scope", "closure_vars"):
        if not hasattr(wrapper, attribute):
            raise AttributeError(f"GuardManagerWrapper.{attribute} is gone")
    if DeletedGuardManagerWrapper("probe").invalidation_reason != "probe":
        raise AttributeError("DeletedGuardManagerWrapper no longer keeps its invalidation_reason")
    # A root with no guards checks anything, also when cloned down to its own source.
    allowed, parts = check_restricted(wrapper, {wrapper.root.get_source()}, {})
    if not allowed or parts:
        raise AttributeError("an empty guard tree's restricted clone no longer passes")


@dataclasses.dataclass(frozen=True)
class GuardPart:
    """One leaf guard's code: ``kind`` is torch's guard class name (``TENSOR_MATCH``, ``LAMBDA_GUARD``...)."""

    kind: str
    code: str
    epilogue: bool  # run after all others: where dynamo puts the shape-env guards
    source: str | None  # the guard manager's source (``L['x']``), None at the root


class BuildListener(Protocol):
    def guards_built(
        self, f_code: types.CodeType, guard_manager: Any, shape_env: Any, error: BaseException | None
    ) -> None: ...


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
            setattr(CheckFunctionManager, "__init__", _wrap(_original))
        _listeners = (*_listeners, listener)
    try:
        yield
    finally:
        with _lock:
            index = next(i for i, current in enumerate(_listeners) if current is listener)
            _listeners = _listeners[:index] + _listeners[index + 1 :]
            if not _listeners:
                if getattr(CheckFunctionManager.__dict__["__init__"], "__wrapped__", None) is _original:
                    setattr(CheckFunctionManager, "__init__", _original)
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
            except Exception:  # noqa: BLE001 - a manager with no source of its own (torch raises what it likes)
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

    return [cache_entry(entry) for entry in _debug_get_cache_entry_list(code)]


def cache_entry(entry: Any) -> CacheEntry:
    """One of torch's cache entries (as ``_compile`` receives them) read into a :class:`CacheEntry`."""
    return CacheEntry(str(entry.compile_id), entry.guard_manager, entry.code)


# -- the tree, for reading every guard and every failure ------------------------------------


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One leaf guard: ``kind`` is torch's guard class name, ``parts`` its code (``verbose_code_parts()``)."""

    kind: str
    parts: tuple[str, ...]


class GuardNode:
    """One node of the guard tree: the value dynamo reached at ``source`` (``L['x']``, ``G['N']``...)."""

    def __init__(self, manager: Any, *, is_root: bool = False) -> None:
        self._manager = manager
        self.is_root = is_root

    @property
    def source(self) -> str:
        return self._manager.get_source()

    def leaves(self) -> list[Leaf]:
        return [Leaf(type(leaf).__name__, tuple(leaf.verbose_code_parts())) for leaf in self._manager.get_leaf_guards()]

    def children(self) -> list[GuardNode]:
        """Child nodes, including the key and value managers of a dict node (in key order)."""
        children = list(self._manager.get_child_managers())
        if hasattr(self._manager, "get_key_value_managers"):
            for _index, (key_manager, value_manager) in sorted(self._manager.get_key_value_managers().items()):
                children.extend(m for m in (key_manager, value_manager) if m is not None)
        return [GuardNode(child) for child in children]

    def walk(self) -> Iterator[GuardNode]:
        """This node and every node below it, depth first."""
        yield self
        for child in self.children():
            yield from child.walk()

    def guarded_type(self) -> type:
        """The type the guarded value had when the guards were built."""
        return self._manager.get_type_of_guarded_value()


def is_deleted(guard_manager: Any) -> bool:
    """Whether dynamo invalidated this entry's guards (see :func:`invalidation_reason`)."""
    from torch._dynamo.guards import DeletedGuardManagerWrapper

    return isinstance(guard_manager, DeletedGuardManagerWrapper)


def invalidation_reason(guard_manager: Any) -> str:
    return guard_manager.invalidation_reason


def tree(guard_manager: Any) -> GuardNode:
    """The root of the guard tree of a ``GuardManagerWrapper``."""
    return GuardNode(guard_manager.root, is_root=True)


def epilogue(guard_manager: Any) -> list[Leaf]:
    """The root's epilogue guards (the symbolic-shape lambda guards), run after all others."""
    root = guard_manager.root
    if not hasattr(root, "get_epilogue_lambda_guards"):
        return []
    return [Leaf(type(leaf).__name__, tuple(leaf.verbose_code_parts())) for leaf in root.get_epilogue_lambda_guards()]


def check_restricted(
    guard_manager: Any, sources: set[str], f_locals: Mapping[str, object]
) -> tuple[bool, tuple[str, ...]]:
    """Check ``f_locals`` against the tree restricted to the nodes at ``sources``.

    Returns whether they pass, and torch's ``verbose_code_parts`` of what failed (the
    first failure within the restriction, as ``check_verbose`` reports it). The root's
    own guards (process state) and the epilogue are always kept by the clone.
    """
    clone = guard_manager.root.clone_manager(lambda node: node.get_source() in sources)
    result = clone.check_verbose(f_locals)
    return bool(result.result), tuple(result.verbose_code_parts)


def eval_scope(guard_manager: Any, f_locals: Mapping[str, object]) -> dict[str, Any]:
    """The names torch's guard code refers to: ``L`` (frame locals), ``G`` (globals), closure cells.

    Module globals are under ``__globals__``: evaluate guard code with
    ``eval(code, dict(scope["__globals__"]), scope)``.
    """
    global_scope = dict(guard_manager.global_scope or {})
    scope: dict[str, Any] = {"L": f_locals, "G": global_scope.get("G", {}), "__globals__": global_scope}
    scope.update(guard_manager.closure_vars or {})
    return scope
